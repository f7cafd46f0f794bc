"""`dualtrace recall` over session records through the real CLI: --type session, and
aggregation questions ("how many sessions ...", "which sessions ...") that list every
session about the topic by date (issue 11)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from dualtrace.memfs.recall import LABEL_B_RECORD, LABEL_C
from tests.e2e.test_session_records import Transcript, fix_session

FIRST = "0b6f1c2e"  # 2026-03-25: fixes the flaky auth test (tests/e2e/test_session_records)
AGAIN = "1111aaaa-7d1a-4b8e-9c55-2f0e8a1d3b44"  # 2026-04-02: the flaky auth test is back
OTHER = "2222bbbb-7d1a-4b8e-9c55-2f0e8a1d3b44"  # 2026-03-01: a CSV export, nothing on auth


def cli(memdir: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "dualtrace.cli", *args, "--memory-dir",
                           str(memdir)], capture_output=True, text=True)


@pytest.fixture
def three_sessions(memdir: Path, tmp_path: Path) -> Path:
    again = Transcript(tmp_path / "again.jsonl", sid=AGAIN, day="2026-04-02")
    again.user("The flaky auth test is back: test_refresh fails again on CI.")
    again.bash("pytest -q tests/test_auth.py",
               "FAILED tests/test_auth.py::test_refresh - AssertionError: 401 != 200", failed=True)
    again.say("The token refresh retry was removed by the proxy rewrite; I restored it.")
    other = Transcript(tmp_path / "other.jsonl", sid=OTHER, day="2026-03-01")
    other.user("Add a CSV export to the orders report.")
    other.say("The orders report now has a CSV export button.")
    for transcript in (fix_session(tmp_path / "fix.jsonl").write(), again.write(), other.write()):
        proc = cli(memdir, "encode", str(transcript), "--backend", "offline")
        assert proc.returncode == 0, proc.stderr
    assert len(list((memdir / "sessions").rglob("*.md"))) == 3
    return memdir


def test_type_session_answers_from_records_only(three_sessions):
    question = "why do we retry the token refresh"
    both = cli(three_sessions, "recall", question)
    assert both.returncode == 0, both.stderr
    assert both.stdout.index("decisions/") < both.stdout.index("Session record sessions/")
    only = cli(three_sessions, "recall", "--type", "session", question)
    assert only.returncode == 0, only.stderr
    assert only.stdout.startswith(LABEL_B_RECORD)
    assert "decisions/" not in only.stdout and "incidents/" not in only.stdout
    assert "> We decided to retry the token refresh once because the staging proxy drops " \
           "the first call." in only.stdout  # the session's own words
    curated = cli(three_sessions, "recall", "--type", "decision", question)
    assert "decisions/" in curated.stdout and "Session record" not in curated.stdout
    bad = cli(three_sessions, "recall", "--type", "sessions", question)
    assert bad.returncode == 1 and "'sessions' is not one of" in bad.stderr
    assert bad.stderr.startswith("Error: ") and len(bad.stderr.strip().splitlines()) == 1


def test_how_many_sessions_lists_every_session_on_the_topic_oldest_first(three_sessions):
    proc = cli(three_sessions, "recall", "how many sessions did we spend on the flaky auth test?")
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0] == LABEL_B_RECORD
    assert lines[1] == "2 matching sessions, oldest first (by date):"
    listed = [ln for ln in lines if ln[:1].isdigit() and "Session record" in ln]
    assert len(listed) == 2
    assert "2026-03-25" in listed[0] and FIRST in listed[0]
    assert "2026-04-02" in listed[1] and AGAIN[:8] in listed[1]
    assert OTHER[:8] not in proc.stdout  # a session on another topic is not counted

    which = json.loads(cli(three_sessions, "recall", "--json",
                           "which sessions touched the token refresh").stdout)
    assert which["aggregation"] is True
    assert [m["record"]["session"][:8] for m in which["memories"]] == [FIRST, AGAIN[:8]]
    assert {m["source"] for m in which["memories"]} == {"record"}


def test_sessions_without_a_topic_are_all_listed_and_an_unknown_topic_abstains(three_sessions):
    proc = cli(three_sessions, "recall", "how many sessions have we had so far?")
    assert proc.returncode == 0, proc.stderr
    assert "3 matching sessions, oldest first (by date):" in proc.stdout
    order = [proc.stdout.index(s[:8]) for s in (OTHER, FIRST, AGAIN)]
    assert order == sorted(order)  # 03-01, 03-25, 04-02
    assert "Turn 1" in proc.stdout.split("\n\n")[1]  # each session shown by its first turn
    none = cli(three_sessions, "recall", "how many sessions did we spend on the kubernetes "
                                         "helm chart migration?")
    assert none.returncode == 0 and LABEL_C in none.stdout


def test_aggregation_over_records_with_type_session(three_sessions):
    proc = cli(three_sessions, "recall", "--type", "session", "list all the auth test failures")
    assert proc.returncode == 0, proc.stderr
    assert "2 matching sessions, oldest first (by date):" in proc.stdout
    assert OTHER[:8] not in proc.stdout
