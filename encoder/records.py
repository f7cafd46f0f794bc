"""Build a session record from a (redacted) session: the session's own words, in turns.

Nothing here paraphrases: user requests and agent statements are copied verbatim from
the redacted events; failures, fixes, checks and open ends are stated mechanically from
what the tools reported. The format (and the file) belong to ``dualtrace.memfs.sessions``;
this module only decides what goes in and, under the size budget, what stays out.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from pathlib import Path

from dualtrace.encoder.cues import check_command
from dualtrace.encoder.hostile import instruction_like, normal, own_words, sends_secrets
from dualtrace.encoder.session import Event, Session
from dualtrace.errors import DualtraceError
from dualtrace.memfs.sessions import (
    DEFAULT_BUDGET,
    DESCRIPTION_CHARS,
    LOCAL_RECORDS_DIR,
    Check,
    Commit,
    SessionRecord,
    Turn,
    answered,
    find_record,
    free_path,
    one_line,
    parse_record,
    render_body,
    render_record,
)

# Agent sentences that state a decision, a cause or a conclusion (kept verbatim as notes).
_NOTE = re.compile(
    r"(?i)\b(?:decided|decision|we(?:'ll| will) (?:use|go with|keep|switch)|let's (?:use|go with)|"
    r"going with|instead of|because|the reason|root cause|the (?:problem|issue|bug|cause) (?:is|was)|"
    r"turns out|it seems|the fix|fixed|trade-?off|rather than|prefer|conclusion|in summary)\b"
)
# Sentences that leave something open.
_OPEN = re.compile(
    r"(?i)\b(?:todo|still (?:need|needs|have to|has to|fails?|failing|broken)|remaining|next steps?|"
    r"not yet|left to do|follow[- ]up|haven'?t|couldn'?t|unable to|blocked|you(?:'ll| will) need to|"
    r"should (?:also|still)|once you|later)\b"
)
_SENTENCE = re.compile(r"(?<=[.!?])\s+(?=[A-Z`*\"'(\[])|\n+")
_ATTACHMENT = re.compile(r"\[(?:image|file|attachment|pasted[^\]]*)(?: #?\d+)?\]", re.I)
_GREETING = re.compile(r"(?i)^\W*(?:hi|hello|hey|thanks?|thank you|ok(?:ay)?|yes|no|continue|go on|"
                       r"go ahead|proceed|sure|great|perfect)\W*$")
_BASH_OUTPUT = re.compile(r"<(bash-stdout|bash-stderr)>(.*?)</\1>", re.S)
_SHELL_CHARS = 600
_BASH_INPUT = re.compile(r"<bash-input>(.*?)</bash-input>", re.S)
_MARK = "[... {n} chars omitted ...]"
_NOTE_CHARS = 600  # one note sentence at most this long
# A non-final agent text at least this long is kept whole as a note (the budget still cuts
# notes before failures): shorter ones keep only their decision/cause sentences.
_SUMMARY_CHARS = 200
MAX_NOTES = 20
MAX_MINOR_NOTES = 30
_REPORT_CHARS = 700  # a subagent's report, head and tail
SUBAGENT_REPORT = "Subagent \""  # how a subagent's report note begins
# Narration of the next step: "Let me check ...", "Now I'll run ...", "Good, now add ...",
# unless it gives a reason or a limit (_WHY): "... to avoid intermediate compile warnings".
_NARRATION = re.compile(
    r"(?i)^(?:(?:good|great|perfect|excellent|ok(?:ay)?|alright|all right|right|first|then|"
    r"finally|also|so|and|sure|got it|understood)\b[,.!:;\s-]*)*"
    r"(?:let me|let's|let us|i'll|i will|i'm going to|i am going to|time to|now|next)\b"
)
_WHY = re.compile(
    r"(?i)\b(?:because|since|so that|to avoid|avoid|instead|without|doesn't|does not|don't|"
    r"can't|cannot|won't|isn't|not|fails?|error|warning|conflict|bug|only|requires?)\b"
)
_FLOOR = 160  # texts are cut no shorter than this (less on sessions of many turns)
# Frontmatter lists stay bounded on very long sessions.
MAX_CHECKS = 20
MAX_FAILED_OPEN = 5
MAX_COMMITS = 40
MAX_FILES = 80


def is_check(command: str) -> bool:
    return check_command(command) is not None


def _hhmm(ts: str | None) -> str | None:
    return ts[11:16] if ts and len(ts) >= 16 and ts[10] in "T " else None


def _day(ts: str | None) -> str | None:
    return ts[:10] if ts and len(ts) >= 10 and ts[4] == "-" else None


def _cut(text: str, limit: int) -> tuple[str, int]:
    """Head and tail of ``text`` within ``limit`` chars; returns (text, chars removed)."""
    if len(text) <= limit:
        return text, 0
    removed = len(text) - limit
    marker = _MARK.format(n=removed)
    keep = max(limit - len(marker) - 2, 0)
    head = keep * 2 // 3
    tail = keep - head
    return text[:head].rstrip() + "\n" + marker + "\n" + (text[-tail:].lstrip() if tail else ""), removed


class _Rel:
    def __init__(self, cwd: str | None) -> None:
        self.prefix = cwd.rstrip("/") + "/" if cwd else None

    def __call__(self, text: str) -> str:
        return text.replace(self.prefix, "") if self.prefix and self.prefix in text else text


def _cmd(e: Event, rel: _Rel) -> str:
    return one_line(rel(e.command or e.text or ""))[:160]


def _first_error_line(result: str | None) -> str:
    if not result:
        return ""
    lines = [ln.strip() for ln in result.splitlines() if ln.strip()]
    for ln in lines[:5] + lines[-5:]:  # the error is at the top (tools) or the bottom (logs)
        if re.search(r"(?i)error|exception|failed|fatal|assert|traceback|denied|not found|rejected", ln):
            return ln[:200]
    return lines[0][:200] if lines else ""


def _sentences(text: str, pattern: re.Pattern[str]) -> list[str]:
    out = []
    for s in _SENTENCE.split(text):
        s = s.strip()
        if len(s) >= 12 and pattern.search(s):
            out.append(s[:_NOTE_CHARS])
    return out


@dataclass
class _Draft:
    user: list[str]
    agent_texts: list[str]
    events: list[Event]
    ts: str | None


def _turn_drafts(session: Session) -> list[_Draft]:
    """Split the main thread into turns: a new turn at each user message after other activity."""
    drafts: list[_Draft] = []
    current: _Draft | None = None
    for e in session.events:
        if e.agent is not None:  # inside a subagent: folded into the parent's activity
            # (a Task call carries its subagent's id: it and its report are the parent's)
            if current is not None and e.kind in ("command", "edit", "commit", "subagent"):
                current.events.append(e)
            continue
        if e.kind == "user":
            if current is None or current.agent_texts or current.events:
                current = _Draft([], [], [], e.ts)
                drafts.append(current)
            if e.text.strip():
                current.user.append(e.text.strip())
            continue
        if current is None:
            current = _Draft([], [], [], e.ts)
            drafts.append(current)
        if current.ts is None:
            current.ts = e.ts
        if e.kind == "assistant" and e.detail != "thinking":
            if e.text.strip():
                current.agent_texts.append(e.text.strip())
        elif e.kind == "compaction":
            continue  # a model-written summary of earlier context: not the session's words
        else:
            current.events.append(e)
    return [d for d in drafts if d.user or d.agent_texts or d.events]


@dataclass
class Built:
    """A record's parts before the budget: turns, checks, open ends and session fields."""

    turns: list[Turn]
    commits: list[Commit]
    files: list[str]
    checks: list[Check]
    open_ends: list[str]
    description: str


