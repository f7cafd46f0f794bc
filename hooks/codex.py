"""OpenAI Codex CLI: hook payloads, the legacy ``notify`` argument, rollouts, the reader.

Rollouts: ``$CODEX_HOME/sessions/YYYY/MM/DD/rollout-<ts>-<session>.jsonl`` (default
``~/.codex``). Lines are ``{timestamp, type, payload}``. ``response_item`` holds the
conversation (messages, reasoning, function calls joined to their outputs by
``call_id``); ``compacted`` carries a compaction summary (docs/HOSTS.md). ``event_msg``
is mostly UI traffic: the legacy ``user_message``/``agent_message`` repeat visible
messages and are dropped, but newer Codex (0.16x) records messages as
``item_completed`` events (``UserMessage`` / ``AgentMessage`` items), which are read;
a message seen in both shapes counts once. Idle rollouts become
``rollout-*.jsonl.zst`` (hooks/transcripts.py decompresses them).

This module is the Codex ``Host`` (hooks/host.py). The hook fast path imports it:
module level is standard library only; the reader imports encoder.session lazily.
"""

from __future__ import annotations

import json
import os
import re
import shlex
from pathlib import Path

TYPE_CHECKING = False  # typing costs ~4 ms: this module is on the hook fast path
if TYPE_CHECKING:
    from typing import Any

    from dualtrace.encoder.session import Session, SessionBuilder

HOST = NAME = "codex"
PREFILTER_TYPES: frozenset[bytes] = frozenset()  # record types the line reader may drop unparsed
TRANSCRIPT_FORMAT = "codex"
# Codex hook event -> (our event, timeout seconds, matcher or None). SessionEnd (root
# threads, after the rollout is flushed) has its timeout capped at 3 s by Codex; without
# it a `codex exec` session waited out Stop's debounce.
EVENTS: dict[str, tuple[str, int, str | None]] = {
    "Stop": ("stop", 10, None),
    "SessionStart": ("session-start", 10, "startup|resume|clear|compact"),
    "UserPromptSubmit": ("prompt", 5, None),
    "PreCompact": ("pre-compact", 10, None),
    "SessionEnd": ("session-end", 3, None),
}
TIMEOUT_UNIT = 1
SCOPES = ("user", "project")
REQUIRES_TRANSCRIPT = False  # transcript_path may be null: found by session id
SWEEP_ON_START = True  # session-start re-checks this project's other rollouts
SWEEP_FOLDER = False  # rollouts span date folders: always swept
KEEPS_OWN_TRANSCRIPT = False
# No output wanted: run in the shell's background (install). Codex 0.169 waits for
# synchronous hooks and, like Claude Code, drops an "async": true Stop hook at exit.
BACKGROUND_EVENTS = frozenset({"Stop", "SessionEnd", "PreCompact"})
FAST_EVENTS: frozenset[str] = frozenset()  # (hookcmd's fast path knows Claude Code only)

# ------------------------------------------------------------------ the host


def looks_like_codex(payload: dict) -> bool:
    """Codex hook payloads carry ``turn_id``; notify payloads a ``thread-id``."""
    if "turn_id" in payload or "thread-id" in payload:
        return True
    path = payload.get("transcript_path")
    return isinstance(path, str) and os.path.basename(path).startswith("rollout-")


def normalize(payload: dict, event: str, state: str = "") -> dict:
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
    hits = rollouts(glob.glob(pattern) + glob.glob(pattern + ".zst"))
    return str(hits[-1]) if hits else None


def rollouts(paths: list[str] | list[Path]) -> list[Path]:
    """Rollout files oldest first, one per session file: a ``.jsonl.zst`` only when its
    plain ``.jsonl`` is gone (Codex compresses idle rollouts and deletes the original)."""
    plain = {str(p) for p in paths if not str(p).endswith(".zst")}
    keep = [Path(p) for p in paths if not (str(p).endswith(".zst") and str(p)[:-4] in plain)]
    return sorted(keep, key=lambda p: (p.name.removesuffix(".zst"), str(p)))


def keep(state: str, payload: dict, lines: list[dict]) -> tuple[str, str | None]:
    """Codex writes its own transcript: ``normalize`` never returns ``lines``."""
    raise NotImplementedError("Codex keeps its own transcript")


def detect(payload: dict) -> bool:
    return looks_like_codex(payload)


def context_output(event: str, text: str) -> str:
    """Codex reads Claude Code's hookSpecificOutput shape for added context (docs/HOSTS.md)."""
    from dualtrace.hooks import claude_code

    return claude_code.context_output(event, text)


