"""OpenAI Codex CLI: hook payloads, the legacy ``notify`` argument, rollout lookup.

Imported on the hook fast path (``normalize``/``from_notify``): standard library only.
"""

from __future__ import annotations

import json
import os

HOST = "codex"


def looks_like_codex(payload: dict) -> bool:
    """Codex hook payloads carry ``turn_id``; notify payloads a ``thread-id``."""
    if "turn_id" in payload or "thread-id" in payload:
        return True
    path = payload.get("transcript_path")
    return isinstance(path, str) and os.path.basename(path).startswith("rollout-")


def normalize(payload: dict, event: str) -> dict:
    transcript = payload.get("transcript_path")
    return {
        "session_id": _str(payload.get("session_id")) or _str(payload.get("thread-id")),
        # transcript_path may be null: the worker then finds the rollout by session id.
        "transcript": _str(transcript),
        "cwd": _str(payload.get("cwd")),
        "agent_id": None,
        "last_assistant_message": _str(payload.get("last_assistant_message"))
        or _str(payload.get("last-assistant-message")),
        "ignore": None,
    }


def from_notify(argument: str) -> dict:
    """The legacy ``notify`` program gets one JSON argument per finished turn."""
    data = json.loads(argument.lstrip("\ufeff"))
    if not isinstance(data, dict):
        raise ValueError("notify argument is not a JSON object")
    if data.get("type") not in (None, "agent-turn-complete"):
        return {"ignore": f"notify type {data.get('type')}"}
    return normalize(data, "stop")


def codex_home() -> str:
    return os.path.expanduser(os.environ.get("CODEX_HOME") or "~/.codex")


def find_rollout(session_id: str, home: str | None = None) -> str | None:
    """``$CODEX_HOME/sessions/YYYY/MM/DD/rollout-<ts>-<session_id>.jsonl``, newest first."""
    import glob  # worker side only; keeps the hook's imports minimal

    root = os.path.join(home or codex_home(), "sessions")
    pattern = os.path.join(root, "*", "*", "*", f"rollout-*{glob.escape(session_id)}.jsonl")
    hits = sorted(glob.glob(pattern), reverse=True)
    return hits[0] if hits else None


def _str(value: object) -> str | None:
    return value if isinstance(value, str) and value.strip() else None
