"""A local fake of the OpenAI Responses API (``POST /v1/responses``) for the Codex tests.

A threaded HTTP server on 127.0.0.1:<free port>; every request is recorded. A reply is
scripted as a list of output items (``message(text)``, ``function_call(name, args)``)
or a callable that builds one from the request body. With ``"stream": true`` (what
Codex sends) the reply is the API's server-sent events, in the documented order:
``response.created``, ``response.in_progress``, per item ``response.output_item.added``,
its content or argument deltas and ``.done`` events, ``response.output_item.done``, and
a final ``response.completed`` carrying the whole response with usage. Without
``stream`` the same response object is returned as JSON.
"""

from __future__ import annotations

import itertools
import json
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

_ids = itertools.count(1)
Item = dict[str, Any]
Scripted = list[Item] | Callable[[dict], list[Item]]


def message(text: str) -> Item:
    return {"id": f"msg_{next(_ids):06d}", "type": "message", "role": "assistant",
            "status": "completed",
            "content": [{"type": "output_text", "text": text, "annotations": []}]}


def function_call(name: str, arguments: dict[str, Any] | str, call_id: str | None = None) -> Item:
    args = arguments if isinstance(arguments, str) else json.dumps(arguments)
    return {"id": f"fc_{next(_ids):06d}", "type": "function_call", "status": "completed",
            "call_id": call_id or f"call_{next(_ids):06d}", "name": name, "arguments": args}


@dataclass
class Recorded:
    method: str
    path: str
    headers: dict[str, str]
    body: Any


def _usage(request: dict[str, Any], output: list[Item]) -> dict[str, Any]:
    prompt = max(1, len(json.dumps(request.get("input") or "")) // 4)
    completion = max(1, len(json.dumps(output)) // 4)
    return {"input_tokens": prompt, "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": completion, "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": prompt + completion}


def response_object(request: dict[str, Any], output: list[Item], status: str) -> dict[str, Any]:
    return {"id": f"resp_{next(_ids):08d}", "object": "response", "created_at": int(time.time()),
            "status": status, "model": request.get("model", "gpt-5"), "output": output,
            "error": None, "incomplete_details": None, "usage": None}


def sse_events(request: dict[str, Any], output: list[Item]) -> bytes:
    """The streamed form of a response whose output is ``output``."""
    seq = itertools.count(0)
    events: list[dict[str, Any]] = []
    final = response_object(request, output, "completed")
    final["usage"] = _usage(request, output)
    started = {**final, "status": "in_progress", "output": [], "usage": None}

    def emit(kind: str, **data: Any) -> None:
        events.append({"type": kind, "sequence_number": next(seq), **data})

    emit("response.created", response=started)
    emit("response.in_progress", response=started)
    for index, item in enumerate(output):
        if item["type"] == "message":
            emit("response.output_item.added", output_index=index,
                 item={**item, "status": "in_progress", "content": []})
            for part_index, part in enumerate(item["content"]):
                where = {"item_id": item["id"], "output_index": index,
                         "content_index": part_index}
                emit("response.content_part.added", **where,
                     part={**part, "text": ""})
                emit("response.output_text.delta", **where, delta=part["text"], logprobs=[])
                emit("response.output_text.done", **where, text=part["text"], logprobs=[])
                emit("response.content_part.done", **where, part=part)
        elif item["type"] == "function_call":
            emit("response.output_item.added", output_index=index,
                 item={**item, "status": "in_progress", "arguments": ""})
            where = {"item_id": item["id"], "output_index": index}
            emit("response.function_call_arguments.delta", **where, delta=item["arguments"])
            emit("response.function_call_arguments.done", **where,
                 arguments=item["arguments"])
        else:
            emit("response.output_item.added", output_index=index, item=item)
        emit("response.output_item.done", output_index=index, item=item)
    emit("response.completed", response=final)
    return "".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n" for e in events).encode()


class FakeResponses:
    """``with FakeResponses() as api: ... api.url ...`` (``/v1`` is the base URL)."""

    def __init__(self) -> None:
        self.queue: deque[Scripted] = deque()
        self.default: Scripted | None = None
        self.requests: list[Recorded] = []
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None

    def start(self) -> FakeResponses:
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
                with fake._lock:
                    fake.requests.append(Recorded(self.command, self.path,
                                                  {k.lower(): v for k, v in self.headers.items()},
                                                  body))
                status, ctype, data = fake.route(self.command, self.path.split("?", 1)[0],
                                                 body if isinstance(body, dict) else {})
                self.send_response(status)
                self.send_header("content-type", ctype)
                self.send_header("content-length", str(len(data)))
                self.send_header("x-request-id", f"req_{next(_ids)}")
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

    def __enter__(self) -> FakeResponses:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    @property
    def url(self) -> str:
        assert self._server is not None, "server not started"
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}/v1"

    def enqueue(self, *replies: Scripted) -> None:
        with self._lock:
            self.queue.extend(replies)

    def response_requests(self) -> list[dict[str, Any]]:
        return [r.body for r in self.requests
                if r.method == "POST" and r.path.split("?", 1)[0].endswith("/responses")]

    def route(self, method: str, path: str, body: dict[str, Any]) -> tuple[int, str, bytes]:
        if method == "GET" and path.endswith("/models"):
            return 200, "application/json", json.dumps({"object": "list", "data": [],
                                                        "models": []}).encode()
        if method != "POST" or not path.endswith("/responses"):
            error = {"error": {"message": f"no route {method} {path}", "type": "not_found"}}
            return 404, "application/json", json.dumps(error).encode()
        with self._lock:
            scripted = self.queue.popleft() if self.queue else self.default
        if scripted is None:
            error = {"error": {"message": "fake server: no scripted response left",
                               "type": "server_error"}}
            return 500, "application/json", json.dumps(error).encode()
        output = scripted(body) if callable(scripted) else scripted
        if body.get("stream"):
            return 200, "text/event-stream", sse_events(body, output)
        done = response_object(body, output, "completed")
        done["usage"] = _usage(body, output)
        return 200, "application/json", json.dumps(done).encode()


def input_text(body: dict[str, Any]) -> str:
    """Every text of a Responses request's ``input`` and ``instructions``, joined."""
    parts = [body.get("instructions") or ""]
    items = body.get("input")
    if isinstance(items, str):
        return "\n".join([*parts, items])
    for item in items or []:
        content = item.get("content") if isinstance(item, dict) else None
        if isinstance(content, str):
            parts.append(content)
        elif isinstance(content, list):
            parts.extend(c.get("text", "") for c in content if isinstance(c, dict))
    return "\n".join(parts)


def last_user_input(body: dict[str, Any]) -> str:
    for item in reversed(body.get("input") or []):
        if isinstance(item, dict) and item.get("role") == "user":
            content = item.get("content")
            if isinstance(content, str):
                return content
            return "\n".join(c.get("text", "") for c in content or [] if isinstance(c, dict))
    return ""
