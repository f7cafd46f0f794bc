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
import time
from collections.abc import Callable
from typing import Any

from tests.fake_http import FakeServer, Recorded, sse

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
    return sse((e["type"], e) for e in events)


class FakeResponses(FakeServer[Scripted]):
    """``with FakeResponses() as api: ... api.url ...`` (``/v1`` is the base URL)."""

    base_path = "/v1"
    request_id_header = "x-request-id"

    def respond(self, rec: Recorded) -> tuple[int, dict[str, str], bytes]:
        status, ctype, data = self.route(rec.method, rec.path.split("?", 1)[0],
                                         rec.body if isinstance(rec.body, dict) else {})
        return status, {"content-type": ctype}, data

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
        scripted = self.next_scripted()
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
