"""Letta Code hook input: event_type and working_directory, not Claude Code's keys."""

from __future__ import annotations


def test_letta_payloads_are_recognised_by_event_type():
    from dualtrace.hooks import registry

    assert registry.detect({"event_type": "Stop", "assistant_message": "ok"}) == "letta"
    assert registry.detect({"hook_event_name": "Stop", "session_id": "s",
                            "transcript_path": "/t.jsonl"}) == "claude-code"
