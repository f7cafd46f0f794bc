"""Review 5, finding 7: one definition of a memory, one verb for a new bullet, one date.

A memory is a fact; its moment and the system files' bullets are counted apart and said
the same way by status, list and reindex ("2 memories, +2 moments, +1 preference
bullet"). A new preference bullet is "stored" in the commit, the encode counts,
backfill's table and `sessions` alike; status' last runs count
the commit's operations, not the candidates skipped (the commit said "update").
`dualtrace log` dates an entry by when the session ran, as `sessions` does, and says
when it was encoded apart. Real offline encodes of the shipped examples, real git.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from tests.conftest import EXAMPLES, git_out, run_dualtrace

SESSIONS = ("pilot-1b-structured-logging", "pilot-1a-preference", "pilot-4-auth-401-session1",
            "pilot-4-auth-401-session2")
COUNTED = "2 memories, +2 moments, +1 preference bullet"


def _encode_all(memdir: Path) -> None:
    for name in SESSIONS:
        run_dualtrace("encode", str(EXAMPLES / f"{name}.jsonl"), "--memory-dir", str(memdir),
                      "--backend", "offline")


def test_status_list_and_reindex_count_the_same_memories_the_same_way(memdir, run_cli):
    _encode_all(memdir)
    status = run_cli("status", "--memory-dir", str(memdir)).output
    assert "memories:   2 (facts" in status and "moments:    2" in status
    assert "bullets:    1 (preference 1)" in status
    listed = run_cli("list", "--memory-dir", str(memdir))
    assert listed.exit_code == 0, listed.output
    assert listed.output.splitlines()[-1].startswith(
        f"({COUNTED}, as `dualtrace status` counts them;")
    reindexed = run_cli("reindex", "--memory-dir", str(memdir))
    assert reindexed.exit_code == 0, reindexed.output
    # Before: "indexed 3 memories" (the preferences file taken for one memory).
    assert re.match(rf"indexed {re.escape(COUNTED)} in \d+\.\d\ds -> ", reindexed.output), \
        reindexed.output
    filtered = run_cli("list", "--type", "decision", "--memory-dir", str(memdir)).output
    assert filtered.splitlines()[-1].startswith("(1 memory; ")  # a filtered list counts rows


def test_a_new_bullet_is_stored_everywhere(memdir, run_cli, tmp_path):
    _encode_all(memdir)
    commits = git_out(memdir, "log", "--format=%s").splitlines()
    assert "mem: store system/human (preference bullet, evidence:4)" in commits  # was "update"
    sessions = run_cli("sessions", "--memory-dir", str(memdir)).output
    assert re.search(r"1a000000 .*1 stored, 0 updated", sessions), sessions
    log = run_cli("log", "--memory-dir", str(memdir)).output
    assert "mem: update system/human" not in log
    encoded = run_dualtrace("encode", str(EXAMPLES / "pilot-1a-preference.jsonl"), "--memory-dir",
                            str(tmp_path / "one"), "--backend", "offline", "--json")
    report = json.loads(encoded.stdout)
    assert [op["action"] for op in report["operations"]] == ["bullet"]
    assert report["operations"][0]["note"] == "stored as a preference bullet in system/human.md"
    backfilled = run_dualtrace("backfill", str(EXAMPLES), "--memory-dir", str(tmp_path / "bf"),
                               "--backend", "offline").stdout
    row = next(ln for ln in backfilled.splitlines() if "1a000000" in ln)
    assert re.search(r"encoded\s+1\s+0\s", row), row  # stored 1, updated 0 (was 0 and 1)


def test_status_last_runs_count_what_the_commit_changed(memdir, run_cli, state_dir):
    _encode_all(memdir)
    run = {"finished_at": 0, "session": "s1", "backend": "offline", "duration": 1.0,
           "tokens": 0, "memory_dir": str(memdir),
           "operations": [{"action": "skip", "path": "decisions/a.md"},
                          {"action": "store", "path": "decisions/b.md"},
                          {"action": "bullet", "path": "system/human.md"}]}
    (state_dir / "runs.jsonl").write_text(json.dumps(run) + "\n")
    status = run_cli("status", "--memory-dir", str(memdir))
    assert status.exit_code == 0, status.output
    line = next(ln for ln in status.output.splitlines() if "  s1  " in ln)
    # Before: "3 ops" (the skipped candidate counted; its commit had two lines).
    assert line.endswith("1.0s  2 ops, 0 tokens"), line


def test_log_dates_a_session_by_when_it_ran_as_sessions_does(memdir, run_cli):
    _encode_all(memdir)
    sessions = run_cli("sessions", "--memory-dir", str(memdir)).output
    log = run_cli("log", "--memory-dir", str(memdir)).output
    ran_1b = next(ln for ln in sessions.splitlines() if "1b000000" in ln)[:16]
    assert ran_1b == "2026-03-12 10:02"
    entry = next(ln for ln in log.splitlines() if "1b000000" in ln)
    # Named by its short id, as `sessions` names it (review 10: log printed the whole uuid).
    assert entry.startswith(f"{ran_1b}  1b000000  offline   "), entry
    assert "1b000000-0000" not in log, log
    encoded = git_out(memdir, "log", "-1", "--format=%cd", "--date=format:%Y-%m-%d %H:%M",
                      "--grep", "json-structured-logging").strip()
    assert entry.endswith(f"encoded {encoded}"), entry


def test_log_dates_a_forget_by_its_commit_and_a_record_only_encode_shows_no_backend(
        memdir, run_cli, tmp_path):
    """Review 10: a forget's row read "undated  -" (no session ran it), and a session the
    gate kept only as a record printed an empty backend column (rows out of line)."""
    _encode_all(memdir)
    noise = tmp_path / "noise.jsonl"
    noise.write_text("\n".join(json.dumps(r) for r in [
        {"type": "user", "sessionId": "9c000000-0000-4000-8000-000000000009",
         "timestamp": "2026-03-20T09:00:00Z", "cwd": "/w/p",
         "message": {"role": "user", "content": "what does this repo do? just curious"}},
        {"type": "assistant", "sessionId": "9c000000-0000-4000-8000-000000000009",
         "timestamp": "2026-03-20T09:00:05Z",
         "message": {"role": "assistant", "content": [
             {"type": "text", "text": "It is a small CLI that prints the weather."}]}},
    ]) + "\n")
    res = run_cli("encode", str(noise), "--memory-dir", str(memdir), "--backend", "offline")
    assert res.exit_code == 0, res.output
    anchor = git_out(memdir, "log", "--format=%s", "--grep", "mem: store decisions/").split(
        "mem: store decisions/")[1].split()[0]
    assert run_cli("forget", anchor, "--yes", "--memory-dir", str(memdir)).exit_code == 0
    rows = [ln for ln in run_cli("log", "--memory-dir", str(memdir)).output.splitlines()
            if not ln.startswith(" ")]
    forgot = git_out(memdir, "log", "-1", "--format=%cd", "--date=format:%Y-%m-%d %H:%M").strip()
    assert rows[0].startswith(f"{forgot}  -         by hand   ") and rows[0].endswith(
        "  committed"), rows
    assert "undated" not in rows[0]
    record_only = next(ln for ln in rows if "9c000000" in ln)
    assert record_only.startswith("2026-03-20 09:00  9c000000  -         "), rows
