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

Both are built on the SDK's low-level ``Server`` with their JSON schemas written out.
The SDK costs ~0.4 s of CPU to import (its pydantic protocol models); that is all a
host waits for: ``initialize`` and ``tools/list`` load nothing else of dualtrace, and
the memory server warms what its first call needs in the background after
``tools/list`` (``MemoryTools``). Only this module imports the SDK, and only the
``mcp`` command imports this module (the hook fast path never does:
tests/dualtrace/test_hook.py).
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

from dualtrace import mcp_sdk

mcp_sdk.load()  # before the SDK's first import: neither its client nor MCPServer is loaded

import anyio  # noqa: E402
import anyio.to_thread  # noqa: E402
import mcp_types as types  # noqa: E402
from mcp.server.lowlevel import Server  # noqa: E402
from mcp.server.stdio import stdio_server  # noqa: E402
from mcp.shared.message import SessionMessage  # noqa: E402
from pydantic import ValidationError  # noqa: E402

from dualtrace import __version__  # noqa: E402
from dualtrace.agent_tools import TYPES, AgentMemory  # noqa: E402
from dualtrace.errors import DualtraceError  # noqa: E402
from dualtrace.mcp_warm import semantic_fingerprint  # noqa: E402

READ_ONLY = types.ToolAnnotations(read_only_hint=True, destructive_hint=False,
                                  idempotent_hint=True, open_world_hint=False)
WRITE = types.ToolAnnotations(read_only_hint=False, destructive_hint=False,
                              idempotent_hint=False, open_world_hint=False)

MEMORY_INSTRUCTIONS = (
    "dualtrace is this project's long-term memory: decisions, incidents, conventions, "
    "preferences, patterns and learnings from earlier sessions, each a Markdown file in a "
    "git repository. Use recall with a question before answering anything about past work "
    "(why something was decided, whether a failure was seen before, how things are done "
    "here); its answer is labelled STATE A (fact and scene), B (fact only) or C (nothing "
    "stored). Use remember only when the user asks you to remember something."
)


def _string(description: str) -> dict[str, Any]:
    return {"type": "string", "description": description}


def _limit(most: int, default: int, what: str) -> dict[str, Any]:
    return {"type": "integer", "minimum": 1, "maximum": most, "default": default,
            "description": f"{what} (1-{most})"}


_KIND = {"type": "string", "enum": list(TYPES), "description": "only memories of this type"}

# name -> (description, properties, required, annotations). Written out rather than
# derived from function signatures: nothing is introspected at start, and the arguments
# reach AgentMemory's own checks untouched (one-line errors, one place).
MEMORY_TOOLS: dict[str, tuple[str, dict[str, Any], tuple[str, ...], types.ToolAnnotations]] = {
    "recall": (
        "Answer a question from memory. The first line is the retrieval state: STATE A "
        "(fact + scene, high confidence), STATE B (fact only, medium confidence) or STATE C "
        "(nothing stored: say so, do not guess).",
        {"question": _string("the question, in the user's words"),
         "limit": _limit(100, 5, "most memories to return"), "type": _KIND},
        ("question",), READ_ONLY),
    "search": (
        "List stored memories matching any of the words, best first: path, type, "
        "confidence, date, description. Open one with show.",
        {"query": _string("subject words"), "limit": _limit(50, 10, "most results"),
         "type": _KIND},
        ("query",), READ_ONLY),
    "show": (
        "Show one memory as stored: the fact file, then its scene (moment) if it has one. "
        "Given a session id or record path, show that session's record.",
        {"target": _string("a memory path (decisions/x.md) or anchor, or a session id or "
                           "record path (sessions/...) from recent_sessions")},
        ("target",), READ_ONLY),
    "recent_sessions": (
        "The most recent sessions in this project, newest first, from their session "
        "records: when, what it was about, the outcome, the memories it stored or updated, "
        "the first open end, and the record path (open it with show).",
        {"limit": _limit(50, 10, "sessions to list")},
        (), READ_ONLY),
    "remember": (
        "Store something the user explicitly asked you to remember. It goes through the "
        "same validator and scoring as session encoding and is committed on its own; a "
        "restatement of a stored memory updates it in place. Never deletes anything.",
        {"type": {"type": "string", "enum": list(TYPES), "description": "the memory's type"},
         "description": _string("one line: what to remember"),
         "body": _string("details, in the user's words"),
         "why": _string("the reason the user gave, if any"),
         "anchor": _string("optional lowercase-hyphenated name (default: from the "
                           "description)")},
        ("type", "description"), WRITE),
}


