"""Claude Code: hook payloads, settings files, and the transcript reader.

Transcripts: ``~/.claude/projects/<project>/<session>.jsonl`` (``CLAUDE_CONFIG_DIR``
moves ``~/.claude``). One assistant API message is split over several lines sharing
``message.id``; ``progress`` and snapshot records are noise; resumed sessions replay
uuids; compaction appends a boundary plus an ``isCompactSummary`` user line;
subagents live in ``<session>/subagents/agent-*.jsonl`` (docs/HOSTS.md).

This module is the Claude Code ``Host`` (hooks/host.py). The hook fast path imports
it: module level is standard library only; the reader imports encoder.session lazily.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

TYPE_CHECKING = False  # typing costs ~4 ms: this module is on the hook fast path
if TYPE_CHECKING:
    from typing import Any

    from dualtrace.encoder.session import Event, Session, SessionBuilder

HOST = NAME = "claude-code"
TRANSCRIPT_FORMAT = "claude-code"
# Claude Code hook event -> (our event, timeout seconds, matcher or None)
EVENTS: dict[str, tuple[str, int, str | None]] = {
    "Stop": ("stop", 10, None),
    # A turn that ended in an API error fires StopFailure instead of Stop (Claude Code
    # 2.1.x): the turn's work is in the transcript all the same.
    "StopFailure": ("stop", 10, None),
    "SessionEnd": ("session-end", 5, None),
    "SessionStart": ("session-start", 10, "startup|resume|clear|compact"),
    "UserPromptSubmit": ("prompt", 5, None),
    "PreCompact": ("pre-compact", 10, None),
}
TIMEOUT_UNIT = 1
SCOPES = ("user", "project", "local")
REQUIRES_TRANSCRIPT = True
SWEEP_ON_START = True  # session-start re-checks the sessions next to the transcript
SWEEP_FOLDER = True  # ... which are the .jsonl files of its folder (sibling_transcripts)
KEEPS_OWN_TRANSCRIPT = False
# No output wanted: run in the shell's background (install). Claude Code waits for every
# synchronous hook, `claude -p` included, and its own "async": true is no substitute: at
# the end of a `claude -p` turn it kills async hooks still running (a Stop hook never
# finished), and it still waits for SessionEnd (docs/HOSTS.md, measured on 2.1.328).
BACKGROUND_EVENTS = frozenset({"Stop", "StopFailure", "SessionEnd", "PreCompact"})
# A stored SessionStart text and a generic prompt are answered without site (hookcmd).
FAST_EVENTS = frozenset({"SessionStart", "UserPromptSubmit"})

# Events that belong to a subagent or are not about the main conversation.
_IGNORED_EVENTS = frozenset({"SubagentStop", "SubagentStart", "Notification"})

# Host-injected wrappers: never the user's words. Slash-command arguments and the
# user's own shell runs (``!cmd`` -> bash-input/stdout/stderr) are taken out first and
# kept as what they are (the request, a command); IDE context becomes a tool event.
_NOISE_TAGS = ("command-name", "command-message", "command-args", "local-command-stdout",
               "local-command-stderr", "local-command-caveat", "system-reminder",
               "task-notification", "user-prompt-submit-hook", "bash-input", "bash-stdout",
               "bash-stderr", "ide_opened_file", "ide_selection", "ide_diagnostics",
               "user-memory-input")
_TAG_RE = re.compile(r"<(" + "|".join(_NOISE_TAGS) + r")>.*?</\1>", re.S)
_OPEN_TAG_RE = re.compile(r"<(" + "|".join(_NOISE_TAGS) + r")>.*\Z", re.S)  # unclosed
_NAME_RE = re.compile(r"<command-name>(.*?)</command-name>", re.S)
_BASH_RE = re.compile(r"<(bash-input|bash-stdout|bash-stderr)>(.*?)</\1>", re.S)
_IDE_RE = re.compile(r"<(ide_opened_file|ide_selection|ide_diagnostics)>(.*?)</\1>", re.S)
_EXIT_CODE = re.compile(r"Exit code (\d+)")
# A rejected tool call: "... The tool use was rejected (...). STOP what you are doing ..."
# optionally followed by what the user said about it.
_REJECTED = re.compile(r"\AThe user doesn't want to proceed with this tool use\.|"
                       r"\AThe user doesn't want to take this action", re.I)
_REJECT_REASON = re.compile(
    r"(?:the user provided the following reason for the rejection|"
    r"to tell you how to proceed, the user said|the user said)\s*:\s*(.+)\Z", re.I | re.S)
# How the user's own shell run went, read from its output (the record has no exit code).
_SHELL_FAILED = re.compile(r"\b\d+ (?:failed|errors?)\b|\bFAILED\b|^error(?:\[|:)|Traceback \(most"
                           r"|command not found", re.M)
_EDIT_TOOLS = {"Edit": "modify", "MultiEdit": "modify", "Write": "modify",
               "NotebookEdit": "modify"}
_SUBAGENT_TOOLS = ("Task", "Agent")
# Noise record types the line reader drops before JSON parsing.
PREFILTER_TYPES = frozenset({b"progress", b"file-history-snapshot", b"queue-operation"})


# ------------------------------------------------------------------ the host


def keep(state: str, payload: dict, lines: list[dict]) -> tuple[str, str | None]:
    """Claude Code writes its own transcript: ``normalize`` never returns ``lines``."""
    raise NotImplementedError("Claude Code keeps its own transcript")


def detect(payload: dict) -> bool:
    """The default host: any payload no other host claims (hooks/registry.py)."""
    return True


def normalize(payload: dict, event: str, state: str = "") -> dict:
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


CONTEXT_CAP = 10_000  # the host drops additionalContext beyond this many characters


def context_output(event: str, text: str) -> str:
    """A SessionStart / UserPromptSubmit hook's stdout that adds ``text`` to the model's
    context: ``{"hookSpecificOutput": {"hookEventName", "additionalContext"}}``."""
    name = next((ev for ev, (ours, _t, _m) in EVENTS.items() if ours == event), event)
    return json.dumps({"hookSpecificOutput": {"hookEventName": name,
                                              "additionalContext": text[:CONTEXT_CAP]}})


def settings_path(scope: str, root: Path, home: Path) -> Path:
    user = Path(os.environ.get("CLAUDE_CONFIG_DIR") or home / ".claude").expanduser()
    return {"user": user / "settings.json", "project": root / ".claude" / "settings.json",
            "local": root / ".claude" / "settings.local.json"}[scope]


AFTER_INSTALL = ("Next: restart Claude Code (or review the hooks with /hooks) so it loads "
                 "them.")


def recall_permission(command: str) -> str:
    """The permission rule that lets the agent run ``<command> recall ...`` unprompted."""
    return f"Bash({command} recall:*)"


def enabled_plugin_files(root: Path, home: Path) -> list[Path]:
    """Settings files that enable a dualtrace plugin (``enabledPlugins`` has a
    ``dualtrace@<marketplace>`` key set to true): its hooks run beside settings hooks."""
    found = []
    for scope in SCOPES:
        path = settings_path(scope, root, home)
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        plugins = data.get("enabledPlugins") if isinstance(data, dict) else None
        if isinstance(plugins, dict) and any(
                str(k).split("@", 1)[0] == "dualtrace" and v for k, v in plugins.items()):
            found.append(path)
    return found


def projects_dir(root: Path) -> Path:
    """``~/.claude/projects/<root with every non-alphanumeric as '-'>``."""
    base = Path(os.environ.get("CLAUDE_CONFIG_DIR") or Path.home() / ".claude").expanduser()
    return base / "projects" / re.sub(r"[^A-Za-z0-9]", "-", str(root))


def project_transcripts(root: Path) -> list[Path]:
    folder = projects_dir(root)
    return sorted(folder.glob("*.jsonl")) if folder.is_dir() else []


def transcripts_place(root: Path) -> str:
    return f"{projects_dir(root)}/*.jsonl"


def find_transcript(session_id: str) -> str | None:
    return None  # every Claude Code payload names its transcript


def session_of(transcript: str) -> str:
    return os.path.basename(transcript).removesuffix(".jsonl")


def sibling_transcripts(transcript: str) -> list[str]:
    """Every main-session transcript next to ``transcript`` (its project folder)."""
    folder = os.path.dirname(transcript)
    try:
        names = os.listdir(folder)
    except OSError:
        return []
    return sorted(os.path.join(folder, n) for n in names if n.endswith(".jsonl"))


def memory_dir(agent_id: str | None) -> str | None:
    return None


def _str(value: object) -> str | None:
    return value if isinstance(value, str) and value.strip() else None


# ------------------------------------------------------------------ the reader


_COMMAND_NAME = re.compile(r"<command-name>\s*(/?[^<\s]+)\s*</command-name>")
_COMMAND_ARGS = re.compile(r"<command-args>(.*?)</command-args>", re.S)


# Claude Code's own commands that ask the agent nothing: they act on the session or the
# tool (a bare "/clear", "/compact", "/model sonnet", "/add-dir ../lib"). Their arguments
# are settings for the host ("/compact keep the API decisions" instructs the summarizer),
# never a request, so the whole command is dropped. A custom command (.claude/commands)
# and the built-ins that prompt the agent (/init, /review, /security-review,
# /pr_comments) are requests: their arguments are kept (#12 item 1).
_HOUSEKEEPING = frozenset({
    "/clear", "/exit", "/quit", "/cost", "/help", "/status", "/model", "/config", "/resume",
    "/login", "/logout", "/doctor", "/permissions", "/hooks", "/mcp", "/ide", "/vim",
    "/terminal-setup", "/release-notes", "/export", "/context", "/agents", "/usage", "/theme",
    "/fast", "/compact", "/add-dir", "/memory", "/rewind", "/rename", "/plugin",
    "/install-github-app", "/statusline", "/output-style", "/privacy-settings", "/bashes",
    "/todos", "/upgrade", "/bug", "/feedback", "/migrate-installer", "/stats", "/tasks",
    "/sandbox"})


# "Stop hook feedback:" (also SubagentStop and other events' hooks) opens the text
# Claude Code sends the agent when a hook blocks it.
_HOOK_FEEDBACK = re.compile(r"([A-Z][A-Za-z]+) hook feedback:\s*")


def clean_user_text(text: str) -> str:
    """Remove host-injected tags; '' when nothing the user typed is left.

    A slash command the user typed is their request: it is kept as ``/name args``
    (the tags around it are the host's, the name and arguments are the user's).
    """
    typed = ""
    if "<" in text:
        name = _COMMAND_NAME.search(text)
        if name:
            args = _COMMAND_ARGS.search(text)
            command = name.group(1) if name.group(1).startswith("/") else "/" + name.group(1)
            typed = f"{command} {args.group(1).strip()}".strip() if args else command
            if command in _HOUSEKEEPING:
                typed = ""
        text = _TAG_RE.sub("", text)
        text = _OPEN_TAG_RE.sub("", text)
    text = text.strip()
    if typed:
        text = f"{typed}\n\n{text}" if text else typed
    if text.startswith(("[Request interrupted by user", "Caveat: The messages",
                        "Read the output file to retrieve the result")):
        return ""
    return text


def rejection_reason(output: str) -> str | None:
    """What the user said when rejecting a tool call ('' for a bare rejection, None if not one)."""
    if not _REJECTED.search(output.strip()):
        return None
    found = _REJECT_REASON.search(output)
    return found.group(1).strip() if found else ""


def _blocks_text(content: Any) -> str:
    """Text of a string or a list of content blocks (images become a marker)."""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return ""
    parts: list[str] = []
    for block in content:
        if isinstance(block, str):
            parts.append(block)
        elif isinstance(block, dict):
            btype = block.get("type")
            if btype == "text" and isinstance(block.get("text"), str):
                parts.append(block["text"])
            elif btype == "image":
                parts.append("[image]")
    return "\n".join(parts)


def input_summary(name: str, data: Any) -> str:
    """A one-line summary of a tool input (never the full file contents)."""
    from dualtrace.encoder.session import truncate_middle
    if not isinstance(data, dict):
        return truncate_middle(str(data), 200)
    for key in ("file_path", "notebook_path", "path", "pattern", "url", "query", "command"):
        value = data.get(key)
        if isinstance(value, str) and value:
            extra = ""
            if key == "pattern" and isinstance(data.get("path"), str):
                extra = f" in {data['path']}"
            return truncate_middle(value + extra, 300)
    if name == "TodoWrite" and isinstance(data.get("todos"), list):
        items = [str(t.get("content", "")) for t in data["todos"] if isinstance(t, dict)]
        return truncate_middle("; ".join(items), 300)
    try:
        return truncate_middle(json.dumps(data, ensure_ascii=False, sort_keys=True), 200)
    except (TypeError, ValueError):
        return ""


class _Parser:
    def __init__(self, builder: SessionBuilder, agent: str | None = None) -> None:
        self.b = builder
        self.agent = agent
        self.seen_uuids: set[str] = set()
        self.msg_index: dict[str, int] = {}  # message.id(+thinking) -> event index
        self.pending: dict[str, tuple[str, Any, str | None]] = {}  # tool_use id -> call
        self.subagent_ids: list[tuple[str, int]] = []  # (agentId, event index)
        self.shell: int | None = None  # index of the user's last `!command`, awaiting output

    def feed(self, rec: dict[str, Any]) -> None:
        b = self.b
        rtype = rec.get("type")
        ts = rec.get("timestamp") if isinstance(rec.get("timestamp"), str) else None
        if rtype not in ("user", "assistant", "system"):
            b.noise[str(rtype)] += 1
            return
        uuid = rec.get("uuid")
        if isinstance(uuid, str):
            if uuid in self.seen_uuids:  # a resumed session replays earlier lines
                b.noise["replayed"] += 1
                return
            self.seen_uuids.add(uuid)
        if b.session_id is None and isinstance(rec.get("sessionId"), str):
            b.session_id = rec["sessionId"]
        if isinstance(rec.get("cwd"), str):
            b.cwd = b.cwd or rec["cwd"]
        if isinstance(rec.get("gitBranch"), str) and rec["gitBranch"]:
            b.git_branch = rec["gitBranch"]  # the latest branch wins: sessions switch
        if not rec.get("isMeta"):
            # An isMeta line can be a copy: after /clear, Claude Code starts the new
            # session's file with the old conversation's "Caveat" line, timestamp and
            # all, which would date the session days early (and sort it before sessions
            # it came after). Its own text still reaches the session (_meta).
            b.saw_time(ts)
        if rec.get("isSidechain") is True and self.agent is None:
            # Claude Code 1.0.x wrote sub-agent turns inline: the prompt the agent gave
            # its sub-agent is a "user" record there, but nobody on the main thread said it.
            self.agent = "sidechain"
            try:
                self._dispatch(rtype, rec, ts)
            finally:
                self.agent = None
            return
        self._dispatch(rtype, rec, ts)

    def _dispatch(self, rtype: Any, rec: dict[str, Any], ts: str | None) -> None:
        if rtype == "system":
            self._system(rec, ts)
        elif rec.get("isMeta"):
            self._meta(rec, ts)
        elif rtype == "assistant":
            self._assistant(rec, ts)
        else:
            self._user(rec, ts)

    def _meta(self, rec: dict[str, Any], ts: str | None) -> None:
        """Text Claude Code adds on the user's side (``isMeta``): never the user's words.

        Two kinds are kept, as tool events (evidence, like any tool output): a hook's
        feedback that blocked a stop ("Stop hook feedback: ... untracked files"), and
        the text a slash command the user just typed expands to (``/init``'s prompt).
        The local-command caveat, system reminders and skill texts stay out.
        """
        from dualtrace.encoder.session import MAX_RESULT_CHARS, Event, truncate_middle

        b = self.b
        text = _blocks_text(rec.get("message", {}).get("content")
                            if isinstance(rec.get("message"), dict) else None).strip()
        hook = _HOOK_FEEDBACK.match(text)
        last = b.events[-1] if b.events else None
        if hook:
            name = hook.group(1)
            b.add(Event("tool", ts, text=f"{name} hook feedback", tool=f"{name} hook",
                        detail="hook-feedback", agent=self.agent,
                        result=truncate_middle(text[hook.end():].strip(), MAX_RESULT_CHARS)))
        elif (text and not text.startswith(("<", "Caveat:")) and last is not None
              and last.kind == "user" and last.agent == self.agent
              and last.text.startswith("/")):
            command = last.text.split(None, 1)[0]
            b.add(Event("tool", ts, text=f"{command} expands to", tool="slash-command",
                        detail="command-expansion", agent=self.agent,
                        result=truncate_middle(text, MAX_RESULT_CHARS)))
        else:
            b.noise["meta"] += 1

    def _system(self, rec: dict[str, Any], ts: str | None) -> None:
        from dualtrace.encoder.session import Event, truncate_middle
        sub = rec.get("subtype")
        if sub == "compact_boundary":
            meta = rec["compactMetadata"] if isinstance(rec.get("compactMetadata"), dict) else {}
            detail = f"trigger={meta.get('trigger')}, preTokens={meta.get('preTokens')}"
            self.b.add(Event("compaction", ts, text="", detail=detail, agent=self.agent))
        elif sub == "api_error":
            msg = rec.get("content") or rec.get("error") or "API error"
            text = msg if isinstance(msg, str) else json.dumps(msg)[:500]
            self.b.add(Event("error", ts, text=truncate_middle(text, 500), is_error=True,
                             detail="api_error", agent=self.agent))
        else:
            self.b.noise[f"system:{sub}"] += 1

    def _assistant(self, rec: dict[str, Any], ts: str | None) -> None:
        msg = rec.get("message")
        if not isinstance(msg, dict):
            return
        mid = msg.get("id") if isinstance(msg.get("id"), str) else rec.get("uuid")
        content = msg.get("content")
        if isinstance(content, str):
            content = [{"type": "text", "text": content}]
        if not isinstance(content, list):
            return
        for block in content:
            if not isinstance(block, dict):
                continue
            btype = block.get("type")
            if btype in ("text", "thinking"):
                text = block.get("text") if btype == "text" else block.get("thinking")
                if not isinstance(text, str) or not text.strip():
                    continue
                self._merge_text(f"{mid}:{btype}", text.strip(), ts,
                                 "thinking" if btype == "thinking" else None)
            elif btype == "tool_use":
                tid = block.get("id")
                name = block["name"] if isinstance(block.get("name"), str) else "tool"
                if isinstance(tid, str):
                    self.pending[tid] = (name, block.get("input"), ts)

    def _merge_text(self, key: str, text: str, ts: str | None, detail: str | None) -> None:
        from dualtrace.encoder.session import MAX_TEXT_CHARS, Event, truncate_middle
        index = self.msg_index.get(key)
        if index is not None:  # a later line of the same API message
            prev = self.b.events[index]
            merged = truncate_middle(prev.text + "\n\n" + text, MAX_TEXT_CHARS)
            self.b.replace_at(index, text=merged)
            return
        self.msg_index[key] = self.b.add(
            Event("assistant", ts, text=truncate_middle(text, MAX_TEXT_CHARS), detail=detail,
                  agent=self.agent, uuid=key.split(":")[0]))

    def _user(self, rec: dict[str, Any], ts: str | None) -> None:
        from dualtrace.encoder.session import MAX_TEXT_CHARS, Event, truncate_middle
        msg = rec.get("message")
        if not isinstance(msg, dict):
            return
        content = msg.get("content")
        if rec.get("isCompactSummary"):
            summary = _blocks_text(content).strip()
            last = self.b.events[-1] if self.b.events else None
            if last is not None and last.kind == "compaction" and not last.text:
                self.b.replace_at(len(self.b.events) - 1,
                                  text=truncate_middle(summary, MAX_TEXT_CHARS))
            else:
                self.b.add(Event("compaction", ts, text=truncate_middle(summary, MAX_TEXT_CHARS),
                                 agent=self.agent))
            return
        tur = rec.get("toolUseResult")
        if isinstance(content, list):
            texts: list[str] = []
            for block in content:
                if isinstance(block, dict) and block.get("type") == "tool_result":
                    self._tool_result(block, tur, ts)
                elif isinstance(block, dict) and block.get("type") == "text":
                    if isinstance(block.get("text"), str):
                        texts.append(block["text"])
            text = "\n".join(texts)
        else:
            text = content if isinstance(content, str) else ""
        if not text:
            return
        if "<" in text:
            self._wrapped_context(text, ts)
        cleaned = clean_user_text(text)
        if not cleaned:
            self.b.noise["injected-user-text"] += 1
            return
        self.b.add(Event("user", ts, text=truncate_middle(cleaned, MAX_TEXT_CHARS),
                         agent=self.agent, uuid=rec.get("uuid")))

    def _wrapped_context(self, text: str, ts: str | None) -> None:
        """The user's own shell runs and IDE context: kept as what they are, never as words."""
        from dualtrace.encoder.session import MAX_RESULT_CHARS, Event, truncate_middle

        b = self.b
        for tag, body in _BASH_RE.findall(text):
            body = body.strip()
            if tag == "bash-input" and body:
                self.shell = b.add(Event("command", ts, text="run by the user", tool="user-shell",
                                         command=body, agent=self.agent))
            elif tag != "bash-input" and body and self.shell is not None:
                prev = b.events[self.shell]
                output = ((prev.result or "") + "\n" + body).strip()
                failed = bool(_SHELL_FAILED.search(output))
                b.replace_at(self.shell, result=truncate_middle(output, MAX_RESULT_CHARS),
                             exit_code=1 if failed else 0, is_error=failed)
        for tag, body in _IDE_RE.findall(text):
            body = " ".join(body.split())
            if body:
                b.add(Event("tool", ts, text=truncate_middle(body, 300), tool="ide",
                            detail=tag, agent=self.agent))

    def _tool_result(self, block: dict[str, Any], tur: Any, ts: str | None) -> None:
        from dualtrace.encoder.session import (
            MAX_RESULT_CHARS,
            MAX_TEXT_CHARS,
            Event,
            commit_events,
            shell_edit_events,
            truncate_middle,
        )
        tid = block.get("tool_use_id")
        name, data, call_ts = self.pending.pop(tid, ("tool", None, ts)) if isinstance(
            tid, str) else ("tool", None, ts)
        is_error = bool(block.get("is_error"))
        output = _blocks_text(block.get("content"))
        tur = tur if isinstance(tur, dict) else {}
        data = data if isinstance(data, dict) else {}
        result = truncate_middle(output, MAX_RESULT_CHARS)
        b, agent = self.b, self.agent
        when = ts or call_ts
        reason = rejection_reason(output) if is_error else None
        if reason is not None:
            # The user refused this call: nothing ran and nothing was written. What they
            # said about it ("use pnpm") is the user speaking.
            target = data.get("file_path") or data.get("command") or ""
            b.add(Event("tool", when, text=input_summary(name, data), tool=name,
                        path=data.get("file_path") if isinstance(data.get("file_path"), str) else None,
                        is_error=True, detail="rejected", agent=agent, uuid=tid))
            if reason:
                b.add(Event("user", when, text=truncate_middle(reason, MAX_TEXT_CHARS), agent=agent,
                            detail=f"rejection of {name}" + (f" {target}" if target else "")))
            return
        if name == "Bash":
            command = data["command"] if isinstance(data.get("command"), str) else ""
            if is_error:
                m = _EXIT_CODE.search(output[:200])
                code: int | None = int(m.group(1)) if m else 1
            elif tur.get("interrupted"):
                code = None
            else:
                code = 0
            if tur and not output:
                output = "\n".join(str(tur.get(k) or "") for k in ("stdout", "stderr")).strip()
                result = truncate_middle(output, MAX_RESULT_CHARS)
            b.add(Event("command", when, text=str(data.get("description") or ""), tool=name,
                        command=command, exit_code=code, is_error=is_error, result=result,
                        agent=agent, uuid=tid))
            for ev in (*shell_edit_events(command, when, not is_error, name, agent, tid),
                       *commit_events(command, output, when, code == 0, agent)):
                b.add(ev)
        elif name in _EDIT_TOOLS:
            path = data.get("file_path") or data.get("notebook_path") or tur.get("filePath")
            kind = "create" if tur.get("type") == "create" else _EDIT_TOOLS[name]
            change = ""
            if name == "Edit":
                change = f"- {data.get('old_string', '')}\n+ {data.get('new_string', '')}"
            elif name == "MultiEdit" and isinstance(data.get("edits"), list):
                change = f"{len(data['edits'])} edits"
            elif name == "Write" and isinstance(data.get("content"), str):
                change = f"{data['content'].count(chr(10)) + 1} lines written"
            b.add(Event("edit", when, text=change and truncate_middle(change, 600), tool=name,
                        path=str(path) if path else None, edit_kind=kind, is_error=is_error,
                        result=result if is_error else None, agent=agent, uuid=tid))
        elif name in _SUBAGENT_TOOLS:
            prompt = data.get("description") or data.get("prompt") or ""
            agent_id = tur.get("agentId") if isinstance(tur.get("agentId"), str) else None
            if not output and isinstance(tur.get("content"), list):
                output = _blocks_text(tur["content"])
            idx = b.add(Event("subagent", when, text=truncate_middle(str(prompt), 500),
                              tool=name, is_error=is_error,
                              result=truncate_middle(output, MAX_RESULT_CHARS),
                              detail=str(data.get("subagent_type") or "") or None,
                              agent=agent_id, uuid=tid))
            if agent_id:
                self.subagent_ids.append((agent_id, idx))
        else:
            b.add(Event("tool", when, text=input_summary(name, data), tool=name,
                        path=data.get("file_path") if isinstance(data.get("file_path"), str)
                        else None, is_error=is_error, result=result, agent=agent, uuid=tid))

    def flush_pending(self) -> None:
        """Tool calls whose result is not in the file (yet): keep the call itself."""
        from dualtrace.encoder.session import Event
        for tid, (name, data, ts) in self.pending.items():
            self.b.add(Event("tool", ts, text=input_summary(name, data), tool=name,
                             agent=self.agent, uuid=tid, detail="no result"))
        self.pending.clear()


def _subagent_files(source: Path, session_id: str | None) -> dict[str, Path]:
    from dualtrace.sanitize import safe_session_id

    folder = source.with_suffix("") / "subagents"
    try:
        # The id comes from the transcript's text: only a plain file name is looked up.
        if not folder.is_dir() and session_id and safe_session_id(session_id) == session_id:
            folder = source.parent / session_id / "subagents"
        if not folder.is_dir():
            return {}
    except OSError:  # a name too long for the file system, and the like
        return {}
    found: dict[str, Path] = {}
    for f in sorted(folder.glob("agent-*.jsonl")):
        agent_id = f.stem[len("agent-"):]
        # acompact-* files are the compaction summarizer: its output already is the
        # isCompactSummary line of the main file.
        if agent_id.startswith("acompact"):
            continue
        found[agent_id] = f
    return found


def _summarize_subagent(path: Path, agent_id: str) -> tuple[list[Event], str, str | None] | None:
    """Nested events worth keeping (edits, commits, failures) and a one-line summary."""
    from dualtrace.encoder.session import SessionBuilder, truncate_middle
    from dualtrace.hooks.transcripts import LineReader

    reader = LineReader(path, skip_types=PREFILTER_TYPES)
    builder = SessionBuilder(HOST, str(path))
    parser = _Parser(builder, agent=agent_id)
    try:
        for rec in reader.records():
            parser.feed(rec)
    except OSError:
        return None
    parser.flush_pending()
    events = builder.events
    users = [e for e in events if e.kind == "user"]
    if not users and not [e for e in events if e.kind != "user"]:
        return None
    prompt = users[0].text if users else ""
    if prompt.strip() == "Warmup":
        return None
    tools = sum(1 for e in events if e.kind in ("tool", "command", "edit"))
    commands = [e for e in events if e.kind == "command"]
    failed = sum(1 for e in commands if e.is_error)
    edited = sorted({e.path for e in events if e.kind == "edit" and e.path and not e.is_error})
    summary = f"{tools} tool calls, {len(commands)} commands ({failed} failed)"
    if edited:
        summary += ", edited: " + ", ".join(edited[:10])
    nested = [e for e in events if e.kind in ("edit", "commit")
              or (e.kind == "command" and e.is_error)]
    final = next((e.text for e in reversed(events)
                  if e.kind == "assistant" and e.detail != "thinking"), "")
    return nested, summary + ("\nprompt: " + truncate_middle(prompt, 300) if prompt else "") + (
        "\nresult: " + truncate_middle(final, 600) if final else ""), builder.started


def read(reader: Any, *, last_assistant_message: str | None = None,
         follow_subagents: bool = True) -> Session:
    from dualtrace.encoder.session import SessionBuilder
    source = Path(reader.path)
    builder = SessionBuilder(HOST, str(source))
    parser = _Parser(builder)
    for rec in reader.records():
        parser.feed(rec)
    parser.flush_pending()
    if follow_subagents:
        _attach_subagents(parser, source, reader.cursor == 0)
    builder.add_stop_message(last_assistant_message)
    builder.noise.update(getattr(reader, "prefiltered", {}))
    return builder.finish(reader)


def _attach_subagents(parser: _Parser, source: Path, whole_file: bool) -> None:
    from dualtrace.encoder.session import Event
    files = _subagent_files(source, parser.b.session_id)
    if not files:
        return
    b = parser.b
    inserts: list[tuple[int, list[Event]]] = []
    linked = set()
    for agent_id, idx in parser.subagent_ids:
        path = files.get(agent_id)
        if path is None:
            continue
        linked.add(agent_id)
        got = _summarize_subagent(path, agent_id)
        if got is None:
            continue
        nested, summary, _ = got
        b.replace_at(idx, detail=summary)
        inserts.append((idx + 1, nested))
    if whole_file:
        # Subagents not started through a Task result in this file (e.g. resumed
        # sessions) still did work: add them at the end, in file order.
        for agent_id, path in files.items():
            if agent_id in linked:
                continue
            got = _summarize_subagent(path, agent_id)
            if got is None:
                continue
            nested, summary, first_ts = got
            inserts.append((len(b.events), [Event("subagent", first_ts, text="(subagent)",
                                                  detail=summary, agent=agent_id), *nested]))
    for pos, evs in sorted(inserts, key=lambda x: x[0], reverse=True):
        b.events[pos:pos] = evs