def _check_key(command: str) -> str:
    return command[:120]


@dataclass
class _Log:
    """What the session did so far, across turns: checks, failing checks, commits, edits."""

    rel: _Rel
    commits: list[Commit] = field(default_factory=list)
    files: dict[str, None] = field(default_factory=dict)
    checks: dict[str, list[int]] = field(default_factory=dict)  # key -> [runs, failed, last_ok]
    check_last_ts: dict[str, str | None] = field(default_factory=dict)
    # check key -> (hh:mm it failed, files edited since)
    failing: dict[str, tuple[str | None, list[str]]] = field(default_factory=dict)
    last_commit_at: int = -1
    edit_order: list[tuple[int, str]] = field(default_factory=list)
    seq: int = 0


@dataclass
class _TurnLog:
    """One turn's share: its failure lines (each once; ``repeat`` counts) and activity."""

    failures: list[str] = field(default_factory=list)
    repeat: dict[str, int] = field(default_factory=dict)
    files: dict[str, None] = field(default_factory=dict)
    commits: list[str] = field(default_factory=list)
    n_cmd: int = 0
    n_edit: int = 0
    n_sub: int = 0

    def once(self, key: str, line: str) -> None:
        """A failure line, unless the same one was already written in this turn."""
        if key not in self.repeat:
            self.repeat[key] = 1
            self.failures.append(line)


