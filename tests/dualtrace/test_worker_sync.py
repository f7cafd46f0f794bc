"""sync = "after-encode": the worker pushes each commit, backs off when offline."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from dualtrace import queue
from dualtrace.memfs.store import MemoryStore
from dualtrace.memfs.sync import add_remote
from tests import hook_helpers
from tests.conftest import EXAMPLES
from tests.hook_helpers import PY, claude_payload, run_hook, wait_drained

hook_env = hook_helpers.hook_env


def _remote_subjects(bare: Path) -> list[str]:
    out = subprocess.run(["git", "--git-dir", str(bare), "log", "--format=%s", "main"],
                         capture_output=True, text=True)
    return out.stdout.splitlines() if out.returncode == 0 else []


def _end_session(env: dict, tmp_path: Path, example: str) -> None:
    lines = (EXAMPLES / example).read_text().splitlines()
    session = json.loads(lines[0]).get("sessionId") or Path(example).stem
    transcript = tmp_path / "claude" / f"{session}.jsonl"
    transcript.parent.mkdir(exist_ok=True)
    transcript.write_text("\n".join(lines) + "\n")
    project = tmp_path / "shop-api"
    project.mkdir(exist_ok=True)
    proc = run_hook("session-end", claude_payload("SessionEnd", session, transcript,
                                                  str(project), reason="other"), env=env)
    assert proc.returncode == 0 and proc.stdout == b""   # the hook never waits for a sync


def _status(env: dict) -> str:
    proc = subprocess.run([PY, "-m", "dualtrace", "status"], capture_output=True, text=True,
                          env=env)
    assert proc.returncode == 0, proc.stderr
    return next(line for line in proc.stdout.splitlines() if line.startswith("sync:"))


def test_worker_syncs_after_each_commit_and_backs_off_offline(hook_env, state_dir, tmp_path):
    bare = tmp_path / "team.git"
    subprocess.run(["git", "init", "-q", "--bare", "-b", "main", str(bare)], check=True)
    memdir = Path(hook_env["DUALTRACE_MEMORY_DIR"])
    add_remote(MemoryStore(memdir), str(bare))
    assert "by hand" in _status(hook_env)
    (state_dir / "config.toml").write_text('sync = "after-encode"\n')
    assert "never synced" in _status(hook_env)

    _end_session(hook_env, tmp_path, "pilot-1b-structured-logging.jsonl")
    wait_drained(state_dir)
    assert any(s.startswith("mem: store decisions/") for s in _remote_subjects(bare))
    line = _status(hook_env)
    assert line.startswith("sync:       after each encode with origin; last ok"), line

    # Offline: the encode still commits; the sync job backs off and stays queued.
    subprocess.run(["git", "-C", str(memdir), "remote", "set-url", "origin",
                    str(tmp_path / "unreachable.git")], check=True)
    before = _remote_subjects(bare)
    _end_session(hook_env, tmp_path, "pilot-4-auth-401-session1.jsonl")
    _wait_offline(state_dir)
    jobs = [j for j in queue.list_jobs(str(state_dir)) if j.get("kind") == "sync"]
    assert len(jobs) == 1 and jobs[0]["status"] == "pending" and jobs[0]["attempts"] >= 2
    assert "cannot fetch" in jobs[0]["last_error"]
    assert jobs[0]["not_before"] > jobs[0]["updated_at"]     # backing off, not parked
    line = _status(hook_env)
    assert "OFFLINE" in line and "next try" in line, line
    assert _remote_subjects(bare) == before

    # Back online: `dualtrace retry` runs the queued sync now; the commit reaches the team.
    subprocess.run(["git", "-C", str(memdir), "remote", "set-url", "origin", str(bare)],
                   check=True)
    proc = subprocess.run([PY, "-m", "dualtrace", "retry"], capture_output=True, text=True,
                          env=hook_env)
    assert proc.returncode == 0 and "re-queued" in proc.stdout, proc.stdout + proc.stderr
    wait_drained(state_dir)
    assert any("incidents/" in s for s in _remote_subjects(bare))
    assert "last ok" in _status(hook_env) and "OFFLINE" not in _status(hook_env)
    assert [j for j in queue.list_jobs(str(state_dir)) if j.get("kind") == "sync"] == []


def _wait_offline(state: Path) -> None:
    """The worker gave up for now: the sync job failed at least twice and no worker runs."""
    hook_helpers.wait_until(
        lambda: any(j.get("kind") == "sync" and int(j.get("attempts") or 0) >= 2
                    and j.get("status") == "pending" for j in queue.list_jobs(str(state)))
        and not hook_helpers.worker_running(state), 60, what="sync job backing off")
