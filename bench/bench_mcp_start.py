"""MCP server cold start, phase by phase, beside echo servers on the same SDK.

    .venv/bin/python bench/bench_mcp_start.py [--runs 9] [--venv NAME=PYTHON ...]
    .venv/bin/python bench/bench_mcp_start.py --runs 9 --against main=/tmp/base/bin/dualtrace

Each candidate is a process a host would start. A hand-written JSON-RPC client (what a
host such as Claude Code, a Node program, does; no SDK client in the way) spawns it and
times three phases from the spawn: ``initialize`` answered, ``tools/list`` answered, and
the first ``tools/call`` answered. For each phase it also reads the server's own CPU
time (``/proc/<pid>/stat`` utime+stime): wall time on this shared 2-core machine swings
with the load, CPU time much less.

The first call is timed from when it is sent. ``dualtrace mcp`` runs three ways (a
process of its own, ``DUALTRACE_MCP_WARM=0``; forked by an already running warm server;
the first start, which starts the warm server: dualtrace/mcp_warm.py), each with the
call sent at once after ``tools/list`` (the worst case: it waits for the session's
warm-up) and sent 1.5 s later (a host's model answers first, as in a real session).

Candidates, interleaved round by round so load drift hits all alike:
- a stdlib-only JSON-RPC echo (json + sys: the interpreter floor of answering MCP);
- a one-tool echo server on the SDK's high-level ``MCPServer`` and one on its low-level
  ``Server`` (per interpreter given with ``--venv``; this venv is always in);
- ``dualtrace mcp``, the product, answering ``recall`` on a small memory dir, with its
  redactor's rule cache already built (as after the first run on a machine).

The echo servers carry none of dualtrace: their time is the SDK's, so "dualtrace mcp
minus the same SDK's echo server" is what our side costs. Prints a markdown table
(medians, and ratios against this venv's ``MCPServer`` echo) for docs/BENCHMARKS.md.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
EXAMPLE = REPO / "examples" / "pilot-5-session-storage.jsonl"
TICK = os.sysconf("SC_CLK_TCK")

FLOOR = """
import json, sys
for line in sys.stdin:
    m = json.loads(line)
    if "id" not in m:
        continue
    if m["method"] == "initialize":
        r = {"protocolVersion": m["params"]["protocolVersion"], "capabilities": {"tools": {}},
             "serverInfo": {"name": "floor", "version": "0"}}
    elif m["method"] == "tools/list":
        r = {"tools": [{"name": "echo", "inputSchema": {"type": "object"}}]}
    else:
        r = {"content": [{"type": "text", "text": m["params"]["arguments"]["text"]}]}
    sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": m["id"], "result": r}) + "\\n")
    sys.stdout.flush()