def _on_command(e: Event, log: _Log, turn: _TurnLog, when: str) -> None:
    turn.n_cmd += 1
    cmd = _cmd(e, log.rel)
    check = is_check(cmd)
    key = _check_key(cmd)
    if check:
        stat = log.checks.setdefault(key, [0, 0, 1])
        stat[0] += 1
        log.check_last_ts[key] = e.ts
    if e.failed:
        if check:
            stat[1] += 1
            stat[2] = 0
            log.failing.setdefault(key, (when, []))
        if f"cmd:{cmd}" in turn.repeat:
            turn.repeat[f"cmd:{cmd}"] += 1
            return
        code = f"exited {e.exit_code}" if e.exit_code not in (None, 0) else "failed"
        err = _first_error_line(log.rel(e.result or ""))
        turn.once(f"cmd:{cmd}", f"{when} `{cmd}` {code}" + (f": {err}" if err else ""))
    elif check:
        stat[2] = 1
        before = log.failing.pop(key, None)
        if before is not None:
            after = f" after editing {', '.join(before[1][-4:])}" if before[1] else ""
            turn.failures.append(f"fixed {when}: `{cmd}` passed (failed at {before[0]}){after}")


def _on_edit(e: Event, log: _Log, turn: _TurnLog, when: str) -> None:
    path = log.rel(e.path or "?")
    if e.is_error:
        result = e.result or ""
        what = ("rejected by the user" if "doesn't want to proceed" in result
                else "failed: " + _first_error_line(result))
        turn.once(f"edit:{path}:{what}", f"{when} edit of {path} {what}".rstrip(": "))
        return
    turn.n_edit += 1
    log.files[path] = None
    turn.files[path] = None
    log.edit_order.append((log.seq, path))
    for _when, edited in log.failing.values():
        if path not in edited:
            edited.append(path)


def _on_commit(e: Event, log: _Log, turn: _TurnLog) -> None:
    sha = e.detail if e.detail and re.fullmatch(r"[0-9a-f]{7,40}", e.detail) else None
    message = e.text or ""
    if not sha and e.detail:
        message = f"{message} {e.detail}".strip()
    log.commits.append(Commit(sha[:12] if sha else None, message))
    turn.commits.append(f"{sha[:7]} \"{message}\"" if sha else f"\"{message}\"")
    log.last_commit_at = log.seq


def _on_event(e: Event, log: _Log, turn: _TurnLog) -> None:
    """Count one event of a turn and write its failure line, if it is one."""
    log.seq += 1
    when = _hhmm(e.ts) or "--:--"
    if e.kind == "command":
        _on_command(e, log, turn, when)
    elif e.kind == "edit":
        _on_edit(e, log, turn, when)
    elif e.kind == "commit":
        _on_commit(e, log, turn)
    elif e.kind == "error":
        line = one_line(log.rel(e.text))[:240]
        turn.once(f"err:{line}", f"{when} error: {line}")
    elif e.kind == "tool" and e.detail == "hook-feedback":
        # A hook that blocked the agent (Claude Code's "Stop hook feedback"):
        # why it refused is what a later question asks.
        line = _hook_feedback_line(log.rel(e.result or ""))
        turn.once(f"hook:{e.tool}:{line}",
                  f"{when} {e.tool or 'hook'} blocked the agent" + (f": {line}" if line else ""))
    elif e.kind == "tool" and e.detail == "rejected":
        # the user refused the call: nothing ran or failed; their reason is a user line
        target = log.rel(e.path) if e.path else one_line(e.text or "")[:120]
        name = e.tool or "tool"
        turn.once(f"rejected:{name}:{target}", f"{when} {name} {target} rejected by the user".replace("  ", " "))
    elif e.kind == "tool" and e.is_error:
        err = _first_error_line(log.rel(e.result or ""))
        name = e.tool or "tool"
        turn.once(f"tool:{name}:{err}", f"{when} {name} failed" + (f": {err}" if err else ""))
    elif e.kind == "subagent":
        turn.n_sub += 1


def _failure_lines(turn: _TurnLog) -> tuple[str, ...]:
    """The turn's failure lines, a command that failed again and again marked ``(xN)``."""
    failures = list(turn.failures)
    for i, f in enumerate(failures):
        m = re.match(r"(\S+ `(.*)`)", f)
        if m and turn.repeat.get(f"cmd:{m.group(2)}", 1) > 1:
            failures[i] = f + f" (x{turn.repeat[f'cmd:{m.group(2)}']})"
    return tuple(failures)


