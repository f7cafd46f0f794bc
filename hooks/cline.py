"""Cline: a task's ``api_conversation_history.json``, read.

Cline keeps each task in ``~/.cline/data/tasks/<task id>/`` (the VS Code extension in
its globalStorage ``tasks/<task id>/``); the task id is the Unix-millisecond time it
began. ``api_conversation_history.json`` is one JSON array of Anthropic-style messages
``{"role", "content"}`` that Cline rewrites whole as the task goes on. Everything Cline
says to the model on the user's side is a text block of that array, so the reader
tells them apart by Cline's own wrappers (src/core/prompts/responses.ts, and the task
loop that builds user content):

- the user's words: ``<task>`` (the request), ``<feedback>`` (after a completion, or
  with a denied tool call: "The user denied this operation and provided the following
  feedback"), ``<answer>`` (to ask_followup_question), ``<user_message>`` (new
  instructions when a task resumes);
- tool results: ``[tool for 'target'] Result:`` followed by the output (older Cline,
  XML tool calls in the assistant's text), or ``tool_result`` blocks (native tool
  calls, joined by ``tool_use_id``);
- Cline's own text, never the user's: ``<environment_details>`` (open files, the time,
  the working directory; its time and directory are read), ``[TASK RESUMPTION]``,
  todo-list reminders, "The user has provided feedback on the results ...", errors
  about the model's tool use.

The messages carry no timestamps: each user message is dated by its environment
details' "Current Time" (local time with its UTC offset), and the task id dates the
start. Cline is a transcript format, not a host dualtrace installs hooks into.
"""

from __future__ import annotations

import os
import re
from typing import Any

from dualtrace.encoder.session import MAX_TEXT_CHARS, Event, Session, truncate_middle
from dualtrace.hooks import toolcalls
from dualtrace.hooks.toolcalls import Call, iso_ms, obj, string

HOST = "cline"
DOCUMENT = True  # one JSON array (hooks/transcripts.py DocumentReader)
PREFILTER_TYPES: frozenset[bytes] = frozenset()
HISTORY_FILE = "api_conversation_history.json"

_KINDS = {"execute_command": "shell", "write_to_file": "write", "replace_in_file": "edit",
          "apply_diff": "edit", "new_task": "subagent"}
# Tools whose input is the agent speaking to the user (their result is not a tool's).
_SAYS = {"attempt_completion": "result", "ask_followup_question": "question",
         "plan_mode_respond": "response"}
_TOOL_NAMES = ("execute_command", "read_file", "write_to_file", "replace_in_file",
               "search_files", "list_files", "list_code_definition_names", "browser_action",
               "use_mcp_tool", "access_mcp_resource", "ask_followup_question",
               "attempt_completion", "plan_mode_respond", "new_task", "web_fetch",
               "load_mcp_documentation", "condense", "summarize_task", "report_bug")
_XML_CALL = re.compile(r"<(" + "|".join(_TOOL_NAMES) + r")>(.*?)</\1>", re.S)
_XML_PARAM = re.compile(r"<([a-z_]+)>\n?(.*?)\n?</\1>", re.S)
_THINKING = re.compile(r"<thinking>(.*?)</thinking>", re.S)

_RESULT_HEAD = re.compile(r"\A\[(\w+)(?: for '(.*?)')?\] Result:\s*", re.S)
_USER_WRAPPERS = re.compile(r"<(task|feedback|answer|user_message)>\n?(.*?)\n?</\1>", re.S)
_ENV = re.compile(r"<environment_details>.*?(?:</environment_details>|\Z)", re.S)
_INSERTED = re.compile(r"<(file_content|final_file_content)\b[^>]*>.*?</\1>", re.S)
_DENIED = re.compile(r"\AThe user denied this operation\.?")
_FAILED = re.compile(r"\AThe tool execution failed with the following error:")
_EXIT = re.compile(r"exit code (-?\d+)", re.I)
_CWD = re.compile(r"# Current Working Directory \((.+?)\) Files|"
                  r"current working directory is now '(.+?)'")
_TIME = re.compile(r"# Current Time\s+(\d{1,2})/(\d{1,2})/(\d{4}),? (\d{1,2}):(\d{2}):(\d{2})"
                   r"\s*([AP]M)?(?:\s*\([^,)]*,\s*UTC([+-]\d{1,2})(?::(\d{2}))?\))?")


