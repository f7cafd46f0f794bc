"""Session records: the episode a session's facts and moments were drawn from.

One Markdown file per session (``sessions/<YYYY-MM>/<YYYY-MM-DD>-<id8>.md``, or under
``.dualtrace/sessions/`` when records are kept local), holding the session's own words,
redacted. This module owns the format (parse and render round-trip), the paths and the
read API (list, find, read, turn windows); building a record from a transcript is the
encoder's job (``dualtrace.encoder.records``). The format is described for people in
docs/FORMATS.md and for the read side in /work/coord/session-record-format.md.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from dualtrace.errors import DualtraceError, FormatError
from dualtrace.memfs.formats import split_frontmatter
from dualtrace.memfs.ids import id8

RECORDS_DIR = "sessions"
LOCAL_RECORDS_DIR = ".dualtrace/sessions"
SCHEMA = 1
DEFAULT_BUDGET = 12000  # bytes of body
MODES = ("commit", "local", "off")
DESCRIPTION_CHARS = 160

_LOADER: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_DUMPER: Any = getattr(yaml, "CSafeDumper", yaml.SafeDumper)

# "## Turn 3 (2026-03-25 14:02 UTC)"; a transcript without timestamps (a plain JSONL
# chat) gives "## Turn 3". Records written before that said "(0000-00-00)": read as undated.
TURN_HEADING = re.compile(r"^## Turn (\d+)(?: \((\d{4}-\d{2}-\d{2})(?: (\d{2}:\d{2}) UTC)?\))?$")
NO_DATE = "0000-00-00"
SUMMARY_HEADING = re.compile(r"^## Summary \(by ([\w.-]+), not the session's words\)$")
OPEN_ENDS_HEADING = "## Open ends"
_LABELS = {
    "**User:**": "user",
    "**Agent:**": "agent",
    "**Failures:**": "failures",
    "**Decisions and notes:**": "notes",
}
_ACTIVITY = "**Activity:** "
_KNOWN = ("type", "schema", "session", "host", "project", "branch", "started", "ended",
          "description", "outcome", "turns", "parts", "commits", "files_changed", "checks",
          "memories", "open_ends", "omitted", "summary_by")


# ------------------------------------------------------------------ model


@dataclass(frozen=True)
class Commit:
    sha: str | None
    message: str


@dataclass(frozen=True)
class Check:
    """A test / lint / build command, grouped by command line."""

    command: str
    runs: int
    failed: int
    outcome: str  # result of the last run: passed | failed


@dataclass(frozen=True)
class Turn:
    """One user request and what followed it, up to the next request."""

    number: int
    date: str | None  # YYYY-MM-DD of the turn's first event
    time: str | None  # HH:MM (UTC)
    user: str | None = None  # the request, verbatim (redacted)
    agent: str | None = None  # the agent's last text of the turn, verbatim
    failures: tuple[str, ...] = ()  # one line each
    notes: tuple[str, ...] = ()  # other agent statements, verbatim
    activity: str | None = None  # one line: commands, edits, commits


@dataclass(frozen=True)
class SessionRecord:
    path: str
    session: str
    host: str
    project: str | None = None
    branch: str | None = None
    started: str | None = None
    ended: str | None = None
    description: str = ""
    commits: tuple[Commit, ...] = ()
    files_changed: tuple[str, ...] = ()
    checks: tuple[Check, ...] = ()
    memories: tuple[tuple[str, str], ...] = ()  # (path, stored | updated)
    turns: tuple[Turn, ...] = ()
    open_ends: tuple[str, ...] = ()
    parts: int = 1
    omitted: int = 0
    summary: str | None = None
    summary_by: str | None = None
    schema: int = SCHEMA
    extra: dict[str, Any] = field(default_factory=dict)  # unknown frontmatter keys, kept

    @property
    def date(self) -> str | None:
        return _date_of(self.started)

    @property
    def outcome(self) -> str:
        return outcome_line(self.commits, self.checks, len(self.open_ends))

    @property
    def local(self) -> bool:
        return self.path.startswith(LOCAL_RECORDS_DIR + "/")


@dataclass(frozen=True)
class RecordInfo:
    """A record's frontmatter: cheap to list (the body is not parsed)."""

    path: str
    session: str
    host: str
    project: str | None
    branch: str | None
    started: str | None
    ended: str | None
    description: str
    outcome: str
    memories: tuple[tuple[str, str], ...]
    open_end: str | None  # first open-ends bullet
    local: bool
    turns: int = 0

    @property
    def date(self) -> str | None:
        return _date_of(self.started)

    def to_dict(self) -> dict[str, Any]:
        return {
            "path": self.path, "session": self.session, "host": self.host,
            "project": self.project, "branch": self.branch, "started": self.started,
            "ended": self.ended, "date": self.date, "description": self.description,
            "outcome": self.outcome, "turns": self.turns,
            "memories": [{"path": p, "action": a} for p, a in self.memories],
            "open_end": self.open_end, "local": self.local,
        }


