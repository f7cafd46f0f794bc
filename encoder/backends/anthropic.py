"""The Anthropic tool-use sub-agent: a model reads the digest and proposes memories.

The model only *proposes*: every store/update/skip call goes through the plan
validator (``PlanBuilder.add``), and a refusal goes back as an ``is_error``
tool_result with the validator's reason so the model can correct itself. The
tools cannot delete, rename or write outside the memory directory.

Cost: the system prompt and tool definitions are a cached prefix (``cache_control``
on the system block), and the conversation carries a moving cache breakpoint on
the newest user turn, so turn N re-reads turns 1..N-1 from the cache.

Retries (a deliberate choice): the SDK's own retries are off (``max_retries=0``)
and this module retries 408/409/429/5xx/529 and connection errors itself, with
exponential backoff and jitter, honouring ``retry-after-ms`` / ``retry-after``,
and never past the wall-clock budget (``timeout_seconds``). One policy in one
place, bounded by one deadline - the SDK's retries would not know the deadline.

Bounds: ``max_turns`` requests, ``max_output_tokens`` per request, and the wall
clock. A model failure (retries exhausted, deadline, auth) raises BackendError
before anything is written: the builder only holds pending operations, which
the pipeline applies after ``encode`` returns. Reaching ``max_turns`` is not a
failure: operations the validator already accepted are kept (each was validated
on its own), the run report notes the cap.

``anthropic`` is imported only inside the call path (it costs about a second).
"""

from __future__ import annotations

import json
import time
from typing import TYPE_CHECKING, Any

from dualtrace.config import Settings, api_key
from dualtrace.encoder.backends import EncodeRequest, Usage, api_tokens, spend
from dualtrace.encoder.backends.pricing import cost_usd, estimate_request_tokens, estimate_tokens
from dualtrace.errors import BackendError, DualtraceError
from dualtrace.memfs.types import MEMORY_TYPES
from dualtrace.retry import Retry

if TYPE_CHECKING:
    from dualtrace.encoder.plan import PlanBuilder

RETRYABLE_STATUS = frozenset({408, 409, 429, 500, 502, 503, 504, 529})
SEARCH_LIMIT = 8
READ_LIMIT = 12000  # characters of one memory file returned to the model
MAX_INDEX = 40  # memories listed in the user turn

_SCORES_SCHEMA = {
    "type": "object",
    "description": "evidence score, each dimension an integer 0-3",
    "properties": {k: {"type": "integer", "minimum": 0, "maximum": 3}
                   for k in ("durability", "scope", "rationale", "retrieval")},
    "required": ["durability", "scope", "rationale", "retrieval"],
}
_MOMENT_SCHEMA = {
    "type": "object",
    "description": "the scene, for FULL memories only; no invented specifics",
    "properties": {
        "narrative": {"type": "string", "description": "one paragraph: who, what, where in the code, when, why"},
        "what": {"type": "string", "description": "what happened (Timeline line)"},
        "marker": {"type": "string", "description": "temporal marker: commit, PR, release or session date"},
        "prior": {"type": "string"},
        "after": {"type": "string"},
    },
    "required": ["narrative", "what", "marker"],
}
_CONFIDENCE = {"type": "string", "enum": ["HIGH", "MEDIUM", "LOW"]}