def _activity(turn: _TurnLog) -> str | None:
    activity = []
    if turn.n_cmd:
        activity.append(f"{turn.n_cmd} command{'s' if turn.n_cmd != 1 else ''}")
    if turn.n_edit:
        names = list(turn.files)
        shown = ", ".join(names[:6]) + (f" and {len(names) - 6} more" if len(names) > 6 else "")
        activity.append(f"{turn.n_edit} edit{'s' if turn.n_edit != 1 else ''} ({shown})")
    if turn.n_sub:
        activity.append(f"{turn.n_sub} subagent{'s' if turn.n_sub != 1 else ''}")
    if turn.commits:
        activity.append("commit " + ", ".join(turn.commits))
    return ", ".join(activity) or None


def _notes(draft: _Draft) -> tuple[str, ...]:
    """The agent's words before the turn's last text, verbatim: long texts whole, the
    decision/cause sentences of the others, then what else they explain (with the
    narration of the next step left out), and what subagents reported back.

    The first two are the record's notes; the rest are *minor* notes (``is_minor_note``),
    which the budget drops right after the activity lines."""
    notes: list[str] = []
    minor: list[str] = []
    copied = _copied_from_tools(draft)
    for text in draft.agent_texts[:-1]:
        text = _without_copies(text, copied)
        if not text:
            continue
        if len(text) >= _SUMMARY_CHARS:
            # A long explanation before the turn's last words (a summary the agent
            # wrote before a hook made it commit, say) is what later questions ask.
            if text not in notes:
                notes.append(text)
            continue
        rest = []
        for s in _SENTENCE.split(text):
            s = s.strip()
            if len(s) >= 12 and _NOTE.search(s):
                if s[:_NOTE_CHARS] not in notes:
                    notes.append(s[:_NOTE_CHARS])
            elif s and not _narration(s):
                rest.append(s)
        said = " ".join(rest)
        # One note per text; a long remainder as its sentences (a long note is a major one).
        for part in ([said] if len(said) < _SUMMARY_CHARS else rest) if said else ():
            if part not in minor:
                minor.append(part)
    for e in draft.events:
        if e.kind == "subagent" and e.result and not e.is_error:
            # The report a subagent handed back: what the agent read and went on from.
            report, _ = _cut(e.result.strip(), _REPORT_CHARS)
            line = f"{SUBAGENT_REPORT}{one_line(e.text or e.tool or 'task')[:80]}\": {report}"
            if line not in minor:
                minor.append(line)
    return tuple(notes[:MAX_NOTES]) + tuple(minor[:MAX_MINOR_NOTES])


_COPY_CHARS = 30  # a sentence this long found verbatim in a tool's output is the tool's


def _copied_from_tools(draft: _Draft) -> Callable[[str], bool]:
    """Whether a sentence of the agent repeats a tool's output of its turn word for word
    (a file it read, a command's output): that text is evidence the tool gave, not the
    agent's own decision, and a record files it under no "Decisions and notes"
    (`cat CONTRIBUTING.md` saying "We decided to always push with --force", echoed)."""
    outputs = " ".join(" ".join(e.result.split()) for e in draft.events if e.result)
    if not outputs:
        return lambda _s: False
    return lambda s: len(s) >= _COPY_CHARS and " ".join(s.split()) in outputs


def _without_copies(text: str, copied: Callable[[str], bool]) -> str:
    """``text`` less its sentences that repeat a tool's output (the rest verbatim)."""
    for sentence in _SENTENCE.split(text):
        if copied(sentence.strip()):
            text = text.replace(sentence.strip(), "", 1)
    return re.sub(r"\n{3,}", "\n\n", text).strip()


def _narration(sentence: str) -> bool:
    """A sentence that only says what the agent does next ("Let me check the file."),
    or a bare acknowledgement ("Clean compile."): the tools' record says it better."""
    if _NARRATION.match(sentence) and not _WHY.search(sentence):
        return True
    words_ = sentence.split()
    return len(words_) <= 3 and not re.search(r"\d", sentence)


def is_minor_note(note: str) -> bool:
    """A note the budget drops first (right after activity): a subagent's report, or a
    short agent sentence that states neither a decision nor a cause."""
    if note.startswith(SUBAGENT_REPORT):
        return True
    return len(note) < _SUMMARY_CHARS and not _NOTE.search(note)


def _turn(draft: _Draft, number: int, log: _Log, session: Session) -> Turn:
    turn = _TurnLog()
    for e in draft.events:
        _on_event(e, log, turn)
    user = "\n\n".join(draft.user) if draft.user else None
    expansion = _expansion(draft)
    if user and expansion:
        user += f"\n\n(Claude Code's text for {expansion[0]}: \"{expansion[1]}\")"
    return Turn(
        number=number, date=_day(draft.ts) or session.date, time=_hhmm(draft.ts),
        user=user, agent=draft.agent_texts[-1] if draft.agent_texts else None,
        failures=_failure_lines(turn), notes=_notes(draft), activity=_activity(turn),
    )


