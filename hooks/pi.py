"""Pi (the pi coding agent, badlogic/pi-mono): its session files, read.

``~/.pi/agent/sessions/--<cwd with / as ->--/<timestamp>_<uuid>.jsonl`` (pi-mono
packages/coding-agent/docs/session.md). The first line is a header ``{"type":
"session", "version", "id", "timestamp", "cwd"}``; every later line is a tree node
with ``id`` and ``parentId``: ``message`` entries carry an AgentMessage (``user``,
``assistant`` with text / thinking / toolCall blocks, ``toolResult`` joined to its call
by ``toolCallId``, ``bashExecution`` for the user's own ``!command``, ``custom`` from
extensions, ``branchSummary`` / ``compactionSummary``), beside ``compaction``,
``branch_summary``, ``custom_message``, ``model_change``, ``label`` and the like.

The tree matters: ``/tree`` moves the leaf back to an earlier entry and the next
message starts a new branch beside the old one, in the same file. What the agent
works from is the path from the last entry back to the root, so that path is the
session; entries on abandoned branches are counted as noise (their account reaches
the session through the ``branch_summary`` pi writes when it leaves one).

Pi is a transcript format, not a host: its extensions are TypeScript modules, and
dualtrace installs nothing into it. ``dualtrace encode`` reads its sessions.
"""

from __future__ import annotations

import re
from typing import Any

from dualtrace.encoder.session import (
    MAX_RESULT_CHARS,
    MAX_TEXT_CHARS,
    Event,
    Session,
    truncate_middle,
)
from dualtrace.hooks import toolcalls
from dualtrace.hooks.toolcalls import Call, string

HOST = "pi"
PREFILTER_TYPES: frozenset[bytes] = frozenset()

# pi's built-in tools (packages/coding-agent/src/core/tools) -> toolcalls kinds.
_KINDS = {"bash": "shell", "write": "write", "edit": "edit", "apply_patch": "patch"}
# The bash tool reports a failing command in its (error) result text.
_EXIT = re.compile(r"(?:Command exited with code|exit code:?)\s*(-?\d+)", re.I)
# What pi puts into a user message on the user's behalf: a skill's text (/skill:name)
# and a file attached with @path. Context, never the user's words.
_INSERTED = re.compile(r"<(skill|file)\b[^>]*>.*?</\1>", re.S)


def read(reader: Any, *, last_assistant_message: str | None = None) -> Session:
    from dualtrace.encoder.session import SessionBuilder

    b = SessionBuilder(HOST, str(reader.path))
    entries: list[dict[str, Any]] = []
    for rec in reader.records():
        rtype = rec.get("type")
        if rtype == "session":
            _header(b, rec)
        elif isinstance(rtype, str) and isinstance(rec.get("id"), str):
            entries.append(rec)
        else:
            b.noise[f"record:{rtype}"] += 1
    if reader.cursor > 0 and b.session_id is None:
        _header_of(reader.path, b)
    on_path = _active_path(entries)
    calls: dict[str, dict[str, Any]] = {}
    for rec in entries:
        if rec["id"] not in on_path:
            b.noise["abandoned-branch"] += 1
            continue
        _entry(b, rec, calls)
    for call_id, call in calls.items():  # a call whose result is not in the file (yet)
        b.add(Event("tool", call["ts"], text=toolcalls.summary(call["args"]), tool=call["name"],
                    uuid=call_id, detail="no result"))
    b.add_stop_message(last_assistant_message)
    return b.finish(reader)


def _header(b: Any, rec: dict[str, Any]) -> None:
    if isinstance(rec.get("id"), str):
        b.session_id = rec["id"]
    if isinstance(rec.get("cwd"), str) and rec["cwd"].strip():
        b.cwd = rec["cwd"]
    b.saw_time(rec.get("timestamp") if isinstance(rec.get("timestamp"), str) else None)


def _header_of(path: Any, b: Any) -> None:
    """On a read from a cursor, the session id and cwd still come from the header."""
    import json

    from dualtrace.hooks.transcripts import first_line

    try:
        first = json.loads(first_line(path))
    except (OSError, ValueError):
        return
    if isinstance(first, dict) and first.get("type") == "session":
        started, ended = b.started, b.ended
        _header(b, first)
        b.started, b.ended = started, ended  # this read's time bounds, not the file's


def _active_path(entries: list[dict[str, Any]]) -> set[str]:
    """Ids on the path from the last entry (the leaf) back to the root. An entry whose
    parent is not in this read (before the cursor) ends the walk."""
    if not entries:
        return set()
    parent = {e["id"]: e.get("parentId") for e in entries}
    path: set[str] = set()
    node: Any = entries[-1]["id"]
    while isinstance(node, str) and node in parent and node not in path:
        path.add(node)
        node = parent[node]
    return path


def _entry(b: Any, rec: dict[str, Any], calls: dict[str, dict[str, Any]]) -> None:
    ts = rec.get("timestamp") if isinstance(rec.get("timestamp"), str) else None
    b.saw_time(ts)
    rtype = rec["type"]
    if rtype == "message" and isinstance(rec.get("message"), dict):
        _message(b, rec["message"], ts, rec["id"], calls)
    elif rtype in ("compaction", "branch_summary") and isinstance(rec.get("summary"), str):
        b.add(Event("compaction", ts, text=truncate_middle(rec["summary"], MAX_TEXT_CHARS),
                    detail=rtype, uuid=rec["id"]))
    elif rtype == "custom_message":
        _context(b, "extension", rec.get("customType"), rec.get("content"), ts, rec["id"])
    else:
        b.noise[rtype] += 1