TOOLS: list[dict[str, Any]] = [
    {
        "name": "search_memory",
        "description": "Search stored memories by subject words. Returns path | type | confidence | description lines.",
        "input_schema": {
            "type": "object",
            "properties": {"query": {"type": "string"},
                           "limit": {"type": "integer", "minimum": 1, "maximum": 20}},
            "required": ["query"],
        },
    },
    {
        "name": "read_memory",
        "description": "Read one memory file by its path in the memory directory (e.g. incidents/auth-timeout.md).",
        "input_schema": {"type": "object", "properties": {"path": {"type": "string"}},
                         "required": ["path"]},
    },
    {
        "name": "store_memory",
        "description": "Store a new memory. The path is derived from type and anchor. If the subject already exists the validator turns this into an update.",
        "input_schema": {
            "type": "object",
            "properties": {
                "type": {"type": "string", "enum": [t.name for t in MEMORY_TYPES]},
                "anchor": {"type": "string", "description": "lowercase-hyphenated, <= 64 chars, no type prefix"},
                "description": {"type": "string"},
                "body": {"type": "string"},
                "scores": _SCORES_SCHEMA,
                "confidence": _CONFIDENCE,
                "status": {"type": "string"},
                "related": {"type": "array", "items": {"type": "string"}},
                "moment": _MOMENT_SCHEMA,
                "supersedes": {"type": "string", "description": "path of a stored decision this one contradicts"},
                "bullet": {"type": "string", "description": "conventions/preferences: the bullet text"},
            },
            "required": ["type", "anchor", "description", "body", "scores"],
        },
    },
    {
        "name": "update_memory",
        "description": "Update a stored fact in place (never renames). Appends a dated body paragraph and optionally a Timeline entry (what + marker).",
        "input_schema": {
            "type": "object",
            "properties": {
                "target": {"type": "string", "description": "path or anchor of the stored fact"},
                "reason": {"type": "string"},
                "body": {"type": "string"},
                "description": {"type": "string"},
                "confidence": _CONFIDENCE,
                "confidence_reason": {"type": "string"},
                "status": {"type": "string"},
                "what": {"type": "string"},
                "marker": {"type": "string"},
                "moment": _MOMENT_SCHEMA,
                "scores": _SCORES_SCHEMA,
            },
            "required": ["target", "reason"],
        },
    },
    {
        "name": "skip",
        "description": "Record that a notable event is deliberately not encoded, and why.",
        "input_schema": {
            "type": "object",
            "properties": {"reason": {"type": "string"}, "subject": {"type": "string"},
                           "scores": _SCORES_SCHEMA},
            "required": ["reason"],
        },
    },
    {
        "name": "finish",
        "description": "End the encoding run with a one-line summary of what you stored, and "
                       "optionally a session_summary for the session's record.",
        "input_schema": {"type": "object", "properties": {
            "summary": {"type": "string"},
            "session_summary": {
                "type": "string",
                "description": "One short plain paragraph (at most 600 characters): what the "
                               "session set out to do, what it did or concluded, what was "
                               "left open. Only what the session shows: every path, number, "
                               "commit or error name must be in it. Shown in the session "
                               "record, marked as yours."},
        }},
    },
]


# ------------------------------------------------------------------ prompts


def system_text(mode: str = "tools") -> str:
    from dualtrace.prompts import render

    return render("encoder_system.j2", mode=mode, types=MEMORY_TYPES)


def _text_of(obj: Any) -> str:
    """The digest as text, whatever shape the digest stage hands over."""
    if obj is None:
        return ""
    if isinstance(obj, str):
        return obj
    for attr in ("text", "rendered"):
        value = getattr(obj, attr, None)
        if isinstance(value, str):
            return value
    render = getattr(obj, "render", None)
    if callable(render):
        return str(render())
    return str(obj)


def _gates_text(gates: Any) -> str:
    if gates is None:
        return ""
    parts = []
    for attr in ("min_tier", "reasons", "signals"):
        value = getattr(gates, attr, None)
        if value:
            parts.append(f"{attr}={', '.join(map(str, value)) if isinstance(value, (list, tuple, set, frozenset)) else value}")
    return "; ".join(parts)


def user_text(request: EncodeRequest) -> str:
    from dualtrace.encoder.redact import redact_text
    from dualtrace.prompts import render

    session = request.session
    # The digest is redacted already; the memories shown beside it come from files a
    # person may have edited: the whole turn passes the redactor once more.
    return redact_text(render(
        "encoder_user.j2",
        session_id=request.ctx.session_id or getattr(session, "session_id", None) or "unknown",
        host=getattr(session, "host", None) or "session",
        date=request.ctx.date,
        project=request.ctx.project,
        gates=_gates_text(request.gates),
        memories=list(request.memories[:MAX_INDEX]),
        digest=_text_of(request.digest).strip(),
    ))


def _params(request: EncodeRequest, mode: str) -> dict[str, Any]:
    settings = request.settings
    return {
        "model": settings.model,
        "max_tokens": settings.max_output_tokens,
        "system": [{"type": "text", "text": system_text(mode),
                    "cache_control": {"type": "ephemeral"}}],
        "tools": TOOLS,
        "messages": [{"role": "user", "content": [{"type": "text", "text": user_text(request)}]}],
    }


