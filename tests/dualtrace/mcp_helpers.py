"""Talk to ``dualtrace mcp`` the way a host does: a subprocess over stdio, the SDK's client."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from mcp import Client
from mcp.client.stdio import StdioServerParameters


def dualtrace_argv(*args: str) -> list[str]:
    """The installed console script, or the same entry point through the interpreter."""
    script = Path(sys.executable).parent / "dualtrace"
    if script.is_file():
        return [str(script), *args]
    return [sys.executable, "-c", "import sys; from dualtrace.hookcmd import entry; "
            "sys.argv[0] = 'dualtrace'; entry()", *args]


def server_params(memdir: Path, cwd: Path, extra_env: dict[str, str] | None = None
                  ) -> StdioServerParameters:
    argv = dualtrace_argv("mcp", "--memory-dir", str(memdir))
    env = {k: os.environ[k] for k in ("HOME", "DUALTRACE_HOME", "PATH", "XDG_DATA_HOME",
                                       "XDG_CONFIG_HOME", "GIT_CONFIG_NOSYSTEM",
                                       "DUALTRACE_MCP_WARM", "DUALTRACE_MCP_IDLE",
                                       "XDG_RUNTIME_DIR")
           if k in os.environ}
    env.update(extra_env or {})
    return StdioServerParameters(command=argv[0], args=argv[1:], env=env, cwd=str(cwd))


def with_session(params: StdioServerParameters,
                 body: Callable[[Client], Awaitable[Any]]) -> Any:
    async def main() -> Any:
        async with Client(params) as client:
            return await body(client)

    return asyncio.run(main())


def text_of(result: Any) -> str:
    return "".join(getattr(block, "text", "") for block in result.content)


def ask_line(proc: subprocess.Popen, msg_id: int | None, method: str, params: dict) -> dict:
    """One JSON-RPC line the way a host writes it (raw, without the SDK's client); the
    answer to it (none for a notification)."""
    msg = {"jsonrpc": "2.0", "method": method, "params": params}
    if msg_id is not None:
        msg["id"] = msg_id
    proc.stdin.write(json.dumps(msg) + "\n")
    proc.stdin.flush()
    while msg_id is not None:
        line = proc.stdout.readline()
        assert line, f"server closed stdout before answering {method}: {proc.stderr.read()}"
        answer = json.loads(line)
        if answer.get("id") == msg_id:
            return answer
    return {}
