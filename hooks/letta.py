"""Letta Code: read its own local transcripts, or keep one from hook payloads.

This module is the Letta ``Host`` (hooks/host.py); standard library only at module
level (it is imported on the hook fast path).

Letta Code writes ``$LETTA_TRANSCRIPT_ROOT/<agent>/<conversation>/transcript.jsonl``
(default root ``~/.letta/transcripts``; both path segments sanitized to
``[A-Za-z0-9._-]``), one JSON record per line: ``{"kind": "user" | "assistant" |
"reasoning" | "error", "text", "captured_at", "source_line_id", "source_message_id"}``
or ``{"kind": "tool_call", "name", "argsText", "resultText", "resultOk", ...}``, with a
``state.json`` beside it (its reflection cursor; not ours). When that file exists for
the conversation a hook fires in, it is the session's transcript and the session id is
its conversation folder's name. Stop payloads name no conversation: the prompt hook's
turn record says which (``turn_of``).

Older Letta Code versions write no transcript, and their Stop payloads carry no
transcript path: then each Stop (user + assistant message) and PostToolUse payload is
appended to ``<state>/letta/<conversation>.jsonl`` in the plain chat format
(``{"role", "content"}`` per line). The reader below reads both.

That payload log is in the state dir, where no secret may land, so nothing is written by
the hook itself: ``normalize`` turns a payload into ``lines``, and dualtrace.hookcmd hands
them to a detached child that redacts them and then, in the order the hooks arrived,
calls ``keep`` (the redactor costs ~0.3 s to load, far over a hook's budget). When Letta
wrote the transcript, ``normalize`` says so (``kept: False``) and the hook queues the
session directly, as for the other hosts.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

TYPE_CHECKING = False  # typing costs ~4 ms: this module is on the hook fast path
if TYPE_CHECKING:
    from typing import Any

    from dualtrace.encoder.session import Session

HOST = NAME = "letta"
TRANSCRIPT_FORMAT = "letta"  # Letta Code's transcript.jsonl, or the plain lines keep() writes
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
# Session-start re-checks this agent's other conversations (those with a transcript of
# Letta's own that dualtrace has encoded before and that grew since).
SWEEP_ON_START = True
SWEEP_FOLDER = False  # the agent's conversations are in other folders: always swept
KEEPS_OWN_TRANSCRIPT = True  # when Letta wrote none
# None in the background: each hook takes its order ticket before it returns, so the
# payloads' lines are written in the order Letta sent them (hookcmd.order_ticket).
BACKGROUND_EVENTS: frozenset[str] = frozenset()
FAST_EVENTS: frozenset[str] = frozenset()
DIR = "letta"
MAX_FIELD_CHARS = 200_000
ROOT_ENV = "LETTA_TRANSCRIPT_ROOT"
NATIVE_FILE = "transcript.jsonl"
PREFILTER_TYPES: frozenset[bytes] = frozenset()  # record types the line reader may drop unparsed


# ------------------------------------------------------------------ Letta's own transcripts


def transcripts_root() -> str:
    root = os.environ.get(ROOT_ENV, "").strip()
    return root or os.path.join(os.path.expanduser("~"), ".letta", "transcripts")


def segment(value: str) -> str:
    """A path segment as Letta Code names its folders: [A-Za-z0-9._-], others -> "_"."""
    out = "".join(c if (c.isascii() and (c.isalnum() or c in "._-")) else "_" for c in value)
    # "." / ".." would leave the folder (Letta's own rule keeps them; no real id is one).
    return out if out.strip(".") else "unknown"


def agent_root(agent: str) -> str:
    return os.path.join(transcripts_root(), segment(agent))


def native_path(agent: str, conversation: str) -> str:
    return os.path.join(agent_root(agent), segment(conversation), NATIVE_FILE)


def is_native(path: str) -> bool:
    return os.path.basename(path) == NATIVE_FILE


def latest_native(agent: str) -> str | None:
    """The agent's transcript written last: Stop payloads name no conversation, and the
    conversation that just finished a turn is the one Letta appended to."""
    best: tuple[float, str] | None = None
    for path in _agent_transcripts(agent_root(agent)):
        try:
            mtime = os.stat(path).st_mtime
        except OSError:
            continue
        if best is None or mtime > best[0]:
            best = (mtime, path)
    return best[1] if best else None


def _agent_transcripts(folder: str) -> list[str]:
    try:
        names = sorted(os.listdir(folder))
    except OSError:
        return []
    out = []
    for name in names:
        path = os.path.join(folder, name, NATIVE_FILE)
        if os.path.isfile(path):
            out.append(path)
    return out


def _conversations(payload: dict) -> list[str]:
    """Conversation ids the payload (or Letta's env) names, most specific first."""
    out = []
    for value in (payload.get("conversation_id"), os.environ.get("LETTA_CONVERSATION_ID"),
                  payload.get("session_id")):
        if isinstance(value, str) and value.strip() and value not in out:
            out.append(value)
    return out


# ------------------------------------------------------------------ which conversation a Stop is
#
# Letta Code's Stop payload names neither the agent nor the conversation (and its hook
# runner drops LETTA_AGENT_ID when the payload has no agent_id), but it carries the
# turn's ``user_message``; the UserPromptSubmit hook of the same turn carries that
# prompt with ``agent_id`` and ``conversation_id``. So the prompt hook leaves a turn
# record, named by a hash of (working directory, prompt), and Stop finds its
# conversation by the same hash: right even when two conversations of one agent run at
# once. The record holds ids only (no prompt text: the state dir never holds secrets).

TURNS = "turns"
TURN_TTL = 2 * 86400  # seconds a turn record is kept (a turn is minutes long)


def _turn_key(cwd: str, prompt: str) -> str:
    import hashlib

    text = f"{os.path.realpath(cwd) if cwd else ''}\0{prompt.strip()}"
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:32]


