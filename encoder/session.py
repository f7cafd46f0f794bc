"""The normalized session model every host reader produces.

Readers in ``dualtrace.hooks`` turn a host's transcript into a :class:`Session`;
redaction, the digest and the gates only ever see this model, so host quirks stay
in ``hooks/``. Records are frozen: a stage that changes text (redaction) builds a
new session with :func:`dataclasses.replace` instead of mutating a shared one.
"""

from __future__ import annotations

import posixpath
import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from typing import Any

EVENT_KINDS = frozenset(
    {"user", "assistant", "tool", "edit", "command", "error", "commit", "subagent", "compaction"}
)

# Huge tool outputs (a Read of a lockfile, a test log) are cut to head + tail here,
# before redaction and the digest: nothing downstream needs megabytes of output, and
# the cut bounds memory and time for every later stage.
MAX_RESULT_CHARS = 4000
_ANSI_ESCAPE = re.compile(r"\x1b(?:\[[0-9;?]*[ -/]*[@-~]|\][^\x07\x1b]*(?:\x07|\x1b\\)|[@-Z\\-_])")
MAX_TEXT_CHARS = 20000


def truncate_middle(text: str, limit: int) -> str:
    """Keep the head and tail of ``text`` within ``limit`` chars, marking the cut."""
    if limit <= 0:
        return ""
    if len(text) <= limit:
        return text
    marker = f"\n[... {len(text) - limit} chars truncated ...]\n"
    keep = max(limit - len(marker), 0)
    head = keep * 2 // 3
    tail = keep - head
    return text[:head] + marker + (text[-tail:] if tail else "")


# The failure summaries of test runners and checkers, as their last lines print them:
# "1 failed, 3 passed" (pytest), "297 tests, 11 failures" (ExUnit), "Tests: 2 failed"
# (jest), "test result: FAILED" (cargo), "FAIL" / "FAILED" lines (go, pytest), "Found 3
# errors" (mypy, ruff). A count of 0 is no failure.
_FAILURE_SUMMARY = re.compile(
    r"\b[1-9]\d* (?:failed|failures?|errors?)\b|^(?:FAILED|FAIL)\b|\btest result: FAILED\b",
    re.M)


def _piped_check_failed(command: str, result: str) -> bool:
    from dualtrace.encoder.cues import check_command  # cues imports this module's types

    return check_command(command) is not None and bool(_FAILURE_SUMMARY.search(result))


@dataclass(frozen=True)
class Event:
    """One thing that happened in a session, in order.

    ``kind`` is one of :data:`EVENT_KINDS`. ``text`` is the human-readable core (a
    message, a tool's input summary, a commit message); the optional fields carry
    structure the digest and gates use without re-parsing text.
    """

    kind: str
    ts: str | None
    text: str = ""
    tool: str | None = None  # tool name as the host spells it (Bash, Edit, exec_command)
    path: str | None = None  # file path for edits and file tools
    edit_kind: str | None = None  # create | modify | delete
    command: str | None = None  # shell command line
    exit_code: int | None = None
    is_error: bool = False
    result: str | None = None  # tool result summary (already head+tail truncated)
    detail: str | None = None  # kind-specific extra: "thinking", commit sha, PR ref, ...
    agent: str | None = None  # subagent id when the event happened inside a subagent
    uuid: str | None = None  # host record id, for dedup and tracing

    def __post_init__(self) -> None:
        if self.kind not in EVENT_KINDS:
            raise ValueError(f"unknown event kind: {self.kind!r}")

    @property
    def failed(self) -> bool:
        """The run failed: a tool error, a non-zero exit, or a check piped into a filter
        whose own output reports failures. Agents mostly run ``pytest 2>&1 | tail -20``,
        where the exit status is tail's: the runner's summary line is the only verdict."""
        if self.is_error or self.exit_code not in (None, 0):
            return True
        return (self.kind == "command" and bool(self.result) and "|" in (self.command or "")
                and _piped_check_failed(self.command or "", self.result or ""))


