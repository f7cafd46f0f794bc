"""Phrase cues shared by the cheap gates and the offline encoder."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from dualtrace.encoder.session import Event

# An assistant message that restates what the user and assistant settled on
# ("Final: ...", "Settled: ...", "Recap of f(): ...", "Amended rule, superseding
# ...:"): the decision of a conversation, in its most complete form. Weaker openers
# ("Got it", "Understood", "Done") count only when the message states a rule.
AGREEMENT_STRONG = re.compile(
    r"^\W*(?:final\b|settled\b|recap\b|(?:full |final )?recap of\b|agreed\b|decision\b|amend\w*"
    r"|to be explicit\b|in summary\b|summary\b|confirmed\b|the (?:new |final )?(?:rule|policy|contract)\b)",
    re.I)
AGREEMENT_WEAK = re.compile(r"^\W*(?:got it|understood|done|right|ok(?:ay)?|so,|perfect|great)\b", re.I)
RULE_WORDS = re.compile(
    r"\b(?:exactly|always|never|only|must|rule|policy|contract|wins?|first|capped|at most|at least"
    r"|superseding|instead|unless|except|should be|keep|drop|reject|allow\w*|case-(?:in)?sensitive)\b", re.I)


_CODE_NAME = re.compile(r"\b[a-z]+_[a-z0-9_]+\b|\b\w+\(\)")


# A command that runs a test suite (any ecosystem).
TEST_COMMAND = re.compile(
    r"\b(?:pytest|py\.test|tox|nox|mix\s+test|go\s+test|cargo\s+test|jest|vitest|mocha|rspec|"
    r"phpunit|ctest|(?:npm|pnpm|yarn|bun)\s+(?:run\s+)?test|make\s+(?:test|check)|"
    r"gradle\w*\s+test|mvn\s+test|dotnet\s+test|deno\s+test|unittest)\b"
)

def run_key(command: str) -> str:
    """A command's identity across its re-runs (a test, a check): its first three words."""
    return " ".join(command.split()[:3])


def fixed_by_rerun(events: Sequence[Event], i: int) -> int | None:
    """The fix arc of the failing test run ``events[i]``: the index of the first later run
    of the same test (same :func:`run_key`) that passed, when a file was edited in
    between. None when it never passed again, or passed with nothing edited (a flaky
    run is no fix). The gates' signal and the offline encoder's fallback incident both
    ask this (encoder/backends/work.fix_arcs is the detailed reader of failures)."""
    key = run_key(events[i].command or "")
    edited = False
    for j in range(i + 1, len(events)):
        e = events[j]
        if e.kind == "edit" and not e.is_error:
            edited = True
        elif (e.kind == "command" and not e.is_error and e.exit_code in (None, 0)
              and run_key(e.command or "") == key):
            return j if edited else None
    return None


# A check whose outcome a person asks about later: tests, linters, type checkers, builds
# (the checks a session record lists).
CHECK_COMMAND = re.compile(
    TEST_COMMAND.pattern
    + r"|\b(?:ruff|flake8|pylint|mypy|pyright|black\s+--check|isort\s+--check|eslint|tsc|"
    r"prettier\s+--check|clippy|golangci-lint|go\s+vet|cargo\s+(?:build|check)|"
    r"(?:npm|pnpm|yarn|bun)\s+(?:run\s+)?(?:build|lint|typecheck)|make(?:\s+(?:build|lint|all))?$|"
    r"lint-imports|pre-commit\s+run)\b"
)
# A failing check the offline encoder turns into an incident: the same, in any case,
# plus the Elixir and task-runner checks. Records do not list those yet: on the question
# set their check lines crowded a record's notes out of its budget (bench/eval_sessions).
FAILING_CHECK = re.compile(
    CHECK_COMMAND.pattern + r"|\b(?:ty\s+check|cargo\s+clippy|mix\s+(?:compile|credo|dialyzer)|"
    r"dialyzer|credo|just\s+(?:check|test|lint)|act)\b", re.I)


def is_agreement(text: str) -> bool:
    """An assistant message that restates a settled decision (see above)."""
    if AGREEMENT_STRONG.search(text[:80]):
        return True
    if not AGREEMENT_WEAK.search(text[:40]) or len(text) < 80:
        return False  # "Understood; I'll keep changes small." acknowledges, it settles nothing
    # A weak opener ("Got it") counts when the message states a rule, or restates what
    # a named piece of code does (snake_case or a call) at some length.
    return bool(RULE_WORDS.search(text[:600])
                or (len(text) > 100 and _CODE_NAME.search(text[:600])))
