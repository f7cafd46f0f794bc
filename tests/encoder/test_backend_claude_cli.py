"""The `claude` sub-agent backend, driven by a fake `claude` that is a real MCP client.

The fake (tests/encoder/fake_claude.py) starts `dualtrace mcp --encoder` over stdio
from the MCP config the backend writes, exactly as the flags say, and plays a
scripted sequence of tool calls; every call reaches this process's validator
through the broker. Nothing here mocks the MCP session or the processes.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from dualtrace.config import Settings
from dualtrace.encoder.backends import EncodeRequest
from dualtrace.encoder.backends.claude_cli import ALLOWED, ClaudeCliBackend
from dualtrace.encoder.plan import Context, Grounding, PlanBuilder
from dualtrace.errors import BackendError
from dualtrace.memfs.store import MemoryStore
from dualtrace.memfs.transaction import commit
from tests.conftest import EXAMPLES
from tests.encoder.test_backend_anthropic import DECISION, DIGEST

DATE = "2026-03-10"
FAKE = Path(__file__).with_name("fake_claude.py")


def T(name: str) -> str:  # noqa: N802 - the name the model calls
    return f"mcp__dualtrace__{name}"


@pytest.fixture
def claude(tmp_path, monkeypatch):
    """A `claude` executable (the fake) plus helpers to script it and read its log."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    exe = bindir / "claude"
    exe.write_text(f"#!/bin/sh\nexec '{sys.executable}' '{FAKE}' \"$@\"\n")
    exe.chmod(0o755)
    script = tmp_path / "script.json"
    log = tmp_path / "claude-log.jsonl"
    monkeypatch.setenv("FAKE_CLAUDE_SCRIPT", str(script))
    monkeypatch.setenv("FAKE_CLAUDE_LOG", str(log))

    class Fake:
        path = str(exe)

        def script(self, turns, **kw) -> None:
            script.write_text(json.dumps({"turns": turns, **kw}))

        def log(self) -> list[dict]:
            return [json.loads(x) for x in log.read_text().splitlines()] if log.exists() else []

        def calls(self) -> list[dict]:
            return [r for r in self.log() if "tool" in r]

    return Fake()


def run(tmp_path, claude_path: str, **settings_kw):
    store = MemoryStore(tmp_path / "memory", project="demo")
    ctx = Context("c1a0de00-0000", "claude", DATE, Grounding(DIGEST, DATE), project="demo")
    builder = PlanBuilder(store, ctx)
    settings = Settings(claude_cli=claude_path, **settings_kw)
    request = EncodeRequest(None, DIGEST, None, (), settings, ctx)
    usage = ClaudeCliBackend(settings).encode(request, builder)
    return usage, builder, store


def test_scripted_session_through_the_validator(tmp_path, claude, monkeypatch):
    monkeypatch.setenv("CLAUDE_CODE_SESSION_ID", "parent-session")  # must not leak
    claude.script([
        [{"tool": T("search_memory"), "input": {"query": "session storage"}},
         {"tool": T("read_memory"), "input": {"path": "../../etc/passwd"}}],
        [{"tool": T("store_memory"), "input": {**DECISION, "scores": {
            "durability": 9, "scope": 3, "rationale": 3, "retrieval": 3}}},
         {"tool": T("store_memory"), "input": {**DECISION, "anchor": "../escape"}},
         {"tool": T("store_memory"), "input": DECISION},
         {"tool": "Bash", "input": {"command": "rm -rf /"}},
         {"tool": T("delete_memory"), "input": {"path": "decisions/x.md"}}],
        [{"tool": T("skip"), "input": {"reason": "routine rename"}},
         {"tool": T("finish"), "input": {"summary": "one decision"}},
         {"tool": T("store_memory"), "input": {**DECISION, "anchor": "after-finish"}}],
    ])
    usage, builder, store = run(tmp_path, claude.path)
    start = claude.log()[0]
    assert start["problems"] == [] and start["system_mentions_tools"]
    tools = next(r for r in claude.log() if r.get("event") == "tools")
    assert tools["tools"] == sorted(n.removeprefix("mcp__dualtrace__") for n in ALLOWED)
    by_tool = [(c["tool"].removeprefix("mcp__dualtrace__"), c["is_error"], c["text"])
               for c in claude.calls()]
    assert by_tool[0][:2] == ("search_memory", False)
    assert by_tool[1][1] and "read_memory" == by_tool[1][0]  # the path escape is refused
    assert "leaves the memory directory" in by_tool[1][2]
    assert by_tool[2][1] and "score 'durability' must be an integer 0-3" in by_tool[2][2]
    assert by_tool[3][1] and "anchor" in by_tool[3][2]
    assert by_tool[4][:2] == ("store_memory", False) and by_tool[4][2].startswith("accepted:")
    assert by_tool[5][:2] == ("Bash", True)  # not allowed: never reaches our server
    assert not [c for c in claude.calls() if c["tool"] == "Bash"][0]["served"]
    assert by_tool[6][:2] == ("delete_memory", True)  # no such tool is allowed either
    assert "permission denied" in by_tool[6][2]
    assert by_tool[7][:2] == ("skip", False) and by_tool[8][:2] == ("finish", False)
    assert by_tool[9][1] and "finished" in by_tool[9][2]
    # Only the validated decision is pending; nothing was written before apply.
    assert sorted(builder.pending) == ["decisions/session-storage-postgres.md",
                                       "scenes/decisions/session-storage-postgres.md"]
    assert not (tmp_path / "memory" / "decisions").exists()
    assert commit(builder.store, builder.changeset())
    assert usage.input_tokens == 5200 and usage.cost_usd == 0.0123 and usage.turns == 3
    notes = " ".join(usage.notes)
    assert "3 tool call(s) rejected by the validator" in notes
    assert "model summary: one decision" in notes