def _tool_list() -> list[types.Tool]:
    return [types.Tool(name=name, description=description,
                       input_schema={"type": "object", "properties": props,
                                     "required": list(required), "additionalProperties": False},
                       annotations=annotations)
            for name, (description, props, required, annotations) in MEMORY_TOOLS.items()]


def _text_result(text: str, is_error: bool = False) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)],
                                is_error=is_error)


class MemoryTools:
    """The memory server's tool calls: checked, serialized, and warmed after the handshake.

    The host waits for ``initialize`` and ``tools/list`` before its session can start,
    so nothing beyond the SDK and the schemas above is loaded for them. What the first
    call needs (the recall stack, the search index, the embedder and the redactor's
    ~490 compiled secret rules, together ~0.3-0.9 s) is loaded by a background thread
    started once ``tools/list`` is answered, while the host is busy with its model. A
    call that arrives sooner waits for that thread instead of loading everything twice.
    """

    def __init__(self, memory: AgentMemory) -> None:
        self.memory = memory
        self._lock = threading.Lock()  # one call (or the warm-up) at a time
        self._warm: threading.Thread | None = None
        # A session lasts as long as the host's: the semantic extra may be installed (or
        # removed) meanwhile, and the embedder this process loaded once would stay. Taken
        # by the warm-up (it imports the embedder module: not before the handshake).
        self._semantics: tuple[object, ...] | None = None

    def warm_up(self) -> None:
        if self._warm is None:
            self._warm = threading.Thread(target=self._warm_up, name="dualtrace-warm-up",
                                          daemon=True)
            self._warm.start()

    def _warm_up(self) -> None:
        with self._lock:
            start = time.perf_counter()
            try:
                # A call that came first took the fingerprint of what it loaded; taking
                # it again here, after an install in between, would hide that install.
                if self._semantics is None:
                    self._semantics = semantic_fingerprint()
                self.memory.warm_up()
            except Exception as exc:  # noqa: BLE001 - the first call reports it to the agent
                print(f"dualtrace mcp: warm-up failed: {exc}", file=sys.stderr, flush=True)
                return
            # stderr is the host's log for this server (stdout carries the protocol).
            print(f"dualtrace mcp: warm-up done in {(time.perf_counter() - start) * 1000:.0f} "
                  "ms (recall, index, redactor)", file=sys.stderr, flush=True)

    def call(self, name: str, arguments: dict[str, Any]) -> tuple[str, bool]:
        spec = MEMORY_TOOLS.get(name)
        if spec is None:
            return f"unknown tool {name!r}: this server has {', '.join(MEMORY_TOOLS)}", True
        unknown = sorted(set(arguments) - set(spec[1]))
        if unknown:
            return (f"unknown argument {unknown[0]!r} for {name}: it takes "
                    f"{', '.join(spec[1])}"), True
        missing = [arg for arg in spec[2] if arg not in arguments]
        if missing:
            # Checked here, as a tool error the agent can act on: the call below would
            # raise a Python TypeError, which the SDK answers as a JSON-RPC error code 0.
            return f"missing required argument {missing[0]!r} for {name}", True
        fn: Callable[..., str] = getattr(self.memory, name)
        with self._lock:
            if name in ("recall", "search", "remember"):
                self._recheck_semantics()
            try:
                return fn(**arguments), False
            except DualtraceError as exc:
                return str(exc), True


    def _recheck_semantics(self) -> None:
        """Drop the loaded embedder (or the absence of one) when the semantic extra's
        packages or weights changed since: the next call loads what is installed now."""
        now = semantic_fingerprint()
        if self._semantics is None or now == self._semantics:
            self._semantics = now
            return
        from dualtrace.memfs import embed

        embed.reset()
        self._semantics = now
        print("dualtrace mcp: the semantic extra changed since the session started; the "
              "embedder is loaded again", file=sys.stderr, flush=True)


