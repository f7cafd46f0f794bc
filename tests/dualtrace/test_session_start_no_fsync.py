"""SessionStart's sweep request is queued without an fsync (issue 17.4): it is cheap to
lose (the next session start asks again) and the fsync cost that synchronous hook ~10 ms.
The session jobs Stop / SessionEnd write stay durable."""

from __future__ import annotations

import json
import subprocess
import sys

from dualtrace import queue
from tests import hook_helpers
from tests.hook_helpers import claude_payload

hook_env = hook_helpers.hook_env  # the fixture (stops the worker afterwards)

# The real hook entry, with os.fsync counted (the count goes to stderr).
COUNTING = """
import os, sys
calls = []
real = os.fsync
os.fsync = lambda fd: (calls.append(fd), real(fd))[1]
sys.argv = ["dualtrace", "hook", sys.argv[1]]
from dualtrace.hookcmd import entry
try:
    entry()
except SystemExit:
    pass
sys.stderr.write(f"fsync={len(calls)}")
"""


def _fsyncs(event: str, payload: dict, env: dict) -> int:
    proc = subprocess.run([sys.executable, "-c", COUNTING, event], input=json.dumps(payload),
                          capture_output=True, text=True, env=env, timeout=30)
    assert proc.returncode == 0, proc.stderr
    return int(proc.stderr.rsplit("fsync=", 1)[1])


def test_the_sweep_touch_skips_fsync_and_session_jobs_keep_it(hook_env, state_dir, tmp_path):
    transcript = tmp_path / "proj" / "s1.jsonl"
    transcript.parent.mkdir(parents=True)
    transcript.write_text('{"type":"user","message":{"role":"user","content":"hi"}}\n')
    start = claude_payload("SessionStart", "s1", transcript, str(tmp_path), source="startup")
    stop = claude_payload("Stop", "s1", transcript, str(tmp_path))
    # Held worker lock: the hooks start no worker, so their jobs stay to be looked at.
    lock = queue.FileLock(str(state_dir / "worker.lock"))
    lock.acquire()
    try:
        assert _fsyncs("session-start", start, hook_env) == 0
        kinds = {j.get("kind"): j for j in queue.list_jobs(str(state_dir))}
        assert kinds["sweep"]["immediate"]  # queued all the same
        assert _fsyncs("stop", stop, hook_env) == 1
        kinds = {j.get("kind"): j for j in queue.list_jobs(str(state_dir))}
        assert kinds["session"]["session_id"] == "s1"
    finally:
        lock.release()