def test_turn_cap_keeps_accepted_operations(tmp_path, claude):
    claude.script([
        [{"tool": T("store_memory"), "input": DECISION}],
        [{"tool": T("search_memory"), "input": {"query": "x"}}],
        [{"tool": T("finish"), "input": {}}],
    ])
    usage, builder, _ = run(tmp_path, claude.path, max_turns=2)
    assert [c["turn"] for c in claude.calls()] == [1, 2]
    assert "decisions/session-storage-postgres.md" in builder.pending
    assert "max_turns (2) reached before finish: 1 accepted operation(s) kept" in usage.notes


def test_tool_call_cap_in_the_broker(tmp_path, claude):
    claude.script([[{"tool": T("search_memory"), "input": {"query": "x"}}] * 10
                   + [{"tool": T("finish"), "input": {}}]])
    usage, _, _ = run(tmp_path, claude.path, max_turns=1)  # cap: 1 turn x 8 calls
    errors = [c["is_error"] for c in claude.calls()]
    assert errors == [False] * 8 + [True] * 2 + [False]  # finish, as the cap's answer asks
    assert "tool-call cap reached (8); call finish" in claude.calls()[8]["text"]
    assert "tool-call cap (8) reached" in usage.notes


def test_timeout_kills_child_and_its_server(tmp_path, claude):
    claude.script([], sleep=30)
    with pytest.raises(BackendError, match="timed out after 1s"):
        run(tmp_path, claude.path, timeout_seconds=1.0)


def test_found_on_path(tmp_path, claude, monkeypatch):
    monkeypatch.setenv("PATH", f"{Path(claude.path).parent}{os.pathsep}{os.environ['PATH']}")
    claude.script([[{"tool": T("finish"), "input": {}}]])
    usage, builder, _ = run(tmp_path, "claude")
    assert builder.pending == {} and len(claude.calls()) == 1


def test_reported_error_raises(tmp_path, claude):
    exe = Path(claude.path)
    exe.write_text("#!/bin/sh\ncat >/dev/null\necho '{\"type\": \"result\", \"subtype\": "
                   "\"error_during_execution\", \"is_error\": true, \"result\": "
                   "\"Credit balance is too low\"}'\n")
    with pytest.raises(BackendError, match="reported an error: Credit balance"):
        run(tmp_path, claude.path)


def test_not_logged_in_exit_code(tmp_path, claude):
    exe = Path(claude.path)
    exe.write_text("#!/bin/sh\ncat >/dev/null\necho 'Not logged in' >&2\nexit 1\n")
    with pytest.raises(BackendError, match="exited with 1: Not logged in"):
        run(tmp_path, claude.path)


def test_missing_cli(tmp_path):
    with pytest.raises(BackendError, match="claude CLI not found"):
        run(tmp_path, str(tmp_path / "no-such-claude"))