def read(reader: Any, *, last_assistant_message: str | None = None) -> Session:
    from dualtrace.encoder.session import SessionBuilder

    path = str(reader.path)
    b = SessionBuilder(HOST, path)
    b.session_id = session_of(path)
    task = os.path.basename(os.path.dirname(path))
    if reader.cursor == 0 and os.path.basename(path) == HISTORY_FILE and re.fullmatch(
            r"\d{12,14}", task):
        b.saw_time(iso_ms(int(task)))  # the task id is when it began
    parser = _Parser(b)
    for message in reader.elements():
        if isinstance(message, dict):
            parser.message(message)
        else:
            b.noise["message:malformed"] += 1
    parser.flush()
    b.add_stop_message(last_assistant_message)
    return b.finish(reader)


def session_of(path: str) -> str:
    """The task id (the history file's folder), or the file's own name for a copy."""
    if os.path.basename(path) == HISTORY_FILE:
        return os.path.basename(os.path.dirname(os.path.abspath(path)))
    return os.path.splitext(os.path.basename(path))[0]


def _local_time(text: str) -> str | None:
    """Cline's "Current Time" (en-US, with the UTC offset) as UTC ISO, or None."""
    import datetime as dt

    m = _TIME.search(text)
    if not m:
        return None
    month, day, year, hour, minute, second = (int(m.group(i)) for i in range(1, 7))
    if m.group(7):
        hour = hour % 12 + (12 if m.group(7) == "PM" else 0)
    offset = dt.timedelta(0)
    if m.group(8):
        sign = -1 if m.group(8).startswith("-") else 1
        offset = sign * dt.timedelta(hours=abs(int(m.group(8))), minutes=int(m.group(9) or 0))
    try:
        when = dt.datetime(year, month, day, hour, minute, second,
                           tzinfo=dt.timezone(offset)).astimezone(dt.timezone.utc)
    except ValueError:
        return None
    return when.strftime("%Y-%m-%dT%H:%M:%S.000Z")