@dataclass(frozen=True)
class Session:
    """A (possibly partial, cursor-bounded) session read from one transcript."""

    session_id: str | None
    host: str  # claude-code | codex | plain
    cwd: str | None
    git_branch: str | None
    started: str | None
    ended: str | None
    events: tuple[Event, ...]
    cursor: int  # byte offset where the next incremental read starts
    skipped_lines: int  # malformed / oversized lines that were skipped
    source: str  # transcript path
    raw_bytes: int = 0  # bytes consumed by this read (from the given cursor)
    lines_read: int = 0
    # Records dropped as noise (progress, snapshots, meta...), by record type.
    noise: tuple[tuple[str, int], ...] = field(default_factory=tuple)

    @property
    def date(self) -> str | None:
        """YYYY-MM-DD of the session start, or None when no timestamp was seen."""
        if self.started and len(self.started) >= 10 and self.started[4] == "-":
            return self.started[:10]
        return None

    def count(self, kind: str) -> int:
        return sum(1 for e in self.events if e.kind == kind)

    def texts(self, kinds: Iterable[str] | None = None) -> Iterable[str]:
        """Every text-bearing field of the selected events (for scanners and tests)."""
        wanted = set(kinds) if kinds is not None else None
        for e in self.events:
            if wanted is not None and e.kind not in wanted:
                continue
            for value in (e.text, e.path, e.command, e.result, e.detail):
                if value:
                    yield value


# --- host-neutral helpers the readers share -------------------------------------


_GIT_COMMIT = re.compile(r"(?:^|[;&|]\s*|\s)git(?:\s+-C\s+\S+)?\s+commit\b")
# A `git log --oneline` / `--format='%h %s'` line a command printed after its commit.
_ONELINE = re.compile(r"^([0-9a-f]{7,40}) (?:\([^)]*\) )?(\S.*)$", re.M)
_HEREDOC_MSG = re.compile(r"<<\s*'?(\w+)'?\s*\n(.*?)\n\s*\1", re.S)
_COMMIT_OUT = re.compile(r"^\[([^\]\s]+)(?: \(root-commit\))? ([0-9a-f]{7,40})\] (.*)$", re.M)
_PR_URL = re.compile(r"https://github\.com/[\w.-]+/[\w.-]+/pull/(\d+)")
_GH_PR = re.compile(r"\bgh\s+pr\s+(create|merge)\b(?:\s+(\d+))?")


_TAKES_ARG = frozenset("mFcCt")


def commit_message(command: str) -> str:
    """The message a `git commit` command line gives: `-m MSG`, `-mMSG`, `--message=MSG`,
    `--message MSG`, short flags combined before it (`-qam MSG`, `-am MSG`); several `-m`
    are paragraphs. "" when the message comes from elsewhere (`-F file`, the editor)."""
    import shlex

    found = _GIT_COMMIT.search(command)
    if not found:
        return ""
    try:
        lex = shlex.shlex(command[found.end():], posix=True, punctuation_chars=";&|")
        lex.whitespace_split = True
        words = list(lex)
    except ValueError:  # an unclosed quote: read what there is up to it
        words = [w.strip("'\"") for w in command[found.end():].split()]
    parts: list[str] = []
    i = 0
    while i < len(words):
        w = words[i]
        i += 1
        if w and set(w) <= set(";&|"):
            break  # the next command of the line
        if w.startswith("--message="):
            parts.append(w.split("=", 1)[1])
        elif w == "--message" and i < len(words):
            parts.append(words[i])
            i += 1
        elif w.startswith("-") and not w.startswith("--") and len(w) > 1:
            for k, flag in enumerate(w[1:], start=2):
                if flag in _TAKES_ARG:  # -m, -F, -c, -C, -t: the rest of the word or the next one
                    if not w[k:]:
                        value, i = (words[i] if i < len(words) else ""), i + 1
                    else:
                        value = w[k:]
                    if flag == "m":
                        parts.append(value)
                    break
                if flag in "Su" or not flag.isalpha():
                    break  # -S<keyid>, -u<mode>: an attached optional value
    return "\n\n".join(p for p in parts if p.strip())


