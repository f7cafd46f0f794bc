"""The host registry: every host module satisfies the Host protocol, and every caller
(hook fast path, install, worker, transcript reader, CLI choices) goes through it."""

from __future__ import annotations

from pathlib import Path

import pytest

from dualtrace import hookcmd
from dualtrace.hooks import install, registry, transcripts
from dualtrace.hooks.host import Host

MEMBERS = [name for name in dir(Host) if not name.startswith("_")] + list(Host.__annotations__)


@pytest.mark.parametrize("name", registry.names())
def test_every_host_module_has_the_whole_protocol(name, tmp_path):
    host = registry.get(name)
    missing = [m for m in set(MEMBERS) if not hasattr(host, m)]
    assert missing == []
    assert host.NAME == name and host.TRANSCRIPT_FORMAT in transcripts.FORMATS
    assert {ours for ours, _t, _m in host.EVENTS.values()} <= set(hookcmd.EVENTS)
    for scope in host.SCOPES:
        path = host.settings_path(scope, tmp_path / "root", tmp_path / "home")
        assert isinstance(path, Path) and path.suffix == ".json"
    assert host.project_transcripts(tmp_path / "nowhere") == []


def test_detection_by_payload_shape(monkeypatch):
    monkeypatch.delenv("LETTA_HOOK_EVENT", raising=False)
    assert registry.detect({"session_id": "s", "transcript_path": "/p/s.jsonl"}) == "claude-code"
    assert registry.detect({"session_id": "s", "turn_id": "t"}) == "codex"
    assert registry.detect({"thread-id": "t"}) == "codex"
    assert registry.detect({"working_directory": "/w", "user_message": "hi"}) == "letta"
    monkeypatch.setenv("LETTA_HOOK_EVENT", "Stop")
    assert registry.detect({"session_id": "s"}) == "letta"


def test_callers_read_the_registry():
    from dualtrace.cli import cli

    assert install.AGENTS == registry.names()
    install_cmd = cli.commands["install"]
    agent = next(p for p in install_cmd.params if p.name == "agent")
    assert tuple(agent.type.choices) == registry.names()
    assert transcripts.format_for_host("letta") == "letta"  # its own and the payload log
    assert transcripts.format_for_host("codex") == "codex"
    assert transcripts.format_for_host(None) is None


@pytest.mark.parametrize("name", registry.names())
def test_injected_context_is_the_json_each_host_reads(name):
    import json

    host = registry.get(name)
    start = json.loads(host.context_output("session-start", "pinned"))
    assert start == {"hookSpecificOutput": {"hookEventName": "SessionStart",
                                            "additionalContext": "pinned"}}
    prompt = json.loads(host.context_output("prompt", "x" * 20_000))["hookSpecificOutput"]
    assert prompt["hookEventName"] == "UserPromptSubmit"
    assert len(prompt["additionalContext"]) == 10_000  # the hosts' cap
