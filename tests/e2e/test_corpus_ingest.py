"""Every real Claude Code and Codex transcript in the shared corpus parses, and the
reader's tool-call and message counts match an independent count of the raw file."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dualtrace.hooks.transcripts import read_transcript
from dualtrace.pipeline import prepare
from tests.conftest import CORPUS, corpus_path

CLAUDE = sorted((CORPUS / "claude-code" / "spotter").glob("*.jsonl")) + sorted(
    (CORPUS / "agentlogs" / "claudecode").glob("*.jsonl"))
CODEX = sorted((CORPUS / "agentlogs" / "codex").glob("*.jsonl"))
_TOOL_KINDS = ("tool", "command", "edit", "subagent")


def _records(path: Path):
    with path.open("rb") as fh:
        for line in fh:
            try:
                yield json.loads(line)
            except ValueError:
                continue


def _independent_claude(path: Path) -> tuple[set[str], set[str]]:
    """tool_use ids and main-thread assistant message ids carrying text, from the raw file.

    Inline sidechain records (``isSidechain``, Claude Code 1.0.x) are a sub-agent's turns:
    their tool calls count, their texts are not the main thread's.
    """
    tools: set[str] = set()
    texts: set[str] = set()
    seen: set[str] = set()
    for rec in _records(path):
        if rec.get("type") != "assistant" or rec.get("uuid") in seen:
            continue
        seen.add(rec.get("uuid"))
        for block in rec["message"].get("content") or []:
            if block.get("type") == "tool_use":
                tools.add(block["id"])
            elif block.get("type") == "text" and block.get("text", "").strip() \
                    and not rec.get("isSidechain"):
                texts.add(rec["message"]["id"])
    return tools, texts


@pytest.mark.parametrize("path", CLAUDE, ids=lambda p: p.name[:20])
def test_claude_corpus_file(path: Path):
    corpus_path("claude-code")
    s = read_transcript(path)
    assert s.host == "claude-code" and s.skipped_lines == 0
    assert s.cursor == path.stat().st_size
    tools, texts = _independent_claude(path)
    main = [e for e in s.events if e.agent is None or e.kind == "subagent"]
    got_tools = {e.uuid for e in main if e.kind in _TOOL_KINDS and e.uuid in tools}
    assert got_tools == tools
    got_texts = {e.uuid for e in s.events
                 if e.kind == "assistant" and e.detail is None and e.agent is None}
    assert got_texts == texts
    got = prepare(str(path))
    assert got.digest.token_estimate <= 8000
    assert "progress" not in got.digest.text.split("## Timeline")[0]


@pytest.mark.parametrize("path", CODEX, ids=lambda p: p.name)
def test_codex_corpus_file(path: Path):
    corpus_path("agentlogs", "codex")
    s = read_transcript(path)
    assert s.host == "codex" and s.skipped_lines == 0
    calls = set()
    messages = 0
    for rec in _records(path):
        p = rec.get("payload") or {}
        if rec.get("type") != "response_item":
            continue
        if p.get("type") in ("function_call", "custom_tool_call"):
            calls.add(p["call_id"])
        if p.get("type") == "message" and p.get("role") == "assistant":
            messages += 1
    tools = [e for e in s.events if e.kind in _TOOL_KINDS]
    # A shell command that writes a file also yields an edit event per file, named
    # "<call_id>:<n>" after its call (crud.jsonl's `cat <<EOF > JOKE.md`).
    derived = [e for e in tools if e.uuid and e.uuid.rsplit(":", 1)[0] in calls
               and e.uuid not in calls]
    assert all(e.kind == "edit" and e.text.startswith("shell: ") for e in derived)
    assert {e.uuid for e in tools if e not in derived} == calls
    assert sum(1 for e in s.events if e.kind == "assistant" and e.detail is None) == messages
    assert s.session_id and s.cwd


def test_spotter_subagents_linked():
    folder = corpus_path("claude-code", "spotter")
    path = folder / "4d5611e5-241a-462a-8d15-5122611a9569.jsonl"
    s = read_transcript(path)
    subs = [e for e in s.events if e.kind == "subagent"]
    assert len(subs) == 1 and subs[0].agent == "a2898e3"
    assert subs[0].detail and "tool calls" in subs[0].detail
    assert sum(1 for e in s.events if e.kind == "compaction") == 1
    noise = dict(s.noise)
    raw_progress = sum(1 for r in _records(path) if r.get("type") == "progress")
    assert noise["progress"] == raw_progress


def test_big_sessions_compress_15x():
    folder = corpus_path("claude-code", "spotter")
    ratios = []
    for path in sorted(folder.glob("*-*-*-*-*.jsonl")):
        d = prepare(str(path)).digest
        ratios.append(d.stats["raw_tokens"] / d.token_estimate)
    ratios.sort()
    assert ratios and ratios[len(ratios) // 2] >= 15