# Lines git and the hosts append to a message ("Co-Authored-By: ...", "Signed-off-by: ...",
# Claude Code's "Generated with" line): nobody's account of the change.
_TRAILER = re.compile(r"^\s*(?:[A-Z][\w-]*-(?:by|Session|Id)\s*:|\S*\s*Generated with\b)", re.I)


def commit_body(command: str) -> str:
    """The body of the message a `git commit` command gives (a heredoc or ``-m``
    paragraphs): what follows the subject line, trailers left out; "" when none."""
    if not _GIT_COMMIT.search(command):
        return ""
    heredoc = _HEREDOC_MSG.search(command)
    text = (heredoc.group(2) if heredoc else commit_message(command)).strip()
    lines = text.splitlines()[1:]
    return "\n".join(ln for ln in lines if not _TRAILER.match(ln)).strip()


def commit_events(command: str, output: str, ts: str | None, ok: bool,
                  agent: str | None = None) -> list[Event]:
    """Commit / PR events implied by one shell command and its output."""
    events: list[Event] = []
    if not ok:
        return events
    if _GIT_COMMIT.search(command):
        found = _COMMIT_OUT.search(output or "")
        if found:
            events.append(Event("commit", ts, text=found.group(3).strip(), detail=found.group(2),
                                command=command, agent=agent))
        else:
            heredoc = _HEREDOC_MSG.search(command)
            text = (heredoc.group(2) if heredoc else commit_message(command)).strip()
            subject = text.splitlines()[0].strip() if text else ""
            # `git commit -q ... && git log --oneline -1` prints no "[branch sha] msg" line:
            # the log line gives the sha (and the subject when the message came from a file).
            logged = [m for m in _ONELINE.finditer(output or "")
                      if not subject or m.group(2).strip() == subject]
            sha = logged[0].group(1) if len(logged) == 1 or (logged and subject) else None
            subject = subject or (logged[0].group(2).strip() if sha else "")
            if subject or sha:  # a commit nothing in the session names is no event to show
                events.append(Event("commit", ts, text=subject, detail=sha, command=command,
                                    agent=agent))
    gh = _GH_PR.search(command)
    if gh:
        url = _PR_URL.search(output or "")
        number = (url.group(1) if url else None) or gh.group(2)
        verb = "PR merged" if gh.group(1) == "merge" else "PR opened"
        events.append(Event("commit", ts, text=verb, detail=f"PR #{number}" if number else "PR",
                            command=command, agent=agent))
    return events


# --- files a shell command writes ---------------------------------------------------
#
# Agents edit with the shell too (Codex above all): ``sed -i``, ``perl -pi``, ``cat > f
# <<EOF``, ``tee``, ``apply_patch`` run through the shell, ``python - <<EOF`` that opens a
# file for writing. Only these clear write forms count, on literal paths: a command that
# writes somewhere a script decides (``python gen.py``, ``make``) is no edit of a file.

_PATCH_HEAD = re.compile(r"^\*\*\* (Add|Update|Delete) File: (.+)$", re.M)
_PATCH_KINDS = {"Add": "create", "Update": "modify", "Delete": "delete"}
_HEREDOC = re.compile(r"<<-?\s*(['\"]?)(\w+)\1([^\n]*)\n(.*?)\n\s*\2\s*$", re.S | re.M)
# open() of a literal path in a write, append or exclusive mode, Path("path").write_text(...)
_PY_WRITE = re.compile(
    r"""\bopen\(\s*(['"])([^'"\n]+)\1\s*,\s*(?:mode\s*=\s*)?(['"])[wax]\+?b?\3"""
    r"""|\bPath\(\s*(['"])([^'"\n]+)\4\s*\)\.write_(?:text|bytes)\(""")
_WRITERS = frozenset({"cat", "echo", "printf"})
_NOT_A_FILE = re.compile(r"^/dev/|[*?\[\]{}$`~]|^-|^&")


_PY_PATH_VAR = re.compile(r"""^\s*(\w+)\s*=\s*(?:pathlib\.)?Path\(\s*(['"])([^'"\n]+)\2\s*\)\s*$""", re.M)


