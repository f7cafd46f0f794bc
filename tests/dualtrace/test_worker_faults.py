"""The worker under faults (issue 13 item 4): real hooks, a real worker process, real
git; faults at the named windows through DUALTRACE_FAULT (dualtrace/faults.py)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from dualtrace import queue
from tests import hook_helpers
from tests.conftest import EXAMPLES
from tests.fault_helpers import fill, mounted_tmpfs
from tests.hook_helpers import (
    PY,
    append_turn,
    claude_payload,
    no_workers_left,
    run_hook,
    runs,
    stop_worker,
    wait_drained,
    wait_until,
    worker_pid,
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


# ------------------------------------------------------------------ idle and paused workers

def _proc_state(pid: int) -> str | None:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return None


def _reads_and_cpu(pid: int) -> tuple[int, int]:
    """read(2)-family calls so far, and CPU ticks (user + system)."""
    io = dict(line.split(": ") for line in Path(f"/proc/{pid}/io").read_text().splitlines())
    stat = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return int(io["syscr"]), int(stat[11]) + int(stat[12])


def test_an_idle_worker_does_not_reread_job_files(hook_env, state_dir, tmp_path):
    if not Path(f"/proc/{os.getpid()}/io").exists():
        pytest.skip("needs /proc/<pid>/io")
    # A debounced job 10 minutes out and a worker willing to wait for it, polling fast:
    # before this fix it read every job file twice per poll (4 per 10 ms here).
    env = dict(hook_env, DUALTRACE_WORKER_POLL="0.005", DUALTRACE_WORKER_MAX_WAIT="900")
    transcript = tmp_path / "idle.jsonl"
    append_turn(transcript, "idle", str(tmp_path), 0)
    stop = claude_payload("Stop", "idle", transcript, str(tmp_path))
    assert run_hook("stop", stop, env=env).returncode == 0
    pid = wait_until(lambda: worker_pid(state_dir), what="worker started")
    wait_until(lambda: "start" in (state_dir / "logs" / "worker.log").read_text()
               if (state_dir / "logs" / "worker.log").exists() else False, what="worker log")
    time.sleep(0.1)  # past its first scans
    reads, cpu = _reads_and_cpu(pid)
    time.sleep(0.5)
    reads_after, cpu_after = _reads_and_cpu(pid)
    print(f"idle 0.5 s: {reads_after - reads} reads, {cpu_after - cpu} CPU ticks")
    assert reads_after - reads <= 5
    assert cpu_after - cpu <= 10
    # Idle is not deaf: the session's end is picked up at once (the queue folder's
    # mtime changed), not when the debounce would have run out.
    end = claude_payload("SessionEnd", "idle", transcript, str(tmp_path), reason="other")
    assert run_hook("session-end", end, env=env).returncode == 0
    wait_until(lambda: runs(state_dir), 60, what="the ended session encoded")
    assert runs(state_dir)[0]["error"] is None and runs(state_dir)[0]["commit"]
    assert worker_pid(state_dir) in (pid, None)  # the same worker did it
    wait_drained(state_dir)


def test_a_worker_paused_while_scheduling_holds_no_queue_lock(hook_env, state_dir, tmp_path):
    # The worker loads the project's settings to know when a job is due; paused right
    # there (SIGSTOP by the fault point), it must not be holding the queue lock that
    # every hook takes to queue a session.
    env = dict(hook_env, DUALTRACE_FAULT="worker-settings:stop")
    env.pop("DUALTRACE_DEBOUNCE_SECONDS")  # the debounce comes from the settings
    first = tmp_path / "first.jsonl"
    append_turn(first, "first", str(tmp_path), 0)
    end = claude_payload("SessionEnd", "first", first, str(tmp_path), reason="other")
    assert run_hook("session-end", end, env=env).returncode == 0
    pid = wait_until(lambda: worker_pid(state_dir), what="worker started")
    try:
        wait_until(lambda: _proc_state(pid) == "T", 30, what="worker paused")
        lock = queue.queue_lock(str(state_dir))
        assert lock.acquire(blocking=False), "a paused worker holds the queue lock"
        lock.release()
        second = tmp_path / "second.jsonl"
        append_turn(second, "second", str(tmp_path), 1)
        started = time.monotonic()
        end2 = claude_payload("SessionEnd", "second", second, str(tmp_path), reason="other")
        assert run_hook("session-end", end2, env=hook_env).returncode == 0
        assert time.monotonic() - started < 5
    finally:
        os.kill(pid, signal.SIGCONT)
    wait_drained(state_dir)
    done = {r["session"]: r for r in runs(state_dir)}
    assert set(done) == {"first", "second"}
    assert all(r["error"] is None and r["commit"] for r in done.values())


# ------------------------------------------------------------------ a full state directory

@pytest.fixture
def small_state(tmp_path):
    """The state directory on a 4 MiB tmpfs (needs mount rights: root, as on CI here)."""
    with mounted_tmpfs(tmp_path / "state-small", "4m") as mnt:
        try:
            yield mnt
        finally:
            stop_worker(mnt)


def test_a_full_state_dir_is_reported_and_the_session_caught_up(hook_env, small_state,
                                                                tmp_path):
    env = dict(hook_env, DUALTRACE_HOME=str(small_state), DUALTRACE_DEBOUNCE_SECONDS="0")
    memdir = Path(env["DUALTRACE_MEMORY_DIR"])
    folder = tmp_path / "claude"
    folder.mkdir()
    # dualtrace already records this project: one session encoded.
    first = folder / "first.jsonl"
    append_turn(first, "first", str(tmp_path), 0)
    assert run_hook("session-end", claude_payload("SessionEnd", "first", first, str(tmp_path),
                                                  reason="other"), env=env).returncode == 0
    wait_drained(small_state)
    filler = fill(small_state)
    # The disk is full: the next session's hook cannot queue it. It still exits 0,
    # silent, at once.
    lost = folder / "lost.jsonl"
    append_turn(lost, "lost", str(tmp_path), 1)
    proc = run_hook("session-end", claude_payload("SessionEnd", "lost", lost, str(tmp_path),
                                                  reason="other"), env=env)
    assert proc.returncode == 0 and proc.stdout == b""
    assert not os.path.exists(queue.job_path(str(small_state), queue.job_id("claude-code",
                                                                             "lost")))
    status = subprocess.run([PY, "-m", "dualtrace.cli", "status"], capture_output=True,
                            text=True, env=env)
    assert status.returncode == 0, status.stderr
    full = [line for line in status.stdout.splitlines() if line.startswith("state dir:")]
    assert len(full) == 1 and "FULL" in full[0] and str(small_state) in full[0], status.stdout
    # Space comes back; the next session start's sweep finds the session nobody queued.
    filler.unlink()
    now = folder / "now.jsonl"
    now.write_text("")
    start = claude_payload("SessionStart", "now", now, str(tmp_path), source="startup")
    assert run_hook("session-start", start, env=env).returncode == 0
    wait_drained(small_state)
    done = {r["session"]: r for r in runs(small_state)}
    assert done["lost"]["error"] is None and done["lost"]["commit"], done
    assert "never queued by their hooks" in (small_state / "logs" / "worker.log").read_text()
    assert "Dualtrace-Session: lost" in _git(memdir, "log", "--format=%B")


def test_a_worker_on_a_full_state_dir_says_so_once_and_keeps_the_job(small_state, tmp_path):
    env = dict(os.environ, DUALTRACE_HOME=str(small_state), DUALTRACE_DEBOUNCE_SECONDS="0")
    transcript = tmp_path / "full.jsonl"
    append_turn(transcript, "full", str(tmp_path), 0)
    job = queue.touch(str(small_state), host="claude-code", session_id="full",
                      event="session-end", immediate=True, transcript=str(transcript),
                      cwd=str(tmp_path), memory_dir=str(tmp_path / "memory"))
    filler = fill(small_state)
    proc = subprocess.run([PY, "-m", "dualtrace.worker"], env=env, capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == 0
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "is full" in lines[0] and str(small_state) in lines[0], lines
    assert queue.list_jobs(str(small_state)) == [job]  # untouched, still queued
    filler.unlink()
    assert subprocess.run([PY, "-m", "dualtrace.worker"], env=env, capture_output=True,
                          timeout=120).returncode == 0
    assert queue.list_jobs(str(small_state)) == []
    assert runs(small_state)[0]["error"] is None and runs(small_state)[0]["commit"]
