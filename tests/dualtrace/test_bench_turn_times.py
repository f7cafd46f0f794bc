"""bench/turn_times.py: what a turn and a model call are in a real Claude Code transcript."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO_ROOT

CORPUS = REPO_ROOT.parent / "shared" / "corpus" / "claude-code"


def _module():
    if "turn_times" in sys.modules:
        return sys.modules["turn_times"]
    spec = importlib.util.spec_from_file_location("turn_times", REPO_ROOT / "bench" / "turn_times.py")
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    sys.modules["turn_times"] = mod  # dataclasses look their module up by name
    spec.loader.exec_module(mod)
    return mod


def _at(second: float) -> str:
    minutes, rest = divmod(second, 60)
    return f"2026-03-04T10:{int(minutes):02d}:{rest:06.3f}Z"


def user(t: float, content, **extra) -> dict:
    return {"type": "user", "timestamp": _at(t), "message": {"role": "user", "content": content}, **extra}


def assistant(t: float, ident: str, block: str = "text", **extra) -> dict:
    message = {"role": "assistant", "id": ident, "model": extra.pop("model", "claude-x"),
               "content": [{"type": block}]}
    return {"type": "assistant", "timestamp": _at(t), "message": message, **extra}


def tool_result(t: float) -> dict:
    return user(t, [{"type": "tool_result", "tool_use_id": "t", "content": "ok"}])


def test_turns_and_calls_of_a_transcript():
    tt = _module()
    lines = [
        {"type": "summary"},  # no timestamp
        user(0.0, "Caveat: local commands below", isMeta=True),
        user(1.0, "fix the build"),  # turn 1 starts
        assistant(3.0, "m1"), assistant(4.5, "m1", "tool_use"),  # call m1: 1.0 -> 4.5
        {"type": "progress", "timestamp": _at(5.0)},
        tool_result(6.0),
        user(6.5, "subagent task", isSidechain=True),  # a subagent's inline records
        assistant(9.0, "side", isSidechain=True),
        assistant(10.0, "m2"),  # call m2: 6.0 (the tool result) -> 10.0
        user(11.0, "Stop hook feedback: tests fail", isMeta=True),  # the same turn goes on
        assistant(14.0, "m3"),  # call m3: 11.0 -> 14.0; turn 1 ends at 14.0
        {"type": "system", "timestamp": _at(20.0)},
        user(30.0, "<command-name>/clear</command-name>"),  # answered by no model: no turn
        user(31.0, "<local-command-stdout></local-command-stdout>"),
        user(40.0, [{"type": "text", "text": "now the docs"}]),  # turn 2
        assistant(41.0, "m4", "tool_use"),  # call m4: 40.0 -> 41.0
        tool_result(42.0),
        user(42.0, [{"type": "text", "text": "[Request interrupted by user for tool use]"}]),
        assistant(43.0, "err", model="<synthetic>"),  # an API error: no call, no reply
        user(50.0, "This session is being continued ...", isCompactSummary=True),
        assistant(52.0, "m5"),  # call m5: 50.0 -> 52.0; turn 2 ends at 52.0
        user(60.0, "and the changelog"),  # turn 3, never answered: no turn
    ]
    turns, calls = tt.measure(lines)
    assert [(t.seconds, t.calls) for t in turns] == [(13.0, 3), (12.0, 2)]
    assert [c.seconds for c in calls] == [3.5, 4.0, 3.0, 1.0, 2.0]


def test_quantiles_match_the_linear_rule():
    tt = _module()
    values = [4.0, 1.0, 3.0, 2.0, 10.0]
    assert tt.quantile(values, 50) == 3.0
    assert tt.quantile(values, 25) == 2.0
    assert tt.quantile(values, 10) == pytest.approx(1.4)
    assert tt.quantile([7.0], 10) == 7.0
    assert tt.summary([])["n"] == 0


def test_report_over_a_folder_skips_subagent_files(tmp_path: Path):
    tt = _module()
    main = tmp_path / "proj" / "s1.jsonl"
    sub = tmp_path / "proj" / "s1" / "subagents" / "agent-a1.jsonl"
    sub.parent.mkdir(parents=True)
    main.write_text("\n".join(json.dumps(r) for r in [user(0, "go"), assistant(5, "a")]) + "\nnot json\n")
    sub.write_text("\n".join(json.dumps(r) for r in [user(0, "sub"), assistant(99, "b")]) + "\n")
    report = tt.corpus_report(tmp_path)
    assert report["proj"]["turns"]["n"] == 1 and report["proj"]["turns"]["p50"] == 5.0
    assert report["all"]["calls"]["n"] == 1


@pytest.mark.skipif(not CORPUS.is_dir(), reason="the shared corpus is absent")
def test_a_real_transcript():
    tt = _module()
    # spotter/short.jsonl: one prompt at 21:11:56.846, one assistant message of four
    # content blocks whose last is written at 21:12:01.669, then an interruption.
    turns, calls = tt.measure(tt.records(CORPUS / "spotter" / "short.jsonl"))
    assert [round(t.seconds, 3) for t in turns] == [4.823]
    assert [round(c.seconds, 3) for c in calls] == [4.823]
    report = tt.corpus_report(CORPUS)
    assert report["all"]["turns"]["n"] >= 40
    assert report["all"]["turns"]["p10"] <= report["all"]["turns"]["p25"] <= report["all"]["turns"]["p50"]
