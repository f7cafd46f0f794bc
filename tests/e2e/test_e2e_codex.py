"""The real Codex CLI (pinned, from npm) with dualtrace installed by
``dualtrace install --agent codex``, against the local fake Responses API."""

from __future__ import annotations

import json
import time

import pytest

from tests.e2e.codex_host import Codex
from tests.e2e.e2e_hosts import memory_text
from tests.fake_openai import FakeResponses, input_text, last_user_input, message

pytestmark = pytest.mark.e2e

DECISION = ("We decided to use PostgreSQL, not MySQL, for the billing service, because "
            "billing needs row-level locking for invoice updates.")
SESSION_END_CAP = 3.0  # seconds: Codex kills a SessionEnd hook after this


def assistant(body: dict) -> list[dict]:
    prompt = last_user_input(body)
    if "We decided" in prompt:
        return [message("Understood: billing uses PostgreSQL rather than MySQL, because "
                        "invoice updates need row-level locking.")]
    return [message("OK.")]


@pytest.fixture
def api():
    with FakeResponses() as server:
        server.default = assistant
        yield server


@pytest.fixture
def codex(codex_bin, sandbox, api) -> Codex:
    proc = sandbox.dualtrace("install", "--agent", "codex")
    assert "/hooks" in proc.stdout  # the person is told to trust the hooks
    return Codex(codex_bin, sandbox, api)


def test_a_codex_session_is_stored_at_session_end(codex):
    box = codex.box
    run = codex.exec(DECISION)
    assert run.messages and "PostgreSQL" in run.messages[-1]
    box.wait_idle()
    records = [r for r in box.runs() if r.get("session") == run.thread_id]
    assert records and records[-1]["error"] is None, (records, box.logs())
    assert records[-1]["commit"] and records[-1]["backend"] == "offline"
    assert records[-1]["host"] == "codex"
    [memdir] = box.memory_dirs()
    assert "PostgreSQL" in memory_text(memdir)
    assert codex.foreign_requests() == []

    # The next session's request carries the memory (SessionStart, as developer context).
    later = codex.exec("Let's plan the next sprint.")
    assert "PostgreSQL" in input_text(later.requests[0])
    assert "<dualtrace-memory>" in json.dumps(later.requests[0])


def test_session_end_hook_queues_within_codex_cap(codex):
    box = codex.box
    run = codex.exec(DECISION)
    # Queued by SessionEnd itself, not Stop's 10-minute debounce: the encode ran now.
    box.wait_idle(timeout=30)
    [record] = [r for r in box.runs() if r.get("session") == run.thread_id]
    assert record["commit"], record
    # The same SessionEnd payload, timed as Codex runs it (a process, JSON on stdin).
    [rollout] = codex.rollouts()
    payload = {"session_id": run.thread_id, "turn_id": "t", "transcript_path": str(rollout),
               "cwd": str(box.project), "hook_event_name": "SessionEnd", "model": "gpt-5"}
    started = time.monotonic()
    proc = box.dualtrace("hook", "session-end", "--host", "codex", input=json.dumps(payload))
    took = time.monotonic() - started
    assert proc.returncode == 0 and proc.stdout == ""
    assert took < SESSION_END_CAP, f"SessionEnd hook took {took:.2f}s (cap {SESSION_END_CAP}s)"
    box.wait_idle(timeout=30)
    assert box.runs()[-1]["skipped"], "a repeated SessionEnd encoded something again"
