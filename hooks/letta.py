"""Letta Code: its Stop payloads carry no transcript, so dualtrace keeps one.

This module is the Letta ``Host`` (hooks/host.py); standard library only.

Each Stop (user + assistant message) and PostToolUse (tool call) payload is appended
to ``<state>/letta/<conversation>.jsonl`` in the plain chat format
(``{"role", "content"}`` per line), which the transcript reader understands; the
session is encoded from that file. Imported on the hook fast path: stdlib only.

That file is in the state dir, where no secret may land, so nothing is written by the
hook itself: ``normalize`` turns a payload into ``lines``, and dualtrace.hookcmd hands
them to a detached child that redacts them and then, in the order the hooks arrived,
calls ``keep`` (the redactor costs ~0.3 s to load, far over a hook's budget).
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

HOST = NAME = "letta"
TRANSCRIPT_FORMAT = "plain"  # the file append() writes
# Letta hook event -> (our event, timeout seconds, matcher or None); PostToolUse feeds
# the transcript dualtrace keeps.
EVENTS: dict[str, tuple[str, int, str | None]] = {
    "Stop": ("stop", 10, None),
    "PostToolUse": ("post-tool-use", 5, None),
    "SessionEnd": ("session-end", 5, None),
    "SessionStart": ("session-start", 10, None),
    "UserPromptSubmit": ("prompt", 5, None),
}
TIMEOUT_UNIT = 1000  # Letta's settings count milliseconds
SCOPES = ("user", "project", "local")
REQUIRES_TRANSCRIPT = False
SWEEP_ON_START = False  # session-start re-checks the sessions next to the transcript
KEEPS_OWN_TRANSCRIPT = True
DIR = "letta"
MAX_FIELD_CHARS = 200_000


def conversation_key(payload: dict) -> str:
    """Stop payloads lack the conversation id; fall back to the agent id (see below)."""
    for key in ("conversation_id", "session_id"):
        value = payload.get(key)
        if isinstance(value, str) and value.strip():
            return value
    env = os.environ.get("LETTA_CONVERSATION_ID")
    if env:
        return env
    return agent_id(payload) or "letta"


def agent_id(payload: dict) -> str | None:
    value = payload.get("agent_id") or os.environ.get("LETTA_AGENT_ID")
    return value if isinstance(value, str) and value.strip() else None


def transcript_path(state: str, key: str) -> str:
    safe = "".join(c if (c.isascii() and (c.isalnum() or c in "-_.")) else "_" for c in key)
    return os.path.join(state, DIR, (safe.strip(".") or "letta") + ".jsonl")


def resolve_transcript(state: str, payload: dict) -> tuple[str, str | None]:
    """The conversation's file, and the key it was adopted from (else None).

    Stop payloads carry no conversation id, so their lines go to an agent-keyed file;
    the first payload that names the conversation renames that file to it.
    """
    key = conversation_key(payload)
    path = transcript_path(state, key)
    agent = agent_id(payload)
    if agent and agent != key and not os.path.exists(path):
        fallback = transcript_path(state, agent)
        if os.path.exists(fallback):
            try:
                os.replace(fallback, path)
            except OSError:
                return fallback, None
            return path, agent
    return path, None


def records(payload: dict, event: str) -> list[dict]:
    """Plain-chat lines for one payload (raw text: redacted before ``keep`` writes it)."""
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    out: list[dict] = []
    if event == "stop":
        for role, key in (("user", "user_message"), ("assistant", "assistant_message")):
            text = payload.get(key)
            if isinstance(text, str) and text.strip():
                out.append({"role": role, "content": text[:MAX_FIELD_CHARS], "timestamp": now})
    elif event == "post-tool-use":
        name = payload.get("tool_name") or "tool"
        tool_input = json.dumps(payload.get("tool_input"), ensure_ascii=False)[:MAX_FIELD_CHARS]
        result = payload.get("tool_result")
        if not isinstance(result, str):
            result = json.dumps(result, ensure_ascii=False)
        out.append({"role": "assistant", "timestamp": now,
                    "content": f"[tool {name}] {tool_input}\n[result] {result[:MAX_FIELD_CHARS]}"})
    return out


def keep(state: str, payload: dict, lines: list[dict]) -> tuple[str, str | None]:
    """Append already-redacted ``lines`` to the conversation's transcript; returns its
    path and the session id of the agent-keyed file it adopted (else None)."""
    path, adopted = resolve_transcript(state, payload)
    if lines:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        data = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in lines).encode("utf-8")
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        try:
            os.write(fd, data)
        finally:
            os.close(fd)
    return path, adopted


def memfs_dir(agent: str | None) -> str | None:
    """``~/.letta/agents/<agent_id>/memory`` when it exists (the agent's own memfs)."""
    if not agent:
        return None
    path = os.path.expanduser(os.path.join("~", ".letta", "agents", agent, "memory"))
    return path if os.path.isdir(path) else None


def detect(payload: dict) -> bool:
    # Letta Code's hook input names the event ``event_type`` and the cwd
    # ``working_directory`` (Claude Code: hook_event_name / cwd).
    return bool(os.environ.get("LETTA_HOOK_EVENT")) or "working_directory" in payload \
        or "conversation_id" in payload or ("event_type" in payload
                                            and "hook_event_name" not in payload)


def normalize(payload: dict, event: str, state: str) -> dict:
    """Writes nothing: Stop and PostToolUse text comes back as ``lines`` (raw), and
    every event that touches the transcript is finished by ``keep`` in the hook's
    detached child (which also adopts the agent-keyed file; see ``resolve_transcript``)."""
    return {
        "session_id": conversation_key(payload),
        "transcript": transcript_path(state, conversation_key(payload)),
        "cwd": payload.get("working_directory") or os.environ.get("LETTA_WORKING_DIR")
        or payload.get("cwd"),
        "agent_id": agent_id(payload),
        "ignore": None,
        "lines": records(payload, event) if event in ("stop", "post-tool-use") else [],
    }


def context_output(event: str, text: str) -> str:
    """Letta Code reads the same hookSpecificOutput shape as Claude Code."""
    from dualtrace.hooks import claude_code

    return claude_code.context_output(event, text)


def settings_path(scope: str, root: Path, home: Path) -> Path:
    return {"user": home / ".letta" / "settings.json",
            "project": root / ".letta" / "settings.json",
            "local": root / ".letta" / "settings.local.json"}[scope]


def project_transcripts(root: Path) -> list[Path]:
    return []  # kept per conversation in the state dir, with no project of their own


def find_transcript(session_id: str) -> str | None:
    return None


def session_of(transcript: str) -> str:
    return os.path.basename(transcript).removesuffix(".jsonl")


def sibling_transcripts(transcript: str) -> list[str]:
    return []


def memory_dir(agent_id: str | None) -> str | None:
    return memfs_dir(agent_id)