def _python_writes(body: str) -> list[str]:
    """Literal paths a Python script opens for writing: ``open("f", "w")``,
    ``Path("f").write_text(...)``, or ``p = Path("f")`` then ``p.write_text(...)``."""
    found = [m.group(2) or m.group(5) for m in _PY_WRITE.finditer(body)]
    for m in _PY_PATH_VAR.finditer(body):
        var = re.escape(m.group(1))
        if re.search(rf"\b{var}\.write_(?:text|bytes)\(|\bopen\(\s*{var}\s*,\s*(['\"])[wax]", body):
            found.append(m.group(3))
    return [p for p in dict.fromkeys(found) if _literal(p)]


def _literal(path: str) -> str | None:
    path = path.strip()
    return path if path and not _NOT_A_FILE.search(path) else None


def _sed_perl_files(words: list[str]) -> list[str] | None:
    """The files of an in-place ``sed`` / ``perl`` call, None when it is not in place.

    Options are read letter by letter: ``i`` is in place (what follows it in the word is
    a backup suffix; perl's ``-pie`` is read as meant, ``-p -i -e``), ``e``/``f`` (perl
    ``e``/``E``) take the script from the next word; the first other word is the script
    when no option gave one, the rest are the files."""
    prog, args = words[0], words[1:]
    script_opts = "ef" if prog == "sed" else "eE"
    inplace = script_given = False
    files: list[str] = []
    i = 0
    while i < len(args):
        w = args[i]
        i += 1
        if w == "--":
            files += args[i:]
            break
        if w.startswith("--"):
            inplace |= w.startswith("--in-place")
            if w in ("--expression", "--file"):
                script_given, i = True, i + 1
            continue
        if not (w.startswith("-") and len(w) > 1):
            if script_given:
                files.append(w)
            script_given = True  # the first operand is the script
            continue
        flags = w[1:]
        for n, ch in enumerate(flags):
            if ch == "i":
                inplace = True
                rest = flags[n + 1:]
                if prog == "perl" and rest in script_opts and rest:
                    script_given, i = True, i + 1
                elif not rest and prog == "sed" and i < len(args) and args[i] == "":
                    i += 1  # BSD sed's -i '' (no backup)
                break
            if ch in script_opts:
                script_given = True
                if not flags[n + 1:]:
                    i += 1
                break
    return files if inplace else None


def _command_words(line: str) -> list[list[str]]:
    """The simple commands of a shell line as word lists: split at unquoted ``;``, ``&``,
    ``&&``, ``|``, ``||`` and parentheses; quotes removed inside a word, never across
    words; redirect operators (``>``, ``>>``, ``2>``, ``>&``) are words of their own."""
    import shlex

    lexer = shlex.shlex(line.replace("\n", " ; "), posix=True, punctuation_chars=";&|()<>")
    lexer.whitespace_split = True
    out: list[list[str]] = [[]]
    try:
        for token in lexer:
            if token and set(token) <= set(";&|()"):
                out.append([])
            else:
                out[-1].append(token)
    except ValueError:  # an unclosed quote: what was read before it
        pass
    return [words for words in out if words]