def _cwd(payload: dict) -> str:
    value = payload.get("working_directory") or os.environ.get("LETTA_WORKING_DIR") \
        or payload.get("cwd")
    return value if isinstance(value, str) else ""


def note_turn(state: str, payload: dict) -> None:
    """At UserPromptSubmit: which agent and conversation this prompt belongs to."""
    prompt, agent = payload.get("prompt"), agent_id(payload)
    names = _conversations(payload)
    if not isinstance(prompt, str) or not prompt.strip() or not agent or not names:
        return
    folder = os.path.join(state, DIR, TURNS)
    os.makedirs(folder, mode=0o700, exist_ok=True)
    record = json.dumps({"agent": agent, "conversation": names[0],
                         "cwd": os.path.realpath(_cwd(payload)) if _cwd(payload) else ""})
    path = os.path.join(folder, _turn_key(_cwd(payload), prompt) + ".json")
    from dualtrace import atomic

    atomic.write_text(path, record, fsync=False)  # a hint for the next Stop, cheap to lose
    _prune_turns(folder)


def _prune_turns(folder: str) -> None:
    cutoff = time.time() - TURN_TTL
    try:
        with os.scandir(folder) as entries:
            old = [e.path for e in entries if e.stat().st_mtime < cutoff]
    except OSError:
        return
    for path in old:
        try:
            os.unlink(path)
        except OSError:
            pass


def _read_turn(path: str) -> dict | None:
    try:
        with open(path, encoding="utf-8") as fh:
            record = json.load(fh)
    except (OSError, ValueError):
        return None
    if isinstance(record, dict) and isinstance(record.get("agent"), str) \
            and isinstance(record.get("conversation"), str):
        return record
    return None


def turn_of(state: str, payload: dict) -> dict | None:
    """The agent and conversation of the turn a Stop payload ends: the turn record of its
    ``user_message`` in this working directory; without one, the record of the last
    prompt submitted in this directory (wrong only if two conversations take turns in
    one directory and Letta sends no user_message)."""
    folder = os.path.join(state, DIR, TURNS)
    cwd = _cwd(payload)
    prompt = payload.get("user_message")
    if isinstance(prompt, str) and prompt.strip():
        record = _read_turn(os.path.join(folder, _turn_key(cwd, prompt) + ".json"))
        if record:
            return record
    here = os.path.realpath(cwd) if cwd else ""
    best: tuple[float, dict] | None = None
    try:
        with os.scandir(folder) as entries:
            files = [(e.stat().st_mtime, e.path) for e in entries if e.name.endswith(".json")]
    except OSError:
        return None
    for mtime, path in sorted(files, reverse=True):
        record = _read_turn(path)
        if record and record.get("cwd") == here:
            best = (mtime, record)
            break
    return best[1] if best else None


