"""The worker under faults (issue 13 item 4): real hooks, a real worker process, real
git; faults at the named windows through DUALTRACE_FAULT (dualtrace/faults.py)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from dualtrace import queue
from tests import hook_helpers
from tests.conftest import EXAMPLES
from tests.hook_helpers import (
    claude_payload,
    no_workers_left,
    run_hook,
    runs,
    wait_drained,
    wait_until,
    worker_running,
)

hook_env = hook_helpers.hook_env


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True,
                          check=True).stdout


def _session_end(tmp_path: Path, example: str, env: dict) -> tuple[str, Path]:
    source = EXAMPLES / example
    session = json.loads(source.read_text().splitlines()[0])["sessionId"]
    folder = tmp_path / "claude"
    folder.mkdir(exist_ok=True)
    transcript = folder / f"{session}.jsonl"
    transcript.write_text(source.read_text())
    end = claude_payload("SessionEnd", session, transcript, str(tmp_path), reason="other")
    assert run_hook("session-end", end, env=env).returncode == 0
    return session, transcript


def test_worker_killed_between_write_and_commit_commits_the_session_on_retry(
        hook_env, state_dir, tmp_path):
    memdir = Path(hook_env["DUALTRACE_MEMORY_DIR"])
    env = dict(hook_env, DUALTRACE_FAULT="txn-written:kill")
    first, _ = _session_end(tmp_path, "pilot-4-auth-401-session1.jsonl", env)
    job_file = Path(queue.job_path(str(state_dir), queue.job_id("claude-code", first)))
    wait_until(lambda: not worker_running(state_dir) and job_file.exists()
               and json.loads(job_file.read_text())["status"] == "running",
               what="worker killed mid-commit")
    assert "incidents/" in _git(memdir, "status", "--porcelain", "-uall")  # written, uncommitted
    # The next session's hook starts a worker: it retries the first session and encodes
    # the second (the same incident recurring) after it.
    second, _ = _session_end(tmp_path, "pilot-4-auth-401-session2.jsonl", hook_env)
    wait_drained(state_dir)
    records = {r["session"]: r for r in runs(state_dir)}
    assert records[first]["error"] is None and records[first]["attempt"] == 2
    assert records[first]["skipped"] != "nothing worth storing"
    assert records[second]["error"] is None and records[second]["commit"]
    log = _git(memdir, "log", "--reverse", "--format=%s|%(trailers:key=Dualtrace-Session,"
               "valueonly,separator=)").splitlines()
    assert [line.split("|") for line in log[1:]] == [
        ["mem: store incidents/auth-middleware-401-race (incident, evidence:8)", first],
        [log[2].split("|")[0], second]]
    assert "recurred" in log[2]  # the second session, once
    # The first commit holds the first session's files; the second adds nothing of them.
    status = _git(memdir, "show", "--name-status", "--format=", "HEAD").split()
    new_in_second = [p for s, p in zip(status[::2], status[1::2], strict=True) if s == "A"]
    assert all(p.startswith("sessions/") and second[:8] in p for p in new_in_second)
    assert _git(memdir, "status", "--porcelain", "-uall") == ""
    assert queue.list_jobs(str(state_dir)) == []
    assert no_workers_left(state_dir)
