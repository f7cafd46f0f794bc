"""The encoding process's side of the ``claude`` sub-agent's tools.

``claude -p`` starts ``dualtrace mcp --encoder`` as its MCP server; that process
holds no state and forwards every tool call here, over a loopback socket guarded
by a random token, as one JSON line per call. The broker runs the call through
``MemoryTools`` (the same executor the Anthropic backend uses), so the builder of
*this* process - the one that holds the store's lock and the session's grounding -
validates it. Answers are ``{"text": ..., "is_error": bool}``.

Bounds enforced here, whatever the child does: at most ``max_calls`` calls (then only
``finish``), and nothing is accepted after ``finish``.
"""

from __future__ import annotations

import json
import secrets
import socket
import socketserver
import threading
from typing import TYPE_CHECKING, Any

from dualtrace.errors import DualtraceError

if TYPE_CHECKING:
    from dualtrace.encoder.backends.anthropic import MemoryTools

MAX_LINE = 4 * 1024 * 1024
CALL_TIMEOUT = 60.0


class Broker:
    """A loopback server for one encode; use as a context manager."""

    def __init__(self, tools: MemoryTools, *, max_calls: int = 60) -> None:
        self.tools = tools
        self.max_calls = max_calls
        self.calls = 0
        self.log: list[tuple[str, bool]] = []  # (tool, is_error) per call, in order
        self.token = secrets.token_hex(16)
        self._lock = threading.Lock()
        broker = self

        class Handler(socketserver.StreamRequestHandler):
            def handle(self) -> None:
                self.connection.settimeout(CALL_TIMEOUT)
                try:
                    line = self.rfile.readline(MAX_LINE + 1)
                    request = json.loads(line)
                except (OSError, ValueError):
                    return
                reply = broker.answer(request)
                try:
                    self.wfile.write(json.dumps(reply).encode("utf-8") + b"\n")
                except OSError:
                    pass

        class Server(socketserver.ThreadingTCPServer):
            daemon_threads = True
            allow_reuse_address = True

        self._server = Server(("127.0.0.1", 0), Handler)
        host, port = self._server.server_address[:2]
        self.address = f"{host!s}:{port}"
        self._thread = threading.Thread(target=self._server.serve_forever,
                                        kwargs={"poll_interval": 0.05}, daemon=True)

    def __enter__(self) -> Broker:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()

    def answer(self, request: Any) -> dict[str, Any]:
        if not isinstance(request, dict) or not secrets.compare_digest(
                str(request.get("token", "")), self.token):
            return {"text": "not authorised", "is_error": True}
        name = str(request.get("tool") or "")
        with self._lock:  # one call at a time: the builder is not thread-safe
            self.calls += 1
            if self.calls > self.max_calls and name != "finish":  # as its answer says
                text, is_error = (f"tool-call cap reached ({self.max_calls}); call finish", True)
            elif self.tools.finished:
                text, is_error = ("the run is finished; no more calls are accepted", True)
            else:
                text, is_error = self.tools.run(name, request.get("arguments"))
            self.log.append((name, is_error))
        return {"text": text, "is_error": is_error}


def call_broker(address: str, token: str, tool: str, arguments: dict[str, Any],
                timeout: float = CALL_TIMEOUT) -> tuple[str, bool]:
    """One tool call from the MCP server process: (text, is_error)."""
    host, _, port = address.rpartition(":")
    try:
        with socket.create_connection((host, int(port)), timeout=timeout) as conn:
            conn.sendall(json.dumps({"token": token, "tool": tool,
                                     "arguments": arguments}).encode("utf-8") + b"\n")
            chunks = []
            while True:
                chunk = conn.recv(65536)
                if not chunk:
                    break
                chunks.append(chunk)
                if chunk.endswith(b"\n"):
                    break
    except (OSError, ValueError) as exc:
        raise DualtraceError(f"the encoding process is not reachable ({exc})") from None
    try:
        reply = json.loads(b"".join(chunks))
        return str(reply["text"]), bool(reply["is_error"])
    except (ValueError, KeyError, TypeError):
        raise DualtraceError("the encoding process sent no answer") from None
