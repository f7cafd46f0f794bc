"""``dualtrace mcp`` as a host sees it, and the ``claude`` sub-agent encode end to end.

    .venv/bin/python bench/bench_mcp.py [--memories 1000] [--starts 7] [--calls 60] [--encodes 3]

Measures, each against a baseline taken in the same run (the machines are noisy):
- server cold start: spawn ``dualtrace mcp`` + MCP initialize handshake, and to the first
  ``recall`` answer, through the SDK's stdio client; baseline: spawn ``python -c pass``
  and ``python -c "import mcp"`` (the SDK's own import cost);
- ``recall`` round trip through a live stdio session (p50/p95 over ``--calls`` questions
  on a synthetic store of ``--memories``); baseline: the same ``recall()`` in process;
- the ``claude`` backend end to end (``encode_session``, backend claude, with the fake
  ``claude`` from tests/encoder/fake_claude.py playing search, read, store, finish over
  a real MCP session); baseline: the offline encode of the same transcript.
Prints a markdown table for docs/BENCHMARKS.md.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(REPO))

from bench_recall import build, pct, questions  # noqa: E402
from mcp import Client  # noqa: E402
from mcp.client.stdio import StdioServerParameters  # noqa: E402

from dualtrace.memfs.recall import recall  # noqa: E402

EXAMPLE = REPO / "examples" / "pilot-5-session-storage.jsonl"


def dualtrace_exe() -> str:
    return str(Path(sys.executable).parent / "dualtrace")


def params(memdir: Path, env: dict[str, str]) -> StdioServerParameters:
    return StdioServerParameters(command=dualtrace_exe(), args=["mcp", "--memory-dir", str(memdir)],
                                 env=env, cwd=str(memdir.parent))


async def one_start(p: StdioServerParameters, question: str) -> tuple[float, float]:
    start = time.perf_counter()
    async with Client(p) as client:
        ready = time.perf_counter()
        await client.call_tool("recall", {"question": question})
        answered = time.perf_counter()
    return (ready - start) * 1000, (answered - start) * 1000


async def round_trips(p: StdioServerParameters, qs: list[str]) -> list[float]:
    out = []
    async with Client(p) as client:
        await client.call_tool("recall", {"question": qs[0]})  # warm: index open once
        for q in qs:
            start = time.perf_counter()
            result = await client.call_tool("recall", {"question": q})
            out.append((time.perf_counter() - start) * 1000)
            assert not result.is_error
    return out


def spawn_ms(argv: list[str], env: dict[str, str], runs: int) -> list[float]:
    out = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run(argv, env=env, capture_output=True, check=True)
        out.append((time.perf_counter() - start) * 1000)
    return out


def encode_runs(tmp: Path, env_base: dict[str, str], runs: int) -> tuple[list[float], list[float]]:
    from dualtrace.config import Settings
    from dualtrace.pipeline import encode_session

    bindir = tmp / "bin"
    bindir.mkdir(exist_ok=True)
    exe = bindir / "claude"
    fake = REPO / "tests" / "encoder" / "fake_claude.py"
    exe.write_text(f"#!/bin/sh\nexec '{sys.executable}' '{fake}' \"$@\"\n")
    exe.chmod(0o755)
    decision = {"type": "decision", "anchor": "session-storage-postgres",
                "description": "Move session storage from Redis to Postgres",
                "body": "Session storage moves from Redis to Postgres for all services.",
                "scores": {"durability": 3, "scope": 3, "rationale": 2, "retrieval": 3},
                "confidence": "HIGH"}
    script = tmp / "script.json"
    script.write_text(json.dumps({"turns": [
        [{"tool": "mcp__dualtrace__search_memory", "input": {"query": "session storage"}}],
        [{"tool": "mcp__dualtrace__store_memory", "input": decision}],
        [{"tool": "mcp__dualtrace__finish", "input": {"summary": "bench"}}],
    ]}))
    os.environ.update(FAKE_CLAUDE_SCRIPT=str(script), FAKE_CLAUDE_LOG=str(tmp / "log.jsonl"))
    claude_ms, offline_ms = [], []
    for i in range(runs):
        for backend, sink in (("claude", claude_ms), ("offline", offline_ms)):
            mem = tmp / f"enc-{backend}-{i}"
            settings = Settings(claude_cli=str(exe), backend=backend, daily_budget_usd=0,
                                daily_budget_tokens=0)
            start = time.perf_counter()
            report = encode_session(EXAMPLE, memory_dir=mem, backend=backend, settings=settings)
            sink.append((time.perf_counter() - start) * 1000)
            assert report.commit and report.backend == backend, report.notes
    return claude_ms, offline_ms


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--memories", type=int, default=1000)
    ap.add_argument("--starts", type=int, default=7)
    ap.add_argument("--calls", type=int, default=60)
    ap.add_argument("--encodes", type=int, default=3)
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="dt-bench-mcp-"))
    os.environ["DUALTRACE_HOME"] = str(tmp / "state")
    env = {k: v for k, v in os.environ.items() if k in ("PATH", "HOME", "LANG")}
    env["DUALTRACE_HOME"] = str(tmp / "state")
    # Each start here is a process of its own, as in earlier sessions; the warm server's
    # starts are measured by bench/bench_mcp_start.py.
    env["DUALTRACE_MCP_WARM"] = "0"
    memdir = tmp / "memory"
    anchors = build(memdir, args.memories)
    rng = random.Random(3)
    qs = questions(memdir, anchors, rng, args.calls)
    recall(memdir, qs[0])  # build the index once, outside the timings
    p = params(memdir, env)

    ready, first, py, sdk = [], [], [], []
    for _ in range(args.starts):  # interleaved, so load drift hits all four alike
        py += spawn_ms([sys.executable, "-c", "pass"], env, 1)
        sdk += spawn_ms([sys.executable, "-c", "import mcp"], env, 1)
        r, f = asyncio.run(one_start(p, qs[0]))
        ready.append(r)
        first.append(f)
    trips = asyncio.run(round_trips(p, qs))
    inproc = []
    for q in qs:
        start = time.perf_counter()
        recall(memdir, q)
        inproc.append((time.perf_counter() - start) * 1000)
    claude_ms, offline_ms = encode_runs(tmp, env, args.encodes)

    med = statistics.median
    print(f"memories: {args.memories}; starts: {args.starts}; calls: {args.calls}; "
          f"encodes: {args.encodes}\n")
    print("| measure | median ms | baseline (same run) | ratio |")
    print("|---|---|---|---|")
    print(f"| server start to initialized | {med(ready):.0f} | `python -c pass` {med(py):.0f} "
          f"| {med(ready) / med(py):.1f}x |")
    print(f"| server start to first recall answer | {med(first):.0f} | `python -c \"import mcp\"` "
          f"{med(sdk):.0f} | {med(first) / med(sdk):.2f}x |")
    print(f"| start to first answer minus the SDK import | {med(first) - med(sdk):.0f} | | |")
    print(f"| recall round trip, live session (p50) | {med(trips):.1f} | in-process recall "
          f"{med(inproc):.1f} | {med(trips) / med(inproc):.2f}x |")
    print(f"| recall round trip, live session (p95) | {pct(trips, 95):.1f} | in-process p95 "
          f"{pct(inproc, 95):.1f} | |")
    print(f"| claude sub-agent encode, fake claude (3 turns, MCP) | {med(claude_ms):.0f} | "
          f"offline encode {med(offline_ms):.0f} | {med(claude_ms) / med(offline_ms):.1f}x |")


if __name__ == "__main__":
    main()