def memory_server(memory: AgentMemory) -> Server[Any]:
    tools = MemoryTools(memory)
    listed = _tool_list()

    async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
        tools.warm_up()
        return types.ListToolsResult(tools=listed)

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        arguments = dict(params.arguments or {})
        text, is_error = await anyio.to_thread.run_sync(lambda: tools.call(params.name, arguments))
        return _text_result(text, is_error)

    return Server("dualtrace", version=__version__, instructions=MEMORY_INSTRUCTIONS,
                  on_list_tools=list_tools, on_call_tool=call_tool)


def run_stdio(server: Server[Any]) -> None:
    async def main() -> None:
        async with stdio_server() as (read, write):
            await server.run(_AnswerBadLines(read, write), write,
                             server.create_initialization_options())

    anyio.run(main)


class _AnswerBadLines:
    """The SDK's stdio transport hands a line that is not a JSON-RPC message to the
    session as an exception, which drops it: the host would wait for an answer that
    never comes. JSON-RPC 2.0 says to answer it (``id`` null): -32700 for a line that
    is not JSON, -32600 for JSON that is not a request, notification or response.
    Blank lines are not messages and are skipped."""

    def __init__(self, inner: Any, write: Any) -> None:
        self._inner = inner
        self._write = write

    @property
    def last_context(self) -> Any:
        return getattr(self._inner, "last_context", None)

    async def receive(self) -> Any:
        while True:
            item = await self._inner.receive()
            if not isinstance(item, Exception):
                return item
            answer = _bad_line_error(item)
            if answer is not None:
                await self._write.send(SessionMessage(answer))

    async def aclose(self) -> None:
        await self._inner.aclose()

    def __aiter__(self) -> _AnswerBadLines:
        return self

    async def __anext__(self) -> Any:
        try:
            return await self.receive()
        except anyio.EndOfStream:
            raise StopAsyncIteration from None

    async def __aenter__(self) -> _AnswerBadLines:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


def _bad_line_error(exc: Exception) -> types.JSONRPCError | None:
    errors = exc.errors() if isinstance(exc, ValidationError) else []
    if errors and errors[0].get("type") == "json_invalid":
        if not str(errors[0].get("input", "x")).strip():
            return None  # a blank line
        code, message = types.PARSE_ERROR, "Parse error: the line is not JSON"
    else:
        code, message = types.INVALID_REQUEST, ("Invalid Request: not a JSON-RPC 2.0 "
                                                "request, notification or response")
    return types.JSONRPCError(jsonrpc="2.0", id=None,
                              error=types.ErrorData(code=code, message=message))


# ------------------------------------------------------------------ encoder server

ENCODER_TOOLS = ("search_memory", "read_memory", "store_memory", "update_memory", "skip",
                 "finish")


def encoder_server(address: str, token: str) -> Server[Any]:
    """The sub-agent's tools; every call is validated by the encoding process.

    The advertised schemas are the encoder's own (shared with the Anthropic backend) and
    the arguments reach the validator untouched, so a wrong score or a path escape is
    judged, and explained, in one place.
    """
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
        return _text_result(text, is_error)

    return Server("dualtrace-encoder", version=__version__, on_list_tools=list_tools,
                  on_call_tool=call_tool)


def serve(memory_dir: str | None = None, *, encoder: bool = False) -> None:
    if encoder:
        address = os.environ.get("DUALTRACE_BROKER", "")
        token = os.environ.get("DUALTRACE_BROKER_TOKEN", "")
        if not address or not token:
            raise DualtraceError("dualtrace mcp --encoder needs DUALTRACE_BROKER and "
                                 "DUALTRACE_BROKER_TOKEN (it is started by the claude backend)")
        run_stdio(encoder_server(address, token))
        return
    run_stdio(memory_server(AgentMemory.resolve(memory_dir)))


def main(argv: list[str]) -> int:
    """``dualtrace mcp [--memory-dir DIR]`` as a host starts it (routed here past click:
    start-up time); ``--help`` and bad options get the click CLI's answer."""
    from dualtrace.mcp_warm import parse_argv, via_click

    parsed = parse_argv(argv)
    if parsed is None:
        return via_click(argv)
    memory_dir, encoder = parsed
    try:
        serve(memory_dir, encoder=encoder)
    except DualtraceError as exc:
        print(f"Error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    return 0


__all__ = ["memory_server", "encoder_server", "run_stdio", "serve", "main", "ENCODER_TOOLS",
           "MEMORY_TOOLS"]
