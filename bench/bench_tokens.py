"""Token economy of the Anthropic backend, measured through the fake Messages API.

Every shared-corpus transcript is encoded with ``--backend anthropic`` through the
real pipeline and the real SDK against tests/fake_anthropic.py. The scripted
model does what a typical run does - turn 1 searches the memory, turn 2 skips,
turn 3 finishes - so every request re-sends the prefix and the moving cache
breakpoint is exercised. Token counts come from the recorded request bodies
(about four characters a token; no tokenizer is available offline), with the
fake server's cache simulation for the cached share.

Baseline, measured in the same run: the raw transcript text (the whole JSONL
file, what an encoder that reads the transcript would be sent), and the paper's
reported ~156,000 tokens per session.

Usage: /work/venv/bin/python bench/bench_tokens.py [--json]
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
CORPUS = ROOT.parent / "shared" / "corpus"
PAPER_TOKENS = 156_000


def transcripts() -> list[Path]:
    out = sorted((CORPUS / "claude-code" / "spotter").glob("*.jsonl"))
    out += sorted((CORPUS / "claude-code" / "spotter").glob("*/*.jsonl"))
    out += sorted((CORPUS / "agentlogs" / "claudecode").glob("*.jsonl"))
    out += sorted((CORPUS / "agentlogs" / "codex").glob("*.jsonl"))
    return [p for p in dict.fromkeys(out) if "subagents" not in p.parts]


def scripted(body: dict) -> dict:
    from tests.fake_anthropic import message, tool_use

    turn = sum(1 for m in body["messages"] if m["role"] == "assistant")
    if turn == 0:
        return message(tool_use("search_memory", {"query": "decision incident convention"}))
    if turn == 1:
        return message(tool_use("skip", {"reason": "benchmark"}))
    return message(tool_use("finish", {"summary": "benchmark"}))


def main() -> int:
    if not CORPUS.is_dir():
        print(f"corpus not found at {CORPUS}; nothing measured")
        return 0
    tmp = Path(tempfile.mkdtemp(prefix="dualtrace-bench-tokens-"))
    os.environ["DUALTRACE_HOME"] = str(tmp / "state")
    os.environ["ANTHROPIC_API_KEY"] = "sk-ant-bench-dummy"
    from dualtrace.config import Settings
    from dualtrace.encoder.backends.pricing import cost_usd, estimate_request_tokens
    from dualtrace.pipeline import encode_session
    from tests.fake_anthropic import FakeAnthropic

    rows = []
    with FakeAnthropic() as api:
        api.default = scripted
        settings = Settings(base_url=api.url)
        for path in transcripts():
            start = len(api.requests)
            report = encode_session(path, memory_dir=tmp / "memory", backend="anthropic",
                                    settings=settings)
            bodies = [r.body for r in api.requests[start:] if r.path == "/v1/messages"]
            raw_tokens = -(-path.stat().st_size // 4)
            if not bodies:
                rows.append({"file": path.name, "raw": raw_tokens, "skipped": report.skipped})
                continue
            u = report.usage
            prompt_total = u["input_tokens"] + u["cache_read_tokens"] + u["cache_write_tokens"]
            rows.append({
                "file": path.name, "raw": raw_tokens, "turns": len(bodies),
                "turn1_prompt": estimate_request_tokens(bodies[0]),
                "prompt_total": prompt_total,
                "cache_read": u["cache_read_tokens"], "cache_write": u["cache_write_tokens"],
                "output": u["output_tokens"], "cost": u["cost_usd"],
                "cost_uncached": cost_usd(settings.model, input_tokens=prompt_total,
                                          output_tokens=u["output_tokens"]),
                "cost_batch_turn1": None,
            })
        system_tokens = estimate_request_tokens({"system": bodies[0]["system"],
                                                 "tools": bodies[0]["tools"]}) if rows else 0
    encoded = [r for r in rows if "turns" in r]
    med = statistics.median
    result = {
        "sessions": len(rows), "encoded": len(encoded), "skipped_by_gates": len(rows) - len(encoded),
        "cached_prefix_tokens (tools+system)": system_tokens,
        "median_raw_transcript_tokens": med([r["raw"] for r in encoded]),
        "median_turn1_prompt_tokens": med([r["turn1_prompt"] for r in encoded]),
        "max_turn1_prompt_tokens": max(r["turn1_prompt"] for r in encoded),
        "median_prompt_tokens_all_turns": med([r["prompt_total"] for r in encoded]),
        "cache_read_share_of_prompt": round(sum(r["cache_read"] for r in encoded)
                                            / sum(r["prompt_total"] for r in encoded), 3),
        "prefix_share_of_turn1": round(system_tokens / med([r["turn1_prompt"] for r in encoded]), 3),
        "median_cost_usd": med([r["cost"] for r in encoded]),
        "median_cost_usd_without_cache": med([r["cost_uncached"] for r in encoded]),
        "ratio_turn1_vs_raw": round(med([r["turn1_prompt"] for r in encoded])
                                    / med([r["raw"] for r in encoded]), 4),
        "ratio_turn1_vs_paper": round(med([r["turn1_prompt"] for r in encoded]) / PAPER_TOKENS, 4),
    }
    if "--json" in sys.argv:
        print(json.dumps({"summary": result, "rows": rows}, indent=1))
    else:
        for r in rows:
            print(json.dumps(r))
        for k, v in result.items():
            print(f"{k}: {v}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
