"""Shared helpers for the hook/queue/worker tests: real processes, temp state.

It holds no tests itself; import it as ``tests.hook_helpers``.
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

PY = sys.executable
SCRIPT = Path(sys.executable).parent / "dualtrace"


def hook_cmd() -> list[str]:
    """The installed console script (what hosts run); ``-m`` as a fallback."""
    return [str(SCRIPT)] if SCRIPT.is_file() else [PY, "-m", "dualtrace.cli"]


def run_hook(event: str, payload: bytes | str | dict | None, *, env: dict | None = None,
             args: tuple[str, ...] = (), timeout: float = 20) -> subprocess.CompletedProcess:
    if isinstance(payload, dict):
        payload = json.dumps(payload)
    if isinstance(payload, str):
        payload = payload.encode("utf-8")
    return subprocess.run([*hook_cmd(), "hook", event, *args], input=payload or b"",
                          capture_output=True, env=env or dict(os.environ), timeout=timeout)


def worker_running(state: Path) -> bool:
    lock = queue.FileLock(str(state / "worker.lock"))
    if not (state / "worker.lock").exists():
        return False
    if lock.acquire(blocking=False):
        lock.release()
        return False
    return True


def worker_pid(state: Path) -> int | None:
    try:
        return int((state / "worker.pid").read_text().strip())
    except (OSError, ValueError):
        return None


def wait_until(pred, timeout: float = 60.0, step: float = 0.05, what: str = "condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = pred()
        if value:
            return value
        time.sleep(step)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")


def active_jobs(state: Path) -> list[dict]:
    return [j for j in queue.list_jobs(str(state)) if j.get("status") != queue.PARKED]


def hook_children_done(state: Path) -> bool:
    """No detached hook child (Letta's redact-and-write) still holds a ticket."""
    folder = state / "hook-order"
    return not folder.is_dir() or not any(folder.glob("*.ticket"))


def wait_drained(state: Path, timeout: float = 90.0) -> None:
    """No hook child at work, no pending/running job and no worker alive."""
    wait_until(lambda: hook_children_done(state) and not queue.has_incoming(str(state))
               and not active_jobs(state) and not worker_running(state), timeout,
               what="hook children done, queue drained and worker exited")


def runs(state: Path) -> list[dict]:
    path = state / queue.RUNS
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def stop_worker(state: Path, timeout: float = 10.0) -> None:
    """Fixture teardown: let a worker finish, else SIGKILL the one this test started."""
    deadline = time.monotonic() + timeout
    while worker_running(state) and time.monotonic() < deadline:
        time.sleep(0.05)
    if worker_running(state):
        pid = worker_pid(state)
        if pid:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        wait_until(lambda: not worker_running(state), 10, what="killed worker gone")


def pids_of_workers(state: Path) -> list[int]:
    """Live processes that are workers of *this* state dir (from /proc, Linux only)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            cmd = Path(f"/proc/{entry}/cmdline").read_bytes().split(b"\0")
            env = Path(f"/proc/{entry}/environ").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"dualtrace.worker" in cmd and f"DUALTRACE_HOME={state}".encode() in env:
            found.append(int(entry))
    return found


def no_workers_left(state: Path, timeout: float = 15.0) -> bool:
    """True once no worker process of this state dir exists (a losing racer that found
    the lock taken needs a moment to exit)."""
    wait_until(lambda: not pids_of_workers(state), timeout, what="worker processes gone")
    return True


@pytest.fixture
def hook_env(state_dir, tmp_path):
    """Env for hook subprocesses; tears down any worker the test started."""
    memory = tmp_path / "memory"
    env = dict(os.environ)
    env.update(DUALTRACE_MEMORY_DIR=str(memory), DUALTRACE_DEBOUNCE_SECONDS="600",
               DUALTRACE_WORKER_POLL="0.05", DUALTRACE_RETRY_SECONDS="0.05",
               # Debounced jobs stay queued; the worker does not wait 10 min for them.
               DUALTRACE_WORKER_MAX_WAIT="1")
    yield env
    stop_worker(state_dir)


# ---------------------------------------------------------------- transcripts

TURNS = [
    ("We're switching to JSON structured logging instead of plain text. The main driver "
     "was that our Datadog pipeline couldn't parse free-form strings reliably. We looked "
     "at keeping plain text and adding a log shipper to transform it, but that felt like "
     "adding complexity to fix a problem we'd created ourselves.",
     "Understood. I switched the logger to JSON output in app/logging.py and updated the "
     "tests; we decided to use structlog."),
    ("The auth middleware is throwing 401s intermittently -- passes locally but fails in "
     "staging. Looks like a race condition in the token refresh.",
     "I found the race: two requests both refresh the token. I made the refresh "
     "idempotent with a lock in auth/refresh.py and the test suite passes now."),
    ("From now on, always run ruff before committing. The rule is: no lint errors on main.",
     "Noted: the rule is that ruff must pass before every commit. I added it to the "
     "pre-commit config."),
]


def claude_lines(session: str, cwd: str, turn: int) -> list[str]:
    """One Claude Code turn (user, assistant tool_use, tool_result, assistant text)."""
    user, answer = TURNS[turn % len(TURNS)]
    base = f"{session}-{turn}"
    ts = f"2026-05-01T10:{turn:02d}:00.000Z"
    env = {"sessionId": session, "cwd": cwd, "version": "2.1.39", "gitBranch": "main",
           "isSidechain": False, "userType": "external", "timestamp": ts}
    recs = [
        {**env, "type": "user", "uuid": f"{base}-u", "parentUuid": None,
         "message": {"role": "user", "content": user}},
        {**env, "type": "assistant", "uuid": f"{base}-a1", "parentUuid": f"{base}-u",
         "message": {"id": f"msg-{base}-1", "role": "assistant", "model": "claude",
                     "content": [{"type": "tool_use", "id": f"tu-{base}", "name": "Edit",
                                  "input": {"file_path": f"{cwd}/app/mod{turn}.py",
                                            "old_string": "a", "new_string": "b"}}],
                     "usage": {"input_tokens": 10, "output_tokens": 5}}},
        {**env, "type": "user", "uuid": f"{base}-r", "parentUuid": f"{base}-a1",
         "message": {"role": "user", "content": [
             {"type": "tool_result", "tool_use_id": f"tu-{base}", "content": "ok"}]},
         "toolUseResult": {"filePath": f"{cwd}/app/mod{turn}.py"}},
        {**env, "type": "assistant", "uuid": f"{base}-a2", "parentUuid": f"{base}-r",
         "message": {"id": f"msg-{base}-2", "role": "assistant", "model": "claude",
                     "content": [{"type": "text", "text": answer}],
                     "usage": {"input_tokens": 10, "output_tokens": 5}}},
    ]
    return [json.dumps(r) for r in recs]


def append_turn(transcript: Path, session: str, cwd: str, turn: int) -> None:
    with transcript.open("a", encoding="utf-8") as fh:
        for line in claude_lines(session, cwd, turn):
            fh.write(line + "\n")


def claude_payload(event: str, session: str, transcript: Path, cwd: str, **extra) -> dict:
    payload = {"session_id": session, "transcript_path": str(transcript), "cwd": cwd,
               "hook_event_name": event, "permission_mode": "default"}
    payload.update(extra)
    return payload


def git_subjects(repo: Path) -> list[str]:
    out = subprocess.run(["git", "-C", str(repo), "log", "--format=%s"], capture_output=True,
                         text=True)
    return out.stdout.splitlines() if out.returncode == 0 else []
