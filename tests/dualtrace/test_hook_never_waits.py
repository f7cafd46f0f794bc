"""Issue 13.4, the hook's part: it never waits long on stdin or on the queue lock.

Real processes throughout: the console script as hosts run it, a pipe the "host" keeps
open, and a real process holding the real queue lock, stopped with SIGSTOP.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from dualtrace import queue
from tests import hook_helpers
from tests.hook_helpers import claude_payload, hook_cmd, run_hook, runs, wait_drained

hook_env = hook_helpers.hook_env

# Generous: a healthy hook takes ~0.05-0.3 s here; the old code took 1.6 s with stdin
# open (and dropped the payload) and hung until the host's timeout on a stopped lock.
BOUND = 3.0

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="SIGSTOP and select()")


def _session(tmp_path: Path, name: str) -> Path:
    path = tmp_path / "proj" / f"{name}.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    hook_helpers.append_turn(path, name, str(tmp_path), 0)
    return path


def _run_with_open_stdin(body: bytes, env: dict) -> tuple[int, float, bytes]:
    """Write ``body`` and keep the pipe open until the hook has exited."""
    started = time.monotonic()
    proc = subprocess.Popen([*hook_cmd(), "hook", "stop"], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, env=env)
    try:
        proc.stdin.write(body)
        proc.stdin.flush()
        code = proc.wait(timeout=20)  # stdin is still open here
        elapsed = time.monotonic() - started
        out = proc.stdout.read()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        proc.stdin.close()
        proc.stdout.close()
    return code, elapsed, out


def test_complete_payload_on_a_pipe_left_open_is_queued_at_once(hook_env, state_dir, tmp_path):
    transcript = _session(tmp_path, "open1")
    body = json.dumps(claude_payload("Stop", "open1", transcript, str(tmp_path))).encode()
    code, elapsed, out = _run_with_open_stdin(body, hook_env)
    assert code == 0 and out == b""
    assert elapsed < BOUND, f"{elapsed:.2f}s"
    (job,) = queue.list_jobs(str(state_dir))  # the old code logged a timeout, queued nothing
    assert job["session_id"] == "open1" and job["transcript"] == str(transcript)


def test_partial_payload_on_a_pipe_left_open_returns_and_logs(hook_env, state_dir):
    code, elapsed, out = _run_with_open_stdin(b'{"session_id": "s1", "transcr', hook_env)
    assert code == 0 and out == b""
    assert elapsed < BOUND, f"{elapsed:.2f}s"
    log = (state_dir / "logs" / "hook.log").read_text()
    assert "stdin not closed after 0.1s" in log and "s1" not in log  # size, never text
    assert queue.list_jobs(str(state_dir)) == []


@pytest.fixture
def stopped_lock_holder(state_dir):
    """A real process that takes the queue lock and is then stopped (SIGSTOP), like a
    worker stopped by a debugger or the OOM-adjacent scheduler in the middle of a scan."""
    queue.ensure_dirs(str(state_dir))
    code = ("import sys, time\n"
            "from dualtrace import queue\n"
            "lock = queue.queue_lock(sys.argv[1]); lock.acquire()\n"
            "print('locked', flush=True)\n"
            "time.sleep(600)\n")
    proc = subprocess.Popen([sys.executable, "-c", code, str(state_dir)],
                            stdout=subprocess.PIPE)
    try:
        assert proc.stdout.readline() == b"locked\n"
        os.kill(proc.pid, signal.SIGSTOP)
        probe = queue.queue_lock(str(state_dir))
        assert not probe.acquire(blocking=False)  # really held
        yield proc
    finally:
        os.kill(proc.pid, signal.SIGCONT)
        proc.kill()
        proc.wait()
        proc.stdout.close()


def test_stop_and_session_start_hooks_do_not_wait_on_a_stopped_lock_holder(
        hook_env, state_dir, tmp_path, stopped_lock_holder):
    transcript = _session(tmp_path, "held")
    timings = {}
    for event, name, extra in (("stop", "Stop", {}),
                               ("session-start", "SessionStart", {"source": "startup"}),
                               ("session-end", "SessionEnd", {"reason": "exit"})):
        started = time.monotonic()
        proc = run_hook(event, claude_payload(name, "held", transcript, str(tmp_path), **extra),
                        env=hook_env, timeout=20)
        timings[event] = time.monotonic() - started
        assert proc.returncode == 0
        assert event == "session-start" or proc.stdout == b""
    assert max(timings.values()) < BOUND, timings
    # Nothing could be written to the job files; every touch waits in queue/incoming/.
    assert queue.list_jobs(str(state_dir)) == []
    incoming = sorted((state_dir / "queue" / "incoming").glob("*.json"))
    events = [json.loads(p.read_text())["event"] for p in incoming]
    assert events == ["stop", "session-start", "session-end"]
    # The holder goes away; the worker the hooks started folds the touches in and
    # encodes the session (session-end made it immediate): nothing was lost.
    stopped_lock_holder.kill()
    wait_drained(state_dir)
    assert not any((state_dir / "queue" / "incoming").glob("*.json"))
    (record,) = [r for r in runs(state_dir) if r["session"] == "held"]
    assert record["error"] is None and record["commit"]


def test_a_deferred_touch_is_folded_by_the_next_hook(hook_env, state_dir, tmp_path):
    transcript = _session(tmp_path, "later")
    deferred = queue.defer(str(state_dir), {
        "host": "claude-code", "session_id": "early", "event": "stop", "immediate": False,
        "kind": "session", "transcript": str(transcript), "cwd": str(tmp_path),
        "agent_id": None, "memory_dir": None, "now": time.time()})
    assert deferred["deferred"] is True
    proc = run_hook("stop", claude_payload("Stop", "later", transcript, str(tmp_path)),
                    env=hook_env)
    assert proc.returncode == 0
    jobs = {j["session_id"]: j for j in queue.list_jobs(str(state_dir))}
    assert set(jobs) == {"early", "later"} and jobs["early"]["events"] == {"stop": 1}
    assert not queue.has_incoming(str(state_dir))
