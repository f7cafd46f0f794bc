"""encode_session: read -> redact -> digest -> gates -> backend -> validate -> apply -> commit.

One call encodes what is new in one transcript (from its cursor) into one memory
directory, as at most one commit, and returns a report. The memory directory's
lock is held from the backend call to the commit, so two encoders never
interleave on one store; the cursor advances only after the commit.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from datetime import date as _date
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dualtrace import config, cursors
from dualtrace.config import Settings
from dualtrace.errors import BackendError, DualtraceError
from dualtrace.sanitize import safe_session_id

if TYPE_CHECKING:
    from dualtrace.encoder.backends import Backend
    from dualtrace.encoder.digest import Digest
    from dualtrace.encoder.gates import GateVerdict
    from dualtrace.encoder.session import Session


@dataclass
class EncodeReport:
    transcript: str
    memory_dir: str
    session_id: str | None = None
    host: str | None = None
    backend: str | None = None
    operations: list[dict[str, Any]] = field(default_factory=list)
    commit: str | None = None
    user_commit: str | None = None  # the person's own memory (preferences), if touched
    skipped: str | None = None
    gates: dict[str, Any] = field(default_factory=dict)
    digest: dict[str, Any] = field(default_factory=dict)
    redactions: dict[str, int] = field(default_factory=dict)
    usage: dict[str, Any] = field(default_factory=dict)
    timings_ms: dict[str, float] = field(default_factory=dict)
    cursor: tuple[int, int] = (0, 0)
    dry_run: bool = False
    diff: str | None = None
    message: str | None = None
    notes: list[str] = field(default_factory=list)
    record: str | None = None  # the session record this encode wrote or updated

    @property
    def stored(self) -> int:
        # A new preference/convention bullet is stored, as its commit line says.
        return sum(1 for op in self.operations if op["action"] in ("store", "bullet"))

    @property
    def updated(self) -> int:
        return sum(1 for op in self.operations if op["action"] in ("update", "upgrade"))

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["cursor"] = list(self.cursor)
        return data


def _grounding_text(session, digest) -> str:
    parts: list[str] = [digest.text]
    for e in session.events:
        parts.extend(v for v in (e.text, e.path, e.command, e.result, e.detail) if v)
        if e.exit_code is not None:
            parts.append(f"exited {e.exit_code}")
    for v in (session.session_id, session.git_branch, session.started, session.ended):
        if v:
            parts.append(v)
    return "\n".join(parts)


def clean_session(session: Session, redactor: Any) -> tuple[Session, Any]:
    """Redacted (secrets, private parts, our injected blocks), then quarantined
    (instruction-like text in tool output withheld): what every later step sees.
    The counts are by kind; ``instruction-like`` counts the withheld passages."""
    from dualtrace.encoder.hostile import quarantine
    from dualtrace.encoder.redact import redact_session

    redacted, counts = redact_session(session, redactor)
    redacted, withheld = quarantine(redacted)
    if withheld:
        counts["instruction-like"] += withheld
    return redacted, counts


@dataclass(frozen=True)
class Prepared:
    """Everything the worker and ``dualtrace digest`` need from one transcript read."""

    session: Session  # redacted
    digest: Digest
    verdict: GateVerdict
    redactions: dict[str, int]


def prepare(path: str, *, cursor: int = 0, budget: int | None = None,
            extra_patterns: tuple[str, ...] = (), fmt: str | None = None,
            last_assistant_message: str | None = None) -> Prepared:
    """Read -> redact -> digest -> gates, the order that keeps secrets out of every output."""
    from dualtrace.encoder.digest import DEFAULT_BUDGET, build_digest
    from dualtrace.encoder.gates import evaluate
    from dualtrace.encoder.redact import Redactor
    from dualtrace.hooks.transcripts import read_transcript

    raw = read_transcript(path, cursor=cursor, fmt=fmt,
                          last_assistant_message=last_assistant_message)
    session, counts = clean_session(raw, Redactor(extra_patterns))
    digest = build_digest(session, budget or DEFAULT_BUDGET)
    digest.stats["redactions"] = dict(sorted(counts.items()))
    return Prepared(session, digest, evaluate(session), dict(counts))


def encode_session(
    transcript: str | Path,
    *,
    memory_dir: str | Path | None = None,
    backend: str | Backend = "auto",
    settings: Settings | None = None,
    workspace: config.Workspace | None = None,
    host: str | None = None,
    last_assistant_message: str | None = None,
    dry_run: bool = False,
    budget: int | None = None,
    fallback: str | None = None,
    force: bool = False,
) -> EncodeReport:
    """Encode the new part of ``transcript`` into ``memory_dir``: at most one commit.

    ``force`` ignores the cursor and the record of earlier commits: the whole
    transcript is encoded again (what it re-finds becomes updates, never duplicates).

    ``fallback`` ("offline" or "none") overrides ``settings.fallback`` for what happens
    when a model backend fails: encode offline instead, or raise (the default by hand;
    the worker passes "offline" unless the config says "none").
    """
    started, timings = time.perf_counter(), _Laps()
    lap = timings.lap
    path = Path(transcript).expanduser().resolve()
    workspace = _workspace_of(workspace, memory_dir, settings)
    settings = workspace.settings
    memory_dir = workspace.memory_dir
    report = EncodeReport(transcript=str(path), memory_dir=str(memory_dir), dry_run=dry_run)

    cursor = cursors.Cursor(str(path)) if force else cursors.load(path, str(memory_dir))
    t = time.perf_counter()
    session = _read_part(path, cursor, host, last_assistant_message)
    t = lap("read", t)
    report.session_id = session.session_id
    report.host = session.host
    report.cursor = (cursor.offset or 0, session.cursor)

    def advance(to: int = session.cursor) -> None:
        if not dry_run:
            cursors.save(cursors.Cursor(str(path), to, cursors.inode_of(path),
                                        session.session_id, str(memory_dir),
                                        cursors.current_head(memory_dir)))

    settings = _preferences_of(session, settings, report)
    report.skipped = _nothing_to_encode(session, memory_dir)
    if report.skipped:
        advance()
        return _done(report, started, timings)

    whole = _whole_session(path, host, session, last_assistant_message) \
        if (cursor.offset or 0) > 0 else session
    from_start = whole is not session or not cursor.offset  # else: another session came first
    redacted, whole, digest, verdict = _condense(session, whole, settings, budget, report, lap, t)
    if verdict.skip_backend:
        report.skipped = "gates: " + ("; ".join(verdict.reasons) or "no activity and no signal")
        if not dry_run:
            _record_gated(path, workspace, whole, report, cursor.offset or 0, session.cursor,
                          from_start)
        advance()
        return _done(report, started, timings)

    store, scratch = _open_store(memory_dir, settings, workspace.project, dry_run)
    try:
        start = cursor.offset or 0
        key = hashlib.sha256(str(cursors.logical_path(path)).encode("utf-8")).hexdigest()[:12]
        done_to = None if force else store.git.committed_range(key, start)
        if done_to is not None:
            # Committed by a run that died before saving its cursor: do not encode it twice.
            report.skipped = f"already committed (range {start}-{done_to}); cursor recovered"
            advance(done_to)
            return _done(report, started, timings)
        _encode_into(store, backend, redacted, (whole, from_start), digest, verdict, settings,
                     fallback, path,
                     (f"Dualtrace-Range: {key} {start}-{session.cursor}",), dry_run, report, lap)
    finally:
        store.close()
        if scratch is not None:
            scratch.cleanup()
    if not report.commit and not dry_run and not report.skipped:
        report.skipped = "nothing worth storing"
    advance()
    return _done(report, started, timings)


def _record_gated(path: Path, workspace: config.Workspace, whole: Session,
                  report: EncodeReport, range_start: int, range_end: int,
                  from_start: bool = True) -> None:
    """A session the gates skip still gets its record when the user asked for something
    (or it is a later part of a recorded session): nothing said is lost. ``whole``: the
    redacted session from its first line (the record is rebuilt from all of it)."""
    settings, memory_dir = workspace.settings, workspace.memory_dir
    if settings.session_records != "off" and (
            _worth_recording(whole) or _has_record(memory_dir, settings, whole.session_id)):
        _record_alone(path, memory_dir, settings, whole, report, project=workspace.project,
                      range_start=range_start, range_end=range_end, from_start=from_start)


def _condense(part: Session, whole: Session, settings: Settings, budget: int | None,
              report: EncodeReport, lap: Callable[[str, float], float], t: float):
    """Redact the session, digest it and run the gates (each timed into the report).

    ``whole`` is the session from its first line to the part's end (``part`` itself for
    a first part): it is what gets redacted (a secret seen in an earlier part is masked
    in this one too, and the record is rebuilt from it). The encoder's session is the
    part with the turns it continues (``encoder.parts.window``). Returns (the encoder's
    session, the whole, redacted; the digest; the gates' verdict)."""
    from dualtrace.encoder import gates as gates_mod
    from dualtrace.encoder.digest import build_digest
    from dualtrace.encoder.parts import window
    from dualtrace.encoder.redact import Redactor

    whole, counts = clean_session(whole, Redactor(settings.redact_patterns))
    redacted = whole if whole is part else window(whole, part)
    report.redactions = dict(counts)
    t = lap("redact", t)
    digest = build_digest(redacted, budget or settings.digest_budget)
    report.digest = _plain(digest.stats)
    t = lap("digest", t)
    verdict = gates_mod.evaluate(redacted)
    report.gates = _plain(verdict)
    lap("gates", t)
    return redacted, whole, digest, verdict


def _encode_into(store, backend, redacted, whole: tuple[Session, bool], digest, verdict,
                 settings: Settings,
                 fallback: str | None, path: Path, range_trailer: tuple[str, ...],
                 dry_run: bool, report: EncodeReport,
                 lap: Callable[[str, float], float]) -> None:
    """Under the store's lock: the backend proposes, the plan is written in one commit
    (or shown as a diff for a dry run); the report gets the operations."""
    from dualtrace.encoder.backends import get_backend
    from dualtrace.encoder.plan import Context, Grounding, LazyArtifacts

    # A name from the registry, or a backend object (backfill's batch helpers).
    engine = get_backend(backend, settings) if isinstance(backend, str) else backend
    day = redacted.date or _date.today().isoformat()
    from dualtrace.memfs.ids import short_id

    grounding = Grounding(_grounding_text(redacted, digest), day,
                          LazyArtifacts(lambda: getattr(digest, "artifacts", ()) or ()),
                          frozenset({short_id(redacted.session_id).lower()}
                                    if redacted.session_id else ()))

    from dualtrace.encoder.hostile import Provenance

    provenance = Provenance.of(redacted)

    def context(engine_name: str) -> Context:
        return Context(redacted.session_id, engine_name, day, grounding, store.project,
                       range_trailer, provenance)

    with store.lock():
        t = time.perf_counter()
        engine, builder, usage = _run_backend(engine, store, context, redacted, digest,
                                              verdict, settings, fallback, path, report)
        if settings.session_records != "off":
            _attach_record(builder, *whole, store, settings, report)
        report.backend = engine.name
        report.usage = usage.to_dict()
        report.operations = [o.to_dict() for o in builder.outcomes]
        report.message = builder.message()
        t = lap("backend", t)
        if dry_run:
            report.diff = builder.diff()
        else:
            _write_plan(store, builder, settings, report)
        lap("apply", t)


def _workspace_of(workspace: config.Workspace | None, memory_dir: str | Path | None,
                  settings: Settings | None) -> config.Workspace:
    """The run's Workspace; an explicit memory dir or settings override the given one."""
    if workspace is None:
        # A library caller without a Workspace: the current directory's project
        # (config.Workspace); the CLI and the worker pass the session's own.
        return config.workspace(memory_dir=memory_dir, settings=settings)
    if memory_dir is not None or settings is not None:
        return replace(workspace, settings=settings or workspace.settings,
                       memory_dir=Path(memory_dir).expanduser().resolve() if memory_dir
                       else workspace.memory_dir)
    return workspace


def _read_part(path: Path, cursor: cursors.Cursor, host: str | None,
               last_assistant_message: str | None) -> Session:
    """The transcript from the cursor on, named by its session id."""
    from dualtrace.hooks.transcripts import format_for_host, read_transcript

    session = read_transcript(path, cursor=cursor.offset or 0, fmt=format_for_host(host),
                              last_assistant_message=last_assistant_message)
    if not session.session_id:
        # A part read from a cursor may not carry the id (Codex names it once, at the
        # top): the label saved with the cursor keeps first and later encodes alike.
        # Plain chats and some hosts carry no id at all: the file name is the name.
        session = replace(session, session_id=safe_session_id(cursor.session_id or path.stem))
    return session


def _preferences_of(session: Session, settings: Settings, report: EncodeReport) -> Settings:
    """Where this session's preferences may go: the person's own memory takes them only
    from sessions that ran on this machine.

    A transcript whose working directory is not here (someone else's session, a copy
    from another machine, the shipped examples) says nothing about this person: what
    it calls a preference stays in the memory directory it is encoded into, instead of
    being injected into every project they work on. No directory named: as configured.
    """
    if settings.preferences == "project" or not session.cwd:
        return settings
    try:
        here = Path(session.cwd).expanduser().is_dir()
    except OSError:
        here = False
    if here:
        return settings
    report.notes.append(f"the session ran in {session.cwd}, which is not on this machine: "
                        "its preferences stay in this memory, not in your own")
    return replace(settings, preferences="project")


def _nothing_to_encode(session: Session, memory_dir: Path) -> str | None:
    """Why this part is skipped before any work, or None."""
    if session.cwd:
        try:
            cwd = Path(session.cwd).resolve()
            if cwd == memory_dir or memory_dir in cwd.parents:
                return "the session ran inside the memory directory itself"
        except OSError:
            pass
    if not session.events:
        return "nothing new in the transcript since the last encode"
    return None


def _open_store(memory_dir: Path, settings: Settings, project: str, dry_run: bool):
    """The store to plan against, and the temporary folder a dry run plans in (or None)."""
    from dualtrace.memfs.store import MemoryStore

    scratch = None
    store_root = memory_dir
    if dry_run and not memory_dir.exists():
        # A dry run writes nothing, not even a new memory directory: plan against an
        # empty one in a temporary folder instead.
        import tempfile

        scratch = tempfile.TemporaryDirectory(prefix="dualtrace-dry-run-")
        store_root = Path(scratch.name) / (memory_dir.name or "memory")
    store = MemoryStore(store_root, author=(settings.author_name, settings.author_email),
                        project=project)
    return store, scratch


def _run_backend(engine, store, context, redacted, digest, verdict, settings: Settings,
                 fallback: str | None, path: Path, report: EncodeReport):
    """Run the backend on the session; over budget or failing, the offline encoder
    instead when the settings allow it. Returns (engine, builder, usage)."""
    from dualtrace.encoder.backends import EncodeRequest, get_backend
    from dualtrace.encoder.backends.spend import BudgetExceeded, action
    from dualtrace.encoder.context import relevant_memories
    from dualtrace.encoder.plan import PlanBuilder

    def run(engine, fell_back: str | None = None):
        ctx = context(engine.name)
        if fell_back:  # the commit says why it is the offline encoder's work
            from dualtrace.encoder.redact import redact_text
            from dualtrace.memfs.gitrepo import FALLBACK_TRAILER

            why = redact_text(fell_back)  # an API's error text goes into a commit
            ctx = replace(ctx, trailers=(*ctx.trailers, f"{FALLBACK_TRAILER}: {why}"))
        builder = PlanBuilder(store, ctx)
        request = EncodeRequest(redacted, digest, verdict,
                                relevant_memories(builder.facts(), digest.text), settings, ctx)
        return engine, builder, engine.encode(request, builder)

    try:
        return run(engine)
    except BudgetExceeded as exc:
        if action(settings) == "wait":
            raise  # the worker keeps the job queued until the budget resets
        report.notes.append(f"{exc}; encoded offline instead")
        return run(get_backend("offline", settings), f"{engine.name}: {exc}")
    except BackendError as exc:
        if engine.name == "offline":
            raise
        if (fallback or settings.fallback) != "offline":
            from dualtrace.encoder.backends import offline_hint

            raise BackendError(f"{exc}; {offline_hint(str(path), report.memory_dir)}") from exc
        report.notes.append(f"{engine.name} failed ({exc}); fell back to offline")
        return run(get_backend("offline", settings), f"{engine.name} failed: {exc}")


def _write_plan(store, builder, settings: Settings, report: EncodeReport) -> None:
    """Commit the plan (and the personal part to the user's memory); keep a local record."""
    report.commit, report.user_commit = commit_plan(store, builder, settings)
    local = builder.local_record()
    if local is not None:  # kept in the gitignored state: indexed, never pushed
        from dualtrace.memfs.sessions import write_local_record

        write_local_record(store.root, *local)


NOTHING_DONE = ("nothing done in the session (no tool activity, no change, no check and "
                "no reply beyond an acknowledgement): no session record")


def _worth_recording(session) -> bool:
    """The record gate: a real request from the user (not a greeting or a bare /clear)."""
    from dualtrace.encoder.records import has_request

    return has_request(session)


def _has_record(memory_dir: Path, settings: Settings, session_id: str | None) -> bool:
    if settings.session_records == "off" or not session_id or not memory_dir.is_dir():
        return False
    from dualtrace.memfs.sessions import find_record

    return find_record(memory_dir, session_id) is not None


def _whole_session(path: Path, host: str | None, part: Session,
                   last_assistant_message: str | None) -> Session:
    """The transcript from its first line to where ``part`` (read from a cursor) ended,
    named like the part: a later part's record is rebuilt from all of it, and the
    encoder sees the turns the part continues."""
    from dualtrace.hooks.transcripts import format_for_host, read_transcript

    session = read_transcript(path, cursor=0, fmt=format_for_host(host),
                              last_assistant_message=last_assistant_message, stop=part.cursor)
    if session.session_id and part.session_id and session.session_id != part.session_id:
        # The file holds another session before this part (a transcript appended to):
        # the part alone is this session's; its record appends the part's turns.
        return part
    return replace(session, session_id=part.session_id)


def _attach_record(builder, session, from_start: bool, store, settings: Settings,
                   report: EncodeReport) -> None:
    """The session record rides in the plan: same commit as the facts (or local state).
    ``session``: the whole session so far, redacted (the record is rebuilt from it)."""
    from dualtrace.encoder.records import record_for
    from dualtrace.encoder.redact import Redactor
    from dualtrace.memfs.sessions import find_record, substantive

    redactor = Redactor(settings.redact_patterns)
    local = settings.session_records == "local"
    recorded = bool(session.session_id) and find_record(store.root, session.session_id) is not None
    record, text = record_for(
        session, store.root, project=store.project, memories=builder.memories_touched(),
        local=local, budget=settings.session_record_budget, fresh=report.cursor[0] == 0,
        redact=redactor.redact, summary=builder.summary, whole=from_start)
    if not recorded and not substantive(record):
        return  # the noise gate for records (memfs.sessions.substantive)
    turns = len(record.turns)
    builder.attach_record(record.path, text, commit=not local,
                          detail=f"{turns} turn{'s' if turns != 1 else ''}, part {record.parts}")
    report.record = record.path


def commit_plan(store, builder, settings: Settings) -> tuple[str | None, str | None]:
    """Commit the session: its personal part (preferences) into the person's own memory
    when ``settings.preferences`` says so, the rest into the project memory; (project
    commit, own-memory commit). An encode and MCP's ``remember`` both commit this way.

    The personal commit comes first: if it fails the job fails and is retried whole,
    instead of a preference being lost with "user" (only your own memory).
    """
    from dualtrace.memfs import transaction
    from dualtrace.memfs.store import MemoryStore

    own = config.user_memory_dir(settings)
    if settings.preferences == "project" or store.root == own:
        return transaction.commit(store, builder.changeset()), None
    personal = builder.changeset(only=transaction.is_personal)
    user_sha = None
    if personal.changes:
        user = MemoryStore(own, author=(settings.author_name, settings.author_email),
                           project="user")
        try:
            with user.lock():  # re-entrant: the rebase reads what the commit replaces
                user_sha = transaction.commit(user, transaction.rebase_personal(personal, user))
        finally:
            user.close()
    project = builder.changeset() if settings.preferences == "both" else \
        builder.changeset(only=lambda rel: not transaction.is_personal(rel))
    return transaction.commit(store, project), user_sha


class _Laps(dict[str, float]):
    """Milliseconds per stage of one encode (the report's timings_ms)."""

    def lap(self, name: str, since: float) -> float:
        now = time.perf_counter()
        self[name] = round((now - since) * 1000, 2)
        return now


def _done(report: EncodeReport, started: float, timings: dict[str, float]) -> EncodeReport:
    timings["total"] = round((time.perf_counter() - started) * 1000, 2)
    report.timings_ms = timings
    return report


def _plain(obj: Any) -> dict[str, Any]:
    """A JSON-friendly dict of a stats/verdict object (dataclass, dict or attributes)."""
    if obj is None:
        return {}
    if isinstance(obj, dict):
        data = dict(obj)
    elif hasattr(obj, "__dataclass_fields__"):
        data = {k: getattr(obj, k) for k in obj.__dataclass_fields__}
    else:
        data = {k: v for k, v in vars(obj).items() if not k.startswith("_")}
    out: dict[str, Any] = {}
    for key, value in data.items():
        if isinstance(value, (set, frozenset, tuple)):
            value = list(value)
        if hasattr(value, "most_common"):
            value = dict(value)
        out[key] = value
    return out


__all__ = ["EncodeReport", "commit_plan", "encode_session", "DualtraceError"]


def _record_alone(path: Path, memory_dir: Path, settings: Settings, session,
                  report: EncodeReport, *, project: str, range_start: int | None = None,
                  range_end: int | None = None, facts: list | None = None,
                  backfill: bool = False, from_start: bool = True) -> None:
    """Write (or update) a session record with no memory operation: its own commit.

    Used for a later part of a recorded session that falls below the noise gate, and by
    ``backfill --records``. In commit mode, facts naming the session (``facts``, for a
    backfill) are listed in the record and link to it in the same commit.
    """
    from dualtrace.encoder.records import record_for
    from dualtrace.encoder.redact import Redactor
    from dualtrace.memfs import sessions as records
    from dualtrace.memfs import transaction
    from dualtrace.memfs.formats import render_fact
    from dualtrace.memfs.gitrepo import RANGE_TRAILER, RECORD_TRAILER, SESSION_TRAILER, OpLine
    from dualtrace.memfs.store import MemoryStore

    redactor = Redactor(settings.redact_patterns)
    store = MemoryStore(memory_dir, author=(settings.author_name, settings.author_email),
                        project=project)
    local = settings.session_records == "local"
    sid = safe_session_id(session.session_id or path.stem) or path.stem
    trailers = [f"{SESSION_TRAILER}: {sid}"]
    if range_start is not None and range_end is not None:
        key = hashlib.sha256(str(path).encode("utf-8")).hexdigest()[:12]
        trailers.append(f"{RANGE_TRAILER}: {key} {range_start}-{range_end}")
    try:
        with store.lock():
            existing = records.find_record(store.root, sid)
            if backfill and existing is not None:
                report.skipped = "the session already has a record"
                return
            if range_start is not None and store.git.committed_range(
                    trailers[-1].split()[1], range_start) is not None:
                return  # this part was committed by a run that died before its cursor
            mine = [f for f in facts or () if sid in f.sessions]
            memories = [(f.path, "stored" if f.sessions[0] == sid else "updated") for f in mine]
            record, text = record_for(session, store.root, project=store.project,
                                      memories=memories, local=local,
                                      budget=settings.session_record_budget,
                                      redact=redactor.redact, fresh=not range_start,
                                      whole=from_start)
            if existing is None and not records.substantive(record):
                # A question and an "OK.": nothing a later session could use, and
                # asked again, its own words would answer it (review 7, F1).
                report.skipped = report.skipped or NOTHING_DONE
                return
            report.record = record.path
            if local:
                records.write_local_record(store.root, record.path, text)
                return
            changes = [(record.path, _current(store, record.path), text)]
            for fact in mine:
                if record.path not in fact.records:
                    linked = replace(fact, records=(*fact.records, record.path))
                    changes.append((fact.path, _current(store, fact.path), render_fact(linked)))
            turns = len(record.turns)
            detail = (f"backfill, {turns} turn{'s' if turns != 1 else ''}" if backfill else
                      f"{turns} turn{'s' if turns != 1 else ''}, part {record.parts}")
            line = OpLine("record", record.path.removesuffix(".md"), detail)
            message = "\n\n".join([line.line(), "\n".join(
                [*trailers, f"{RECORD_TRAILER}: {record.path}"])]) + "\n"
            # A later part amends the session's own unpushed commit, like any encode;
            # through the transaction, so a crash before the commit is finished later.
            changes = [c for c in changes if c[1] != c[2]]
            report.commit = transaction.commit(store, transaction.ChangeSet(
                tuple(changes), message, (), None if backfill else sid))
            report.message = message
    finally:
        store.close()


def _current(store, rel: str) -> str | None:
    return store.read_text(rel) if store.exists(rel) else None


def record_past_session(transcript: str | Path, *, memory_dir: str | Path,
                        settings: Settings, facts: list | None = None) -> EncodeReport:
    """Write the session record of an already-encoded (or never-encoded) transcript.

    For ``backfill --records``: the whole transcript is read (cursors are neither read
    nor moved, no backend runs, no fact is created). A session that fails the noise gate,
    or already has a record, is skipped.
    """
    from dualtrace.encoder import gates as gates_mod
    from dualtrace.encoder.redact import Redactor
    from dualtrace.hooks.transcripts import read_transcript

    started = time.perf_counter()
    path = Path(transcript).expanduser().resolve()
    memory_dir = Path(memory_dir).expanduser().resolve()
    report = EncodeReport(transcript=str(path), memory_dir=str(memory_dir), backend="records")
    if settings.session_records == "off":
        report.skipped = 'session_records = "off"'
        return _done(report, started, {})
    session = read_transcript(path, cursor=0)
    if not session.session_id:
        session = replace(session, session_id=safe_session_id(path.stem))
    report.session_id, report.host = session.session_id, session.host
    if not session.events:
        report.skipped = "empty transcript"
        return _done(report, started, {})
    redacted, counts = clean_session(session, Redactor(settings.redact_patterns))
    report.redactions = dict(counts)
    verdict = gates_mod.evaluate(redacted)
    if verdict.skip_backend and not _worth_recording(redacted):
        report.skipped = "no request from the user in the session"
        return _done(report, started, {})
    project = config.workspace(memory_dir=memory_dir, settings=settings).project
    _record_alone(path, memory_dir, settings, redacted, report, project=project, facts=facts,
                  backfill=True)
    return _done(report, started, {})