def native_for(payload: dict, event: str) -> str | None:
    """The transcript Letta Code keeps for this payload's conversation, if it exists.
    A payload that names no conversation (Stop, PostToolUse) is given one by its turn
    record (``with_turn``); only without any is it the agent's transcript written last."""
    agent = agent_id(payload)
    if not agent:
        return None
    names = _conversations(payload)
    for name in names:
        path = native_path(agent, name)
        if os.path.isfile(path):
            return path
    if not names and event in ("stop", "post-tool-use", "session-end"):
        return latest_native(agent)
    return None


def with_turn(state: str, payload: dict, event: str) -> dict:
    """The payload with the agent and conversation of its turn filled in when it names
    neither (Letta's Stop and PostToolUse); unchanged otherwise."""
    if event not in ("stop", "post-tool-use") or _conversations(payload):
        return payload
    record = turn_of(state, payload)
    if record is None or (agent_id(payload) not in (None, record["agent"])):
        return payload
    return dict(payload, agent_id=record["agent"], conversation_id=record["conversation"])


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
    # Stop and PostToolUse name no conversation: the same turn record as in normalize.
    path, adopted = resolve_transcript(state, with_turn(state, payload, "stop"))
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
    """Letta's own transcript when it has one for this conversation (``kept: False``: the
    hook queues it directly). Else this writes nothing: Stop and PostToolUse text comes
    back as ``lines`` (raw), and every event that touches the transcript is finished by
    ``keep`` in the hook's detached child (which also adopts the agent-keyed file; see
    ``resolve_transcript``)."""
    if event == "prompt":
        try:
            note_turn(state, payload)
        except OSError:
            pass  # a full or read-only state dir: Stop falls back to the newest transcript
    payload = with_turn(state, payload, event)
    out = {
        "session_id": conversation_key(payload),
        "transcript": transcript_path(state, conversation_key(payload)),
        "cwd": payload.get("working_directory") or os.environ.get("LETTA_WORKING_DIR")
        or payload.get("cwd"),
        "agent_id": agent_id(payload),
        "ignore": None,
        "lines": records(payload, event) if event in ("stop", "post-tool-use") else [],
    }
    native = native_for(payload, event)
    if native:
        out.update(session_id=session_of(native), transcript=native, lines=[], kept=False)
    elif event == "session-start":
        # A new conversation has no transcript yet; naming where it will be lets the
        # session-start sweep look at this agent's other conversations (none: no sweep).
        agent = agent_id(payload)
        names = _conversations(payload)
        out["transcript"] = native_path(agent, names[0] if names else "_") if agent and \
            os.path.isdir(agent_root(agent)) else None
    return out


def context_output(event: str, text: str) -> str:
    """Letta Code reads the same hookSpecificOutput shape as Claude Code."""
    from dualtrace.hooks import claude_code

    return claude_code.context_output(event, text)


def settings_path(scope: str, root: Path, home: Path) -> Path:
    return {"user": home / ".letta" / "settings.json",
            "project": root / ".letta" / "settings.json",
            "local": root / ".letta" / "settings.local.json"}[scope]


def project_agents(root: Path) -> list[str]:
    """The agents Letta Code used in this project, from the file where it keeps them:
    ``<root>/.letta/settings.local.json`` (``lastAgent``, ``lastSession``,
    ``sessionsByServer``, ``pinnedAgents``, ``pinnedAgentsByServer``; letta-code's
    ``LocalProjectSettings``, src/settings-manager.ts)."""
    try:
        data = json.loads((Path(root) / ".letta" / "settings.local.json").read_text("utf-8"))
    except (OSError, ValueError):
        return []
    if not isinstance(data, dict):
        return []
    found: list[object] = [data.get("lastAgent")]
    sessions = [data.get("lastSession")]
    if isinstance(data.get("sessionsByServer"), dict):
        sessions += list(data["sessionsByServer"].values())
    found += [ref.get("agentId") for ref in sessions if isinstance(ref, dict)]
    pinned = [data.get("pinnedAgents")]
    if isinstance(data.get("pinnedAgentsByServer"), dict):
        pinned += list(data["pinnedAgentsByServer"].values())
    found += [a for ids in pinned if isinstance(ids, list) for a in ids]
    return list(dict.fromkeys(a for a in found if isinstance(a, str) and a.strip()))


