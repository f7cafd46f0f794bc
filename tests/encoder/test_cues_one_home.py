"""Phrase cues and the test-command pattern have one home: encoder/cues.py."""

from __future__ import annotations

import re

from dualtrace.encoder import cues
from tests.conftest import package_files_spelling


def test_the_test_command_pattern_is_spelled_only_in_cues():
    spelled = re.compile(r"py\\\\?\.test")  # the regex text r"py\.test" of a test-runner list
    assert package_files_spelling(spelled) == ["encoder/cues.py"]


def test_every_test_runner_the_digest_knew_is_a_test_command():
    for command in ("pytest -q", "python -m py.test", "tox -e py311", "nox -s tests",
                    "python -m unittest", "mix test", "go test ./...", "cargo test",
                    "npx jest", "pnpm run test", "make check", "./gradlew test"):
        assert cues.TEST_COMMAND.search(command), command
    assert not cues.TEST_COMMAND.search("ls tests/")


def test_one_check_rule_lives_in_cues_and_records_and_offline_ask_it():
    from dualtrace.encoder import records
    from dualtrace.encoder.backends import work

    assert not hasattr(cues, "FAILING_CHECK")  # before: a second list for the offline encoder
    assert records.check_command is cues.check_command
    assert work.check_command is cues.check_command
    spelled = re.compile(r"golangci-lint|dialyzer")
    assert package_files_spelling(spelled) == ["encoder/cues.py"]
    # records list the checks the offline encoder makes incidents of, and the reverse
    command = "mix credo --strict 2>&1 | tail -5"
    assert records.is_check(command) and cues.check_command(command) == "mix credo"


def test_a_check_is_the_program_of_a_simple_command():
    checks = {
        "pytest -q": "pytest", "uv run mypy dualtrace": "mypy", "ruff check .": "ruff",
        "cd web && npx tsc --noEmit": "tsc", "make": "make", "pre-commit run --all-files":
        "pre-commit run", "cargo build": "cargo build", "golangci-lint run": "golangci-lint",
        "mix credo --strict": "mix credo", "uv run ty check": "ty check", "just lint": "just lint",
        "act -j test": "act", "MYPY src": "mypy", "MIX_ENV=test mix test": "mix test",
        "timeout 60 python -m pytest -x": "pytest", ".venv/bin/pytest tests": "pytest",
        "./gradlew test": "gradlew test", "npm run build": "npm run build",
        "mix format --check-formatted; echo ---; mix credo --strict 2>&1 | tail": "mix credo",
        "mix compile --warnings-as-errors 2>&1 && mix dialyzer": "mix compile",
    }
    for command, check in checks.items():
        assert cues.check_command(command) == check, command
    # A check's name as an argument or in quoted text is not a check (before: records or
    # the offline encoder took each of these for one).
    for command in ("ls tests/", "git status", "make install", "rm .dialyzerignore",
                    "npx create-next-app@latest app --typescript --eslint",
                    'bd create --title="Install quality tools and configure Credo"',
                    'git commit -m "$(cat <<\'EOF\'\nfix: dialyzer warnings\nEOF\n)"',
                    'grep -n "ignore_warnings\\|dialyzer" mix.exs', "ls -la | grep dialyzer",
                    'echo "pytest passed', "pip install pytest"):
        assert cues.check_command(command) is None, command


def _events(*steps):
    from dualtrace.encoder.session import Event

    out = []
    for n, (kind, arg, ok) in enumerate(steps):
        ts = f"2026-03-01T10:{n:02d}:00Z"
        if kind == "run":
            out.append(Event("command", ts, command=arg, exit_code=0 if ok else 1,
                             result="ok" if ok else "expected 3 widgets in the basket got 2"))
        else:
            out.append(Event("edit", ts, path=arg, is_error=not ok))
    return tuple(out)


def test_one_fix_arc_rule_a_failing_test_then_an_edit_then_the_same_test_passing():
    fixed = _events(("run", "pytest -q tests/test_a.py", False), ("edit", "src/a.py", True),
                    ("run", "pytest -q tests/test_a.py -x", True))
    assert cues.fixed_by_rerun(fixed, 0) == 2  # same first three words: the same test
    flaky = _events(("run", "pytest -q tests/test_a.py", False), ("run", "pytest -q tests/test_a.py", True),
                    ("edit", "src/a.py", True), ("run", "pytest -q tests/test_a.py", True))
    assert cues.fixed_by_rerun(flaky, 0) is None  # it passed again with nothing edited
    refused = _events(("run", "pytest -q tests/test_a.py", False), ("edit", "src/a.py", False),
                      ("run", "pytest -q tests/test_a.py", True))
    assert cues.fixed_by_rerun(refused, 0) is None  # a failed edit changed nothing
    other = _events(("run", "pytest -q tests/test_a.py", False), ("edit", "src/a.py", True),
                    ("run", "mypy src", True))
    assert cues.fixed_by_rerun(other, 0) is None


def test_the_gates_and_the_offline_encoder_ask_the_same_fix_arc_rule(tmp_path):
    from dualtrace.encoder import gates
    from dualtrace.encoder.backends import offline
    from dualtrace.encoder.session import Session

    events = _events(("run", "pytest -q tests/test_a.py", False), ("edit", "src/a.py", True),
                     ("run", "pytest -q tests/test_a.py", True))
    session = Session("s1", "claude-code", str(tmp_path), None, events[0].ts, events[-1].ts,
                      events, 0, 0, "t.jsonl")
    assert gates._fix_arc(events) == "test `pytest -q tests/test_a.py` failed at 10:00, fixed, passed at 10:02"
    (incident,) = offline.structural_incidents(session, [])
    assert incident.type == "incident" and "`pytest -q tests/test_a.py` then passed" in incident.support[-1]
    flaky = events[:1] + _events(("run", "pytest -q tests/test_a.py", True))[:1] + events[1:]
    session = Session("s1", "claude-code", str(tmp_path), None, flaky[0].ts, flaky[-1].ts,
                      flaky, 0, 0, "t.jsonl")
    assert gates._fix_arc(flaky) is None and offline.structural_incidents(session, []) == []
    # the rule is written once: the three-word run key and the rerun scan live in cues
    assert package_files_spelling('split()[:3])') == ["encoder/cues.py"]
