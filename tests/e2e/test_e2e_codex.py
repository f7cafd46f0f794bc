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
    if "We decided" in prompt and "Redis" not in prompt:
        return [message("Understood: billing uses PostgreSQL rather than MySQL, because "
                        "invoice updates need row-level locking.")]
    if "Redis" in prompt:
        return [message("Understood: Redis for the session cache, for key expiry events.")]
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
    records = box.wait_encoded(run.thread_id)
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
    [record] = box.wait_encoded(run.thread_id, timeout=30)
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


def test_a_compressed_rollout_of_an_older_session_is_caught_up_by_the_sweep(codex):
    import zstandard

    box = codex.box
    first = codex.exec(DECISION)
    assert [r for r in box.wait_encoded(first.thread_id) if r.get("commit")]
    # The session goes on, but its process is killed mid-turn: neither Stop nor SessionEnd
    # reaches dualtrace (the hooks of that run are only the start and prompt ones).
    hooks_file = box.home / ".codex" / "hooks.json"
    installed = hooks_file.read_text()
    data = json.loads(installed)
    for event in ("Stop", "SessionEnd"):
        data["hooks"].pop(event)
    hooks_file.write_text(json.dumps(data))
    codex.exec("We decided to use Redis instead of memcached for the session cache, because "
               "we need key expiry events.", "resume", first.thread_id)
    box.wait_idle()
    assert not [r for r in box.runs() if "Redis" in json.dumps(r)]
    # A week later Codex rewrites the idle rollout as .jsonl.zst and deletes the plain file.
    [rollout] = [p for p in codex.rollouts() if first.thread_id in p.name]
    compressed = rollout.with_name(rollout.name + ".zst")
    compressed.write_bytes(zstandard.ZstdCompressor().compress(rollout.read_bytes()))
    rollout.unlink()
    hooks_file.write_text(installed)

    later = codex.exec("Let's plan the next sprint.")  # its SessionStart runs the sweep
    box.wait_idle()
    caught = [r for r in box.runs() if r.get("session") == first.thread_id
              and (r.get("transcript") or "").endswith(".jsonl.zst")]
    assert caught and caught[-1]["commit"] and caught[-1]["error"] is None, (
        box.runs(), box.logs())
    [memdir] = box.memory_dirs()
    text = memory_text(memdir)
    assert "Redis" in text and text.count("We decided to use PostgreSQL") >= 1
    # The caught-up encode read only the new turn: the first decision is not stored twice.
    assert len(list((memdir / "decisions").glob("*postgresql*"))) == 1
    assert later.thread_id != first.thread_id