def build_params(request: EncodeRequest, *, mode: str = "tools") -> dict[str, Any]:
    """The first request body (pure: no SDK, no network). Used live and for batches.

    The whole turn-1 prompt (tools + system + index + digest) is kept within
    ``settings.prompt_budget`` estimated tokens (default 9,500): when the digest
    the pipeline built does not fit next to the prefix, it is rebuilt smaller
    from the (already redacted) session.
    """
    params = _params(request, mode)
    limit = request.settings.prompt_budget
    session = request.session
    for _ in range(3):
        over = estimate_request_tokens(params) - limit
        if over <= 0 or session is None or not hasattr(session, "events"):
            break
        from dataclasses import replace

        from dualtrace.encoder.digest import build_digest

        current = estimate_tokens(_text_of(request.digest))
        request = replace(request, digest=build_digest(session, max(current - over - 50, 300)))
        params = _params(request, mode)
    return params


# ------------------------------------------------------------------ tools


MAX_TOOL_CALLS = 150  # per session, every tool (the builder caps the writes among them)
# The calls that say what becomes of the session; a run with none of them stored nothing
# and decided nothing (searches and reads alone are not a decision).
PROPOSALS = frozenset({"store_memory", "update_memory", "skip", "finish"})
# Sent once when the model answers in text before proposing anything, with tool_choice
# "any" on that one request (the API then requires a tool call).
NUDGE = ("You answered in text. Nothing is stored from text: use the tools. Call "
         "store_memory or update_memory for each event worth keeping, skip for what is "
         "deliberately left out, then finish (finish alone if nothing in the session is "
         "worth keeping).")


