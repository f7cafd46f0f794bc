"""OpenCode (sst/opencode): a session as ``opencode export <session>`` writes it, read.

One JSON document: ``{"info": {"id": "ses_...", "directory", "title", "time"},
"messages": [{"info": {"id", "role", "time": {"created"}, "path": {"cwd"}, "error"},
"parts": [...]}]}``. A message's parts are ``text`` (``synthetic`` ones are OpenCode's,
not the user's), ``reasoning``, ``tool`` (``tool``, ``callID``, ``state``: ``status``
completed / error, ``input``, ``output``, ``metadata`` (``exit`` for bash, ``exists``
for write), ``error``), ``file`` (an attachment), ``subtask`` (a sub-agent the user's
``@agent`` started), and bookkeeping (``step-start``, ``step-finish``, ``patch``,
``snapshot``). Times are Unix milliseconds.

OpenCode is a transcript format, not a host: its plugins are JavaScript modules, and
dualtrace installs nothing into it. ``dualtrace encode`` reads an exported session.
"""

from __future__ import annotations

from typing import Any

from dualtrace.encoder.session import (
    MAX_RESULT_CHARS,
    MAX_TEXT_CHARS,
    Event,
    Session,
    truncate_middle,
)
from dualtrace.hooks import toolcalls
from dualtrace.hooks.toolcalls import Call, iso_ms, obj, string

HOST = "opencode"
DOCUMENT = True  # one JSON document (hooks/transcripts.py DocumentReader)
PREFILTER_TYPES: frozenset[bytes] = frozenset()

_KINDS = {"bash": "shell", "write": "write", "edit": "edit", "multiedit": "edit",
          "patch": "patch", "apply_patch": "patch", "task": "subagent"}
_BOOKKEEPING = frozenset({"step-start", "step-finish", "patch", "snapshot", "agent", "retry"})


def read(reader: Any, *, last_assistant_message: str | None = None) -> Session:
    from dualtrace.encoder.session import SessionBuilder

    b = SessionBuilder(HOST, str(reader.path))
    for message in reader.elements("messages"):
        if isinstance(message, dict):
            _message(b, message)
        else:
            b.noise["message:malformed"] += 1
    info = reader.head.get("info")
    if isinstance(info, dict):
        if isinstance(info.get("id"), str):
            b.session_id = info["id"]
        if isinstance(info.get("directory"), str) and info["directory"].strip():
            b.cwd = info["directory"]
        if reader.cursor == 0:
            times = obj(info.get("time"))
            b.saw_time(iso_ms(times.get("created")))
    b.add_stop_message(last_assistant_message)
    return b.finish(reader)


def _message(b: Any, message: dict[str, Any]) -> None:
    info = obj(message.get("info"))
    times = obj(info.get("time"))
    ts = iso_ms(times.get("created"))
    b.saw_time(ts)
    b.saw_time(iso_ms(times.get("completed")))
    if b.session_id is None and isinstance(info.get("sessionID"), str):
        b.session_id = info["sessionID"]
    where = obj(info.get("path"))
    if isinstance(where.get("cwd"), str) and where["cwd"].strip():
        b.cwd = b.cwd or where["cwd"]
    role = info.get("role")
    mid = info.get("id") if isinstance(info.get("id"), str) else None
    parts = message.get("parts")
    for part in parts if isinstance(parts, list) else []:
        if isinstance(part, dict):
            _part(b, part, role, ts, mid)
    error = info.get("error")
    if isinstance(error, dict):
        data = obj(error.get("data"))
        text = string(data.get("message"))
        name = error.get("name") if isinstance(error.get("name"), str) else "error"
        b.add(Event("error", ts, text=truncate_middle(f"{name}: {text}".strip(": "), 500),
                    is_error=True, detail="opencode-error", uuid=mid))


