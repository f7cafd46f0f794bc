"""A fake ``claude`` executable that is a real MCP client.

It accepts the ``claude -p`` flags the claude backend uses (an unknown flag is an
error, as with the real CLI), refuses to run when the child is not locked down the
way the backend promises, starts every server of ``--mcp-config`` over stdio exactly
as the config says (command, args, env over its own environment, as Claude Code
does) with the MCP SDK's client, and plays a scripted tool sequence:

    FAKE_CLAUDE_SCRIPT = {"turns": [[{"tool": "mcp__dualtrace__store_memory",
                                      "input": {...}}, ...], ...],
                          "result": "final text", "usage": {...}, "cost": 0.01,
                          "sleep": seconds}

``"runs": [{...}, ...]`` instead gives each invocation its own of those keys, in order.
One list per model turn; ``--max-turns`` caps the turns played (the result is then
``error_max_turns``, as Claude Code reports it). A tool outside ``--allowedTools`` is
denied without reaching the server. Every call and its answer is appended to
FAKE_CLAUDE_LOG as a JSON line, and the checks it made go to the first line.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time


def parse(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="claude", add_help=False)
    p.add_argument("-p", "--print", action="store_true", dest="print_mode")
    p.add_argument("--output-format")
    p.add_argument("--model")
    p.add_argument("--max-turns", type=int)
    p.add_argument("--no-session-persistence", action="store_true")
    p.add_argument("--setting-sources")
    p.add_argument("--settings")
    p.add_argument("--strict-mcp-config", action="store_true")
    p.add_argument("--mcp-config", nargs="+")
    p.add_argument("--tools")
    p.add_argument("--allowedTools", "--allowed-tools")
    p.add_argument("--permission-mode", choices=["acceptEdits", "auto", "bypassPermissions",
                                                 "manual", "dontAsk", "plan"])
    p.add_argument("--disable-slash-commands", action="store_true")
    p.add_argument("--max-budget-usd", type=float)
    p.add_argument("--system-prompt")
    return p.parse_args(argv)


def checks(args: argparse.Namespace) -> list[str]:
    """What a locked-down encoder child must look like; each failure is a reason."""
    bad = []
    if not args.print_mode:
        bad.append("not -p")
    if args.output_format != "json":
        bad.append("output format is not json")
    if args.tools != "":
        bad.append(f"built-in tools not disabled: --tools {args.tools!r}")
    if not args.strict_mcp_config or not args.mcp_config:
        bad.append("MCP servers not restricted to --mcp-config")
    if not args.no_session_persistence:
        bad.append("session persistence on")
    if args.setting_sources != "":
        bad.append("user/project settings are loaded")
    try:
        if not json.loads(args.settings or "{}").get("disableAllHooks"):
            bad.append("hooks not disabled")
    except ValueError:
        bad.append("--settings is not JSON")
    if args.permission_mode != "dontAsk":
        bad.append("permission mode is not dontAsk")
    if not args.max_turns:
        bad.append("no --max-turns")
    allowed = [t for t in (args.allowedTools or "").replace(",", " ").split() if t]
    if not allowed or any(not t.startswith("mcp__dualtrace__") for t in allowed):
        bad.append(f"allowed tools beyond ours: {allowed}")
    if os.environ.get("DUALTRACE_CHILD") != "1":
        bad.append("DUALTRACE_CHILD is not 1")
    if os.environ.get("CLAUDE_CODE_SESSION_ID"):
        bad.append("the parent's session id leaked into the child")
    if os.listdir(os.getcwd()) != [os.path.basename(args.mcp_config[0])] and \
            os.listdir(os.getcwd()):
        bad.append(f"working directory is not empty: {os.listdir(os.getcwd())}")
    return bad


def load_servers(specs: list[str]) -> dict[str, dict]:
    servers: dict[str, dict] = {}
    for spec in specs:
        text = open(spec, encoding="utf-8").read() if os.path.isfile(spec) else spec
        servers.update(json.loads(text)["mcpServers"])
    return servers


async def play(args: argparse.Namespace, script: dict, log) -> dict:
    from mcp import Client
    from mcp.client.stdio import StdioServerParameters

    allowed = set((args.allowedTools or "").replace(",", " ").split())
    servers = load_servers(args.mcp_config)
    name, spec = next(iter(servers.items()))
    params = StdioServerParameters(command=spec["command"], args=spec.get("args", []),
                                   env={**os.environ, **spec.get("env", {})})
    turns = script.get("turns", [])
    played = 0
    async with Client(params) as client:
        listed = sorted(t.name for t in (await client.list_tools()).tools)
        log({"event": "tools", "server": name, "tools": listed})
        for turn in turns:
            if played >= args.max_turns:
                return {"subtype": "error_max_turns", "num_turns": played}
            played += 1
            for call in turn:
                tool = call["tool"]
                if tool not in allowed:
                    log({"turn": played, "tool": tool, "is_error": True,
                         "text": "permission denied (not in --allowedTools)", "served": False})
                    continue
                prefix = f"mcp__{name}__"
                result = await client.call_tool(tool.removeprefix(prefix), call.get("input", {}))
                text = "".join(getattr(b, "text", "") for b in result.content)
                log({"turn": played, "tool": tool, "is_error": bool(result.is_error),
                     "text": text, "served": True})
    return {"subtype": "success", "num_turns": played}


def main() -> int:
    try:
        args = parse(sys.argv[1:])
    except SystemExit:
        print("error: unknown option", file=sys.stderr)
        return 1
    script = json.load(open(os.environ["FAKE_CLAUDE_SCRIPT"], encoding="utf-8"))
    log_path = os.environ["FAKE_CLAUDE_LOG"]
    prompt = sys.stdin.read()

    def log(record: dict) -> None:
        with open(log_path, "a", encoding="utf-8") as fh:
            fh.write(json.dumps(record) + "\n")

    # "runs": one script per invocation, in order (a backend that runs claude -p again).
    runs = script.get("runs")
    if runs:
        started = 0
        if os.path.exists(log_path):
            with open(log_path, encoding="utf-8") as fh:
                started = sum(1 for line in fh if '"event": "start"' in line)
        script = {**script, **runs[min(started, len(runs) - 1)]}
    problems = checks(args)
    log({"event": "start", "problems": problems, "prompt_chars": len(prompt),
         "prompt_tail": prompt[-1500:],
         "max_budget_usd": args.max_budget_usd, "model": args.model,
         "system_mentions_tools": "mcp__dualtrace__store_memory" in (args.system_prompt or "")})
    if problems:
        print("refusing: " + "; ".join(problems), file=sys.stderr)
        return 3
    time.sleep(float(script.get("sleep", 0)))
    outcome = asyncio.run(play(args, script, log))
    usage = script.get("usage", {"input_tokens": 5200, "output_tokens": 700,
                                 "cache_read_input_tokens": 3000,
                                 "cache_creation_input_tokens": 0})
    reply = {"type": "result", "is_error": outcome["subtype"] != "success",
             "result": script.get("result", "done"), "session_id": "fake-session",
             "usage": usage, "total_cost_usd": script.get("cost", 0.0123), **outcome}
    print(json.dumps(reply))
    return 0


if __name__ == "__main__":
    sys.exit(main())