@dataclass(frozen=True)
class TurnWindow:
    """One ``## `` section of a record: the unit the index chunks."""

    kind: str  # turn | summary | open-ends
    number: int | None
    date: str | None
    time: str | None
    heading: str
    text: str  # plain words: quote prefixes and labels removed (see turn_windows)
    raw: str  # the section's markdown as written
    answered: bool = True  # the agent's side holds something (``answered``)


# ------------------------------------------------------------------ substance
#
# A question is not knowledge, and "OK." is not an answer: a session whose only content is
# the user's question and an acknowledgement stored nothing a later session can use, and
# its record, found by the question's own words, told the next session that its earlier
# unanswered question was a memory (review 7, F1). These predicates say what counts.

# What an agent says when it says nothing: acknowledgements and pleasantries. "Yes" and
# "no" are not here: to a yes/no question they are the answer.
_ACK_PHRASE = re.compile(
    r"(?i)\b(?:ok(?:ay)?|sure(?: thing)?|got it|understood|noted|will do|sounds good|great|"
    r"good|fine|cool|perfect|alright|all right|of course|certainly|absolutely|done|"
    r"thanks?(?: you)?|you'?re welcome|i see|makes sense|(?:i'?m )?on it|hello|hi|hey|"
    r"happy to help|how can i help(?: you)?(?: today)?|what can i do for you(?: today)?|"
    r"let me know(?: if you need anything(?: else)?)?)\b")
_SENTENCES = re.compile(r"(?<=[.!?])\s+|\n+")
# A sentence that asks, even without its question mark ("how do we deploy").
_ASKS = re.compile(
    r"(?i)^(?:how|what|why|when|where|which|who|whom|whose|should|shall|can|could|would|"
    r"will|is|are|was|were|any idea|(?:do|does|did|have|has|had) (?:we|you|i|they|it|he|she))"
    r"\b[^.!]*$")


def is_acknowledgement(text: str | None) -> bool:
    """Whether an agent's words say nothing beyond an acknowledgement ("OK.", "Sure!",
    "Got it, thanks.", "Hello! How can I help you today?"); empty text too."""
    rest = _ACK_PHRASE.sub(" ", text or "")
    return not re.search(r"\w", rest)


def is_question(sentence: str) -> bool:
    sentence = sentence.strip().strip("*_`\"'").strip()
    return sentence.endswith("?") or bool(_ASKS.match(sentence))


def statements(text: str) -> str:
    """``text`` without its questions: the sentences that state or ask for something."""
    kept = [s.strip() for s in _SENTENCES.split(text) if s.strip() and not is_question(s)]
    return " ".join(kept)


def answered(turn: Turn) -> bool:
    """Whether the agent's side of a turn holds anything: a reply beyond an
    acknowledgement, a failure, a decision or note, or tool activity."""
    return bool(turn.failures or turn.notes or turn.activity
                or not is_acknowledgement(turn.agent))


def substantive(record: SessionRecord) -> bool:
    """Whether a session did something worth its record: a commit, a changed file, a
    check, a memory it stored or updated, or a turn the agent answered (``answered``).
    The noise gate for records: a question followed by "OK." writes none."""
    return bool(record.commits or record.files_changed or record.checks or record.memories
                or any(answered(t) for t in record.turns))


def description_evidence(record: SessionRecord) -> str:
    """The record's description as the index may match it: not when it is a question
    no turn answered (the description is the first request; records written before
    descriptions skipped unanswered requests can start with one)."""
    text = record.description
    if not text or not is_question(text.removesuffix("...")):
        return text
    head = text.removesuffix("...").strip()[:60]
    for turn in record.turns:
        if turn.user and head in " ".join(turn.user.split()) and answered(turn):
            return text
    return ""