def _part(b: Any, part: dict[str, Any], role: Any, ts: str | None, mid: str | None) -> None:
    ptype = part.get("type")
    pid = part.get("id") if isinstance(part.get("id"), str) else mid
    when = obj(part.get("time"))
    at = iso_ms(when.get("start")) or ts
    if ptype == "text":
        text = string(part.get("text")).strip()
        if not text:
            return
        if part.get("synthetic") or part.get("ignored"):
            # OpenCode's own text on the user's side (an attached file read for them)
            b.add(Event("tool", at, text="added by OpenCode", tool="opencode", detail="injected",
                        result=truncate_middle(text, MAX_RESULT_CHARS), uuid=pid))
        elif role == "user":
            b.add(Event("user", at, text=truncate_middle(text, MAX_TEXT_CHARS), uuid=pid))
        elif role == "assistant":
            b.add(Event("assistant", at, text=truncate_middle(text, MAX_TEXT_CHARS), uuid=pid))
        else:
            b.noise[f"text:{role}"] += 1
    elif ptype == "reasoning":
        text = string(part.get("text")).strip()
        if text:
            b.add(Event("assistant", at, text=truncate_middle(text, MAX_TEXT_CHARS),
                        detail="thinking", uuid=pid))
        else:
            b.noise["reasoning:encrypted"] += 1
    elif ptype == "tool":
        _tool(b, part, ts, pid)
    elif ptype == "file":
        name = part.get("filename") or part.get("url") or "file"
        b.add(Event("tool", at, text=f"attached {name}", tool="attachment", detail="file",
                    uuid=pid))
    elif ptype == "subtask":
        # A sub-agent started from the user's message: the prompt is its brief, written
        # for it, never the user's own statement.
        prompt = string(part.get("prompt"))
        b.add(Event("subagent", at, text=truncate_middle(prompt, 500), tool="subtask",
                    detail=str(part.get("agent") or "") or None, uuid=pid))
    elif ptype in _BOOKKEEPING:
        b.noise[str(ptype)] += 1
    else:
        b.noise[f"part:{ptype}"] += 1


def _tool(b: Any, part: dict[str, Any], ts: str | None, pid: str | None) -> None:
    name = string(part.get("tool")) or "tool"
    state = obj(part.get("state"))
    args = obj(state.get("input"))
    meta = obj(state.get("metadata"))
    status = state.get("status")
    when = obj(state.get("time"))
    at = iso_ms(when.get("start")) or ts
    uid = part.get("callID") if isinstance(part.get("callID"), str) else pid
    if status not in ("completed", "error"):
        b.add(Event("tool", at, text=toolcalls.summary(args), tool=name, uuid=uid,
                    detail="no result"))
        return
    failed = status == "error"
    output = string(state.get("output"))
    if failed and isinstance(state.get("error"), str):
        output = (output + "\n" + state["error"]).strip()
    kind = _KINDS.get(name, "other")
    path = next((v for v in (args.get("filePath"), args.get("path")) if isinstance(v, str) and v),
                None)
    code: int | None = None
    if kind == "shell":
        exit_code = meta.get("exit")
        code = exit_code if isinstance(exit_code, int) and not isinstance(exit_code, bool) else (
            1 if failed else None)
    change, edit_kind = "", "modify"
    if kind == "write":
        change = toolcalls.written(args.get("content"))
        edit_kind = "create" if meta.get("exists") is False else "modify"
    elif kind == "edit":
        change = toolcalls.replaced(args.get("oldString"), args.get("newString"))
        if not change and isinstance(args.get("edits"), list):
            change = f"{len(args['edits'])} edits"
    patch = next((v for v in (args.get("patchText"), args.get("patch"), args.get("input"))
                  if isinstance(v, str) and "*** Begin Patch" in v), "")
    command = string(args.get("command"))
    prompt = string(args.get("prompt"))
    subagent_type = args.get("subagent_type")
    toolcalls.add(b, Call(kind, name, args, output=output, failed=failed, exit_code=code, ts=at,
                          uid=uid, path=path, command=command, patch=patch, change=change,
                          edit_kind=edit_kind, prompt=prompt,
                          detail=subagent_type if isinstance(subagent_type, str) else None))
    if name == "question" and isinstance(meta.get("answers"), list):
        # The question tool asked the user and this is what they answered: the user speaking.
        said = [a for group in meta["answers"] if isinstance(group, list) for a in group
                if isinstance(a, str) and a.strip()]
        if said:
            b.add(Event("user", at, text=truncate_middle("\n".join(said), MAX_TEXT_CHARS),
                        detail="answer to question", uuid=f"{uid}:answer"))
