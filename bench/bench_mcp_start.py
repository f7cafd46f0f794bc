"""MCP server cold start: ``dualtrace mcp`` beside the candidates that could make it faster.

    .venv/bin/python bench/bench_mcp_start.py [--runs 9] [--venv NAME=PYTHON ...]

Each candidate is a process a host would start: spawn it, do the MCP handshake and call
one tool through the SDK's stdio client (this venv's, as the host stand-in), until the
answer arrives. Candidates, interleaved round by round so load drift hits all alike:

- ``python -c pass`` (the interpreter floor) and ``python -c "import <sdk server>"``
  (each SDK's import floor), per interpreter;
- ``dualtrace mcp``, the product, answering ``recall`` on a small memory dir;
- a one-tool echo server on the SDK's high-level server (``MCPServer`` in 2.x,
  ``FastMCP`` in 1.x) and one on its low-level ``Server``, for each SDK given with
  ``--venv`` (e.g. ``--venv 1.30.0=/tmp/v1.30.0/bin/python``; this venv is always in).

The echo servers carry none of dualtrace: their time is the SDK's, so "dualtrace mcp
minus the same SDK's echo server" is what our side costs. Prints a markdown table
(medians, and ratios against this venv's high-level echo server) for docs/BENCHMARKS.md.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from mcp import Client
from mcp.client.stdio import StdioServerParameters

REPO = Path(__file__).resolve().parent.parent
EXAMPLE = REPO / "examples" / "pilot-5-session-storage.jsonl"

HIGH_2 = """
from mcp.server.mcpserver import MCPServer
server = MCPServer("echo")
@server.tool()
def echo(text: str) -> str:
    return text
server.run()
"""
HIGH_1 = HIGH_2.replace("from mcp.server.mcpserver import MCPServer",
                        "from mcp.server.fastmcp import FastMCP as MCPServer")
LOW_2 = """
import anyio
import mcp_types as types
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server
TOOL = types.Tool(name="echo", input_schema={"type": "object",
                  "properties": {"text": {"type": "string"}}, "required": ["text"]})
async def list_tools(ctx, params):
    return types.ListToolsResult(tools=[TOOL])
async def call_tool(ctx, params):
    return types.CallToolResult(content=[types.TextContent(type="text",
                                                           text=params.arguments["text"])])
server = Server("echo", on_list_tools=list_tools, on_call_tool=call_tool)
async def main():
    async with stdio_server() as (r, w):
        await server.run(r, w, server.create_initialization_options())
anyio.run(main)
"""
LOW_1 = """
import anyio
import mcp.types as types
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server
server = Server("echo")
@server.list_tools()
async def list_tools():
    return [types.Tool(name="echo", inputSchema={"type": "object",
                       "properties": {"text": {"type": "string"}}, "required": ["text"]})]
@server.call_tool()
async def call_tool(name, arguments):
    return [types.TextContent(type="text", text=arguments["text"])]
async def main():
    async with stdio_server() as (r, w):
        await server.run(r, w, server.create_initialization_options())
anyio.run(main)
"""
IMPORT = {"2": "import mcp.server.mcpserver, mcp.server.stdio",
          "1": "import mcp.server.fastmcp, mcp.server.stdio"}


def sdk_version(python: str) -> str:
    out = subprocess.run([python, "-c", "import importlib.metadata as m; print(m.version('mcp'))"],
                         capture_output=True, text=True, check=True)
    return out.stdout.strip()


async def first_answer(p: StdioServerParameters, tool: str, args: dict) -> float:
    start = time.perf_counter()
    async with Client(p) as client:
        result = await client.call_tool(tool, args)
        took = (time.perf_counter() - start) * 1000
    assert not result.is_error, result
    return took


def spawn(argv: list[str], env: dict[str, str]) -> float:
    start = time.perf_counter()
    subprocess.run(argv, env=env, capture_output=True, check=True)
    return (time.perf_counter() - start) * 1000


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=9)
    ap.add_argument("--venv", action="append", default=[],
                    help="LABEL=PYTHON of another venv with an mcp SDK installed")
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="dt-bench-mcp-start-"))
    env = {k: v for k, v in os.environ.items() if k in ("PATH", "LANG")}
    env.update(HOME=str(tmp / "home"), DUALTRACE_HOME=str(tmp / "state"))
    os.environ.update(DUALTRACE_HOME=env["DUALTRACE_HOME"])
    from dualtrace.pipeline import encode_session

    memdir = tmp / "memory"
    assert encode_session(EXAMPLE, memory_dir=memdir, backend="offline").commit
    pythons = {sdk_version(sys.executable): sys.executable}
    for item in args.venv:
        _label, python = item.split("=", 1)
        pythons[sdk_version(python)] = python
    here = sdk_version(sys.executable)

    candidates: dict[str, tuple[str, object]] = {}  # label -> (kind, spec)
    for version, python in pythons.items():
        major = version.split(".")[0]
        high, low = (HIGH_2, LOW_2) if major == "2" else (HIGH_1, LOW_1)
        for name, code in (("high", high), ("low", low)):
            path = tmp / f"echo_{name}_{version}.py"
            path.write_text(code)
            candidates[f"mcp {version}: {'MCPServer' if major == '2' and name == 'high' else 'FastMCP' if name == 'high' else 'lowlevel Server'} echo"] = (
                "mcp", StdioServerParameters(command=python, args=[str(path)], env=env))
        candidates[f"mcp {version}: `python -c \"{IMPORT[major]}\"`"] = (
            "spawn", [python, "-c", IMPORT[major]])
    candidates["`python -c pass`"] = ("spawn", [sys.executable, "-c", "pass"])
    exe = str(Path(sys.executable).parent / "dualtrace")
    candidates[f"dualtrace mcp (mcp {here}), first recall"] = ("dualtrace", StdioServerParameters(
        command=exe, args=["mcp", "--memory-dir", str(memdir)], env=env, cwd=str(tmp)))

    times: dict[str, list[float]] = {label: [] for label in candidates}
    for _ in range(args.runs):
        for label, (kind, spec) in candidates.items():
            if kind == "spawn":
                times[label].append(spawn(spec, env))  # type: ignore[arg-type]
            elif kind == "mcp":
                times[label].append(asyncio.run(first_answer(spec, "echo", {"text": "hi"})))  # type: ignore[arg-type]
            else:
                times[label].append(asyncio.run(first_answer(
                    spec, "recall", {"question": "why postgres for sessions"})))  # type: ignore[arg-type]

    med = {label: statistics.median(v) for label, v in times.items()}
    base_label = f"mcp {here}: MCPServer echo"
    base = med[base_label]
    print(f"runs: {args.runs} (interleaved); load average {os.getloadavg()[0]:.1f}\n")
    print(f"| process, start to first tool answer | median ms | ratio to {base_label} |")
    print("|---|---|---|")
    for label in sorted(med, key=med.get):  # type: ignore[arg-type]
        print(f"| {label} | {med[label]:.0f} | {med[label] / base:.2f}x |")


if __name__ == "__main__":
    main()