def settings_path(scope: str, root: Path, home: Path) -> Path:
    user = Path(os.environ.get("CODEX_HOME") or home / ".codex").expanduser()
    return {"user": user / "hooks.json", "project": root / ".codex" / "hooks.json"}[scope]


def project_transcripts(root: Path) -> list[Path]:
    """Rollouts whose session_meta cwd is the project (or inside it)."""
    from dualtrace.hooks.transcripts import first_line

    found = []
    base = Path(codex_home()) / "sessions"
    for path in rollouts(list(base.glob("*/*/*/rollout-*.jsonl"))
                         + list(base.glob("*/*/*/rollout-*.jsonl.zst"))):
        try:
            first = json.loads(first_line(path) or b"{}")
        except (OSError, ValueError):
            continue
        cwd = (first.get("payload") or {}).get("cwd") if isinstance(first, dict) else None
        if isinstance(cwd, str):
            try:
                where = Path(cwd).expanduser().resolve()
            except OSError:
                continue
            if where == root or root in where.parents:
                found.append(path)
    return found


def transcripts_place(root: Path) -> str:
    return f"{Path(codex_home()) / 'sessions'}/*/*/*/rollout-*.jsonl[.zst] whose cwd is {root}"


def find_transcript(session_id: str) -> str | None:
    return find_rollout(session_id)


_ROLLOUT_ID = re.compile(r"-([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})"
                         r"\.jsonl(?:\.zst)?$")


def session_of(transcript: str) -> str:
    """``rollout-<timestamp>-<session uuid>.jsonl[.zst]`` -> the session (thread) id."""
    found = _ROLLOUT_ID.search(os.path.basename(transcript))
    return found.group(1) if found else os.path.basename(transcript).split(".", 1)[0]


def sibling_transcripts(transcript: str) -> list[str]:
    """The other rollouts of ``transcript``'s project (its session_meta cwd): Codex keeps
    every project's rollouts in one dated tree, compressed ones (.jsonl.zst) included."""
    from dualtrace.config import project_root
    from dualtrace.hooks.transcripts import first_line

    try:
        first = json.loads(first_line(Path(transcript)) or b"{}")
    except (OSError, ValueError):
        return []
    cwd = (first.get("payload") or {}).get("cwd") if isinstance(first, dict) else None
    if not isinstance(cwd, str) or not os.path.isdir(cwd):
        return []
    return [str(p) for p in project_transcripts(project_root(cwd))]


def memory_dir(agent_id: str | None) -> str | None:
    return None


def _str(value: object) -> str | None:
    return value if isinstance(value, str) and value.strip() else None


# ------------------------------------------------------------------ the reader


_SHELL_TOOLS = ("exec_command", "shell", "local_shell", "container.exec", "shell_command")
# User-role messages Codex injects itself (instructions, environment), not typed by a person.
_INJECTED_PREFIXES = ("# AGENTS.md instructions", "<environment_context>", "<user_instructions>",
                      "<permissions instructions>", "<user_shell_command>", "<turn_aborted>")
_EXIT = re.compile(r"(?:Process exited with code|Exit code:?)\s*(-?\d+)")
_PATCH_FILE = re.compile(r"^\*\*\* (Add|Update|Delete) File: (.+)$", re.M)
_PATCH_KIND = {"Add": "create", "Update": "modify", "Delete": "delete"}


_IMAGE_TAG = re.compile(r"\s*</?image\b[^>]*>\s*")


def _message_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    parts: list[str] = []
    if isinstance(content, list):
        for block in content:
            if isinstance(block, dict) and isinstance(block.get("text"), str):
                if not _IMAGE_TAG.fullmatch(block["text"]):  # Codex's frame around an image
                    parts.append(block["text"])
            elif isinstance(block, dict) and block.get("type") in ("input_image", "image"):
                parts.append("[image]")
    return "\n".join(parts)


def _command_of(args: Any) -> str:
    if isinstance(args, str):
        try:
            args = json.loads(args)
        except ValueError:
            return args
    if not isinstance(args, dict):
        return ""
    cmd = args.get("cmd", args.get("command"))
    if isinstance(cmd, list):
        parts = [str(c) for c in cmd]
        # ["bash", "-lc", "<script>"] is how Codex wraps most commands.
        if len(parts) == 3 and parts[1] in ("-lc", "-c"):
            return parts[2]
        return shlex.join(parts)
    return str(cmd) if cmd is not None else ""