"""
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
PHASES = ("initialize", "tools/list", "first call")
THINK = 1.5  # seconds between tools/list and the first call, for the "after" row


def sdk_version(python: str) -> str:
    out = subprocess.run([python, "-c", "import importlib.metadata as m; print(m.version('mcp'))"],
                         capture_output=True, text=True, check=True)
    return out.stdout.strip()


def cpu_ms(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) * 1000 / TICK  # utime + stime


def phases(argv: list[str], env: dict[str, str], cwd: str, tool: str,
           arguments: dict[str, str], think: float = 0.0,
           env_extra: dict[str, str] | None = None) -> list[tuple[float, float]]:
    """(wall ms, server CPU ms) when each phase's answer arrived: since the spawn for
    initialize and tools/list; for the first call, since it was sent, ``think`` seconds
    after tools/list (a host's model reads the tool list and answers first)."""
    start = time.perf_counter()
    if env_extra and env_extra.get("DUALTRACE_HOME") == "fresh":  # no warm server yet
        env_extra = dict(env_extra, DUALTRACE_HOME=tempfile.mkdtemp(dir=env["WARM_ROOT"]))
    proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, env={**env, **(env_extra or {})}, cwd=cwd)
    assert proc.stdin and proc.stdout
    stdin, stdout = proc.stdin, proc.stdout

    def ask(msg_id: int | None, method: str, params: dict[str, object]) -> dict[str, object]:
        msg: dict[str, object] = {"jsonrpc": "2.0", "method": method, "params": params}
        if msg_id is not None:
            msg["id"] = msg_id
        stdin.write((json.dumps(msg) + "\n").encode())
        stdin.flush()
        while msg_id is not None:
            line = stdout.readline()
            if not line:
                raise RuntimeError(f"{argv[-1]} closed stdout before answering {method}")
            answer = json.loads(line)
            if answer.get("id") == msg_id:
                if "error" in answer or answer["result"].get("isError"):
                    raise RuntimeError(f"{method}: {answer}")
                return answer
        return {}

    marks = []
    try:
        ask(1, "initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                              "clientInfo": {"name": "bench", "version": "0"}})
        marks.append(((time.perf_counter() - start) * 1000, cpu_ms(proc.pid)))
        ask(None, "notifications/initialized", {})
        ask(2, "tools/list", {})
        marks.append(((time.perf_counter() - start) * 1000, cpu_ms(proc.pid)))
        time.sleep(think)
        sent = time.perf_counter()
        ask(3, "tools/call", {"name": tool, "arguments": arguments})
        marks.append(((time.perf_counter() - sent) * 1000, cpu_ms(proc.pid)))
    finally:
        stdin.close()
        proc.wait(timeout=60)
    return marks


def stop_warm_servers(tmp: Path) -> None:
    """The warm servers this run started (their argv names a socket under ``tmp``)."""
    import signal

    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and str(tmp).encode() in (entry / "cmdline").read_bytes() \
                    and b"serve_forever" in (entry / "cmdline").read_bytes():
                os.kill(int(entry.name), signal.SIGTERM)
        except OSError:
            pass


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=9)
    ap.add_argument("--venv", action="append", default=[],
                    help="LABEL=PYTHON of another venv with an mcp SDK installed")
    ap.add_argument("--against", action="append", default=[],
                    help="LABEL=DUALTRACE: another build's console script (e.g. main's, in a "
                         "venv of its own) beside this one: only the dualtrace rows that "
                         "matter for a start (own process, first start; recall sent "
                         f"{THINK:g} s later) and the echo servers")
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="dt-bench-mcp-start-"))
    env = {k: v for k, v in os.environ.items() if k in ("PATH", "LANG")}
    env.update(HOME=str(tmp / "home"), DUALTRACE_HOME=str(tmp / "state"),
               DUALTRACE_MCP_IDLE="600", WARM_ROOT=str(tmp))  # stopped at the end
    os.environ.update(DUALTRACE_HOME=env["DUALTRACE_HOME"])
    from dualtrace.encoder.redact import redact_text
    from dualtrace.pipeline import encode_session

    memdir = tmp / "memory"
    assert encode_session(EXAMPLE, memory_dir=memdir, backend="offline").commit
    redact_text("warm the rule cache")  # what the first run on a machine leaves behind
    pythons = {sdk_version(sys.executable): sys.executable}
    for item in args.venv:
        _label, python = item.split("=", 1)
        pythons[sdk_version(python)] = python
    here = sdk_version(sys.executable)

    echo = ("echo", {"text": "hi"})
    candidates: dict[str, tuple[list[str], tuple[str, dict[str, str]], float,
                                dict[str, str]]] = {}
    path = tmp / "floor.py"
    path.write_text(FLOOR)
    candidates["stdlib-only JSON-RPC echo (no SDK)"] = ([sys.executable, str(path)], echo, 0.0, {})
    for version, python in pythons.items():
        major = version.split(".")[0]
        for name, code in (("high", HIGH_2 if major == "2" else HIGH_1),
                           ("low", LOW_2 if major == "2" else LOW_1)):
            path = tmp / f"echo_{name}_{version}.py"
            path.write_text(code)
            kind = ("MCPServer" if major == "2" else "FastMCP") if name == "high" else "lowlevel Server"
            candidates[f"mcp {version}: {kind} echo"] = ([python, str(path)], echo, 0.0, {})
    exe = str(Path(sys.executable).parent / "dualtrace")
    server = [exe, "mcp", "--memory-dir", str(memdir)]
    recall = ("recall", {"question": "why postgres for sessions"})
    own = {"DUALTRACE_MCP_WARM": "0"}
    warm = {"DUALTRACE_MCP_WARM": "1"}
    # A new state dir each run (the warm server's socket lives there), the same compiled
    # secret rules (a first start on a machine where dualtrace ran before).
    first = {"DUALTRACE_MCP_WARM": "1", "DUALTRACE_HOME": "fresh",
             "KF_RULE_CACHE_DIR": str(tmp / "state" / "cache" / "kingfisher-rules")}
    if args.against:
        builds = [("this tree", exe)] + [tuple(item.split("=", 1)) for item in args.against]
        for name, script in builds:
            argv = [script, "mcp", "--memory-dir", str(memdir)]
            for label, extra in ((f"dualtrace mcp ({name}), a process of its own", own),
                                 (f"dualtrace mcp ({name}), first start", first),
                                 (f"dualtrace mcp ({name}), forked by the warm server", warm)):
                candidates[label] = (argv, recall, THINK, extra)
    for label, extra in ((f"dualtrace mcp (mcp {here}), a process of its own", own),
                         ("dualtrace mcp, forked by the running warm server", warm),
                         ("dualtrace mcp, first start (starts the warm server)", first)):
        if args.against:
            break
        candidates[f"{label}, recall sent at once"] = (server, recall, 0.0, extra)
        candidates[f"{label}, recall sent {THINK:g} s after tools/list"] = (
            server, recall, THINK, extra)

    load = [os.getloadavg()[0]]
    marks: dict[str, list[list[tuple[float, float]]]] = {label: [] for label in candidates}
    for _ in range(args.runs):
        for label, (argv, (tool, arguments), think, extra) in candidates.items():
            marks[label].append(phases(argv, env, str(tmp), tool, arguments, think, extra))
        load.append(os.getloadavg()[0])

    stop_warm_servers(tmp)

    def med(label: str, phase: int, which: int) -> float:
        return statistics.median(run[phase][which] for run in marks[label])

    base = f"mcp {here}: MCPServer echo"
    print(f"runs: {args.runs} (interleaved); load average (1 min) during the runs: "
          f"{min(load):.1f}-{max(load):.1f}, median {statistics.median(load):.1f}\n")
    print(f"initialize and tools/list: ms since the spawn; first call: ms since it was sent; "
          f"ratios against {base}\n")
    print("| process | initialize: wall ms (ratio) | tools/list: wall ms (ratio) | first call: wall ms"
          + " | " + " | ".join(f"{p}: server CPU ms" for p in PHASES) + " |")
    print("|---" * (1 + 2 * len(PHASES)) + "|")
    for label in sorted(candidates, key=lambda lab: med(lab, 0, 0)):
        walls = [f"{med(label, i, 0):.0f} ({med(label, i, 0) / med(base, i, 0):.2f}x)"
                 for i in range(2)] + [f"{med(label, 2, 0):.0f}"]
        cpus = [f"{med(label, i, 1):.0f}" for i in range(len(PHASES))]
        print(f"| {label} | " + " | ".join(walls) + " | " + " | ".join(cpus) + " |")


if __name__ == "__main__":
    main()