def _context(b: Any, tool: str, name: Any, content: Any, ts: str | None, uid: str) -> None:
    """Text an extension or pi itself added to the conversation: evidence, not words."""
    text = toolcalls.text_of(content).strip()
    if text:
        b.add(Event("tool", ts, text=str(name or tool), tool=tool, detail="injected",
                    result=truncate_middle(text, MAX_RESULT_CHARS), uuid=uid))
    else:
        b.noise[tool] += 1


def _message(b: Any, msg: dict[str, Any], ts: str | None, uid: str,
             calls: dict[str, dict[str, Any]]) -> None:
    role = msg.get("role")
    if role == "user":
        text = toolcalls.text_of(msg.get("content"))
        for inserted in _INSERTED.finditer(text):
            _context(b, "attachment", inserted.group(1), inserted.group(0), ts, uid)
        text = _INSERTED.sub("", text).strip()
        if text:
            b.add(Event("user", ts, text=truncate_middle(text, MAX_TEXT_CHARS), uuid=uid))
        else:
            b.noise["user:empty"] += 1
    elif role == "assistant":
        _assistant(b, msg, ts, uid, calls)
    elif role == "toolResult":
        _result(b, msg, ts, calls)
    elif role == "bashExecution":
        command = string(msg.get("command"))
        code = msg.get("exitCode") if isinstance(msg.get("exitCode"), int) else None
        output = string(msg.get("output"))
        if command.strip():
            # The user's own `!command`: something they ran, like Claude Code's `!` runs.
            b.add(Event("command", ts, text="run by the user", tool="user-shell",
                        command=command, exit_code=None if msg.get("cancelled") else code,
                        is_error=code not in (None, 0),
                        result=truncate_middle(output, MAX_RESULT_CHARS), uuid=uid))
    elif role in ("branchSummary", "compactionSummary") and isinstance(msg.get("summary"), str):
        b.add(Event("compaction", ts, text=truncate_middle(msg["summary"], MAX_TEXT_CHARS),
                    detail=role, uuid=uid))
    elif role == "custom":
        _context(b, "extension", msg.get("customType"), msg.get("content"), ts, uid)
    else:
        b.noise[f"message:{role}"] += 1


def _assistant(b: Any, msg: dict[str, Any], ts: str | None, uid: str,
               calls: dict[str, dict[str, Any]]) -> None:
    content = msg.get("content")
    if isinstance(content, str):
        content = [{"type": "text", "text": content}]
    for n, block in enumerate(content if isinstance(content, list) else []):
        if not isinstance(block, dict):
            continue
        btype = block.get("type")
        if btype in ("text", "thinking"):
            text = block.get("text") if btype == "text" else block.get("thinking")
            if isinstance(text, str) and text.strip():
                b.add(Event("assistant", ts, text=truncate_middle(text.strip(), MAX_TEXT_CHARS),
                            detail="thinking" if btype == "thinking" else None, uuid=f"{uid}:{n}"))
        elif btype == "toolCall" and isinstance(block.get("id"), str):
            args = block.get("arguments")
            calls[block["id"]] = {"name": str(block.get("name") or "tool"), "ts": ts,
                                  "args": args if isinstance(args, dict) else {}}
    if msg.get("stopReason") == "error" and isinstance(msg.get("errorMessage"), str):
        b.add(Event("error", ts, text=truncate_middle(msg["errorMessage"], 500), is_error=True,
                    detail="pi-error", uuid=uid))


def _result(b: Any, msg: dict[str, Any], ts: str | None, calls: dict[str, dict[str, Any]]) -> None:
    call_id = msg.get("toolCallId")
    call = calls.pop(call_id, None) if isinstance(call_id, str) else None
    if call is None:
        b.noise["orphan-result"] += 1
        return
    name, args = call["name"], call["args"]
    output = toolcalls.text_of(msg.get("content"))
    failed = msg.get("isError") is True
    kind = _KINDS.get(name, "other")
    path = args.get("path") if isinstance(args.get("path"), str) else None
    code: int | None = None
    if kind == "shell":
        found = _EXIT.search(output[-400:])
        code = int(found.group(1)) if found else (1 if failed else 0)
    change = ""
    if kind == "write":
        change = toolcalls.written(args.get("content"))
    elif kind == "edit":
        change = toolcalls.replaced(args.get("oldText"), args.get("newText"))
        if not change and isinstance(args.get("edits"), list):
            change = f"{len(args['edits'])} edits"
    command = string(args.get("command"))
    patch = next((v for v in (args.get("input"), args.get("patch"))
                  if isinstance(v, str) and "*** Begin Patch" in v), "")
    toolcalls.add(b, Call(kind, name, args, output=output, failed=failed, exit_code=code,
                          ts=call["ts"] or ts, uid=call_id, path=path, command=command,
                          patch=patch, change=change))
