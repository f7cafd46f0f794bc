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


def test_the_check_command_patterns_live_in_cues_and_records_and_offline_use_them():
    from dualtrace.encoder import records
    from dualtrace.encoder.backends import work

    assert records.CHECK_COMMAND is cues.CHECK_COMMAND
    assert work.CHECK_COMMAND is cues.FAILING_CHECK
    spelled = re.compile(r"golangci-lint|dialyzer")
    assert package_files_spelling(spelled) == ["encoder/cues.py"]


def test_a_failing_check_is_any_check_a_record_lists_and_more():
    listed = ["pytest -q", "uv run mypy dualtrace", "ruff check .", "npx tsc --noEmit", "make",
              "pre-commit run --all-files", "cargo build", "golangci-lint run"]
    for command in listed:
        assert cues.CHECK_COMMAND.search(command) and cues.FAILING_CHECK.search(command), command
    for command in ("mix credo --strict", "uv run ty check", "just lint", "act -j test", "MYPY src"):
        assert cues.FAILING_CHECK.search(command) and not cues.CHECK_COMMAND.search(command), command
    for command in ("ls tests/", "git status", "make install", "rm .dialyzerignore"):
        assert not cues.FAILING_CHECK.search(command), command


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