# ------------------------------------------------------------------ helpers


def _date_of(ts: str | None) -> str | None:
    if ts and len(ts) >= 10 and re.match(r"\d{4}-\d{2}-\d{2}", ts):
        return ts[:10]
    return None


def record_path(session_id: str, started: str | None, *, local: bool = False,
                today: str | None = None) -> str:
    """``sessions/2026-03/2026-03-25-0b6f1c2e.md`` (relative to the memory directory)."""
    day = _date_of(started) or today
    if day is None:
        import datetime as _dt

        day = _dt.datetime.now(_dt.timezone.utc).date().isoformat()
    base = LOCAL_RECORDS_DIR if local else RECORDS_DIR
    return f"{base}/{day[:7]}/{day}-{id8(session_id)}.md"


def is_record_path(rel: str) -> bool:
    rel = rel.replace("\\", "/")
    return (rel.startswith((RECORDS_DIR + "/", LOCAL_RECORDS_DIR + "/")) and rel.endswith(".md"))


OUTCOME_CHECK_CHARS = 60  # a failed check named in the outcome line, cut to this


def outcome_line(commits: Iterable[Commit], checks: Iterable[Check], open_ends: int) -> str:
    """One line: commits, checks, open ends. The frontmatter's ``checks`` list already
    names every check, so a session of several checks is counted here, not listed again
    (a line repeating them doubled the frontmatter and took the body's budget); only a
    failed one is named, cut short."""
    n = len(tuple(commits))
    parts = [f"{n} commit{'s' if n != 1 else ''}" if n else "no commits"]
    checks = tuple(checks)
    if len(checks) == 1:
        parts.append(f"{_short(checks[0].command)} {checks[0].outcome}")
    elif checks:
        failed = [c for c in checks if c.outcome != "passed"]
        if failed:
            named = ", ".join(dict.fromkeys(_short(c.command) for c in failed[-2:]))
            more = f" and {len(failed) - 2} more" if len(failed) > 2 else ""
            parts.append(f"{len(failed)} of {len(checks)} checks failed: {named}{more}")
        else:
            parts.append(f"{len(checks)} checks passed")
    if open_ends:
        parts.append("open end" if open_ends == 1 else f"{open_ends} open ends")
    return "; ".join(parts)


def _short(command: str) -> str:
    command = one_line(command)
    return command if len(command) <= OUTCOME_CHECK_CHARS else command[:OUTCOME_CHECK_CHARS - 3] + "..."


def one_line(text: str) -> str:
    return " ".join(text.split())


def _quote(text: str) -> list[str]:
    """``> ``-prefix every line; an empty line stays inside the quote as ``>``."""
    out = []
    for line in text.strip("\n").split("\n"):
        out.append(f"> {line}" if line else ">")  # verbatim: trailing spaces are kept
    return out


# ------------------------------------------------------------------ render


def _front(record: SessionRecord) -> dict[str, Any]:
    data: dict[str, Any] = {
        "type": "session",
        "schema": record.schema,
        "session": record.session,
        "host": record.host,
        "project": record.project,
        "branch": record.branch,
        "started": record.started,
        "ended": record.ended,
        "description": one_line(record.description)[:DESCRIPTION_CHARS * 2],
        "outcome": record.outcome,
        "turns": len(record.turns),
        "parts": record.parts,
        "commits": [{"sha": c.sha, "message": one_line(c.message)} for c in record.commits],
        "files_changed": list(record.files_changed),
        "checks": [{"command": c.command, "runs": c.runs, "failed": c.failed,
                    "outcome": c.outcome} for c in record.checks],
        "memories": [{"path": p, "action": a} for p, a in record.memories],
        "open_ends": len(record.open_ends),
        "omitted": record.omitted,
        "summary_by": record.summary_by if record.summary else None,
    }
    for key, value in record.extra.items():
        if key not in data:
            data[key] = value
    return data