class _Parser:
    def __init__(self, builder: Any) -> None:
        self.b = builder
        self.ts: str | None = None  # the time of the user message last seen
        self.pending: list[dict[str, Any]] = []  # calls awaiting their result, in order
        self.n = 0

    def message(self, msg: dict[str, Any]) -> None:
        self.n += 1
        content = msg.get("content")
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content
        if not isinstance(blocks, list):
            self.b.noise["message:empty"] += 1
            return
        if isinstance(msg.get("ts"), (int, float)):
            self.ts = iso_ms(msg["ts"]) or self.ts
        if msg.get("role") == "user":
            texts = [bl.get("text") for bl in blocks if isinstance(bl, dict)
                     and isinstance(bl.get("text"), str)]
            self._environment("\n".join(t for t in texts if t))
            for block in blocks:
                if isinstance(block, dict):
                    self._user_block(block)
        elif msg.get("role") == "assistant":
            for k, block in enumerate(blocks):
                if isinstance(block, dict):
                    self._assistant_block(block, f"m{self.n}:{k}")
        else:
            self.b.noise[f"role:{msg.get('role')}"] += 1

    def _environment(self, text: str) -> None:
        for env in _ENV.findall(text):
            when = _local_time(env)
            if when:
                self.ts = when
                self.b.saw_time(when)
        found = _CWD.search(text)
        if found and not self.b.cwd:
            self.b.cwd = (found.group(1) or found.group(2)).strip()

    # ---------------------------------------------------------------- the assistant side

    def _assistant_block(self, block: dict[str, Any], uid: str) -> None:
        btype = block.get("type")
        if btype == "text" and isinstance(block.get("text"), str):
            self._assistant_text(block["text"], uid)
        elif btype == "thinking" and isinstance(block.get("thinking"), str):
            self._say(block["thinking"], uid, "thinking")
        elif btype == "tool_use":
            args = obj(block.get("input"))
            tid = string(block.get("id")) or uid
            self._call(str(block.get("name") or "tool"), args, tid)
        else:
            self.b.noise[f"assistant:{btype}"] += 1

    def _assistant_text(self, text: str, uid: str) -> None:
        """Text, with older Cline's tool calls written in it as XML."""
        for n, thought in enumerate(_THINKING.findall(text)):
            self._say(thought, f"{uid}:t{n}", "thinking")
        text = _THINKING.sub("", text)
        calls = list(_XML_CALL.finditer(text))
        self._say(_XML_CALL.sub("", text), uid, None)
        for n, call in enumerate(calls):
            args = {k: v for k, v in _XML_PARAM.findall(call.group(2))}
            self._call(call.group(1), args, f"{uid}:c{n}")

    def _say(self, text: str, uid: str, detail: str | None) -> None:
        text = text.strip()
        if text:
            self.b.add(Event("assistant", self.ts, text=truncate_middle(text, MAX_TEXT_CHARS),
                             detail=detail, uuid=uid))

    def _call(self, name: str, args: dict[str, Any], uid: str) -> None:
        said = args.get(_SAYS.get(name, ""))
        if isinstance(said, str):
            self._say(said, uid, None)  # the agent's conclusion or question, to the user
        self.pending.append({"name": name, "args": args, "uid": uid, "ts": self.ts})

    # ---------------------------------------------------------------- the user side

    def _user_block(self, block: dict[str, Any]) -> None:
        if block.get("type") == "tool_result":
            tid = block.get("tool_use_id")
            call = next((c for c in self.pending if c["uid"] == tid), None)
            output = toolcalls.text_of(block.get("content"))
            if call is None:
                self.b.noise["orphan-result"] += 1
                return
            self.pending.remove(call)
            self._result(call, output, failed=block.get("is_error") is True)
            return
        if block.get("type") == "image":
            self.b.noise["image"] += 1
            return
        text = string(block.get("text"))
        head = _RESULT_HEAD.match(text)
        if head:
            call = next((c for c in self.pending if c["name"] == head.group(1)), None)
            call = call or (self.pending[0] if self.pending else None)
            if call is None:
                self.b.noise["orphan-result"] += 1
                return
            self.pending.remove(call)
            self._result(call, text[head.end():])
            return
        self._words(text, None)

    def _words(self, text: str, detail: str | None) -> None:
        """The user's words in Cline's wrappers; everything else is Cline's own text."""
        said = False
        for tag, body in _USER_WRAPPERS.findall(_ENV.sub("", text)):
            for inserted in _INSERTED.findall(body):
                self.b.noise[f"inserted:{inserted}"] += 1
            body = _INSERTED.sub("", body).strip()
            if body:
                said = True
                self.b.add(Event("user", self.ts, text=truncate_middle(body, MAX_TEXT_CHARS),
                                 detail=detail or (None if tag == "task" else tag)))
        if not said and text.strip():
            self.b.noise["cline-text"] += 1

    def _result(self, call: dict[str, Any], output: str, failed: bool = False) -> None:
        name, args, uid = call["name"], call["args"], call["uid"]
        ts = call["ts"] or self.ts
        output = output.strip()
        if name in _SAYS:
            # What came back is the user's answer or feedback, or Cline's "Done".
            self._words(output, None if name == "attempt_completion" else "answer")
            return
        path = args.get("path") if isinstance(args.get("path"), str) else None
        if _DENIED.match(output):
            target = path or (string(args.get("command")))
            self.b.add(Event("tool", ts, text=toolcalls.summary(args), tool=name, path=path,
                             is_error=True, detail="rejected", uuid=uid))
            self._words(output, f"rejection of {name}" + (f" {target}" if target else ""))
            return
        failed = failed or bool(_FAILED.match(output))
        kind = _KINDS.get(name, "other")
        code: int | None = None
        if kind == "shell":
            found = _EXIT.search(output[:300])
            code = int(found.group(1)) if found else (1 if failed else None)
            if "\nOutput:\n" in output[:300]:
                output = output.split("\nOutput:\n", 1)[1]
        change = ""
        if kind == "write":
            change = toolcalls.written(args.get("content"))
        elif kind == "edit" and isinstance(args.get("diff"), str):
            blocks = args["diff"].count("------- SEARCH") or args["diff"].count("<<<<<<< SEARCH")
            change = f"{blocks or 1} search/replace block{'s' if blocks > 1 else ''}"
        command = string(args.get("command"))
        prompt = string(args.get("context"))
        toolcalls.add(self.b, Call(kind, name, args, output=output, failed=failed, exit_code=code,
                                   ts=ts, uid=uid, path=path, command=command, change=change,
                                   prompt=prompt))

    def flush(self) -> None:
        """Calls whose result is not in the file (yet): keep the call itself."""
        for call in self.pending:
            if call["name"] in _SAYS:
                continue
            self.b.add(Event("tool", call["ts"], text=toolcalls.summary(call["args"]),
                             tool=call["name"], uuid=call["uid"], detail="no result"))
        self.pending.clear()
