"""``dualtrace explain SESSION`` explains what the session did when it was encoded.

The dry run reads the memory as it was before the session's first commit
(``<commit>^``), so a recurrence the session recorded comes back as the update it was,
a memory it stored as a store, and a later session's change to that memory does not
turn it into "skip / nothing new". The memory directory itself is never written.
Real encodes (offline, the shipped examples), real git, the CLI in process.
"""

from __future__ import annotations

import json
import re
import tempfile
from pathlib import Path

from tests.conftest import EXAMPLES, git_out, run_dualtrace

FIRST = EXAMPLES / "pilot-4-auth-401-session1.jsonl"
SECOND = EXAMPLES / "pilot-4-auth-401-session2.jsonl"  # the same incident again
INCIDENT = "incidents/auth-middleware-401-race.md"


def _encode(memdir: Path, *transcripts: Path) -> list[str]:
    """Encode each transcript; the sha of the commit each made."""
    shas = []
    for transcript in transcripts:
        run_dualtrace("encode", str(transcript), "--memory-dir", str(memdir),
                      "--backend", "offline")
        shas.append(git_out(memdir, "rev-parse", "HEAD").strip())
    return shas


def _candidate(output: str, path: str) -> str:
    return next(ln for ln in output.splitlines() if f" {path}" in ln and "d/s/r/l=" in ln)


def test_a_recurrence_is_explained_as_the_update_its_commit_made(memdir, run_cli):
    first, second = _encode(memdir, FIRST, SECOND)
    assert git_out(memdir, "log", "-1", "--format=%B").startswith(
        "mem: update incidents/auth-middleware-401-race")
    for target in ("40000000-0000-4000-8000-000000000042", str(SECOND)):
        result = run_cli("explain", target, "--memory-dir", str(memdir))
        assert result.exit_code == 0, result.output
        # Before: "stored ... the re-run adds nothing to it" (run on today's memory, which
        # already holds the recurrence); the commit says update.
        assert re.search(r"\(9\)\s+update\s+incidents/auth-middleware-401-race\.md",
                         _candidate(result.output, INCIDENT)), result.output
        assert (f"re-run now as a dry run on the memory as it was before this session's "
                f"commit (at {first[:10]})") in result.output
        assert "stored by this session" not in result.output
        assert "skip" not in result.output and "nothing new" not in result.output
    got = json.loads(run_cli("explain", "40000000-0000-4000-8000-000000000042", "--memory-dir", str(memdir), "--json").output)
    assert got["against"] == first
    assert got["report"]["memory_dir"] == str(memdir)  # not the temporary clone's
    assert [(op["action"], op["path"]) for op in got["report"]["operations"]] == [
        ("update", INCIDENT)]
    assert git_out(memdir, "rev-parse", "HEAD").strip() == second


def test_a_memory_a_later_session_changed_is_still_explained_as_stored(memdir, run_cli):
    _encode(memdir, FIRST, SECOND)  # the second session rewrote the first one's incident
    result = run_cli("explain", str(FIRST), "--memory-dir", str(memdir))
    assert result.exit_code == 0, result.output
    assert re.search(r"\s+store\s+incidents/auth-middleware-401-race\.md",
                     _candidate(result.output, INCIDENT)), result.output
    assert "before this session's commit" in result.output
    assert "skip" not in result.output and "nothing new" not in result.output


def test_explain_writes_nothing_in_the_memory_directory_and_leaves_no_clone(memdir, run_cli,
                                                                           tmp_path, monkeypatch):
    _encode(memdir, FIRST, SECOND)
    before = {p: p.stat().st_mtime_ns for p in (memdir / ".git").rglob("*") if p.is_file()}
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    assert run_cli("explain", "40000000-0000-4000-8000-000000000042", "--memory-dir", str(memdir)).exit_code == 0
    after = {p: p.stat().st_mtime_ns for p in (memdir / ".git").rglob("*") if p.is_file()}
    assert after == before  # no worktree entry, no ref, no object written in the memory's repo
    assert git_out(memdir, "status", "--porcelain") == ""
    assert list(scratch.iterdir()) == []  # the clone is gone


def test_a_session_without_a_commit_is_run_on_todays_memory(memdir, run_cli):
    _encode(memdir, FIRST)
    result = run_cli("explain", str(EXAMPLES / "pilot-1b-structured-logging.jsonl"),
                     "--memory-dir", str(memdir))
    assert result.exit_code == 0, result.output
    assert "committed: nothing for this session" in result.output
    assert "re-run now as a dry run on today's memory" in result.output
    assert re.search(r"\s+store\s+decisions/json-structured-logging\.md", result.output)


def test_a_candidate_the_rerun_skips_shows_what_the_commit_did(memdir):
    """Today's encoder may disagree with the one that encoded the session: the commit's
    verb is shown, never "skip" for a memory the commit says this session wrote."""
    from dualtrace import config
    from dualtrace.explain import Explanation, _mark_already_stored

    first, _ = _encode(memdir, FIRST, SECOND)
    got = Explanation(
        "40000000-0000-4000-8000-000000000042", None,
        [{"sha": "abcdef0123456789", "operations": [
            "mem: update incidents/auth-middleware-401-race (recurred, evidence:9)"]}],
        report={"operations": [{"action": "skip", "path": INCIDENT, "note": "nothing new"},
                               {"action": "skip", "path": "decisions/other.md", "note": "x"}]},
        against=first)
    _mark_already_stored(got, config.workspace(memory_dir=memdir))
    ops = got.report["operations"]
    assert ops[0]["action"] == "update"
    assert ops[0]["note"].startswith("commit abcdef0123 did this (update)")
    assert ops[1]["action"] == "skip"  # not this session's: stays a skip