def _output_of(raw: Any) -> tuple[str, int | None]:
    """Output text and exit code from a function_call_output payload."""
    if isinstance(raw, dict):
        raw = raw.get("content", raw.get("output", ""))
    text = raw if isinstance(raw, str) else json.dumps(raw, ensure_ascii=False)
    code: int | None = None
    if text.startswith("{"):
        try:
            data = json.loads(text)
        except ValueError:
            data = None
        if isinstance(data, dict):
            meta = data.get("metadata")
            if isinstance(meta, dict) and isinstance(meta.get("exit_code"), int):
                code = meta["exit_code"]
            if isinstance(data.get("output"), str):
                text = data["output"]
    if code is None:
        m = _EXIT.search(text[:400])
        if m:
            code = int(m.group(1))
    if "\nOutput:\n" in text[:400]:
        text = text.split("\nOutput:\n", 1)[1]
    return text, code


def read(reader: Any, *, last_assistant_message: str | None = None) -> Session:
    from dualtrace.encoder.session import (
        MAX_TEXT_CHARS,
        Event,
        SessionBuilder,
        truncate_middle,
    )
    b = SessionBuilder(HOST, str(reader.path))
    pending: dict[str, tuple[str, Any, str | None, bool]] = {}
    # Messages already taken, by (turn, role, text): newer Codex writes each message
    # twice (a response_item and an item_completed event), older Codex only the first.
    said = _Said()
    if reader.cursor > 0:
        _read_meta(Path(reader.path), b)
    for rec in reader.records():
        ts = rec.get("timestamp") if isinstance(rec.get("timestamp"), str) else None
        rtype = rec.get("type")
        payload = rec.get("payload")
        if not isinstance(payload, dict):
            b.noise[str(rtype)] += 1
            continue
        b.saw_time(ts)
        said.turn = _turn_of(payload) or said.turn
        if rtype == "session_meta":
            _meta(payload, b)
        elif rtype == "turn_context":
            if isinstance(payload.get("cwd"), str):
                b.cwd = b.cwd or payload["cwd"]
            b.noise["turn_context"] += 1
        elif rtype == "compacted":
            text = payload["message"] if isinstance(payload.get("message"), str) else ""
            b.add(Event("compaction", ts, text=truncate_middle(text, MAX_TEXT_CHARS)))
        elif rtype == "response_item":
            _item(payload, ts, b, pending, said)
        elif rtype == "event_msg" and payload.get("type") == "item_completed":
            _completed(payload, ts, b, said)
        else:
            b.noise[f"{rtype}:{payload.get('type')}"] += 1
    for call_id, (name, args, ts, _custom) in pending.items():
        b.add(Event("tool", ts, text=truncate_middle(_command_of(args) or str(args), 300),
                    tool=name, uuid=call_id, detail="no result"))
    b.add_stop_message(last_assistant_message)
    return b.finish(reader)


def _meta(payload: dict[str, Any], b: SessionBuilder) -> None:
    if isinstance(payload.get("id"), str):
        b.session_id = payload["id"]
    if isinstance(payload.get("cwd"), str):
        b.cwd = payload["cwd"]
    git = payload.get("git")
    if isinstance(git, dict) and isinstance(git.get("branch"), str):
        b.git_branch = git["branch"]
    b.saw_time(payload.get("timestamp"))


def _read_meta(path: Path, b: SessionBuilder) -> None:
    """On an incremental read, the session id and cwd still come from the first line."""
    from dualtrace.errors import TranscriptError
    from dualtrace.hooks.transcripts import open_bytes

    try:
        with open_bytes(path) as fh:
            first = fh.readline(4 * 1024 * 1024)
        obj = json.loads(first)
    except (OSError, ValueError, TranscriptError):
        return
    if isinstance(obj, dict) and obj.get("type") == "session_meta" and isinstance(
            obj.get("payload"), dict):
        started, ended = b.started, b.ended
        _meta(obj["payload"], b)
        b.started, b.ended = started, ended  # this read's time bounds, not the file's


class _Said:
    """The messages of this read, so the same message in two record shapes counts once."""

    def __init__(self) -> None:
        self.turn = ""
        self.keys: set[tuple[str, str, str]] = set()

    def first(self, role: str, text: str) -> bool:
        key = (self.turn, role, " ".join(text.split())[:4000])
        if key in self.keys:
            return False
        self.keys.add(key)
        return True


def _turn_of(payload: dict[str, Any]) -> str | None:
    turn = payload.get("turn_id")
    if not isinstance(turn, str):
        meta = payload.get("internal_chat_message_metadata_passthrough")
        turn = meta.get("turn_id") if isinstance(meta, dict) else None
    return turn if isinstance(turn, str) and turn else None


_COMPLETED_ROLES = {"UserMessage": "user", "AgentMessage": "assistant"}


