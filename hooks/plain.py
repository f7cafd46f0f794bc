"""Plain chat transcripts: JSONL of ``{"role", "content"[, "timestamp"]}``.

For tests, benchmarks and hosts without a transcript file of their own (dualtrace
logs their hook payloads in this shape). Roles: user, assistant, tool, system.
"""

from __future__ import annotations

TYPE_CHECKING = False  # typing costs ~4 ms: this module is on the hook fast path
if TYPE_CHECKING:
    from typing import Any

    from dualtrace.encoder.session import Session

HOST = "plain"
PREFILTER_TYPES: frozenset[bytes] = frozenset()  # record types the line reader may drop unparsed


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for item in content:
            if isinstance(item, str):
                parts.append(item)
            elif isinstance(item, dict) and isinstance(item.get("text"), str):
                parts.append(item["text"])
        return "\n".join(parts)
    return ""


def read(reader: Any, *, last_assistant_message: str | None = None) -> Session:
    from dualtrace.encoder.session import SessionBuilder

    b = SessionBuilder(HOST, str(reader.path))
    for rec in reader.records():
        add_record(b, rec)
    b.add_stop_message(last_assistant_message)
    return b.finish(reader)


def add_record(b: Any, rec: dict[str, Any]) -> None:
    """One ``{"role", "content"}`` line into a SessionBuilder (Letta's reader shares it
    for the payload log dualtrace keeps when the host wrote no transcript)."""
    from dualtrace.encoder.session import (
        MAX_RESULT_CHARS,
        MAX_TEXT_CHARS,
        Event,
        truncate_middle,
    )
    ts = rec.get("timestamp") if isinstance(rec.get("timestamp"), str) else None
    b.saw_time(ts)
    if b.session_id is None and isinstance(rec.get("session_id"), str):
        b.session_id = rec["session_id"]
    if isinstance(rec.get("cwd"), str):
        b.cwd = b.cwd or rec["cwd"]
    role = rec.get("role")
    text = _text(rec.get("content")).strip()
    if not text:
        return
    if role == "user":
        b.add(Event("user", ts, text=truncate_middle(text, MAX_TEXT_CHARS)))
    elif role == "assistant":
        b.add(Event("assistant", ts, text=truncate_middle(text, MAX_TEXT_CHARS)))
    elif role == "tool":
        name = rec.get("name") if isinstance(rec.get("name"), str) else "tool"
        b.add(Event("tool", ts, tool=name, result=truncate_middle(text, MAX_RESULT_CHARS)))
    else:
        b.noise[f"role:{role}"] += 1
