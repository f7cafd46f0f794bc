"""One tool call -> session events, for the readers whose hosts name tools their own way.

Pi, OpenCode and Cline each call a shell, a file writer, a file editor, a patch tool and
a sub-agent under their own names and argument keys. Each reader maps its names to one
of the kinds below and hands the call here, so a shell command becomes the same
``command`` event (with its exit code, the files it writes and the commits it makes)
whichever host ran it, and an edit the same ``edit`` event.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from dualtrace.encoder.session import (
    MAX_RESULT_CHARS,
    Event,
    SessionBuilder,
    commit_events,
    shell_edit_events,
    truncate_middle,
)

KINDS = ("shell", "write", "edit", "patch", "subagent", "other")


@dataclass(frozen=True)
class Call:
    """A tool call and how it ended, in the reader's terms."""

    kind: str  # one of KINDS
    name: str  # the tool's name as the host spells it
    args: dict[str, Any]
    output: str = ""
    failed: bool = False
    exit_code: int | None = None
    ts: str | None = None
    uid: str | None = None
    path: str | None = None  # write / edit: the file
    command: str = ""  # shell: the command line
    patch: str = ""  # patch: the ``*** Begin Patch`` text
    change: str = ""  # edit / write: a short account of the change
    edit_kind: str = "modify"  # write / edit: "create" when the host says the file was new
    prompt: str = ""  # subagent: what the agent asked it (never the user's words)
    detail: str | None = None  # subagent: its type


def add(b: SessionBuilder, call: Call) -> None:
    from dualtrace.hooks.codex import _PATCH_FILE, _PATCH_KIND

    result = truncate_middle(call.output, MAX_RESULT_CHARS)
    if call.kind == "shell":
        code = call.exit_code if call.exit_code is not None else (1 if call.failed else None)
        failed = call.failed or code not in (None, 0)
        b.add(Event("command", call.ts, tool=call.name, command=call.command, exit_code=code,
                    is_error=failed, result=result, uuid=call.uid))
        for ev in (*shell_edit_events(call.command, call.ts, not failed, call.name, uuid=call.uid),
                   *commit_events(call.command, call.output, call.ts, code == 0)):
            b.add(ev)
    elif call.kind == "patch":
        for verb, path in _PATCH_FILE.findall(call.patch):
            b.add(Event("edit", call.ts, tool=call.name, path=path.strip(),
                        edit_kind=_PATCH_KIND[verb], is_error=call.failed,
                        result=result if call.failed else None, uuid=call.uid))
    elif call.kind in ("write", "edit"):
        b.add(Event("edit", call.ts, text=truncate_middle(call.change, 600), tool=call.name,
                    path=call.path, edit_kind=call.edit_kind, is_error=call.failed,
                    result=result if call.failed else None, uuid=call.uid))
    elif call.kind == "subagent":
        b.add(Event("subagent", call.ts, text=truncate_middle(call.prompt, 500), tool=call.name,
                    is_error=call.failed, result=result, detail=call.detail, uuid=call.uid))
    else:
        b.add(Event("tool", call.ts, text=summary(call.args), tool=call.name, path=call.path,
                    is_error=call.failed, result=result, uuid=call.uid))


def obj(value: Any) -> dict[str, Any]:
    """``value`` when it is a JSON object, else ``{}`` (host records are untrusted)."""
    return value if isinstance(value, dict) else {}


def string(value: Any) -> str:
    """``value`` when it is a string, else ``""``."""
    return value if isinstance(value, str) else ""


def summary(args: dict[str, Any]) -> str:
    """A one-line account of a tool's input (never a whole file's contents)."""
    for key in ("path", "filePath", "file_path", "pattern", "url", "query", "command", "regex"):
        value = args.get(key)
        if isinstance(value, str) and value:
            return truncate_middle(value, 300)
    try:
        return truncate_middle(json.dumps(args, ensure_ascii=False, sort_keys=True), 200)
    except (TypeError, ValueError):
        return ""


def written(content: Any) -> str:
    """How a whole-file write is told: its size, not its text."""
    return f"{content.count(chr(10)) + 1} lines written" if isinstance(content, str) else ""


def replaced(old: Any, new: Any) -> str:
    return f"- {old}\n+ {new}" if isinstance(old, str) and isinstance(new, str) else ""


def text_of(value: Any) -> str:
    """Text of a string or a list of content blocks (images become a marker)."""
    if isinstance(value, str):
        return value
    parts: list[str] = []
    if isinstance(value, list):
        for block in value:
            if isinstance(block, str):
                parts.append(block)
            elif isinstance(block, dict):
                if block.get("type") == "text" and isinstance(block.get("text"), str):
                    parts.append(block["text"])
                elif block.get("type") == "image":
                    parts.append("[image]")
    return "\n".join(parts)


def iso_ms(value: Any) -> str | None:
    """Unix milliseconds -> the ISO form the other readers' timestamps have."""
    import datetime as dt

    if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
        return None
    try:
        when = dt.datetime.fromtimestamp(value / 1000, tz=dt.timezone.utc)
    except (OverflowError, OSError, ValueError):
        return None
    return when.strftime("%Y-%m-%dT%H:%M:%S.") + f"{when.microsecond // 1000:03d}Z"