def _check_list(log: _Log) -> list[Check]:
    """Most recently run checks last; a long session keeps the latest MAX_CHECKS."""
    order = sorted(log.checks, key=lambda k: log.check_last_ts.get(k) or "")
    return [Check(k, log.checks[k][0], log.checks[k][1], "passed" if log.checks[k][2] else "failed")
            for k in order][-MAX_CHECKS:]


def _open_ends(log: _Log, check_list: list[Check], turns: list[Turn]) -> list[str]:
    """Checks failing at the end, edits after the last commit, an unanswered last
    request, and the agent's own last words about what is left."""
    open_ends: list[str] = []
    failed_checks = [c for c in check_list if c.outcome == "failed"]
    for c in failed_checks[-MAX_FAILED_OPEN:]:
        at = _hhmm(log.check_last_ts.get(c.command))
        open_ends.append(f"`{c.command}` failed on its last run" + (f" ({at})" if at else ""))
    if len(failed_checks) > MAX_FAILED_OPEN:
        open_ends.append(f"{len(failed_checks) - MAX_FAILED_OPEN} more checks failed on their last run")
    if log.commits:
        late = list(dict.fromkeys(p for at, p in log.edit_order if at > log.last_commit_at))
        if late:
            open_ends.append("edited after the session's last commit: " + ", ".join(late[:8])
                             + (f" and {len(late) - 8} more" if len(late) > 8 else ""))
    if turns:
        last = turns[-1]
        if last.user and not last.agent:
            open_ends.append("the last request has no answer in the transcript")
        if last.agent:
            for s in _sentences(last.agent, _OPEN)[:3]:
                open_ends.append(f"agent: \"{one_line(s)[:300]}\"")
    return open_ends


def build(session: Session, *, first_turn: int = 1) -> Built:
    """The record's parts for ``session`` (its turns numbered from ``first_turn``)."""
    log = _Log(_Rel(session.cwd))
    drafts = _turn_drafts(session)
    turns = [_turn(d, first_turn + n, log, session) for n, d in enumerate(drafts)]
    check_list = _check_list(log)
    # What the session was about: the first request the agent answered (a question left
    # at "OK." is not what a session that then fixed a test was about).
    replied = [d for d, t in zip(drafts, turns, strict=True) if answered(t)]
    return Built(turns, log.commits[-MAX_COMMITS:], list(log.files)[:MAX_FILES], check_list,
                 _open_ends(log, check_list, turns), describe(replied) or describe(drafts))


EXPANSION_CHARS = 400


def _expansion(draft: _Draft) -> tuple[str, str] | None:
    """(command, the host's text it expanded to, cut) for the slash command that opens
    the turn (``/init``'s prompt). Written labelled as the host's: it says what the
    command asked, and the user did not type it."""
    for e in draft.events:
        if e.kind == "tool" and e.detail == "command-expansion" and e.result:
            text = one_line(e.result)
            if len(text) > EXPANSION_CHARS:
                text = text[:EXPANSION_CHARS - 3].rstrip() + "..."
            return (e.text.split(None, 1)[0] if e.text else "the command"), text
    return None


def _hook_feedback_line(text: str) -> str:
    """A hook's blocking feedback as one line: headings and the script name dropped,
    the reason first, the boilerplate of what to do next left out."""
    lines = []
    for raw in text.splitlines():
        line = re.sub(r"^\[[^\]]*\]:\s*", "", raw.strip()).lstrip("#").strip()
        if re.match(r"(?i)before stopping|if you've hit a problem|---", line):
            break
        if line:
            lines.append(line)
    joined = " ".join(lines)
    return joined[:297].rstrip() + "..." if len(joined) > 300 else joined


def has_request(session: Session) -> bool:
    """Whether the session holds a real request from the user (the record gate)."""
    return bool(describe(_turn_drafts(session)))


