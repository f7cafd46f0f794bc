"""``dualtrace mcp``: stdio MCP servers built on the official ``mcp`` Python SDK.

Two servers share this module:

- the **memory server** (``dualtrace mcp``) that a host agent (Claude Code, Codex)
  starts for the project: ``recall``, ``search``, ``show``, ``recent_sessions`` (all
  annotated read-only) and ``remember`` (one validated commit). No tool deletes.
  What each tool does lives in dualtrace/agent_tools.py; this module only declares
  the schemas and turns our errors into MCP tool errors (``isError``).
- the **encoder server** (``dualtrace mcp --encoder``) that the ``claude`` backend's
  headless ``claude -p`` child starts: ``search_memory``, ``read_memory``,
  ``store_memory``, ``update_memory``, ``skip``, ``finish``. It holds no state: each
  call is forwarded to the encoding process (encoder/backends/broker.py), whose
  ``PlanBuilder`` validates it; a refusal comes back as a tool error with the
  validator's reason.

The SDK costs ~0.4 s to import; only this module imports it, and only the ``mcp``
command imports this module (the hook fast path never does: tests/test_hook.py).
"""

from __future__ import annotations

import os
from typing import Annotated, Any

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp_types import ToolAnnotations
from pydantic import Field

from dualtrace import __version__
from dualtrace.agent_tools import TYPES, AgentMemory
from dualtrace.errors import DualtraceError

READ_ONLY = ToolAnnotations(read_only_hint=True, destructive_hint=False, idempotent_hint=True,
                            open_world_hint=False)
WRITE = ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=False,
                        open_world_hint=False)

MEMORY_INSTRUCTIONS = (
    "dualtrace is this project's long-term memory: decisions, incidents, conventions, "
    "preferences, patterns and learnings from earlier sessions, each a Markdown file in a "
    "git repository. Use recall with a question before answering anything about past work "
    "(why something was decided, whether a failure was seen before, how things are done "
    "here); its answer is labelled STATE A (fact and scene), B (fact only) or C (nothing "
    "stored). Use remember only when the user asks you to remember something."
)

Kind = Annotated[str | None, Field(description=f"only memories of this type: {', '.join(TYPES)}")]


def _call(fn: Any, *args: Any, **kwargs: Any) -> str:
    try:
        return fn(*args, **kwargs)
    except DualtraceError as exc:
        raise ToolError(str(exc)) from None


def memory_server(memory: AgentMemory) -> MCPServer:
    server: MCPServer = MCPServer("dualtrace", version=__version__,
                                  instructions=MEMORY_INSTRUCTIONS)

    @server.tool(annotations=READ_ONLY)
    def recall(
        question: Annotated[str, Field(description="the question, in the user's words")],
        limit: Annotated[int, Field(description="most memories to return (1-100)")] = 5,
        type: Kind = None,  # noqa: A002 - the name the agent sees
    ) -> str:
        """Answer a question from memory. The first line is the retrieval state: STATE A
        (fact + scene, high confidence), STATE B (fact only, medium confidence) or STATE C
        (nothing stored: say so, do not guess)."""
        return _call(memory.recall, question, limit, type)

    @server.tool(annotations=READ_ONLY)
    def search(
        query: Annotated[str, Field(description="subject words")],
        limit: Annotated[int, Field(description="most results (1-50)")] = 10,
        type: Kind = None,  # noqa: A002
    ) -> str:
        """List stored memories matching any of the words, best first: path, type,
        confidence, date, description. Open one with show."""
        return _call(memory.search, query, limit, type)

    @server.tool(annotations=READ_ONLY)
    def show(
        target: Annotated[str, Field(
            description="a memory path (decisions/x.md) or anchor, or a session id or "
                        "record path (sessions/...) from recent_sessions")],
    ) -> str:
        """Show one memory as stored: the fact file, then its scene (moment) if it has one.
        Given a session id or record path, show that session's record."""
        return _call(memory.show, target)

    @server.tool(annotations=READ_ONLY)
    def recent_sessions(
        limit: Annotated[int, Field(description="sessions to list (1-50)")] = 10,
    ) -> str:
        """The most recent sessions in this project, newest first, from their session
        records: when, what it was about, the outcome, the memories it stored or updated,
        the first open end, and the record path (open it with show)."""
        return _call(memory.recent_sessions, limit)

    @server.tool(annotations=WRITE)
    def remember(
        type: Annotated[str, Field(description=f"one of {', '.join(TYPES)}")],  # noqa: A002
        description: Annotated[str, Field(description="one line: what to remember")],
        body: Annotated[str, Field(description="details, in the user's words")] = "",
        why: Annotated[str, Field(description="the reason the user gave, if any")] = "",
        anchor: Annotated[str, Field(
            description="optional lowercase-hyphenated name (default: from the description)")] = "",
    ) -> str:
        """Store something the user explicitly asked you to remember. It goes through the
        same validator and scoring as session encoding and is committed on its own; a
        restatement of a stored memory updates it in place. Never deletes anything."""
        return _call(memory.remember, type, description, body, why, anchor)

    return server