class MemoryTools:
    """Executes the model's tool calls against the builder; nothing is written here."""

    def __init__(self, builder: PlanBuilder) -> None:
        self.builder = builder
        self.finished = False
        self.summary = ""
        self.rejected = 0
        self.accepted = 0
        self.calls = 0
        self.proposals = 0  # store/update/skip/finish calls, refused or not


    def run(self, name: str, raw_input: Any) -> tuple[str, bool]:
        """(tool_result content, is_error)."""
        from dualtrace.encoder.operations import Rejected  # noqa: F401 - DualtraceError covers it

        self.calls += 1
        if name in PROPOSALS:
            self.proposals += 1
        if self.calls > MAX_TOOL_CALLS and name != "finish":
            # Reads too: each answer rides in every later request of the conversation.
            self.rejected += 1
            return (f"tool-call cap reached ({MAX_TOOL_CALLS} calls in this session); "
                    "call finish"), True
        if self.finished and name != "finish":
            self.rejected += 1
            return "finish was called: nothing more is accepted in this session", True
        data = raw_input
        if isinstance(data, str):
            try:
                data = json.loads(data)
            except ValueError:
                self.rejected += 1
                return "tool input is not valid JSON; send an object matching the schema", True
        if not isinstance(data, dict):
            self.rejected += 1
            return "tool input must be a JSON object matching the schema", True
        handler = getattr(self, f"_t_{name}", None)
        if handler is None:
            self.rejected += 1
            return (f"unknown tool {name!r}; available: search_memory, read_memory, "
                    "store_memory, update_memory, skip, finish (nothing can be deleted)"), True
        from dualtrace.encoder.redact import redact_text

        # Everything read back to the model passes the redactor that cleaned the
        # session: a memory file a person edited by hand may hold a credential.
        try:
            return redact_text(handler(data)), False
        except DualtraceError as exc:  # Rejected, PathError, ...: the model can act on it
            self.rejected += 1
            return redact_text(f"rejected: {exc}"), True

    # -- read-only

    def _t_search_memory(self, data: dict[str, Any]) -> str:
        query = data.get("query")
        if not isinstance(query, str) or not query.strip():
            raise DualtraceError("'query' is required")
        limit = data.get("limit", SEARCH_LIMIT)
        limit = limit if isinstance(limit, int) and 0 < limit <= 20 else SEARCH_LIMIT
        hits = self._search(query, limit)
        if not hits:
            return "no matching memories"
        return "\n".join(hits)

    def _search(self, query: str, limit: int) -> list[str]:
        from dualtrace.encoder.matching import similarity

        scored = []
        for fact in self.builder.facts():
            text = f"{fact.anchor.replace('-', ' ')} {fact.description} {fact.body[:400]}"
            score = similarity(query, text)
            if score > 0:
                scored.append((score, fact.path, fact))
        scored.sort(key=lambda t: (-t[0], t[1]))
        return [f"{path} | {f.type} | {f.confidence} | {f.description}"
                for _s, path, f in scored[:limit]]

    def _t_read_memory(self, data: dict[str, Any]) -> str:
        from dualtrace.memfs import formats

        rel = data.get("path")
        if not isinstance(rel, str) or not rel.strip():
            raise DualtraceError("'path' is required")
        rel = rel.strip()
        if not rel.endswith(".md"):
            rel += ".md"
        store = self.builder.store
        store.path(rel)  # confinement: raises PathError for ../ or absolute paths
        pending = self.builder.pending.get(rel)
        if pending is not None:
            text = formats.render_memory(pending)
        elif rel in set(store.iter_files()):
            text = store.read_text(rel)
        else:
            raise DualtraceError(f"no memory file {rel}")
        return text[:READ_LIMIT]

    # -- proposals

    def _outcome(self, outcome: Any) -> str:
        self.accepted += 1
        return "accepted: " + json.dumps(outcome.to_dict(), separators=(",", ":"))

    def _t_store_memory(self, data: dict[str, Any]) -> str:
        from dualtrace.encoder.operations import parse_store

        return self._outcome(self.builder.add(parse_store(data)))

    def _t_update_memory(self, data: dict[str, Any]) -> str:
        from dualtrace.encoder.operations import parse_update

        return self._outcome(self.builder.add(parse_update(data)))

    def _t_skip(self, data: dict[str, Any]) -> str:
        from dualtrace.encoder.operations import parse_skip

        return self._outcome(self.builder.add(parse_skip(data)))

    def _t_finish(self, data: dict[str, Any]) -> str:
        from dualtrace.encoder.redact import redact_text

        paragraph = data.get("session_summary")
        if isinstance(paragraph, str) and paragraph.strip():
            # Checked before finishing: a refused summary is reported like any refused
            # call, and the model may call finish again (with a fixed one or none).
            self.builder.set_summary(redact_text(paragraph))
        self.finished = True
        summary = data.get("summary")
        self.summary = redact_text(summary.strip()[:500]) if isinstance(summary, str) else ""
        return "done"


# ------------------------------------------------------------------ responses


def message_dict(message: Any) -> dict[str, Any]:
    """An SDK Message (or a dict from a batch result file) as a plain dict."""
    if isinstance(message, dict):
        return message
    dump = getattr(message, "model_dump", None)
    if callable(dump):
        return dump(mode="json", exclude_none=True, warnings=False)
    raise BackendError(f"unexpected response object {type(message).__name__}")


