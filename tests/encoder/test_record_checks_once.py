"""A session record's frontmatter names each check once (issue 11).

The ``outcome`` line used to repeat every check of the ``checks`` list ("mix test ...
passed; mix test ... passed; ..."): on spotter fa812bfe (five mix test commands) the
frontmatter held each command twice, and what the frontmatter takes the body cannot, so
the agent's notes were cut for it. Now several checks are counted in the outcome line and
only a failed one is named there (cut short).
"""

from __future__ import annotations

import pytest
import yaml

from dualtrace.encoder.records import PASSED_CHECKS_KEPT, record_for
from dualtrace.hooks.transcripts import read_transcript
from dualtrace.memfs.sessions import Check, Commit, outcome_line, render_body
from tests.conftest import CORPUS
from tests.e2e.test_session_records import Transcript

SPOTTER = CORPUS / "claude-code" / "spotter"


def _frontmatter(text: str) -> tuple[str, dict]:
    front = text.split("---\n", 2)[1]
    return front, yaml.safe_load(front)


@pytest.mark.skipif(not SPOTTER.is_dir(), reason="shared corpus not available")
def test_a_real_sessions_frontmatter_names_each_check_once(tmp_path):
    path = next(SPOTTER.glob("fa812bfe-*.jsonl"))
    record, text = record_for(read_transcript(path), tmp_path, project="spotter", memories=())
    front, data = _frontmatter(text)
    commands = [c["command"] for c in data["checks"]]
    assert len(commands) >= 5 and "mix test 2>&1" in commands
    for command in commands:
        assert front.count(command) == 1, command
    assert data["outcome"].startswith("5 commits; ") and len(data["outcome"]) < 200
    for check in data["checks"]:
        assert f"{check['command']} {check['outcome']}" not in data["outcome"]  # counted
    assert len(text.encode("utf-8")) <= 12000


def _many_checks(tmp_path) -> Transcript:
    """Thirteen checks, the last one failing, and the agent's words around them."""
    t = Transcript(tmp_path / "s.jsonl")
    t.user("Make the importer tests pass on Python 3.13")
    for n in range(12):
        t.bash(f"pytest -q tests/importer/test_case_{n:02d}.py", "1 passed")
        t.say(f"Case {n:02d} passes because the importer now reads the BOM before decoding "
              f"the header row; keeping the old decoder for files without one.")
    t.bash("ruff check src/importer", "src/importer/bom.py:3:1: F401 unused import", failed=True)
    t.say("All twelve cases pass; ruff still flags one unused import in bom.py.")
    return t


def test_older_passed_checks_leave_the_file_before_the_agents_notes(tmp_path):
    session = read_transcript(_many_checks(tmp_path).write())
    full, full_text = record_for(session, tmp_path, project="p", memories=(), budget=10**6)
    assert len(full.checks) == 13 and full.omitted == 0
    budget = len(full_text.encode("utf-8")) - 100  # something must go
    record, text = record_for(session, tmp_path, project="p", memories=(), budget=budget)
    assert len(text.encode("utf-8")) <= budget
    # The body is whole: every note and the agent's words stay ...
    assert render_body(record) == render_body(full)
    # ... older passed checks went instead: the failed one and the latest passed kept.
    kept = [c.command for c in record.checks]
    assert "ruff check src/importer" in kept
    latest = [c.command for c in full.checks if c.outcome == "passed"][-PASSED_CHECKS_KEPT:]
    assert all(cmd in kept for cmd in latest)
    assert 1 + PASSED_CHECKS_KEPT <= len(kept) < 13
    assert kept == [c.command for c in full.checks if c.command in kept]  # order kept
    assert record.omitted == 13 - len(kept)
    # Without pressure nothing leaves.
    again, _ = record_for(session, tmp_path, project="p", memories=(),
                          budget=len(full_text.encode("utf-8")))
    assert again.checks == full.checks and again.omitted == 0


def test_the_outcome_line_counts_several_checks_and_names_only_the_failed():
    one = [Check("pytest -q", 2, 1, "passed")]
    assert outcome_line([Commit("abc1234", "m")], one, 1) == "1 commit; pytest -q passed; open end"
    passed = [Check(f"pytest tests/test_{n}.py", 1, 0, "passed") for n in range(4)]
    assert outcome_line([], passed, 0) == "no commits; 4 checks passed"
    long = "mypy " + "src/package/module_with_a_long_name.py " * 3
    failed = [*passed, Check("ruff check .", 1, 1, "failed"), Check(long, 1, 1, "failed")]
    line = outcome_line([], failed, 2)
    assert line.startswith("no commits; 2 of 6 checks failed: ruff check ., mypy src/package/")
    assert line.endswith("...; 2 open ends") and len(line) < 150
    assert "pytest" not in line  # the passed ones are counted, not named
    same = [*passed, Check(long, 1, 1, "failed"), Check(long + "x.py", 1, 1, "failed")]
    assert outcome_line([], same, 0).count("mypy src/") == 1  # the same name once
    three = [*failed, Check("tsc --noEmit", 1, 1, "failed")]
    assert "3 of 7 checks failed: mypy src/" in outcome_line([], three, 0)
    assert outcome_line([], three, 0).endswith(", tsc --noEmit and 1 more")