def render_turn(turn: Turn, fallback_date: str | None) -> str:
    day = turn.date or fallback_date
    if day is None:  # no timestamp in the transcript: no date is made up
        lines = [f"## Turn {turn.number}", ""]
    else:
        when = f"{day} {turn.time} UTC" if turn.time else day
        lines = [f"## Turn {turn.number} ({when})", ""]
    if turn.user:
        lines += ["**User:**", *_quote(turn.user), ""]
    if turn.agent:
        lines += ["**Agent:**", *_quote(turn.agent), ""]
    if turn.failures:
        lines += ["**Failures:**", *(f"- {one_line(f)}" for f in turn.failures), ""]
    if turn.notes:
        lines.append("**Decisions and notes:**")
        for note in turn.notes:
            lines += [*_quote(note), ""]
    if turn.activity:
        lines += [f"{_ACTIVITY}{one_line(turn.activity)}", ""]
    return "\n".join(lines)


def render_body(record: SessionRecord) -> str:
    day = record.date
    title = f"# Session {day or 'undated'} {id8(record.session)}"
    if record.description:
        title += f": {one_line(record.description)}"
    parts = [title, ""]
    if record.summary and record.summary_by:
        parts += [f"## Summary (by {record.summary_by}, not the session's words)", "",
                  record.summary.strip(), ""]
    for turn in record.turns:
        parts.append(render_turn(turn, day))
    if record.open_ends:
        parts += [OPEN_ENDS_HEADING, "", *(f"- {one_line(o)}" for o in record.open_ends), ""]
    return "\n".join(parts).rstrip("\n") + "\n"


def render_record(record: SessionRecord) -> str:
    front = yaml.dump(_front(record), Dumper=_DUMPER, sort_keys=False, allow_unicode=True,
                      width=100000, default_flow_style=None)
    return f"---\n{front}---\n\n{render_body(record)}"


# ------------------------------------------------------------------ parse


def _split(text: str, path: str) -> tuple[dict[str, Any], str]:
    try:
        front, body, _line = split_frontmatter(text, path)
    except FormatError as exc:
        raise DualtraceError(f"{path}: a session record starts with '---' frontmatter "
                             f"({exc.reason})") from None
    try:
        data = yaml.load(front, Loader=_LOADER) or {}
    except yaml.YAMLError as exc:
        raise DualtraceError(f"{path}: bad frontmatter: {' '.join(str(exc).split())[:200]}") from None
    if not isinstance(data, dict) or data.get("type") != "session":
        raise DualtraceError(f"{path}: not a session record (type: session)")
    return data, body


def _s(value: Any) -> str | None:
    if value is None:
        return None
    if hasattr(value, "isoformat"):  # YAML turned a bare timestamp into a datetime
        text = value.isoformat()
        return text.replace("+00:00", "Z")
    return str(value)


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _memories(value: Any) -> tuple[tuple[str, str], ...]:
    out = []
    for m in _list(value):
        if isinstance(m, dict) and m.get("path"):
            out.append((str(m["path"]), str(m.get("action") or "stored")))
    return tuple(out)


def info_from_front(data: dict[str, Any], path: str, first_open_end: str | None = None) -> RecordInfo:
    return RecordInfo(
        path=path, session=str(data.get("session") or ""), host=str(data.get("host") or ""),
        project=_s(data.get("project")), branch=_s(data.get("branch")),
        started=_s(data.get("started")), ended=_s(data.get("ended")),
        description=str(data.get("description") or ""), outcome=str(data.get("outcome") or ""),
        memories=_memories(data.get("memories")), open_end=first_open_end,
        local=path.startswith(LOCAL_RECORDS_DIR + "/"), turns=int(data.get("turns") or 0),
    )


def _sections(body: str) -> list[tuple[str, list[str]]]:
    sections: list[tuple[str, list[str]]] = []
    current: tuple[str, list[str]] | None = None
    for line in body.split("\n"):
        if line.startswith("## "):
            current = (line, [])
            sections.append(current)
        elif current is not None:
            current[1].append(line)
    return sections


def _turn_date(m: re.Match[str]) -> str | None:
    return None if m.group(2) in (None, NO_DATE) else m.group(2)