def test_cli_encode_with_claude_backend(tmp_path, claude):
    """`dualtrace encode --backend claude` end to end, claude_cli from the config."""
    from dualtrace import config

    (config.state_dir() / "config.toml").write_text(f'claude_cli = "{claude.path}"\n')
    decision = {"type": "decision", "anchor": "structured-logging-json",
                "description": "JSON structured logging because Datadog could not parse "
                               "free-form strings",
                "body": "Switched src/shop/logging_config.py to JSON; a log shipper was rejected.",
                "scores": {"durability": 3, "scope": 3, "rationale": 3, "retrieval": 2},
                "confidence": "HIGH"}
    claude.script([[{"tool": T("store_memory"), "input": decision},
                    {"tool": T("finish"), "input": {"summary": "logging"}}]])
    proc = subprocess.run([sys.executable, "-m", "dualtrace.cli", "encode", "--backend",
                           "claude", "--memory-dir", str(tmp_path / "mem"),
                           str(EXAMPLES / "pilot-1b-structured-logging.jsonl")],
                          cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "mem/decisions/structured-logging-json.md").is_file()
    log = subprocess.run(["git", "log", "--format=%B"], cwd=tmp_path / "mem",
                         capture_output=True, text=True).stdout
    assert "Dualtrace-Backend: claude" in log
    start = claude.log()[0]
    assert start["problems"] == [] and start["prompt_chars"] > 500


def test_spending_guard_bounds_the_child(tmp_path, claude):
    from dualtrace.encoder.backends import spend

    spend.record("anthropic", cost_usd=0.75)
    claude.script([[{"tool": T("finish"), "input": {}}]], cost=0.02)
    usage, _, _ = run(tmp_path, claude.path)
    assert claude.log()[0]["max_budget_usd"] == pytest.approx(0.25)  # what is left today
    assert spend.spent()["claude"]["cost_usd"] == pytest.approx(0.02)
    spend.record("claude", cost_usd=0.5)
    log_before = len(claude.log())
    with pytest.raises(spend.BudgetExceeded, match="daily model budget reached"):
        run(tmp_path, claude.path)
    assert len(claude.log()) == log_before  # claude was never started


def test_a_text_only_answer_is_asked_once_more_and_its_proposals_kept(tmp_path, claude):
    """The gap fb7ebe1 closed for the anthropic backend: a run that answers in text and
    calls no tool ended with nothing proposed, and the session was committed as if
    nothing in it were worth keeping."""
    claude.script([], runs=[
        {"turns": [[{"tool": T("search_memory"), "input": {"query": "session storage"}}]],
         "result": "We decided to move session storage to Postgres.", "cost": 0.01},
        {"turns": [[{"tool": T("store_memory"), "input": DECISION},
                    {"tool": T("finish"), "input": {"summary": "one decision"}}]],
         "cost": 0.02},
    ])
    usage, builder, _ = run(tmp_path, claude.path)
    first, second = [r for r in claude.log() if r.get("event") == "start"]
    assert "use the tools" not in first["prompt_tail"]
    assert "<your-answer>\nWe decided to move session storage to Postgres.\n</your-answer>" \
        in second["prompt_tail"] and "Nothing is stored from text: use the tools" \
        in second["prompt_tail"]
    assert "decisions/session-storage-postgres.md" in builder.pending
    assert usage.requests == 2 and usage.cost_usd == 0.03
    assert "the model answered in text without using its tools: asked once more to use " \
        "them" in usage.notes


@pytest.mark.parametrize("second", [
    {"turns": [], "result": "Still only words."},
    {"turns": [[{"tool": T("search_memory"), "input": {"query": "x"}}]] * 5},
], ids=["text-again", "searches-until-max-turns"])
def test_nothing_proposed_after_the_second_run_is_a_backend_error(tmp_path, claude, second):
    claude.script([], runs=[{"turns": [], "result": "Only words."}, second])
    with pytest.raises(BackendError, match=r"claude -p proposed nothing for the session \("
                                           r"(it answered in text again|max_turns \(2\) "
                                           r"reached); no store, update, skip or finish call"):
        run(tmp_path, claude.path, max_turns=2)
    assert len([r for r in claude.log() if r.get("event") == "start"]) == 2


def test_a_finish_alone_is_a_proposal_not_text_only(tmp_path, claude):
    claude.script([[{"tool": T("finish"), "input": {"summary": "nothing worth keeping"}}]])
    usage, builder, _ = run(tmp_path, claude.path)
    assert len([r for r in claude.log() if r.get("event") == "start"]) == 1
    assert not builder.pending and usage.requests == 1