def written_files(command: str) -> list[tuple[str, str]]:
    """(path, create | modify | delete) for each file ``command`` clearly writes."""
    out: list[tuple[str, str]] = []
    if "*** Begin Patch" in command and re.search(r"\bapply_patch\b", command):
        return [(path.strip(), _PATCH_KINDS[kind]) for kind, path in _PATCH_HEAD.findall(command)]
    bodies = [m.group(4) for m in _HEREDOC.finditer(command)]
    # the command words without the heredocs' text (what follows ``<<EOF`` on its line,
    # a redirect, stays)
    line = _HEREDOC.sub(lambda m: " " + m.group(3), command)
    where = ""  # a ``cd DIR`` earlier in the line: later relative paths are under it
    for words in _command_words(line):
        while words and re.fullmatch(r"\w+=\S*|sudo|command|env|time", words[0]):
            words = words[1:]
        if not words:
            continue
        prog = words[0].rsplit("/", 1)[-1]
        if prog == "cd":
            target = _literal(words[1]) if len(words) == 2 else None
            if target is None:
                return out  # somewhere we cannot follow: nothing after it is a known path
            where = target if target.startswith("/") else f"{where}{target}".rstrip("/")
            where += "/"
            continue
        before = len(out)
        if prog in ("sed", "gsed", "perl"):
            plain = [w for w in words if w not in (">", ">>")]
            for f in _sed_perl_files(["perl" if prog == "perl" else "sed", *plain[1:]]) or []:
                if _literal(f):
                    out.append((f, "modify"))
        elif prog == "tee":
            out += [(f, "modify") for f in words[1:] if not f.startswith("-") and _literal(f)]
        elif prog in _WRITERS:
            # the redirect of a cat/echo/printf: ``cat > f``, ``cat <<EOF > f``, ``>> f``
            for n, op in enumerate(words[:-1]):
                if op in (">", ">>") and _literal(words[n + 1]) and not (n and words[n - 1].isdigit()):
                    out.append((words[n + 1], "modify" if op == ">>" else "create"))
        elif re.fullmatch(r"python[\d.]*", prog) and words[1:2] == ["-"]:
            for body in bodies:
                out += [(path, "modify") for path in _python_writes(body)]
        if where:
            out[before:] = [(p if p.startswith("/") else posixpath.normpath(where + p), k)
                            for p, k in out[before:]]
    return list(dict.fromkeys(out))


def shell_edit_events(command: str, ts: str | None, ok: bool, tool: str | None,
                      agent: str | None = None, uuid: str | None = None) -> list[Event]:
    """Edit events for the files a shell command writes (:func:`written_files`); a failed
    command's edits are marked ``is_error`` (nothing may have been written)."""
    return [Event("edit", ts, text=f"shell: {path}", tool=tool, path=path, edit_kind=kind,
                  command=command, is_error=not ok, agent=agent,
                  uuid=f"{uuid}:{n}" if uuid else None)
            for n, (path, kind) in enumerate(written_files(command))]


class SessionBuilder:
    """Accumulates events for a reader; dedups and tracks time bounds."""

    def __init__(self, host: str, source: str) -> None:
        self.host = host
        self.source = source
        self.events: list[Event] = []
        self.session_id: str | None = None
        self.cwd: str | None = None
        self.git_branch: str | None = None
        self.started: str | None = None
        self.ended: str | None = None
        self.noise: Counter[str] = Counter()

    def saw_time(self, ts: Any) -> None:
        if isinstance(ts, str) and ts:
            if self.started is None or ts < self.started:
                self.started = ts
            if self.ended is None or ts > self.ended:
                self.ended = ts

    def add(self, event: Event) -> int:
        if event.result and "\x1b" in event.result:
            # Terminal colours in a tool's output are nothing a memory or a record keeps.
            event = replace(event, result=_ANSI_ESCAPE.sub("", event.result))
        self.events.append(event)
        return len(self.events) - 1

    def replace_at(self, index: int, **changes: Any) -> None:
        self.events[index] = replace(self.events[index], **changes)

    def add_stop_message(self, message: str | None) -> None:
        """Append the Stop payload's final text when the file has not caught up yet."""
        if not message or not message.strip():
            return
        want = " ".join(message.split())
        for e in reversed(self.events):
            if e.kind == "assistant" and e.detail != "thinking" and e.agent is None:
                have = " ".join(e.text.split())
                if have == want or have.endswith(want) or want in have:
                    return
                break
        self.add(Event("assistant", self.ended, text=truncate_middle(message, MAX_TEXT_CHARS),
                       detail="stop-payload"))

    def finish(self, reader: Any) -> Session:
        return Session(
            session_id=self.session_id, host=self.host, cwd=self.cwd,
            git_branch=self.git_branch, started=self.started, ended=self.ended,
            events=tuple(self.events), cursor=reader.end, skipped_lines=reader.skipped,
            source=self.source, raw_bytes=reader.end - reader.cursor, lines_read=reader.lines,
            noise=tuple(sorted(self.noise.items())),
        )

