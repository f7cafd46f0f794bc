"""What the agent's memory tools do, as plain functions over one memory directory.

``dualtrace mcp`` (dualtrace/mcp_server.py) exposes these over MCP; they hold no
protocol knowledge, so they are tested and timed without a server. Every function
returns the text the agent reads, or raises ``ToolInputError`` / ``DualtraceError``
with a one-line reason the agent can act on.

Reads use the search index and never take the store's lock, so they work while a
worker encodes and on a read-only memory directory. ``remember`` is the only write:
it builds one ``Store`` operation, sends it through the encoder's validator (the
same ``PlanBuilder.add`` every backend goes through: anchor rules, score routing,
the duplicate guard that turns a restatement into an update in place), and commits
it alone under the store's lock. Nothing here deletes or renames.
"""

from __future__ import annotations

import datetime as _dt
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dualtrace import words
from dualtrace.errors import DualtraceError
from dualtrace.memfs.types import MEMORY_TYPES

TYPES = tuple(t.name for t in MEMORY_TYPES)
MAX_QUESTION = 4000
MAX_LIMIT = 50
SHOW_LIMIT = 20000  # characters of fact + moment returned by show
WARM_UP_QUESTION = "what was decided about this project and why"
# A session id or its prefix (what recent_sessions prints), as `dualtrace show` takes it.
_SESSION_REF = re.compile(r"[0-9A-Za-z][0-9A-Za-z._-]{3,}")


class ToolInputError(DualtraceError):
    """An argument the agent got wrong; the message says which and how."""


