"""What the fake model APIs share: a threaded local HTTP server that records every
request and replies from a queue of scripted answers, and the server-sent-events wire
format (tests/fake_anthropic.py: the Messages API; tests/fake_openai.py: the
Responses API).

A subclass says how to answer one recorded request (``respond``); the server reads
the body, parses JSON when it is JSON, records it, and writes the status, headers and
bytes that ``respond`` returns, with a content-length and a request id.
"""

from __future__ import annotations

import itertools
import json
import threading
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Generic, TypeVar

ids = itertools.count(1)
S = TypeVar("S")


@dataclass
class Recorded:
    method: str
    path: str
    headers: dict[str, str]
    raw: bytes
    body: Any  # parsed JSON or None


def sse(events: Iterable[tuple[str, dict[str, Any]]]) -> bytes:
    """``(event name, data)`` pairs as a ``text/event-stream`` body."""
    return "".join(f"event: {name}\ndata: {json.dumps(data)}\n\n" for name, data in events).encode()


class FakeServer(Generic[S]):
    """``with Sub() as api: ... api.url ...``; ``enqueue`` scripts the next answers."""

    base_path = ""  # the API's base URL below the server's root
    request_id_header = "request-id"

    def __init__(self) -> None:
        self.queue: deque[S] = deque()
        self.default: S | None = None  # used when the queue is empty
        self.requests: list[Recorded] = []
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None

    def respond(self, rec: Recorded) -> tuple[int, dict[str, str], bytes]:
        """Status, headers (content-type first) and body for one request."""
        raise NotImplementedError

    def enqueue(self, *replies: S) -> None:
        with self._lock:
            self.queue.extend(replies)

    def next_scripted(self) -> S | None:
        """The next scripted answer, else the default (None: nothing scripted)."""
        with self._lock:
            return self.queue.popleft() if self.queue else self.default

    # -- lifecycle

    def start(self):  # -> Self (typing.Self is 3.11+)
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:  # quiet
                pass

            def _handle(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                raw = self.rfile.read(length) if length else b""
                try:
                    body = json.loads(raw) if raw else None
                except ValueError:
                    body = None
                rec = Recorded(self.command, self.path,
                               {k.lower(): v for k, v in self.headers.items()}, raw, body)
                with fake._lock:
                    fake.requests.append(rec)
                status, headers, data = fake.respond(rec)
                self.send_response(status)
                for key, value in headers.items():
                    self.send_header(key, value)
                self.send_header("content-length", str(len(data)))
                self.send_header(fake.request_id_header, f"req_{next(ids)}")
                self.end_headers()
                self.wfile.write(data)

            do_POST = _handle
            do_GET = _handle

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    @property
    def url(self) -> str:
        assert self._server is not None, "server not started"
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}{self.base_path}"