# ------------------------------------------------------------------ encoder server

ENCODER_TOOLS = ("search_memory", "read_memory", "store_memory", "update_memory", "skip",
                 "finish")


def encoder_server(address: str, token: str) -> Any:
    """The sub-agent's tools; every call is validated by the encoding process.

    A low-level SDK server: the advertised schemas are the encoder's own (shared with
    the Anthropic backend) and the arguments reach the validator untouched, so a
    wrong score or a path escape is judged, and explained, in one place.
    """
    import anyio.to_thread
    import mcp_types as types
    from mcp.server.lowlevel import Server
    from mcp.server.stdio import stdio_server

    from dualtrace.encoder.backends.anthropic import TOOLS
    from dualtrace.encoder.backends.broker import call_broker

    tools = [types.Tool(name=t["name"], description=t["description"],
                        input_schema=t["input_schema"],
                        annotations=READ_ONLY if t["name"] in ("search_memory", "read_memory")
                        else WRITE)
             for t in TOOLS if t["name"] in ENCODER_TOOLS]

    async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(tools=tools)

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        arguments = dict(params.arguments or {})
        try:
            text, is_error = await anyio.to_thread.run_sync(
                lambda: call_broker(address, token, params.name, arguments))
        except DualtraceError as exc:
            text, is_error = str(exc), True
        return types.CallToolResult(content=[types.TextContent(type="text", text=text)],
                                    is_error=is_error)

    server = Server("dualtrace-encoder", version=__version__, on_list_tools=list_tools,
                    on_call_tool=call_tool)

    class _Runner:
        def run(self, transport: str = "stdio") -> None:
            import anyio

            async def main() -> None:
                async with stdio_server() as (read, write):
                    await server.run(read, write, server.create_initialization_options())

            anyio.run(main)

    return _Runner()


def serve(memory_dir: str | None = None, *, encoder: bool = False) -> None:
    if encoder:
        address = os.environ.get("DUALTRACE_BROKER", "")
        token = os.environ.get("DUALTRACE_BROKER_TOKEN", "")
        if not address or not token:
            raise DualtraceError("dualtrace mcp --encoder needs DUALTRACE_BROKER and "
                                 "DUALTRACE_BROKER_TOKEN (it is started by the claude backend)")
        encoder_server(address, token).run("stdio")
        return
    memory_server(AgentMemory.resolve(memory_dir)).run("stdio")


def main(argv: list[str]) -> int:
    """``dualtrace mcp [--memory-dir DIR]``, routed here before click (start-up time)."""
    import argparse
    import sys

    parser = argparse.ArgumentParser(
        prog="dualtrace mcp",
        description="Serve this project's memory to an agent over MCP (stdio).")
    parser.add_argument("--memory-dir", default=None, help="memory directory (default: resolved "
                        "from env, dualtrace.toml, or the project)")
    parser.add_argument("--encoder", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    try:
        serve(args.memory_dir, encoder=args.encoder)
    except DualtraceError as exc:
        print(f"Error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    return 0


__all__ = ["memory_server", "encoder_server", "serve", "main", "ENCODER_TOOLS"]