@dataclass
class AgentMemory:
    """One memory directory as the agent sees it (built once per server)."""

    root: Path
    settings: Any  # dualtrace.config.Settings
    project_root: Path
    project: str
    session_id: str | None = None

    @classmethod
    def resolve(cls, memory_dir: str | os.PathLike[str] | None = None) -> AgentMemory:
        from dualtrace import config
        from dualtrace.sanitize import safe_session_id

        ws = config.workspace(memory_dir=memory_dir)
        return cls(Path(ws.memory_dir), ws.settings, ws.root, ws.project,
                   safe_session_id(os.environ.get("CLAUDE_CODE_SESSION_ID") or None))

    def warm_up(self) -> None:
        """Load what the first answer needs: the recall stack, the search index and
        embedder, and the redactor with its compiled secret rules (most of a first
        recall's time; the server runs this after the handshake, off the host's path).
        One recall of a fixed question does all of it through the real code path; it
        reads and writes nothing a real first recall would not."""
        if not self._empty():
            self.recall(WARM_UP_QUESTION)

    # ------------------------------------------------------------ reads

    def _require(self) -> None:
        if self.root.exists() and not self.root.is_dir():
            raise DualtraceError(f"memory directory {self.root} is not a directory")

    def _empty(self) -> bool:
        return not (self.root / ".git").exists() and not self.root.is_dir()

    def recall(self, question: str, limit: int = 5, type: str | None = None) -> str:  # noqa: A002
        question = _text(question, "question", MAX_QUESTION)
        limit = _limit(limit, 100)
        kind = _kind(type)
        self._require()
        from dualtrace.memfs.recall import ABSTAIN, LABEL_C, OFFER
        from dualtrace.memfs.recall import recall as do_recall

        if self._empty():
            return f"{ABSTAIN}\n{LABEL_C}\n{OFFER}\n"
        result = do_recall(self.root, question, limit=limit, type=kind, stale_days=self.settings.stale_days,
                           project_root=self.project_root)
        from dualtrace.encoder.redact import redact_text

        # Memory files may have been edited by hand: what the agent reads back passes
        # the same redactor as everything dualtrace wrote.
        return redact_text(result.render())

    def search(self, query: str, limit: int = 10, type: str | None = None) -> str:  # noqa: A002
        """Ranked memories matching any of the query's words: one line each."""
        query = _text(query, "query", MAX_QUESTION)
        limit = _limit(limit, MAX_LIMIT)
        kind = _kind(type)
        self._require()
        if self._empty():
            return "no memories stored yet"
        from dualtrace.memfs.index import Index
        from dualtrace.memfs.recall import content_terms

        terms = content_terms(query) or [w for w in query.lower().split() if w.isalnum()]
        with Index.open(self.root) as index:
            hits = index.match(terms, (kind,) if kind else None, limit=limit * 4)
            info = index.hit_info(i for i, _ in hits)
            units: list[str] = []
            for doc_id, _score in hits:  # best first; a fact and its scene are one memory
                unit = info[doc_id][0] if doc_id in info else None
                if unit is not None and unit not in units:
                    units.append(unit)
            units = units[:limit]
            by_unit: dict[str, list[Any]] = {}
            for doc in index.docs_of_units(units):
                by_unit.setdefault(doc.unit, []).append(doc)
        lines = []
        for unit in units:
            docs = by_unit.get(unit, [])
            main = next((d for d in docs if d.kind != "moment"), docs[0] if docs else None)
            if main is None:
                continue
            scene = any(d.kind == "moment" for d in docs)
            desc = " ".join(str(main.data.get("bullet") or main.data.get("description") or "").split())
            extra = " | has scene" if scene and main.kind != "moment" else ""
            if main.superseded_by:
                extra += f" | superseded by {main.superseded_by}"
            lines.append(f"{main.path} | {main.type} | {main.data.get('confidence') or '-'} | "
                         f"{main.stored or '-'} | {desc}{extra}")
        if not lines:
            return f"no memories match {query!r}"
        return "path | type | confidence | stored | description\n" + "\n".join(lines)

    def show(self, target: str) -> str:
        """The fact file, then its moment (scene) file, as stored."""
        target = _text(target, "target", 300)
        if target.startswith(("/", "\\")) or ".." in target.replace("\\", "/").split("/"):
            raise ToolInputError(f"target {target!r} must be a path inside the memory "
                                 "directory (e.g. decisions/x.md) or an anchor")
        self._require()
        if self._empty():
            raise DualtraceError("no memories stored yet")
        from dualtrace.memfs import sessions as records

        if records.is_record_path(target):
            parts = self._record(target)
        else:
            store = self._store()
            try:
                fact, moment = store.lookup(target)
                parts = [f"==> {fact.path}", store.read_text(fact.path).rstrip("\n")]
                if moment is not None:
                    parts += ["", f"==> {moment.path}", store.read_text(moment.path).rstrip("\n")]
            except DualtraceError as not_memory:
                # Not a memory: a session id (or prefix) names that session's record.
                if not _SESSION_REF.fullmatch(target):
                    raise
                try:
                    parts = self._record(target)
                except DualtraceError:
                    raise not_memory from None
            finally:
                store.close()
        from dualtrace.encoder.redact import redact_text

        text = redact_text("\n".join(parts) + "\n")
        return text if len(text) <= SHOW_LIMIT else text[:SHOW_LIMIT] + "\n[...]\n"

    def recent_sessions(self, limit: int = 10) -> str:
        """The latest sessions from their records (memfs/sessions.py), newest first: when,
        host, what it was about, its outcome, the memories it stored or updated, the first
        open end and the record's path (``show`` reads it). A memory dir without records
        (``session_records = "off"``, or encoded before records existed) falls back to the
        session commits in its git log."""
        limit = _limit(limit, MAX_LIMIT)
        self._require()
        if self._empty():
            return "no encoded sessions yet"
        from dualtrace.memfs.sessions import list_records, one_line

        infos = list_records(self.root, limit=limit)
        if not infos:
            return self._sessions_from_log(limit)
        out = []
        for info in infos:
            when = info.date or "undated"
            if info.date and info.started and len(info.started) >= 16:
                when = f"{info.date} {info.started[11:16]}"
            turns = f", {info.turns} turn{'s' if info.turns != 1 else ''}" if info.turns else ""
            local = ", local record" if info.local else ""
            out.append(f"{when}  session {info.session}  ({info.host}{turns}{local})")
            if info.description:
                out.append(f"    about: {one_line(info.description)}")
            if info.outcome:
                out.append(f"    outcome: {one_line(info.outcome)}")
            out.extend(f"    {action} {path}" for path, action in info.memories)
            if info.open_end:
                out.append(f"    open end: {one_line(info.open_end)}")
            out.append(f"    record: {info.path}")
        from dualtrace.encoder.redact import redact_text

        return redact_text("\n".join(out) + "\n")

    def _sessions_from_log(self, limit: int) -> str:
        if not (self.root / ".git").exists():
            return "no encoded sessions yet"
        store = self._store()
        try:
            entries = store.git.session_log(limit)
        finally:
            store.close()
        if not entries:
            return "no encoded sessions yet"
        out = ["(no session records in this memory dir: sessions from its git log)"]
        for entry in entries:
            out.append(f"{entry.date}  session {entry.session or '-'}  "
                       f"({entry.backend or 'unknown backend'})  {entry.sha[:10]}")
            out.extend(f"    {line}" for line in entry.operations)
        return "\n".join(out) + "\n"

    def _record(self, ref: str) -> list[str]:
        from dualtrace.memfs import sessions as records

        record = records.read_record(self.root, ref)
        return [f"==> {record.path}",
                (self.root / record.path).read_text(encoding="utf-8").rstrip("\n")]

    # ------------------------------------------------------------ the one write

    def remember(self, type: str, description: str, body: str = "", why: str = "",  # noqa: A002
                 anchor: str = "", scores: dict[str, int] | None = None,
                 confidence: str = "HIGH") -> str:
        """Store what the user asked to remember: validated, scored, one commit."""
        kind = _kind(type)
        if kind is None:
            raise ToolInputError(f"'type' is required: one of {', '.join(TYPES)}")
        description = _said(_text(description, "description", 500), kind)
        body = _opt(body, "body", 20000) or description
        why = _opt(why, "why", 2000)
        if why:
            body = f"{body}\n\nWhy: {why}"
        from dualtrace.encoder.plan import (
            Context,
            Grounding,
            PlanBuilder,
            parse_store,
        )
        from dualtrace.memfs.anchors import make_anchor
        from dualtrace.pipeline import commit_plan

        if anchor:
            anchor = _text(anchor, "anchor", 64)
        else:
            anchor = make_anchor(" ".join(description.split()[:8]))
        if scores is None:
            # The user asked for it explicitly: durable and worth finding again; how wide
            # and how well argued depend on what was said (a stated reason counts).
            scores = {"durability": 3, "scope": 2, "rationale": 2 if why else 1,
                      "retrieval": 2}
        operation = parse_store({"type": kind, "anchor": anchor, "description": description,
                                 "body": body, "scores": scores, "confidence": confidence})
        store = self._store(create=True)
        try:
            day = _dt.date.today().isoformat()
            ctx = Context(self.session_id, "remember", day, Grounding(body, day), store.project)
            with store.lock():
                builder = PlanBuilder(store, ctx)
                outcome = builder.add(operation)
                if outcome.action == "skip":
                    return (f"not stored: {outcome.note or 'the validator skipped it'} "
                            f"(evidence {outcome.scores.total if outcome.scores else '-'}; "
                            "5 or more is stored)")
                # The person asked in this session, on this machine: a preference also
                # goes to their own memory, as an encode's would (``preferences``).
                sha, own_sha = commit_plan(store, builder, self.settings)
        finally:
            store.close()
        if sha is None and own_sha is None:
            return f"already stored, nothing changed: {outcome.path}"
        note = f" ({outcome.note})" if outcome.note else ""
        where = [f"in commit {sha[:10]}"] if sha else []
        if own_sha:
            where.append(f"in your own memory (commit {own_sha[:10]})")
        # A bullet is its own tier (a line in a preferences or conventions file), not
        # the FULL or RECORD its scores would give a fact.
        tier = "BULLET" if outcome.action == "bullet" else outcome.tier
        return (f"{outcome.action} {outcome.path} [{tier}, evidence "
                f"{outcome.scores.total if outcome.scores else '-'}] {' and '.join(where)}{note}")

    def _store(self, *, create: bool = False):
        from dualtrace.memfs.store import MemoryStore

        return MemoryStore(
            self.root,
            author=(self.settings.author_name, self.settings.author_email),
            project=self.project,
            create=create and not (self.root / ".git").exists(),
        )