def _parse_turn(heading: str, lines: list[str], path: str) -> Turn:
    m = TURN_HEADING.match(heading)
    if not m:
        raise DualtraceError(f"{path}: bad turn heading {heading!r}")
    blocks: dict[str, list[str]] = {"user": [], "agent": [], "failures": [], "notes": []}
    label: str | None = None
    quote: list[str] | None = None
    activity: str | None = None

    def close() -> None:
        nonlocal quote
        if quote is not None and label is not None:
            blocks[label].append("\n".join(quote))
        quote = None

    for line in lines:
        if line in _LABELS:
            close()
            label = _LABELS[line]
        elif line.startswith(_ACTIVITY):
            close()
            label = None
            activity = line[len(_ACTIVITY):]
        elif line == ">" or line.startswith("> "):
            if quote is None:
                quote = []
            quote.append(line[2:])
        elif line.startswith("- ") and label == "failures":
            blocks["failures"].append(line[2:])
        elif not line.strip():
            close()
    close()
    return Turn(
        number=int(m.group(1)), date=_turn_date(m), time=m.group(3),
        user="\n\n".join(blocks["user"]) or None, agent="\n\n".join(blocks["agent"]) or None,
        failures=tuple(blocks["failures"]), notes=tuple(blocks["notes"]), activity=activity,
    )


def parse_record(text: str, path: str) -> SessionRecord:
    data, body = _split(text, path)
    if not data.get("session"):
        raise DualtraceError(f"{path}: a session record needs a 'session' id")
    turns: list[Turn] = []
    open_ends: list[str] = []
    summary = summary_by = None
    for heading, lines in _sections(body):
        if heading.startswith("## Turn "):
            turns.append(_parse_turn(heading, lines, path))
        elif heading == OPEN_ENDS_HEADING:
            open_ends = [ln[2:] for ln in lines if ln.startswith("- ")]
        else:
            m = SUMMARY_HEADING.match(heading)
            if m:
                summary_by = m.group(1)
                summary = "\n".join(lines).strip() or None
    commits = tuple(Commit(_s(c.get("sha")), str(c.get("message") or ""))
                    for c in _list(data.get("commits")) if isinstance(c, dict))
    checks = tuple(Check(str(c.get("command") or ""), int(c.get("runs") or 0),
                         int(c.get("failed") or 0), str(c.get("outcome") or ""))
                   for c in _list(data.get("checks")) if isinstance(c, dict))
    return SessionRecord(
        path=path, session=str(data["session"]), host=str(data.get("host") or ""),
        project=_s(data.get("project")), branch=_s(data.get("branch")),
        started=_s(data.get("started")), ended=_s(data.get("ended")),
        description=str(data.get("description") or ""), commits=commits,
        files_changed=tuple(str(f) for f in _list(data.get("files_changed"))),
        checks=checks, memories=_memories(data.get("memories")), turns=tuple(turns),
        open_ends=tuple(open_ends), parts=int(data.get("parts") or 1),
        omitted=int(data.get("omitted") or 0), summary=summary, summary_by=summary_by,
        schema=int(data.get("schema") or SCHEMA),
        extra={k: v for k, v in data.items() if k not in _KNOWN},
    )


def _plain(lines: list[str]) -> str:
    out = []
    for line in lines:
        if line in _LABELS:
            continue
        if line.startswith(_ACTIVITY):
            line = line[len(_ACTIVITY):]
        elif line == ">":
            line = ""
        elif line.startswith("> "):
            line = line[2:]
        elif line.startswith("- "):
            line = line[2:]
        out.append(line)
    return re.sub(r"\n{3,}", "\n\n", "\n".join(out)).strip()


def turn_windows(text: str) -> list[TurnWindow]:
    """Every ``## `` section of a record, in file order: the units the index chunks."""
    try:
        data, body = _split(text, "<record>")
    except DualtraceError:
        data, body = {}, text
    day = _date_of(_s(data.get("started")))
    out: list[TurnWindow] = []
    for heading, lines in _sections(body):
        raw = "\n".join([heading, *lines]).strip("\n")
        m = TURN_HEADING.match(heading)
        if m:
            turn = _parse_turn(heading, lines, "<record>")
            text, replied = _plain(lines), answered(turn)
            if not replied:
                # Nothing on the agent's side: the user's questions are not an answer to
                # anything (asked again, they would find themselves); their statements
                # stay. A turn of questions alone has no words to index.
                text = statements(turn.user or "")
            out.append(TurnWindow("turn", int(m.group(1)), _turn_date(m), m.group(3), heading,
                                  text, raw, answered=replied))
        elif heading == OPEN_ENDS_HEADING:
            out.append(TurnWindow("open-ends", None, day, None, heading, _plain(lines), raw))
        elif SUMMARY_HEADING.match(heading):
            out.append(TurnWindow("summary", None, day, None, heading, _plain(lines), raw))
    return out


