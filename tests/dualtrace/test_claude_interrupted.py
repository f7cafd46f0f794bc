"""Claude Code sessions whose last turn fired no Stop: interrupted, or ended in an API error."""

from __future__ import annotations

import json
from pathlib import Path

from dualtrace import queue
from tests import hook_helpers
from tests.conftest import EXAMPLES
from tests.hook_helpers import claude_payload, git_subjects, run_hook, runs, wait_drained

hook_env = hook_helpers.hook_env  # the fixture, shared with the other hook tests


def _session(tmp_path: Path, name: str) -> Path:
    path = tmp_path / "proj" / f"{name}.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text((EXAMPLES / "pilot-5-session-storage.jsonl").read_text())
    return path


def test_stop_failure_marks_the_session_like_stop(hook_env, state_dir, tmp_path):
    transcript = _session(tmp_path, "sf")
    payload = claude_payload("StopFailure", "sf", transcript, str(tmp_path),
                             error="overloaded_error", last_assistant_message="Partial answer")
    proc = run_hook("stop", payload, env=hook_env)
    assert proc.returncode == 0 and proc.stdout == b""
    (job,) = queue.list_jobs(str(state_dir))
    assert job["session_id"] == "sf" and job["status"] == queue.PENDING
    assert not job.get("immediate")  # debounced like a Stop: the session may go on


def test_an_interrupted_last_turn_is_encoded_at_session_end(hook_env, state_dir, tmp_path):
    transcript = _session(tmp_path, "intr")
    with transcript.open("a") as fh:  # the user pressed Esc: no Stop for this turn
        fh.write(json.dumps({"type": "user", "sessionId": "intr", "uuid": "u-int",
                             "timestamp": "2026-04-02T10:30:00.000Z", "message": {
                                 "role": "user", "content": [{"type": "text", "text":
                                     "[Request interrupted by user]"}]}}) + "\n")
    end = claude_payload("SessionEnd", "intr", transcript, str(tmp_path), reason="other")
    assert run_hook("session-end", end, env=hook_env).returncode == 0
    wait_drained(state_dir)
    (record,) = [r for r in runs(state_dir) if r["session"] == "intr"]
    assert record["error"] is None and record["commit"]
    memdir = Path(hook_env["DUALTRACE_MEMORY_DIR"])
    assert any("session-storage" in s or "redis-postgres" in s for s in git_subjects(memdir))