def project_transcripts(root: Path) -> list[Path]:
    """Every conversation Letta Code keeps for this project's agents. Letta's transcripts
    name no working directory; the project's settings name its agents, and an agent's
    conversations are taken to be its project's (Letta Code keeps one agent per
    directory unless told otherwise)."""
    return [Path(p) for agent in project_agents(root)
            for p in _agent_transcripts(agent_root(agent))]


def transcripts_place(root: Path) -> str:
    agents = project_agents(root)
    if not agents:
        return f"the Letta Code agents named in {Path(root) / '.letta' / 'settings.local.json'} (none)"
    return f"the conversations of Letta Code agent{'s' if len(agents) > 1 else ''} " + \
        ", ".join(agents[:3]) + (" ..." if len(agents) > 3 else "")


def find_transcript(session_id: str) -> str | None:
    """A conversation's own transcript, by its folder name, under any agent."""
    want = segment(session_id)
    try:
        agents = sorted(os.listdir(transcripts_root()))
    except OSError:
        return None
    for agent in agents:
        path = os.path.join(transcripts_root(), agent, want, NATIVE_FILE)
        if os.path.isfile(path):
            return path
    return None


def session_of(transcript: str) -> str:
    if is_native(transcript):
        return os.path.basename(os.path.dirname(transcript))
    return os.path.basename(transcript).removesuffix(".jsonl")


def sibling_transcripts(transcript: str) -> list[str]:
    """The same agent's other conversations (Letta's own transcripts only: the payload
    logs dualtrace keeps carry no project, so the sweep leaves them alone)."""
    if not is_native(transcript):
        return []
    return _agent_transcripts(os.path.dirname(os.path.dirname(transcript)))


def memory_dir(agent_id: str | None) -> str | None:
    return memfs_dir(agent_id)


# ------------------------------------------------------------------ the reader

# Tool names across Letta Code's toolsets (Claude-, Codex- and Gemini-style).
_SHELL_TOOLS = frozenset({"Bash", "Shell", "ShellCommand", "shell", "shell_command",
                          "exec_command", "run_shell_command", "RunShellCommand"})
_EDIT_TOOLS = frozenset({"Edit", "MultiEdit", "Write", "NotebookEdit", "write_file", "replace"})
_PATCH_TOOLS = frozenset({"ApplyPatch", "apply_patch"})


def read(reader: Any, *, last_assistant_message: str | None = None) -> Session:
    """Letta Code's transcript records, or the plain lines of dualtrace's payload log."""
    from dualtrace.encoder.session import SessionBuilder
    from dualtrace.hooks import plain

    path = str(reader.path)
    b = SessionBuilder(HOST, path)
    if is_native(path):
        b.session_id = session_of(path)
    lines: dict[str, int] = {}  # source_line_id -> event index: a rewritten line replaces
    for rec in reader.records():
        kind = rec.get("kind")
        if isinstance(kind, str):
            _native_record(b, rec, kind, lines)
        elif "role" in rec:
            plain.add_record(b, rec)
        else:
            b.noise["record:unknown"] += 1
    b.add_stop_message(last_assistant_message)
    return b.finish(reader)