def _assistant_blocks(content: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """What we send back as the assistant turn (only text and tool_use; inputs as objects).

    Redacted like everything else in a request: a credential the model wrote (echoed or
    made up) does not travel back in the conversation either.
    """
    from dualtrace.encoder.redact import redact_text

    def clean(value: Any) -> Any:
        if isinstance(value, str):
            return redact_text(value)
        if isinstance(value, dict):
            return {k: clean(v) for k, v in value.items()}
        if isinstance(value, list):
            return [clean(v) for v in value]
        return value

    out: list[dict[str, Any]] = []
    for block in content:
        kind = block.get("type")
        if kind == "text" and block.get("text"):
            out.append({"type": "text", "text": redact_text(block["text"])})
        elif kind == "tool_use":
            value = block.get("input")
            out.append({"type": "tool_use", "id": block.get("id"), "name": block.get("name"),
                        "input": clean(value) if isinstance(value, dict) else {}})
    return out


def _nudge(messages: list[dict[str, Any]], content: list[dict[str, Any]]) -> None:
    """Add the turns that ask a model which answered in text for tool calls: its text back
    as the assistant turn, then the request. A reply with no text at all cannot be sent
    back (the API refuses an empty assistant turn): the request then joins the user turn
    the model just saw (a copy of it: the first request's params stay as they were)."""
    blocks = _assistant_blocks(content)
    ask = {"type": "text", "text": NUDGE}
    if blocks:
        messages += [{"role": "assistant", "content": blocks}, {"role": "user", "content": [ask]}]
    else:
        messages[-1] = {**messages[-1], "content": [*messages[-1]["content"], ask]}


def _with_breakpoint(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Copy of messages with one cache breakpoint on the newest user turn's last block."""
    out = []
    last_user = max(i for i, m in enumerate(messages) if m["role"] == "user")
    for i, message in enumerate(messages):
        content = [dict(b) for b in message["content"]]
        for block in content:
            block.pop("cache_control", None)
        if i == last_user and content:
            content[-1]["cache_control"] = {"type": "ephemeral"}
        out.append({"role": message["role"], "content": content})
    return out


# ------------------------------------------------------------------ the backend


class AnthropicBackend:
    name = "anthropic"

    def __init__(self, settings: Settings, *,
                 prefetched: tuple[dict[str, Any], Any] | None = None,
                 sleep: Any = time.sleep) -> None:
        self.settings = settings
        # (request params, response) of a turn 1 already answered through the
        # Message Batches API: the loop continues from it instead of calling the
        # API for turn 1, with exactly the prompt the model saw.
        self.prefetched = prefetched
        self._sleep = sleep
        self.retries = settings.api_retries
        self.retry_base = settings.retry_base_seconds
        self.retry_cap = settings.retry_max_seconds
        self.request_timeout = settings.request_timeout_seconds

    # -- client

    def client(self) -> Any:
        key = api_key(self.settings)
        if not key:
            raise BackendError("no Anthropic API key: set ANTHROPIC_API_KEY or api_key in config")
        import anthropic  # only here: the import costs about a second

        kwargs: dict[str, Any] = {"api_key": key, "max_retries": 0,
                                  "timeout": self.request_timeout}
        if self.settings.base_url:
            kwargs["base_url"] = self.settings.base_url
        return anthropic.Anthropic(**kwargs)

    # -- encode

    def encode(self, request: EncodeRequest, builder: PlanBuilder) -> Usage:
        settings = request.settings
        usage = Usage(model=settings.model)
        deadline = time.monotonic() + float(settings.timeout_seconds)
        if self.prefetched is not None:
            params = self.prefetched[0]
        else:
            params = build_params(request)
        tools = MemoryTools(builder)
        messages: list[dict[str, Any]] = list(params["messages"])
        client = None
        batch_turn = False
        nudged = False  # the one request that insists on a tool call (tool_choice any)
        force = False
        why = ""  # why nothing was proposed, when nothing was
        for turn in range(1, max(1, settings.max_turns) + 1):
            if turn == 1 and self.prefetched is not None:
                reply = message_dict(self.prefetched[1])
                batch_turn = True
            else:
                try:
                    spend.check(settings, self.name)  # before every request
                except spend.BudgetExceeded:
                    if turn == 1:
                        raise
                    why = f"daily budget reached after turn {turn - 1}"
                    usage.notes.append(f"{why}: {tools.accepted} accepted operation(s) kept")
                    break
                if client is None:
                    client = self.client()
                body = {**params, "messages": _with_breakpoint(messages)}
                if force:
                    body["tool_choice"] = {"type": "any"}
                    force = False
                reply = message_dict(self._call(client, body, deadline, usage))
            usage.turns = turn
            usage.add_tokens(reply.get("usage"))
            tokens = api_tokens(reply.get("usage"))
            turn_cost = cost_usd(settings.model, batch=batch_turn and turn == 1, **tokens)
            usage.cost_usd += turn_cost
            spend.record(self.name, cost_usd=turn_cost, **tokens)
            content = [b for b in reply.get("content") or [] if isinstance(b, dict)]
            calls = [b for b in content if b.get("type") == "tool_use"]
            if reply.get("stop_reason") == "max_tokens":
                usage.notes.append(f"turn {turn}: output hit max_tokens")
            if not calls:
                if nudged and not tools.proposals:
                    why = "it answered in text again, with a tool call required"
                if tools.proposals or nudged:
                    break  # it ended its turn (after proposing, or after the nudge)
                # Text instead of tool calls: nothing would be stored, and no one would
                # know. Ask once more, with a tool call required.
                nudged = force = True
                usage.notes.append(f"turn {turn}: the model answered in text without "
                                   "calling a tool; asked again with tool_choice any")
                _nudge(messages, content)
                continue
            results = []
            for call in calls:
                text, is_error = tools.run(str(call.get("name")), call.get("input"))
                result: dict[str, Any] = {"type": "tool_result", "tool_use_id": call.get("id"),
                                          "content": text}
                if is_error:
                    result["is_error"] = True
                results.append(result)
            if tools.finished:
                break
            messages.append({"role": "assistant", "content": _assistant_blocks(content)})
            messages.append({"role": "user", "content": results})
        else:
            why = f"max_turns ({settings.max_turns}) reached before finish"
            usage.notes.append(f"{why}: {tools.accepted} accepted operation(s) kept")
        usage.cost_usd = round(usage.cost_usd, 6)
        if not tools.proposals:
            # Never a silent empty result: the session's knowledge would be lost with a
            # commit that looks like "nothing worth keeping". A backend error makes the
            # pipeline encode offline (the worker's default) or report it and keep the
            # session for another attempt (by hand).
            raise BackendError("the model proposed nothing (no store, update, skip or "
                               f"finish call) in {usage.turns} turn(s): {why or 'no reply'}")
        if tools.rejected:
            usage.notes.append(f"{tools.rejected} tool call(s) rejected by the validator")
        if tools.summary:
            usage.notes.append(f"model summary: {tools.summary}")
        return usage

    # -- one request with retries

    def _call(self, client: Any, body: dict[str, Any], deadline: float, usage: Usage) -> Any:
        import anthropic

        policy = self.retry_policy(deadline)
        failures = 0
        while True:
            remaining = policy.left()
            if remaining <= 0:
                raise BackendError(
                    f"model call exceeded the {self.settings.timeout_seconds:.0f}s budget")
            usage.requests += 1
            try:
                return client.messages.create(**body, timeout=min(remaining, self.request_timeout))
            except anthropic.APIStatusError as exc:
                status = exc.status_code
                retry_after = _retry_after(exc.response.headers)
                what = f"HTTP {status}: {_short(exc)}"
                if status not in RETRYABLE_STATUS:
                    raise BackendError(f"Anthropic API refused the request ({what})") from None
            except anthropic.APITimeoutError:
                retry_after, what = None, "request timed out"
            except anthropic.APIConnectionError as exc:
                retry_after, what = None, f"connection error: {_short(exc)}"
            except anthropic.APIError as exc:  # malformed response body and the like
                raise BackendError(f"Anthropic API error: {_short(exc)}") from None
            failures += 1
            if policy.exhausted(failures):
                raise BackendError(f"Anthropic API failed after {failures} attempts ({what})")
            delay = policy.wait(failures, retry_after)
            if not policy.in_time(delay):
                raise BackendError(f"Anthropic API failed ({what}); no time left to retry")
            usage.notes.append(f"retry {failures} after {what}, waiting {delay:.2f}s")
            self._sleep(delay)

    def retry_policy(self, deadline: float | None = None) -> Retry:
        """Capped exponential backoff with equal jitter; a server's retry-after wins."""
        return Retry(base=self.retry_base, cap=self.retry_cap, tries=self.retries + 1,
                     jitter=True, deadline=deadline)

    def backoff(self, attempt: int, retry_after: float | None) -> float:
        """The wait after try ``attempt`` (from 0) failed (the Batch API calls' retries)."""
        return self.retry_policy().wait(attempt + 1, retry_after)


def _retry_after(headers: Any) -> float | None:
    try:
        ms = headers.get("retry-after-ms")
        if ms is not None:
            return max(float(ms) / 1000.0, 0.0)
        sec = headers.get("retry-after")
        if sec is not None:
            return max(float(sec), 0.0)
    except (TypeError, ValueError):
        return None
    return None


def _short(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return text[:200]
