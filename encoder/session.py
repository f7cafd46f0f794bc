"""The normalized session model every host reader produces.

Readers in ``dualtrace.hooks`` turn a host's transcript into a :class:`Session`;
redaction, the digest and the gates only ever see this model, so host quirks stay
in ``hooks/``. Records are frozen: a stage that changes text (redaction) builds a
new session with :func:`dataclasses.replace` instead of mutating a shared one.
"""

from __future__ import annotations

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
_COMMIT_MSG = re.compile(r"""-m\s+(?:"((?:[^"\\]|\\.)*)"|'([^']*)'|(\S+))""")
_HEREDOC_MSG = re.compile(r"<<\s*'?(\w+)'?\s*\n(.*?)\n\s*\1", re.S)
_COMMIT_OUT = re.compile(r"^\[([^\]\s]+)(?: \(root-commit\))? ([0-9a-f]{7,40})\] (.*)$", re.M)
_PR_URL = re.compile(r"https://github\.com/[\w.-]+/[\w.-]+/pull/(\d+)")
_GH_PR = re.compile(r"\bgh\s+pr\s+(create|merge)\b(?:\s+(\d+))?")


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
            msg = _HEREDOC_MSG.search(command)
            m = _COMMIT_MSG.search(command)
            text = (msg.group(2) if msg else next((g for g in m.groups() if g), "") if m else "")
            events.append(Event("commit", ts, text=text.strip().splitlines()[0] if text.strip()
                                else "", command=command, agent=agent))
    gh = _GH_PR.search(command)
    if gh:
        url = _PR_URL.search(output or "")
        number = (url.group(1) if url else None) or gh.group(2)
        verb = "PR merged" if gh.group(1) == "merge" else "PR opened"
        events.append(Event("commit", ts, text=verb, detail=f"PR #{number}" if number else "PR",
                            command=command, agent=agent))
    return events


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