def _native_record(b: Any, rec: dict, kind: str, lines: dict[str, int]) -> None:
    from dualtrace.encoder.session import MAX_TEXT_CHARS, Event, truncate_middle

    ts = _str(rec, "captured_at") or None
    b.saw_time(ts)
    line_id = _str(rec, "source_line_id") or None
    uid = _str(rec, "source_message_id") or line_id
    if kind == "tool_call":
        _tool_call(b, rec, ts, uid)
        return
    text = _str(rec, "text")
    if kind == "user":
        text = _strip_reminders(text)
    text = text.strip()
    if not text:
        return
    if kind == "user":
        event = Event("user", ts, text=truncate_middle(text, MAX_TEXT_CHARS), uuid=uid)
    elif kind == "assistant":
        event = Event("assistant", ts, text=truncate_middle(text, MAX_TEXT_CHARS), uuid=uid)
    elif kind == "reasoning":
        event = Event("assistant", ts, text=truncate_middle(text, MAX_TEXT_CHARS),
                      detail="thinking", uuid=uid)
    elif kind == "error":
        event = Event("error", ts, text=truncate_middle(text, 500), is_error=True,
                      detail="letta-error", uuid=uid)
    else:
        b.noise[f"kind:{kind}"] += 1
        return
    key = f"{kind}:{line_id}" if line_id else None
    if key and key in lines:
        b.replace_at(lines[key], text=event.text)
        return
    index = b.add(event)
    if key:
        lines[key] = index


def _str(rec: dict, key: str) -> str:
    value = rec.get(key)
    return value if isinstance(value, str) else ""


def _strip_reminders(text: str) -> str:
    """Letta Code wraps what it injects into a user turn in <system-reminder> tags."""
    import re

    return re.sub(r"<system-reminder>.*?</system-reminder>", "", text, flags=re.S)


def _tool_call(b: Any, rec: dict, ts: str | None, uid: str | None) -> None:
    from dualtrace.encoder.session import (
        MAX_RESULT_CHARS,
        Event,
        commit_events,
        shell_edit_events,
        truncate_middle,
    )
    from dualtrace.hooks.codex import _PATCH_FILE, _PATCH_KIND, _command_of

    name = _str(rec, "name") or "tool"
    raw = _str(rec, "argsText")
    try:
        parsed = json.loads(raw) if raw else {}
    except ValueError:
        parsed = {}
    args = parsed if isinstance(parsed, dict) else {}
    output = _str(rec, "resultText")
    ok = rec.get("resultOk")
    failed = ok is False
    result = truncate_middle(output, MAX_RESULT_CHARS)
    patch = next((v for v in (args.get("input"), args.get("patch"), raw)
                  if isinstance(v, str) and "*** Begin Patch" in v), None)
    if name in _PATCH_TOOLS or (patch and name not in _SHELL_TOOLS):
        for verb, path in _PATCH_FILE.findall(patch or ""):
            b.add(Event("edit", ts, tool=name, path=path.strip(), edit_kind=_PATCH_KIND[verb],
                        is_error=failed, result=result if failed else None, uuid=uid))
        return
    if name in _SHELL_TOOLS:
        command: str = _command_of(args) if args else raw
        code = None if ok is None else (0 if ok else 1)
        b.add(Event("command", ts, tool=name, command=command, exit_code=code,
                    is_error=failed, result=result, uuid=uid))
        for ev in (*shell_edit_events(command, ts, not failed, name, uuid=uid),
                   *commit_events(command, output, ts, ok is True)):
            b.add(ev)
        return
    file_path = next((v for v in (args.get("file_path"), args.get("path"),
                                  args.get("notebook_path")) if isinstance(v, str) and v), None)
    if name in _EDIT_TOOLS:
        change = ""
        if isinstance(args.get("old_string"), str) and isinstance(args.get("new_string"), str):
            change = f"- {args['old_string']}\n+ {args['new_string']}"
        elif isinstance(args.get("edits"), list):
            change = f"{len(args['edits'])} edits"
        elif isinstance(args.get("content"), str):
            change = f"{args['content'].count(chr(10)) + 1} lines written"
        b.add(Event("edit", ts, text=change and truncate_middle(change, 600), tool=name,
                    path=file_path, edit_kind="modify", is_error=failed,
                    result=result if failed else None, uuid=uid))
        return
    summary = raw if len(raw) <= 300 else truncate_middle(raw, 300)
    b.add(Event("tool", ts, text=summary, tool=name, path=file_path, is_error=failed,
                result=result, uuid=uid))