# ------------------------------------------------------------------ read API


def _read(root: Path, rel: str) -> str:
    """A record's text: no symlink on the way (file or folder), at most the size limit."""
    from dualtrace.memfs.anchors import LinkError, read_nofollow

    step = Path(root)
    for part in Path(rel).parts[:-1]:
        step = step / part
        if step.is_symlink():
            raise LinkError(f"session record {rel} goes through a symlink; not followed")
    return read_nofollow(Path(root) / rel, rel)


def _record_files(root: Path, local: bool, id8_: str | None = None) -> list[str]:
    """Relative paths of the record files (``id8_``: only those of that file-name id).

    With ``os.scandir`` the entry types come from the directory listing: no stat per
    file (a stat and an lstat per record made ``find_record``, run for every commit,
    grow with the number of records: 3 -> 12 ms per commit over 220 records).
    """
    rels: list[str] = []
    bases = [RECORDS_DIR] + ([LOCAL_RECORDS_DIR] if local else [])
    for base in bases:
        folder = root / base
        if folder.is_symlink() or not folder.is_dir():
            continue  # a link is never followed (issue 13): it could point anywhere
        for month in _entries(folder):
            if month.is_symlink() or not month.is_dir(follow_symlinks=False):
                continue
            for f in _entries(Path(month.path)):
                name = f.name
                if (name.endswith(".md") and (id8_ is None or name[11:19] == id8_)
                        and f.is_file(follow_symlinks=False)):
                    rels.append(f"{base}/{month.name}/{name}")
    return rels


def _entries(folder: Path) -> list[os.DirEntry[str]]:
    try:
        with os.scandir(folder) as it:
            return list(it)
    except OSError:
        return []


def _first_open_end(body: str) -> str | None:
    at = body.find("\n" + OPEN_ENDS_HEADING + "\n")
    if at < 0:
        return None
    for line in body[at + len(OPEN_ENDS_HEADING) + 2:].split("\n"):
        if line.startswith("## "):
            break
        if line.startswith("- "):
            return line[2:]
    return None


def read_info(root: Path, rel: str) -> RecordInfo:
    text = _read(Path(root), rel)
    data, body = _split(text, rel)
    return info_from_front(data, rel, _first_open_end(body))


def list_records(root: Path | str, *, local: bool = True, limit: int | None = None,
                 project: str | None = None) -> list[RecordInfo]:
    """Records, newest first (by start time). Unreadable files are skipped.

    File names begin with the date, so with ``limit`` only the newest days are read.
    """
    root = Path(root)
    rels = sorted(_record_files(root, local), key=lambda r: r.rsplit("/", 1)[-1], reverse=True)
    if limit is not None:
        rels = _newest(root, rels, limit, project)
    infos: list[RecordInfo] = []
    for rel in rels:
        try:
            info = read_info(root, rel)
        except (OSError, UnicodeDecodeError, DualtraceError):
            continue
        if project is not None and info.project not in (None, project):
            continue
        infos.append(info)
    infos.sort(key=lambda i: (i.started or i.path.rsplit("/", 1)[-1][:10], i.path), reverse=True)
    return infos[:limit] if limit is not None else infos


RECENT_LOOKBACK = 4  # recent_records reads up to this many times ``limit`` records


def recent_records(root: Path | str, limit: int, *,
                   project: str | None = None) -> list[RecordInfo]:
    """The ``limit`` newest records of sessions that did something (``substantive``).

    Records are no longer written for sessions that did nothing, but a memory made
    before holds them: a run of "question, OK." sessions would push the session that
    did the work out of SessionStart's recent list. Only the newest few are read.
    """
    root = Path(root)
    out: list[RecordInfo] = []
    for info in list_records(root, limit=limit * RECENT_LOOKBACK, project=project):
        if info.memories:
            out.append(info)
        else:
            try:
                record = parse_record(_read(root, info.path), info.path)
            except (OSError, UnicodeDecodeError, DualtraceError):
                continue
            if substantive(record):
                out.append(info)
        if len(out) >= limit:
            break
    return out


_STARTED = re.compile(r"^started: '?([^'\n]*)'?$", re.M)
_PROJECT = re.compile(r"^project: '?([^'\n]*)'?$", re.M)


