"""Claude Code hook payloads: normalize stdin JSON into the fields the queue needs.

Imported on the hook fast path: standard library only, nothing heavy.
"""

from __future__ import annotations

import os

HOST = "claude-code"

# Events that belong to a subagent or are not about the main conversation.
_IGNORED_EVENTS = frozenset({"SubagentStop", "SubagentStart", "Notification"})


def normalize(payload: dict, event: str) -> dict:
    """``{"session_id", "transcript", "cwd", "last_assistant_message", "ignore"}``.

    ``ignore`` holds a reason when the hook must do nothing (subagent, sidechain, or
    an event we never act on); the caller logs nothing for it: it is routine.
    """
    name = str(payload.get("hook_event_name") or "")
    transcript = payload.get("transcript_path") or None
    out = {
        "session_id": _str(payload.get("session_id")) or _str(os.environ.get("CLAUDE_CODE_SESSION_ID")),
        "transcript": _str(transcript),
        "cwd": _str(payload.get("cwd")) or _str(os.environ.get("CLAUDE_PROJECT_DIR")),
        "agent_id": None,
        "last_assistant_message": _str(payload.get("last_assistant_message")),
        "ignore": None,
    }
    if name in _IGNORED_EVENTS:
        out["ignore"] = f"event {name}"
    elif payload.get("agent_id") or payload.get("agent_type"):
        # Inside a subagent: its work is part of the parent's transcript already.
        out["ignore"] = "subagent"
    elif out["transcript"] and f"{os.sep}subagents{os.sep}" in out["transcript"]:
        out["ignore"] = "subagent transcript"
    elif payload.get("isSidechain"):
        out["ignore"] = "sidechain"
    return out


def project_transcripts(transcript: str) -> list[str]:
    """Every main-session transcript next to ``transcript`` (its project folder)."""
    folder = os.path.dirname(transcript)
    try:
        names = os.listdir(folder)
    except OSError:
        return []
    return sorted(os.path.join(folder, n) for n in names if n.endswith(".jsonl"))


def _str(value: object) -> str | None:
    return value if isinstance(value, str) and value.strip() else None
