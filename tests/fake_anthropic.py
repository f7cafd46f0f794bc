"""A local fake of the Anthropic Messages API (and Message Batches API) for tests.

A threaded HTTP server on 127.0.0.1:<free port> that the real ``anthropic`` SDK
talks to over real HTTP (``base_url=server.url``). Tests script responses with
``enqueue()`` (message bodies, error statuses with headers, or callables that
build a reply from the request), and every request body is recorded.

Usage numbers are computed from the request unless a scripted reply carries its
own: prompt tokens are counted from the body (about four characters a token,
the same estimate as ``pricing.estimate_request_tokens``) and prompt caching is
simulated from the ``cache_control`` breakpoints - a prefix seen before is a
cache read, a new prefix up to a breakpoint is a cache write (min 1024 tokens,
as for Sonnet-class models), the rest is plain input.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import math
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import Any

from tests.fake_http import FakeServer, Recorded, sse

MIN_CACHEABLE = 1024
_ids = itertools.count(1)


@dataclass
class Reply:
    """One scripted HTTP reply."""

    status: int = 200
    body: Any = None  # dict -> JSON; str/bytes -> raw
    headers: dict[str, str] = field(default_factory=dict)


# ------------------------------------------------------------------ builders


def sse_stream(msg: dict[str, Any]) -> bytes:
    """A complete message as the Messages API's server-sent events (``"stream": true``):
    message_start, one start/delta/stop triple per content block, message_delta, stop."""
    events: list[tuple[str, dict[str, Any]]] = []
    usage = dict(msg.get("usage") or {})
    start_usage = {**usage, "output_tokens": 1}
    head = {**msg, "content": [], "stop_reason": None, "stop_sequence": None,
            "usage": start_usage}
    events.append(("message_start", {"type": "message_start", "message": head}))
    for index, block in enumerate(msg.get("content") or []):
        if block.get("type") == "tool_use":
            opening = {**block, "input": {}}
            delta = {"type": "input_json_delta", "partial_json": json.dumps(block.get("input"))}
        elif block.get("type") == "thinking":
            opening = {"type": "thinking", "thinking": "", "signature": ""}
            delta = {"type": "thinking_delta", "thinking": block.get("thinking", "")}
        else:
            opening = {"type": "text", "text": ""}
            delta = {"type": "text_delta", "text": block.get("text", "")}
        events.append(("content_block_start", {"type": "content_block_start", "index": index,
                                               "content_block": opening}))
        events.append(("content_block_delta", {"type": "content_block_delta", "index": index,
                                               "delta": delta}))
        events.append(("content_block_stop", {"type": "content_block_stop", "index": index}))
    events.append(("message_delta", {
        "type": "message_delta",
        "delta": {"stop_reason": msg.get("stop_reason"), "stop_sequence": msg.get("stop_sequence")},
        "usage": {"output_tokens": usage.get("output_tokens", 1)}}))
    events.append(("message_stop", {"type": "message_stop"}))
    return sse(events)


def tool_use(name: str, input: Any, id: str | None = None) -> dict[str, Any]:  # noqa: A002
    return {"type": "tool_use", "id": id or f"toolu_{next(_ids):06d}", "name": name,
            "input": input}


def text(value: str) -> dict[str, Any]:
    return {"type": "text", "text": value}


def message(*content: dict[str, Any], stop_reason: str | None = None,
            usage: dict[str, int] | None = None, model: str = "claude-sonnet-4-5") -> dict[str, Any]:
    """A Messages API response body. stop_reason defaults from the content."""
    if stop_reason is None:
        stop_reason = "tool_use" if any(c["type"] == "tool_use" for c in content) else "end_turn"
    body: dict[str, Any] = {
        "id": f"msg_{next(_ids):08d}", "type": "message", "role": "assistant", "model": model,
        "content": list(content), "stop_reason": stop_reason, "stop_sequence": None,
    }
    if usage is not None:
        body["usage"] = usage
    return body


def error(status: int, message_text: str = "error", headers: dict[str, str] | None = None,
          kind: str | None = None) -> Reply:
    kind = kind or {400: "invalid_request_error", 401: "authentication_error",
                    429: "rate_limit_error", 529: "overloaded_error"}.get(status, "api_error")
    return Reply(status, {"type": "error", "error": {"type": kind, "message": message_text}},
                 headers or {})


# ------------------------------------------------------------------ token accounting


def _tokens(text_value: str) -> int:
    return math.ceil(len(text_value) / 4) if text_value else 0


def segments(body: dict[str, Any]) -> list[tuple[str, int, bool]]:
    """The request in cache order (tools, system, messages): (canonical json, tokens, breakpoint)."""
    out: list[tuple[str, int, bool]] = []
    for tool in body.get("tools") or []:
        core = {k: tool[k] for k in ("name", "description", "input_schema") if k in tool}
        js = json.dumps(core, sort_keys=True, separators=(",", ":"))
        out.append((js, _tokens(js), "cache_control" in tool))
    system = body.get("system")
    if isinstance(system, str):
        system = [{"type": "text", "text": system}]
    for block in system or []:
        out.append((json.dumps(block.get("text", "")), _tokens(block.get("text", "")),
                    "cache_control" in block))
    for msg in body.get("messages") or []:
        content = msg.get("content")
        if isinstance(content, str):
            content = [{"type": "text", "text": content}]
        for block in content or []:
            core = {k: v for k, v in block.items() if k != "cache_control"}
            if block.get("type") == "text":
                n = _tokens(block.get("text", ""))
            elif block.get("type") == "tool_result":
                inner = block.get("content")
                n = _tokens(inner if isinstance(inner, str) else json.dumps(inner))
            else:
                n = _tokens(json.dumps(block.get("input"), separators=(",", ":")))
            out.append((msg.get("role", "") + json.dumps(core, sort_keys=True), n,
                        "cache_control" in block))
    return out


class CacheSim:
    def __init__(self) -> None:
        self.seen: set[str] = set()
        self.lock = threading.Lock()

    def usage(self, body: dict[str, Any]) -> dict[str, int]:
        segs = segments(body)
        total = sum(n for _j, n, _b in segs)
        h = hashlib.sha256()
        prefix_hashes: list[tuple[int, str, bool]] = []  # (tokens so far, hash, is breakpoint)
        running = 0
        for js, n, bp in segs:
            h.update(js.encode())
            running += n
            prefix_hashes.append((running, h.hexdigest(), bp))
        breakpoints = [(t, d) for t, d, bp in prefix_hashes if bp and t >= MIN_CACHEABLE]
        with self.lock:
            # The API reads the longest cached prefix ending at or before a breakpoint
            # (its 20-block lookback); approximated by any previously seen prefix hash.
            read = max((t for t, d, _bp in prefix_hashes if d in self.seen
                        and t <= (breakpoints[-1][0] if breakpoints else 0)), default=0)
            last_bp = breakpoints[-1][0] if breakpoints else 0
            write = max(last_bp - read, 0)
            for _t, d in breakpoints:
                self.seen.add(d)
        return {"input_tokens": total - read - write, "cache_read_input_tokens": read,
                "cache_creation_input_tokens": write}


# ------------------------------------------------------------------ server


Scripted = Reply | dict | Callable[[dict], "Reply | dict"]


class FakeAnthropic(FakeServer[Scripted]):
    """``with FakeAnthropic() as api: ... api.url ...``; see module docstring."""

    def __init__(self, *, batch_polls: int = 1) -> None:
        super().__init__()
        self.cache = CacheSim()
        self.batch_polls = batch_polls
        self.batches: dict[str, dict[str, Any]] = {}
        # custom_id, params -> a batch result ({"type": "succeeded", "message": {...}} ...)
        self.batch_responder: Callable[[str, dict], dict] | None = None

    def respond(self, rec: Recorded) -> tuple[int, dict[str, str], bytes]:
        reply = self.route(rec)
        if isinstance(reply.body, (dict, list)):
            data, ctype = json.dumps(reply.body).encode(), "application/json"
        elif isinstance(reply.body, bytes):
            data, ctype = reply.body, "application/octet-stream"
        else:
            data, ctype = str(reply.body or "").encode(), "application/json"
        return reply.status, {"content-type": ctype, **reply.headers}, data

    # -- scripting

    def message_requests(self) -> list[dict[str, Any]]:
        return [r.body for r in self.requests if r.method == "POST" and r.path.startswith("/v1/messages")
                and not r.path.startswith("/v1/messages/batches")]

    # -- routing

    def route(self, rec: Recorded) -> Reply:
        path = rec.path.split("?", 1)[0]
        if rec.method == "POST" and path == "/v1/messages":
            return self._messages(rec.body or {})
        if rec.method == "POST" and path == "/v1/messages/batches":
            return self._batch_create(rec.body or {})
        if rec.method == "GET" and path.startswith("/v1/messages/batches/"):
            rest = path[len("/v1/messages/batches/"):]
            if rest.endswith("/results"):
                return self._batch_results(rest[: -len("/results")])
            return self._batch_get(rest)
        return error(404, f"no route {rec.method} {path}", kind="not_found_error")

    def _messages(self, body: dict[str, Any]) -> Reply:
        scripted = self.next_scripted()
        if scripted is None:
            return error(500, "fake server: no scripted response left")
        if callable(scripted):
            scripted = scripted(body)
        reply = scripted if isinstance(scripted, Reply) else Reply(200, scripted)
        if reply.status == 200 and isinstance(reply.body, dict):
            reply = Reply(200, self.complete(body, reply.body), reply.headers)
            if body.get("stream"):
                reply = Reply(200, sse_stream(reply.body),
                              {**reply.headers, "content-type": "text/event-stream"})
        return reply

    def complete(self, request: dict[str, Any], msg: dict[str, Any]) -> dict[str, Any]:
        """Fill model and usage of a scripted message from the request."""
        msg = dict(msg)
        msg.setdefault("model", request.get("model", "claude-sonnet-4-5"))
        if "usage" not in msg:
            usage = self.cache.usage(request)
            usage["output_tokens"] = max(1, _tokens(json.dumps(msg.get("content"))))
            msg["usage"] = usage
        return msg

    # -- batches

    def _batch_object(self, batch_id: str) -> dict[str, Any]:
        b = self.batches[batch_id]
        now = datetime.now(timezone.utc)
        ended = b["polls_left"] <= 0
        counts = {"processing": 0 if ended else len(b["requests"]), "succeeded": 0,
                  "errored": 0, "canceled": 0, "expired": 0}
        if ended:
            for result in b["results"].values():
                counts[result["type"]] = counts.get(result["type"], 0) + 1
        return {
            "id": batch_id, "type": "message_batch",
            "processing_status": "ended" if ended else "in_progress",
            "request_counts": counts,
            "created_at": b["created_at"], "expires_at": (now + timedelta(days=1)).isoformat(),
            "ended_at": now.isoformat() if ended else None,
            "cancel_initiated_at": None, "archived_at": None,
            "results_url": f"{self.url}/v1/messages/batches/{batch_id}/results" if ended else None,
        }

    def _batch_create(self, body: dict[str, Any]) -> Reply:
        with self._lock:
            scripted = self.queue.popleft() if self.queue else None
        if isinstance(scripted, Reply) and scripted.status != 200:
            return scripted
        requests = body.get("requests") or []
        batch_id = f"msgbatch_{next(_ids):08d}"
        results = {}
        for item in requests:
            cid, params = item["custom_id"], item["params"]
            if self.batch_responder is None:
                result = {"type": "errored", "error": {"type": "error", "error": {
                    "type": "api_error", "message": "no batch responder"}}}
            else:
                result = self.batch_responder(cid, params)
            if result.get("type") == "succeeded":
                result = {**result, "message": self.complete(params, result["message"])}
            results[cid] = result
        with self._lock:
            self.batches[batch_id] = {"requests": requests, "results": results,
                                      "polls_left": self.batch_polls,
                                      "created_at": datetime.now(timezone.utc).isoformat()}
        return Reply(200, self._batch_object(batch_id))

    def _batch_get(self, batch_id: str) -> Reply:
        with self._lock:
            if batch_id not in self.batches:
                return error(404, f"no batch {batch_id}", kind="not_found_error")
            obj = self._batch_object(batch_id)
            self.batches[batch_id]["polls_left"] -= 1
        return Reply(200, obj)

    def _batch_results(self, batch_id: str) -> Reply:
        b = self.batches.get(batch_id)
        if b is None or b["polls_left"] > 0:
            return error(404, "results not ready", kind="not_found_error")
        lines = [json.dumps({"custom_id": cid, "result": res}) for cid, res in b["results"].items()]
        return Reply(200, ("\n".join(lines) + "\n").encode(),
                     {"content-type": "application/binary"})