def _completed(p: dict[str, Any], ts: str | None, b: SessionBuilder, said: _Said) -> None:
    """A new-style ``item_completed`` event: user and agent messages (other items - tool
    calls, reasoning - still come from their response_item records)."""
    item = p.get("item")
    kind = item.get("type") if isinstance(item, dict) else None
    role = _COMPLETED_ROLES.get(kind) if isinstance(kind, str) else None
    if role is None or not isinstance(item, dict):
        b.noise[f"item_completed:{kind}"] += 1
        return
    _message(role, _message_text(item.get("content")).strip(), ts, b, said)


def _message(role: Any, text: str, ts: str | None, b: SessionBuilder, said: _Said) -> None:
    from dualtrace.encoder.session import MAX_TEXT_CHARS, Event, truncate_middle

    if not text:
        return
    if role in ("user", "assistant") and not said.first(role, text):
        b.noise["duplicate-message"] += 1
        return
    if role == "user":
        if text.startswith(_INJECTED_PREFIXES):
            b.noise["injected-user-text"] += 1
            return
        b.add(Event("user", ts, text=truncate_middle(text, MAX_TEXT_CHARS)))
    elif role == "assistant":
        b.add(Event("assistant", ts, text=truncate_middle(text, MAX_TEXT_CHARS)))
    else:
        b.noise[f"message:{role}"] += 1


def _item(p: dict[str, Any], ts: str | None, b: SessionBuilder,
          pending: dict[str, tuple[str, Any, str | None, bool]], said: _Said) -> None:
    from dualtrace.encoder.session import MAX_TEXT_CHARS, Event, truncate_middle
    ptype = p.get("type")
    if ptype == "message":
        _message(p.get("role"), _message_text(p.get("content")).strip(), ts, b, said)
    elif ptype == "reasoning":
        summary = p.get("summary")
        text = _message_text(summary).strip() if isinstance(summary, list) else ""
        if text:
            b.add(Event("assistant", ts, text=truncate_middle(text, MAX_TEXT_CHARS),
                        detail="thinking"))
    elif ptype in ("function_call", "custom_tool_call", "local_shell_call"):
        call_id = p.get("call_id") or p.get("id")
        name = p.get("name") or ("local_shell" if ptype == "local_shell_call" else "tool")
        args = p.get("arguments", p.get("input", p.get("action")))
        if isinstance(call_id, str):
            pending[call_id] = (str(name), args, ts, ptype == "custom_tool_call")
    elif ptype in ("function_call_output", "custom_tool_call_output", "local_shell_call_output"):
        call_id = p.get("call_id")
        call = pending.pop(call_id, None) if isinstance(call_id, str) else None
        if call is None:
            b.noise["orphan-output"] += 1
            return
        _joined(call, p.get("output"), ts, b, str(call_id))
    else:
        b.noise[f"response_item:{ptype}"] += 1


def _joined(call: tuple[str, Any, str | None, bool], raw_output: Any, ts: str | None,
            b: SessionBuilder, call_id: str) -> None:
    from dualtrace.encoder.session import (
        MAX_RESULT_CHARS,
        Event,
        commit_events,
        shell_edit_events,
        truncate_middle,
    )
    name, args, call_ts, _custom = call
    output, code = _output_of(raw_output)
    when = call_ts or ts
    result = truncate_middle(output, MAX_RESULT_CHARS)
    patch = args if isinstance(args, str) and "*** Begin Patch" in args else None
    command = "" if patch else _command_of(args) if name in _SHELL_TOOLS else ""
    if command.startswith("apply_patch") and "*** Begin Patch" in command:
        patch, command = command, ""
    if name == "apply_patch" or patch:
        failed = code not in (None, 0)
        for kind, path in _PATCH_FILE.findall(patch or ""):
            b.add(Event("edit", when, tool="apply_patch", path=path.strip(),
                        edit_kind=_PATCH_KIND[kind], is_error=failed,
                        result=result if failed else None, uuid=call_id))
        return
    if name in _SHELL_TOOLS:
        is_error = code not in (None, 0)
        b.add(Event("command", when, tool=name, command=command, exit_code=code,
                    is_error=is_error, result=result, uuid=call_id))
        for ev in (*shell_edit_events(command, when, not is_error, name, uuid=call_id),
                   *commit_events(command, output, when, code == 0)):
            b.add(ev)
        return
    summary = args if isinstance(args, str) else json.dumps(args, ensure_ascii=False)
    b.add(Event("tool", when, text=truncate_middle(summary or "", 300), tool=name,
                result=result, uuid=call_id))