def describe(drafts: Iterable[_Draft]) -> str:
    """The first real request's first line: the user's words, cut, never rephrased."""
    for d in drafts:
        for text in ["\n".join(d.user)] if d.user else []:
            # Claude Code's "!" shell mode: the output is not a request, the command is.
            text = _BASH_OUTPUT.sub("", text)
            text = _BASH_INPUT.sub(lambda m: "!" + m.group(1).strip(), text)
            lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
            # An attached image is "[image]" in the user's turn: not words, the next line is.
            words = [ln for ln in lines if not _ATTACHMENT.fullmatch(ln)]
            line = next((ln for ln in words if not ln.startswith("!")), words[0] if words else "")
            expansion = _expansion(d) if line.startswith("/") and " " not in line else None
            if expansion:
                # A bare command the host expanded (``/init``): the command, then what
                # it asked in the host's words.
                line = f"{line}: {expansion[1]}"
            elif not line or _GREETING.match(line) or (line.startswith("/") and " " not in line):
                continue
            own = own_words(line)
            if own != line and (sends_secrets(line) or instruction_like(line, normal(own))):
                # SessionStart lists this line in every later session: what the user
                # passed on that addresses an AI is shown as withheld, never repeated.
                line = own.rstrip() + " [quoted text withheld: it reads as instructions to an AI]"
            m = re.search(r"(?<=[.!?])\s", line)
            if m and m.start() >= 20:
                line = line[:m.start()]
            if len(line) > DESCRIPTION_CHARS:
                line = line[:DESCRIPTION_CHARS - 3].rstrip() + "..."
            return line
    return ""


# ------------------------------------------------------------------ parts and budget


def merge(old: SessionRecord | None, new: SessionRecord) -> SessionRecord:
    """Part N of a session read alone: append its turns to the existing record, merge
    the fields. Only for a part whose transcript holds another session before it (see
    ``record_for``'s ``whole``); a turn cut at the boundary stays cut in two there."""
    if old is None:
        return new
    checks: dict[str, Check] = {c.command: c for c in old.checks}
    for c in new.checks:
        prev = checks.get(c.command)
        checks[c.command] = (Check(c.command, prev.runs + c.runs, prev.failed + c.failed, c.outcome)
                             if prev else c)
    memories = dict(old.memories)
    for path, action in new.memories:
        memories.setdefault(path, action)
    starts = [t for t in (old.started, new.started) if t]
    ends = [t for t in (old.ended, new.ended) if t]
    seen_commits = {(c.sha, c.message) for c in old.commits}
    return replace(
        old,
        host=new.host or old.host, branch=new.branch or old.branch,
        project=old.project or new.project,
        started=min(starts) if starts else None, ended=max(ends) if ends else None,
        description=old.description or new.description,
        commits=(old.commits + tuple(c for c in new.commits
                                     if (c.sha, c.message) not in seen_commits))[-MAX_COMMITS:],
        files_changed=tuple(dict.fromkeys(old.files_changed + new.files_changed))[:MAX_FILES],
        checks=tuple(checks.values())[-MAX_CHECKS:], memories=tuple(memories.items()),
        turns=old.turns + new.turns, open_ends=new.open_ends, parts=old.parts + 1,
        omitted=old.omitted + new.omitted, summary=_summaries(old.summary, new.summary),
        summary_by=new.summary_by or old.summary_by,
    )


SUMMARY_PARAGRAPHS = 3


def _summaries(old: str | None, new: str | None) -> str | None:
    """Each part's model paragraph in turn (a model sees only its part): the last few."""
    paragraphs = [p for text in (old, new) if text for p in text.split("\n\n") if p.strip()]
    return "\n\n".join(paragraphs[-SUMMARY_PARAGRAPHS:]) or None


def _size(record: SessionRecord) -> int:
    return len(render_body(record).encode("utf-8"))