# ------------------------------------------------------------ argument checks

def _text(value: Any, name: str, limit: int) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ToolInputError(f"'{name}' is required and must be a non-empty string")
    if len(value) > limit:
        raise ToolInputError(f"'{name}' is longer than {limit} characters")
    return value.strip()


# Words that acknowledge or fill but name nothing: "ok", "yes thanks" is no memory.
FILLER = frozenset("ok okay yes yeah yep sure thanks thank please hi hello hey test todo tbd "
                   "xx xxx".split())

WHAT = {"decision": "what was decided", "incident": "what happened",
        "preference": "what the user prefers", "convention": "what the rule is",
        "pattern": "what the pattern is", "learning": "what was learned"}


def _said(description: str, kind: str) -> str:
    """A description must name something: at least one content word that is no filler
    (one letter, punctuation, "ok" or "todo" would be stored, scored and recalled)."""
    if not [w for w in words.content_words(description) if w not in FILLER]:
        raise ToolInputError(
            f"'description' must say {WHAT.get(kind, 'what to remember')} in words, "
            f"got {description[:40]!r}")
    return description


def _opt(value: Any, name: str, limit: int) -> str:
    if value is None or value == "":
        return ""
    return _text(value, name, limit)


def _limit(value: Any, most: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= most:
        raise ToolInputError(f"'limit' must be an integer from 1 to {most}, got {value!r}")
    return value


def _kind(value: Any) -> str | None:
    if value is None or value == "":
        return None
    if not isinstance(value, str) or value.strip().lower() not in TYPES:
        raise ToolInputError(f"'type' must be one of {', '.join(TYPES)}, got {value!r}")
    return value.strip().lower()