def _newest(root: Path, rels: list[str], limit: int, project: str | None) -> list[str]:
    """The ``limit`` newest records (by start time) without parsing every same-day file.

    Names sort by day; within the last days needed, the start time and project are read
    from the first lines only (SessionStart lists 3 of possibly thousands).
    """
    picked: list[tuple[str, str]] = []
    last_day: str | None = None
    for rel in rels:
        day = rel.rsplit("/", 1)[-1][:10]
        if len(picked) >= limit and day != last_day:
            break
        try:
            with (root / rel).open("r", encoding="utf-8", errors="replace") as fh:
                head = fh.read(2048)
        except OSError:
            continue
        if project is not None:
            m = _PROJECT.search(head)
            if m and m.group(1) not in ("null", project):
                continue
        m = _STARTED.search(head)
        picked.append((m.group(1) if m and m.group(1) not in ("null", "") else day, rel))
        last_day = day
    picked.sort(reverse=True)
    return [rel for _s, rel in picked[: limit + 2]]  # a spare or two for unreadable files


def find_record(root: Path | str, session_id: str) -> str | None:
    """Path of the record of ``session_id`` (exact id), or None."""
    root = Path(root)
    for rel in _record_files(root, True, id8(session_id)):
        try:
            data, _ = _split(_read(root, rel), rel)
        except (OSError, UnicodeDecodeError, DualtraceError):
            continue
        if str(data.get("session")) == session_id:
            return rel
    return None


def read_record(root: Path | str, ref: str) -> SessionRecord:
    """A record by full session id, unique id prefix (4+ chars) or relative path."""
    root = Path(root)
    ref = ref.strip()
    if is_record_path(ref):
        try:
            return parse_record(_read(root, ref), ref)
        except FileNotFoundError:
            raise DualtraceError(f"no session record at {ref}") from None
    exact = find_record(root, ref) if ref else None
    if exact is not None:
        return parse_record(_read(root, exact), exact)
    if len(ref) < 4:
        raise DualtraceError(f"session id {ref!r} is too short (give at least 4 characters)")
    matches = [i for i in list_records(root) if i.session.lower().startswith(ref.lower())
               or i.path.rsplit("/", 1)[-1][:-3].endswith(ref.lower())]
    if not matches:
        raise DualtraceError(f"no session record for {ref!r} (see `dualtrace sessions`)")
    if len({m.session for m in matches}) > 1:
        listed = ", ".join(sorted({m.session for m in matches})[:5])
        raise DualtraceError(f"session id {ref!r} is ambiguous: {listed}")
    rel = matches[0].path
    return parse_record(_read(root, rel), rel)


def local_record_file(root: Path, rel: str) -> Path:
    """The file of a local record: under .dualtrace/, which memory paths may not reach.

    The path comes from :func:`record_path` (a date and a [0-9a-z] id), never from a
    model; it is still checked, since confine() cannot be used for the state folder.
    """
    parts = rel.split("/")
    if not (rel.startswith(LOCAL_RECORDS_DIR + "/") and is_record_path(rel) and len(parts) == 4
            and all(p and p not in (".", "..") for p in parts)):
        raise DualtraceError(f"not a local session record path: {rel!r}")
    return Path(root) / rel


def write_local_record(root: Path, rel: str, text: str) -> None:
    from dualtrace.atomic import write_text as atomic_write_text

    atomic_write_text(local_record_file(root, rel), text)


def free_path(root: Path, session_id: str, started: str | None, *, local: bool) -> str:
    """The record path for a new session: the next free ``-2``, ``-3`` name on a clash."""
    rel = record_path(session_id, started, local=local)
    candidate, n = rel, 1
    while (root / candidate).exists():
        try:
            data, _ = _split(_read(root, candidate), candidate)
            if str(data.get("session")) == session_id:
                return candidate
        except (OSError, UnicodeDecodeError, DualtraceError):
            pass
        n += 1
        candidate = rel[:-3] + f"-{n}.md"
    return candidate


__all__ = [
    "Check", "Commit", "DEFAULT_BUDGET", "LOCAL_RECORDS_DIR", "MODES", "RECORDS_DIR",
    "RecordInfo", "SessionRecord", "Turn", "TurnWindow", "find_record", "free_path", "id8",
    "is_record_path", "list_records", "outcome_line", "parse_record", "read_info",
    "read_record", "recent_records", "record_path", "render_record", "render_turn",
    "substantive", "turn_windows",
]