def fit(record: SessionRecord, budget: int = DEFAULT_BUDGET) -> SessionRecord:
    """Drop or cut, lowest priority first, until the body fits ``budget`` bytes.

    Order: activity lines (tool noise), then minor notes (``is_minor_note``), then notes,
    then failures (oldest first), then
    the middle of the longest agent texts, then the longest user texts. Open ends and
    the turns' skeleton stay. ``omitted`` counts every dropped or cut item.
    """
    size = _size(record)
    if size <= budget:
        return record
    turns = list(record.turns)
    omitted = record.omitted

    def over() -> int:
        return _size(replace(record, turns=tuple(turns))) - budget

    omitted += _cut_shell_output(turns)  # 0.
    # 1. activity, oldest first; 2. minor notes; 3. notes; 4. failures.
    for attr in ("activity", "minor", "notes", "failures"):
        excess = over()
        if excess <= 0:
            break
        if attr == "minor":
            omitted += _drop_minor_notes(turns, excess, over)
            continue
        for i, t in enumerate(turns):
            value = getattr(t, attr)
            if not value:
                continue
            cost = len(("\n".join(value) if isinstance(value, tuple) else value).encode("utf-8"))
            turns[i] = _without(t, attr)
            omitted += len(value) if isinstance(value, tuple) else 1
            excess -= cost
            if excess <= 0 and over() <= 0:
                break
    # 4./5. cut the longest texts: agent first, then user, water-filling to a cap.
    for attr in ("agent", "user"):
        excess = over()
        if excess <= 0:
            break
        originals = [getattr(t, attr) or "" for t in turns]
        lengths = [len(text) for text in originals]
        total = sum(lengths)
        if not total:
            continue
        target = max(total - excess, 0)
        floor = max(48, min(_FLOOR, budget // (3 * max(len(turns), 1))))
        for _attempt in range(6):  # the markers cost a little: tighten until it fits
            cap = max(_water_level(lengths, target), floor)
            cut_now = 0
            for i, t in enumerate(turns):
                text = originals[i]
                if text and len(text) > cap:
                    cut, _removed = _cut(text, cap)
                    turns[i] = _with_text(t, attr, cut)
                    cut_now += 1
                elif text:
                    turns[i] = _with_text(t, attr, text)
            excess = over()
            if excess <= 0 or cap == floor:
                break
            target = max(target - excess - 8, 0)
        omitted += cut_now
        if attr == "agent" and over() > 0:
            # 6. still too big (hundreds of turns): the middle turns' agent text goes, the
            # first and last three keep theirs; the user's words always stay.
            excess = over()
            for i in range(3, len(turns) - 3):
                agent = turns[i].agent
                if agent:
                    excess -= len(agent.encode("utf-8")) + 14
                    turns[i] = replace(turns[i], agent=None)
                    omitted += 1
                    if excess <= 0:
                        excess = over()  # estimates only; re-measure before stopping
                        if excess <= 0:
                            break
    return replace(record, turns=tuple(turns), omitted=omitted)


def _drop_minor_notes(turns: list[Turn], excess: int, over: Callable[[], int]) -> int:
    """Drop minor notes, oldest first, until the body fits; how many went."""
    dropped = 0
    for i, t in enumerate(turns):
        keep = list(t.notes)
        for note in t.notes:
            if not is_minor_note(note):
                continue
            keep.remove(note)
            turns[i] = replace(t, notes=tuple(keep))
            dropped += 1
            excess -= len(note.encode("utf-8")) + 4
            if excess <= 0:
                excess = over()  # an estimate: re-measure before stopping
                if excess <= 0:
                    return dropped
    return dropped


PASSED_CHECKS_KEPT = 5  # the latest passed checks the frontmatter always lists


def _fit_file(record: SessionRecord, budget: int) -> SessionRecord:
    """Fit the whole file in ``budget`` bytes: what the frontmatter takes, the body cannot.

    Except older passed checks: the failed ones and the latest ``PASSED_CHECKS_KEPT``
    passed ones are reserved, the older passed ones come after everything in the body (a
    session of many mix/pytest runs lost the agent's notes to its check list). They are
    listed back, newest first, while the file still fits; ``omitted`` counts the rest.
    """
    def size(r: SessionRecord) -> int:
        return len(render_record(r).encode("utf-8"))

    checks = record.checks
    passed = [i for i, c in enumerate(checks) if c.outcome == "passed"]
    older = set(passed[:-PASSED_CHECKS_KEPT]) if len(passed) > PASSED_CHECKS_KEPT else set()

    def listing(r: SessionRecord, back: set[int]) -> SessionRecord:
        return replace(r, checks=tuple(c for i, c in enumerate(checks)
                                       if i not in older or i in back))

    lean = listing(record, set())
    front = size(lean) - _size(lean)
    fitted = fit(record, max(budget - front, budget // 4))
    if not older:
        return fitted
    back: set[int] = set()
    for i in sorted(older, reverse=True):
        if size(listing(fitted, back | {i})) > budget:
            break
        back.add(i)
    return replace(listing(fitted, back), omitted=fitted.omitted + len(older) - len(back))


def _cut_shell_output(turns: list[Turn]) -> int:
    """Shell output pasted by Claude Code's "!" mode is a tool's words, not the user's:
    cut it to head and tail (in place) before anything the user typed; how many cuts."""
    omitted = 0
    for i, t in enumerate(turns):
        if t.user and "<bash-std" in t.user:
            cut_count = 0

            def shrink(m: re.Match[str]) -> str:
                nonlocal cut_count
                inner, removed = _cut(m.group(2), _SHELL_CHARS)
                cut_count += bool(removed)
                return f"<{m.group(1)}>{inner}</{m.group(1)}>"

            user = _BASH_OUTPUT.sub(shrink, t.user)
            if cut_count:
                turns[i] = replace(t, user=user)
                omitted += cut_count
    return omitted


def _without(turn: Turn, attr: str) -> Turn:
    if attr == "activity":
        return replace(turn, activity=None)
    if attr == "notes":
        return replace(turn, notes=())
    return replace(turn, failures=())


def _with_text(turn: Turn, attr: str, text: str) -> Turn:
    return replace(turn, agent=text) if attr == "agent" else replace(turn, user=text)


def _water_level(lengths: list[int], target: int) -> int:
    """The largest cap C with sum(min(len, C)) <= target."""
    if sum(lengths) <= target:
        return max(lengths, default=0)
    lo, hi = 0, max(lengths)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if sum(min(n, mid) for n in lengths) <= target:
            lo = mid
        else:
            hi = mid - 1
    return lo


def _kept_memories(root: Path, earlier: SessionRecord,
                   memories: tuple[tuple[str, str], ...]) -> tuple[tuple[str, str], ...]:
    """``memories`` after the earlier record's own that still exist (theirs first; a
    memory stored in an earlier part and updated now stays "stored" by this session)."""
    now = dict(memories)
    kept = [(path, action) for path, action in earlier.memories
            if path in now or (root / path).is_file()]
    known = {path for path, _action in kept}
    return (*kept, *((path, action) for path, action in memories if path not in known))


def record_for(session: Session, root: Path, *, project: str | None,
               memories: Iterable[tuple[str, str]], local: bool = False,
               budget: int = DEFAULT_BUDGET, redact: Callable[[str], str] | None = None,
               fresh: bool = False, summary: tuple[str, str] | None = None,
               whole: bool = True) -> tuple[SessionRecord, str]:
    """The record of ``session`` after this encode, and its rendered text.

    ``session`` is the whole (redacted) session so far, from the transcript's first line
    to the end of the part being encoded now. When the session already has a record (an
    earlier part), the record is rebuilt from the whole session at the same path: the
    record after all parts is the record of one encode of the whole transcript (a turn
    cut by a part boundary stays one turn; a check that failed in one part and passed in
    the next is one check; open ends are those at the end). What the record keeps of the
    earlier parts: the memories they stored (still existing), the model's summary
    paragraphs, and the count of parts. ``fresh`` (``encode --force``, a re-created
    memory directory) starts the count and the summaries again.
    ``summary``: (backend, paragraph) a model backend wrote for this part, already
    checked like a moment (PlanBuilder.set_summary); the offline encoder never writes one.
    ``whole`` False: ``session`` is only the part being encoded (its transcript holds
    another session before it, so the whole file is not this session's): its turns are
    appended to the record (``merge``).
    """
    sid = session.session_id or "unknown"
    existing_rel = find_record(root, sid)
    old: SessionRecord | None = None
    if existing_rel is not None and existing_rel.startswith(LOCAL_RECORDS_DIR + "/") != local:
        existing_rel = None  # the mode changed: start a record where the mode puts it
    if existing_rel is not None:
        try:
            old = parse_record((root / existing_rel).read_text(encoding="utf-8"), existing_rel)
        except (OSError, UnicodeDecodeError, DualtraceError):
            old = None  # unreadable: rewritten from this part (git keeps the old text)
    memories = tuple(memories)
    append = old is not None and not whole and not fresh
    if old is not None and not append:
        # A re-read often finds nothing new: the record still lists what this session
        # stored before (in an earlier part, or before ``--force``).
        memories = _kept_memories(root, old, memories)
    built = build(session, first_turn=len(old.turns) + 1 if append and old else 1)
    rel = existing_rel or free_path(root, sid, session.started, local=local)
    new = SessionRecord(
        path=rel, session=sid, host=session.host, project=project, branch=session.git_branch,
        started=session.started, ended=session.ended, description=built.description,
        commits=tuple(built.commits), files_changed=tuple(built.files), checks=tuple(built.checks),
        memories=memories, turns=tuple(built.turns), open_ends=tuple(built.open_ends),
        summary=summary[1] if summary else None, summary_by=summary[0] if summary else None,
    )
    if append:
        new = merge(old, new)
    elif old is not None and not fresh:
        new = replace(new, project=old.project or project, parts=old.parts + 1,
                      summary=_summaries(old.summary, new.summary),
                      summary_by=new.summary_by or old.summary_by)
    record = _fit_file(new, budget)
    text = render_record(record)
    if redact is not None:
        # Everything above came from redacted events; one more pass over the rendered file
        # catches a secret split across two events and joined by the layout. Not the
        # session id: it names the record (find_record), the commits and the cursor, and
        # a host's random id (OpenCode's ``ses_...``) reads as high-entropy.
        line = re.search(r"(?m)^session: .*$", text)
        if line is None:
            text = redact(text)
        else:
            text = (redact(text[:line.start()]) + line.group(0)
                    + redact(text[line.end():]))
    return record, text


__all__ = ["Built", "build", "describe", "fit", "is_check", "merge", "record_for"]
