"""The derived search index: SQLite FTS5 (bm25, porter) over the memory files.

The index is a cache of the markdown files, never the truth. It lives in the
gitignored ``<memory dir>/.dualtrace/index.sqlite`` (created there only by a writer:
a commit or ``dualtrace reindex``; a read-only command on a memory dir without one keeps
its index in the state dir, ``cache_index_path``, so reading never creates a file in the
memory dir) and is
- updated after every commit (``update_after_commit``, called by MemoryStore.commit),
- rebuilt from scratch when missing, corrupt or of another schema version,
- brought up to date when the files changed behind its back (hand edits, ``git pull``).

Freshness is checked cheaply on every open: the HEAD commit plus the mtimes of the
memory folders (an atomic write, an add or a delete renames inside a folder, so its
mtime moves). In-place edits do not move a folder's mtime, so a full stat pass also
runs when the last one is older than ``FULL_CHECK_SECONDS``, and every file a recall
is about to return is re-checked (``verify``) before it is shown.

One row per *document*: a fact file, a moment file, or one bullet of a system file.
Documents that belong together (a fact and its moment) share a ``unit`` key so recall
can score them as one memory. Parsed fields are kept as JSON so recall never needs to
re-read or re-parse the markdown.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import posixpath
import re
import sqlite3
import sys
import time
from array import array
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from dualtrace.logfile import LazyLogger
from dualtrace.memfs import layout
from dualtrace.memfs.anchors import MAX_FILE_BYTES, read_confined, read_nofollow
from dualtrace.memfs.types import MEMORY_TYPES

TYPE_CHECKING = False  # typing and logging: ~11 ms of every prompt hook's imports
if TYPE_CHECKING:
    from typing import Any

    from dualtrace.memfs.vectors import Matrix  # simsimd: only on the semantic paths

log = LazyLogger(__name__)
LITTLE_ENDIAN = sys.byteorder == "little"

# 5: the searchable body of facts and moments leaves out the encoders' template words
# (``evidence_text``). 6: a record turn the agent did not answer is indexed without the
# user's questions, and an unanswered question is no chunk's description (review 7, F1).
# 7: a chunk's line token ids are kept beside its vector (``line_tokens``).
SCHEMA_VERSION = "7"
INDEX_FILE = "index.sqlite"
STATE_FOLDER = ".dualtrace"
FULL_CHECK_SECONDS = 300.0
# bm25 column weights: anchor, type, description, body. The anchor and the
# description are written to be searchable (docs/PROTOCOL.md §4), so they count more.
BM25_WEIGHTS = (3.0, 0.5, 2.0, 1.0)

_SCHEMA = """
CREATE TABLE meta(key TEXT PRIMARY KEY, value TEXT);
CREATE TABLE files(path TEXT PRIMARY KEY, mtime_ns INTEGER, size INTEGER);
CREATE TABLE docs(
    id INTEGER PRIMARY KEY,
    path TEXT NOT NULL,
    kind TEXT NOT NULL,          -- fact | moment | bullet
    unit TEXT NOT NULL,          -- memory this document belongs to
    type TEXT NOT NULL,
    anchor TEXT NOT NULL,
    stored TEXT NOT NULL,
    superseded_by TEXT,
    data TEXT NOT NULL           -- parsed fields as JSON
);
CREATE INDEX docs_path ON docs(path);
CREATE INDEX docs_unit ON docs(unit);
CREATE INDEX docs_kind ON docs(kind, unit, path);  -- the counts after each commit (_count)
CREATE VIRTUAL TABLE fts USING fts5(anchor, type, description, body,
                                    tokenize='porter unicode61');
-- Session record chunks in a table of their own: the curated memories' statistics (and
-- query cost) stay what they were, and records are searched only when recall broadens.
CREATE VIRTUAL TABLE fts_chunks USING fts5(anchor, type, description, body,
                                           tokenize='porter unicode61');
-- One fp32 vector per document (semantic recall, the dualtrace[semantic] extra). Rows
-- are deleted with their document in the same transaction and filled lazily by
-- ensure_vectors(), so the lexical paths (the prompt hook) never load the embedder.
CREATE TABLE vectors(doc_id INTEGER PRIMARY KEY, vec BLOB NOT NULL);
-- A session record chunk's line token ids (``pack_lines``), written with its vector by
-- the same model (kept apart: the vector rows stay three to a page).
CREATE TABLE line_tokens(doc_id INTEGER PRIMARY KEY, ids BLOB NOT NULL);
"""
# Session records are indexed by turn window: one "chunk" document per section.
SESSION_TYPE = "session"
CURATED_TYPES = tuple(t.name for t in MEMORY_TYPES if t.bullet_file is None) + tuple(
    t.name for t in MEMORY_TYPES if t.bullet_file is not None)
# A chunk keeps this much of its section's text in the index (the FTS body and the
# passage recall quotes); records are budgeted to ~12 KB, so this rarely cuts.
CHUNK_CHARS = 6000


@dataclass(frozen=True)
class Doc:
    id: int
    path: str
    kind: str
    unit: str
    type: str
    anchor: str
    stored: str
    superseded_by: str | None
    data: dict[str, Any]


def index_path(root: Path) -> Path:
    return Path(root) / STATE_FOLDER / INDEX_FILE


def cache_index_path(root: Path) -> Path:
    """Where readers keep the index of a memory dir that has none of its own.

    In the state dir, keyed by the memory dir's real path: a read-only command (recall,
    the prompt hook, the MCP tools) must not create anything inside the memory dir. The
    writers' index in the memory dir wins as soon as a commit creates it.
    """
    import hashlib  # here: loading OpenSSL costs the recall CLI ~2 ms otherwise

    from dualtrace.paths import state_dir

    real = os.path.realpath(root)
    key = hashlib.sha256(real.encode("utf-8", "surrogateescape")).hexdigest()[:16]
    name = "".join(c if c.isalnum() or c in "-_" else "_" for c in os.path.basename(real))
    return Path(state_dir()) / "cache" / "index" / f"{name[:40]}-{key}" / INDEX_FILE


# ------------------------------------------------------------------ files & signature


def _memory_dirs(root: Path) -> list[Path]:
    """The memory folders and the session records' folders (memfs/layout.py).

    Fact folders are flat (docs/PROTOCOL.md §2), so their listings are not walked here:
    listing a folder of 10,000 files to look for sub-folders would cost more than
    the whole query.
    """
    return sorted(layout.memory_folders(root) + layout.record_folders(root))


def _head(root: Path) -> str:
    """HEAD's commit by reading git's files directly (no git process, no GitPython)."""
    gitdir = root / ".git"
    try:
        head = (gitdir / "HEAD").read_text(encoding="utf-8").strip()
    except OSError:
        return ""
    if not head.startswith("ref:"):
        return head
    ref = head[4:].strip()
    try:
        return (gitdir / ref).read_text(encoding="utf-8").strip()
    except OSError:
        pass
    try:
        for line in (gitdir / "packed-refs").read_text(encoding="utf-8").splitlines():
            if line.endswith(" " + ref):
                return line.split(" ", 1)[0]
    except OSError:
        pass
    return ref


def cheap_signature(root: Path) -> str:
    """HEAD plus every memory folder's mtime: changes on pull, add, delete, atomic write."""
    parts = [_head(root)]
    for folder in _memory_dirs(root):
        try:
            parts.append(f"{folder.name}:{folder.stat().st_mtime_ns}")
        except OSError:
            continue
    return "|".join(parts)


def _stat_files(root: Path) -> dict[str, tuple[int, int]]:
    """Relative path -> (mtime_ns, size) for every memory markdown file."""
    out: dict[str, tuple[int, int]] = {}
    for folder in _memory_dirs(root):
        # A link is never listed (it could hand .git/config or a file outside the
        # memory dir to recall), nor is an oversized file read.
        for entry in layout.markdown_files(folder):
            try:
                st = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            if st.st_size > MAX_FILE_BYTES:
                log.info("not indexing %s: %d bytes, over the size limit", entry.name,
                         st.st_size)
                continue
            rel = Path(entry.path).relative_to(root).as_posix()
            out[rel] = (st.st_mtime_ns, st.st_size)
    return out


# ------------------------------------------------------------------ documents


def canonical_fact(rel: str) -> str:
    """decision/x.md and decisions/x.md are one memory: key them by the plural folder."""
    from dualtrace.memfs.formats import canonical_folder

    folder, _, name = rel.partition("/")
    return f"{canonical_folder(folder) or folder}/{name}"


def _words(anchor: str) -> str:
    return anchor.replace("-", " ")


# The words the encoders write around what was said, in every memory alike: "The user
# stated (session 1b000000, 2026-03-12): ...", "**Update 2026-03-18, session 40000000:**",
# "In session 50000000 on branch `b` (2026-04-02), the user said: ... Then: ...
# Concretely, the work touched ...", "Outcome (the agent's report):". They say who said
# it and when, not what it is about: matched, they made every memory an answer to "how
# do we store user sessions" (the new-user review, session 4). The file keeps them; the
# searchable text does not (the section labels, "Rationale:", "Root cause / evidence:",
# stay: a question may ask for exactly that).
_TEMPLATE = (
    r"\((?:session [0-9a-f]{4,}|a session)(?:,[^)\n]{0,40})?\)"
    r"|\*\*Update [^*\n]{0,60}\*\*"
    r"|\b(?:the (?:user|session|agent)) (?:stated|asked|added|found|said|pasted this failure)\b"
    r"|\bSettled in the conversation\b|\bIn (?:session [0-9a-f]{4,}|a session)\b"
    r"|\bon branch\b|\bThen:|\bConcretely,|\bit mentions\b|\bthe work touched\b"
    r"|\bthe session hit\b|\(the agent's report\)|\(as the agent stated\)"
    r"|\(from the compacted summary\)|\bFrom the compacted context\b"
    r"|\bthe agent stated the fix \(no check re-ran in the session\)"
    r"|\b(?:changed|fixed) in the session\b")


@functools.cache
def _template() -> re.Pattern[str]:
    """``_TEMPLATE`` compiled when a document is first indexed: a reader (the recall
    CLI) never needs it (~1 ms of its imports at load 3, session 10)."""
    return re.compile(_TEMPLATE, re.I)


def evidence_text(text: str) -> str:
    """``text`` without the encoders' template words (``_TEMPLATE``): what is indexed."""
    return _template().sub(lambda m: _TEMPLATE_KEEP.get(m.group(0).lower(), " "), text)


# Phrases whose content word stays once the template around it goes.
_TEMPLATE_KEEP = {"changed in the session": "changed", "fixed in the session": "fixed"}


def _docs_for(rel: str, text: str) -> list[tuple[dict[str, Any], tuple[str, str, str, str]]]:
    """(row fields, fts columns) for one file; raises FormatError when unparsable."""
    from dualtrace.memfs import formats

    sessions = _sessions()
    if sessions is not None and sessions.is_record_path(rel):
        return _record_docs(rel, text)
    memory = formats.parse(text, rel)
    if isinstance(memory, formats.Fact):
        data = {
            "path": memory.path, "type": memory.type, "description": memory.description,
            "body": memory.body, "confidence": memory.confidence, "stored": memory.stored,
            "evidence_score": memory.evidence_score, "linked_scene": memory.linked_scene,
            "related": list(memory.related), "tier": memory.tier, "updated": memory.updated,
            "status": memory.status, "sessions": list(memory.sessions),
            "supersedes": memory.supersedes, "superseded_by": memory.superseded_by,
        }
        row = {"path": rel, "kind": "fact", "unit": canonical_fact(rel), "type": memory.type,
               "anchor": memory.anchor, "stored": memory.updated or memory.stored,
               "superseded_by": memory.superseded_by, "data": data}
        cols = (_words(memory.anchor), memory.type, memory.description,
                evidence_text(memory.body))
        return [(row, cols)]
    if isinstance(memory, formats.Moment):
        parts = rel.split("/")
        category = formats.canonical_folder(parts[1]) if len(parts) > 2 else None
        kind = formats.TYPE_OF_CATEGORY.get(category or "", "decision")
        linked = memory.linked_fact
        if linked and not linked.startswith("system/"):
            unit = canonical_fact(linked)
        else:
            unit = rel  # a convention/preference scene is a memory of its own
        data = {
            "path": memory.path, "anchor": memory.anchor, "description": memory.description,
            "linked_fact": linked, "narrative": memory.narrative,
            "timeline": list(memory.timeline), "prior": memory.prior, "after": memory.after,
            "confidence": memory.confidence, "stored": memory.stored, "updated": memory.updated,
        }
        row = {"path": rel, "kind": "moment", "unit": unit, "type": kind,
               "anchor": memory.anchor, "stored": memory.updated or memory.stored,
               "superseded_by": None, "data": data}
        body = "\n".join([memory.narrative, *memory.timeline, memory.prior, memory.after])
        cols = (_words(memory.anchor), kind, memory.description, evidence_text(body))
        return [(row, cols)]
    # A system file: every bullet is a small memory of its own (fact only).
    kind = formats.type_of_system_file(rel)
    out = []
    for i, bullet in enumerate(memory.bullets):
        data = {"path": rel, "description": memory.description, "bullet": bullet, "index": i}
        row = {"path": rel, "kind": "bullet", "unit": f"{rel}#{i}", "type": kind,
               "anchor": "", "stored": "", "superseded_by": None, "data": data}
        out.append((row, ("", kind, "", bullet)))
    return out


def _sessions() -> Any:
    """The session-record module (issue 11, write side), or None before it exists."""
    import importlib

    try:
        return importlib.import_module("dualtrace.memfs.sessions")
    except ImportError:  # pragma: no cover - only on a tree without session records
        return None


def _record_docs(rel: str, text: str) -> list[tuple[dict[str, Any], tuple[str, str, str, str]]]:
    """One chunk document per section of a session record (its turn windows)."""
    sessions = _sessions()
    record = sessions.parse_record(text, rel)
    day = record.date or ""
    described = sessions.description_evidence(record)
    out = []
    for i, window in enumerate(sessions.turn_windows(text)):
        body = window.text[:CHUNK_CHARS]
        if not body.strip():
            continue
        data = {"path": rel, "session": record.session, "project": record.project,
                "host": record.host, "started": record.started,
                "description": record.description, "described": described,
                "heading": window.heading,
                "section": window.kind, "turn": window.number,
                "date": window.date or day, "time": window.time, "text": body}
        row = {"path": rel, "kind": "chunk", "unit": f"{rel}#{i}", "type": SESSION_TYPE,
               "anchor": "", "stored": window.date or day, "superseded_by": None,
               "data": data}
        # The description is what the whole session was about: every chunk carries it,
        # in the (heavier) description column.
        # (Not an unanswered question: asked again, it would find itself.)
        out.append((row, ("", SESSION_TYPE, described, body)))
    return out


def embed_text(doc: Doc) -> str:
    """The text a document's vector is computed from."""
    data = doc.data
    if doc.kind == "chunk":
        return f"{data.get('described', data.get('description', ''))}\n{data.get('text', '')}"
    if doc.kind == "bullet":
        return str(data.get("bullet", ""))
    if doc.kind == "moment":
        parts = [_words(doc.anchor), data.get("description", ""), data.get("narrative", ""),
                 *data.get("timeline", []), data.get("prior", ""), data.get("after", "")]
        return "\n".join(str(p) for p in parts if p)
    return "\n".join(str(p) for p in (_words(doc.anchor), data.get("description", ""),
                                       data.get("body", "")) if p)


# ------------------------------------------------------------------ the index



def record_lines(text: str) -> list[str]:
    """A chunk's lines as recall embeds them (its passage's and its best run's): each
    non-blank line stripped and cut to 600 characters, the first of each text once."""
    return list(dict.fromkeys(ln.strip()[:600] for ln in text.splitlines() if ln.strip()))


def pack_lines(ids: list[list[int]]) -> bytes:
    """Token ids of a chunk's lines as a ``line_tokens`` blob: the line count, each
    line's token count, then all ids, as little-endian uint16 (uint32, after a "4",
    for a vocabulary past 65,535)."""
    wide = any(i > 0xFFFF for line in ids for i in line) or len(ids) > 0xFFFF or any(
        len(line) > 0xFFFF for line in ids)
    out = array("I" if wide else "H", [len(ids)])
    out.extend(len(line) for line in ids)
    for line in ids:
        out.extend(line)
    if not LITTLE_ENDIAN:
        out.byteswap()
    return (b"4" if wide else b"2") + out.tobytes()


def unpack_lines(blob: bytes) -> list[list[int]] | None:
    """``pack_lines``' ids back, or None for a blob that is not one."""
    code = {b"2": "H", b"4": "I"}.get(blob[:1])
    if code is None:
        return None
    flat = array(code)
    try:
        flat.frombytes(blob[1:])
    except ValueError:
        return None
    if not LITTLE_ENDIAN:
        flat.byteswap()
    if not flat or len(flat) < 1 + flat[0]:
        return None
    n = flat[0]
    out, at = [], 1 + n
    for size in flat[1:1 + n]:
        out.append(flat[at:at + size].tolist())
        at += size
    return out if at == len(flat) else None


def _doc(r: tuple[Any, ...]) -> Doc:
    """A docs row (``SELECT *``) as a Doc."""
    return Doc(r[0], r[1], r[2], r[3], r[4], r[5], r[6], r[7], json.loads(r[8]))

class Index:
    """An open index connection for one memory directory."""

    def __init__(self, root: Path, conn: sqlite3.Connection, *, memory: bool = False,
                 path: Path | None = None) -> None:
        self.root = root
        self.conn = conn
        self._memory = memory
        self.path = path or index_path(root)  # the file (vector snapshots live beside it)
        # doc_frequency's answers, valid while the database stays as it was read
        # (``_df_version``): a recall asks for the same words' counts several times.
        self._df: dict[tuple[str, str], int] = {}
        self._df_version: tuple[int, int] | None = None

    # ---------------------------------------------------------- open / build

    @classmethod
    def open(cls, root: Path | str, *, refresh: bool = True, create: bool = False) -> Index:
        """Open (building or refreshing as needed). Never fails on a broken index file.

        ``create``: a writer's open, which may create the index inside the memory dir;
        a reader's open uses ``cache_index_path`` while the memory dir has no index.
        """
        root = Path(root)
        path = index_path(root)
        if not create and not os.path.lexists(path):
            path = cache_index_path(root)
        index: Index | None = None
        if path.is_file():
            try:
                conn = _connect(path)
                if _meta(conn, "schema") == SCHEMA_VERSION:
                    index = cls(root, conn, path=path)
                else:
                    conn.close()
            except sqlite3.OperationalError as exc:  # e.g. a read-only memory directory
                log.info("index %s cannot be opened (%s); rebuilding", path, exc)
            except sqlite3.DatabaseError as exc:
                log.warning("index %s unreadable (%s); rebuilding", path, exc)
        if index is None:
            return cls.rebuild(root, path=path)
        if refresh:
            try:
                index.refresh()
            except sqlite3.OperationalError as exc:
                # Busy (another process is writing): answer from the index as it is.
                log.info("index refresh skipped: %s", exc)
            except sqlite3.DatabaseError as exc:
                log.warning("index %s corrupt (%s); rebuilding", path, exc)
                index.close()
                return cls.rebuild(root, path=path)
        return index

    @classmethod
    def rebuild(cls, root: Path | str, *, in_memory_ok: bool = True,
                path: Path | None = None) -> Index:
        """Build a fresh index in a temp file, then swap it in atomically."""
        root = Path(root)
        path = path or index_path(root)
        tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            with contextlib.suppress(FileNotFoundError):
                tmp.unlink()
            conn = _connect(tmp)
        except (OSError, sqlite3.OperationalError) as exc:
            if not in_memory_ok:
                from dualtrace.errors import PathError

                raise PathError(f"cannot write the search index {path}: {exc}") from None
            # A read-only memory directory can still be searched: from a private
            # in-memory index, rebuilt on every open.
            log.info("index %s cannot be written (%s); using an in-memory index", path, exc)
            return cls._build(root, sqlite3.connect(":memory:", isolation_level=None),
                              memory=True)
        cls._build(root, conn).close()
        os.replace(tmp, path)
        for suffix in ("-wal", "-shm"):
            with contextlib.suppress(FileNotFoundError):
                Path(str(path) + suffix).unlink()
        return cls(root, _connect(path), path=path)

    @classmethod
    def _build(cls, root: Path, conn: sqlite3.Connection, *, memory: bool = False) -> Index:
        conn.executescript(_SCHEMA)
        index = cls(root, conn, memory=memory)
        with index.write():
            _set_meta(conn, "schema", SCHEMA_VERSION)
            _set_meta(conn, "built", os.urandom(8).hex())  # this build (_shared_counts)
            index._sync(force=False)
        return index

    @contextlib.contextmanager
    def write(self) -> Iterator[None]:
        """One write transaction, taking the write lock up front (no upgrade deadlocks)."""
        self.conn.execute("BEGIN IMMEDIATE")
        try:
            yield
        except BaseException:
            self.conn.execute("ROLLBACK")
            raise
        self.conn.execute("COMMIT")

    def close(self) -> None:
        with contextlib.suppress(sqlite3.Error):
            self.conn.close()

    def __enter__(self) -> Index:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---------------------------------------------------------- freshness

    def refresh(self) -> bool:
        """Bring the index up to date if the cheap check or the periodic check says so."""
        sig = cheap_signature(self.root)
        last = float(_meta(self.conn, "full_check") or 0)
        if sig == _meta(self.conn, "signature") and time.time() - last < FULL_CHECK_SECONDS:
            return False
        with self.write():
            return self._sync(force=False, signature=sig)

    def _sync(self, *, force: bool, signature: str | None = None,
              paths: Iterable[str] = ()) -> bool:
        """Re-index changed files (by mtime/size), ``paths`` unconditionally; drop removed ones.

        Must run inside ``self.write()``.
        """
        if signature is None:
            signature = cheap_signature(self.root)
        current = _stat_files(self.root)
        known = {p: (m, s) for p, m, s in self.conn.execute("SELECT path, mtime_ns, size FROM files")}
        forced = set(paths)
        changed = [p for p, st in current.items()
                   if force or p in forced or known.get(p) != st]
        removed = [p for p in known if p not in current]
        for rel in removed:
            self._delete(rel)
        for rel in changed:
            self._index_file(rel, current[rel])
        _set_meta(self.conn, "signature", signature)
        _set_meta(self.conn, "full_check", str(time.time()))
        if changed or removed:
            self._count()
        return bool(changed or removed)

    def _delete(self, rel: str) -> None:
        ids = [r[0] for r in self.conn.execute("SELECT id FROM docs WHERE path = ?", (rel,))]
        for doc_id in ids:
            self.conn.execute("DELETE FROM fts WHERE rowid = ?", (doc_id,))
            self.conn.execute("DELETE FROM fts_chunks WHERE rowid = ?", (doc_id,))
            self.conn.execute("DELETE FROM vectors WHERE doc_id = ?", (doc_id,))
            self.conn.execute("DELETE FROM line_tokens WHERE doc_id = ?", (doc_id,))
        self.conn.execute("DELETE FROM docs WHERE path = ?", (rel,))
        if ids:
            self._bump()
        self.conn.execute("DELETE FROM files WHERE path = ?", (rel,))
        self._note_unreadable(rel, None)

    def _note_unreadable(self, rel: str, reason: str | None) -> None:
        """Keep the files that do not parse (path -> why) in meta, so list, reindex and
        status can say a hand edit dropped a memory without parsing every file."""
        known = self.unreadable()
        if reason is None:
            if rel not in known:
                return  # the usual case: nothing to forget, nothing to write
            del known[rel]
        elif known.get(rel) == reason:
            return
        else:
            known[rel] = reason
        _set_meta(self.conn, "unreadable", json.dumps(known, sort_keys=True))

    def unreadable(self) -> dict[str, str]:
        """Files the index could not read or parse: relative path -> the error."""
        raw = _meta(self.conn, "unreadable")
        return json.loads(raw) if raw else {}

    def _index_file(self, rel: str, stat: tuple[int, int]) -> None:
        from dualtrace.errors import DualtraceError

        self._delete(rel)
        try:
            text = (read_nofollow(self.root / rel, rel) if rel.startswith(STATE_FOLDER + "/")
                    else read_confined(self.root, rel))
            docs = _docs_for(rel, text)
        except (OSError, DualtraceError) as exc:
            # An unreadable file is remembered (so it is not re-parsed every time) but
            # contributes nothing; `dualtrace status` reports it.
            log.info("not indexing %s: %s", rel, exc)
            docs = []
            self._note_unreadable(rel, str(exc))
        if docs:
            self._bump()
        for row, cols in docs:
            cur = self.conn.execute(
                "INSERT INTO docs(path, kind, unit, type, anchor, stored, superseded_by, data)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (row["path"], row["kind"], row["unit"], row["type"], row["anchor"],
                 row["stored"], row["superseded_by"], json.dumps(row["data"])),
            )
            self.conn.execute(
                f"INSERT INTO {'fts_chunks' if row['kind'] == 'chunk' else 'fts'}"
                "(rowid, anchor, type, description, body) VALUES (?, ?, ?, ?, ?)",
                (cur.lastrowid, *cols),
            )
        self.conn.execute("INSERT OR REPLACE INTO files(path, mtime_ns, size) VALUES (?, ?, ?)",
                          (rel, stat[0], stat[1]))

    def _count(self) -> None:
        # Runs after every commit: from the covering index docs_kind, not the table,
        # whose rows hold every chunk's text (a scan was ~25 ms of each commit at 1,000
        # records). An index built before docs_kind existed gets it on its next write.
        conn = self.conn
        conn.execute("CREATE INDEX IF NOT EXISTS docs_kind ON docs(kind, unit, path)")
        for key, sql in (
                ("units", "SELECT count(DISTINCT unit) FROM docs WHERE kind != 'chunk'"),
                ("docs", "SELECT count(*) FROM docs"),
                ("chunks", "SELECT count(*) FROM docs WHERE kind = 'chunk'"),
                ("records", "SELECT count(DISTINCT path) FROM docs WHERE kind = 'chunk'")):
            _set_meta(conn, key, str(conn.execute(sql).fetchone()[0]))

    def _bump(self) -> None:
        """Documents changed: vectors must be brought up to date before the next semantic query."""
        _set_meta(self.conn, "docs_gen", str(int(_meta(self.conn, "docs_gen") or 0) + 1))

    # ---------------------------------------------------------- vectors

    def ensure_vectors(self, embedder: Any) -> int:
        """Compute the vectors of documents that have none (or of another model). Returns how many."""
        gen = _meta(self.conn, "docs_gen") or "0"
        if _meta(self.conn, "vectors_model") == embedder.name and \
                _meta(self.conn, "vectors_gen") == gen:
            return 0
        done = 0
        with self.write():
            if _meta(self.conn, "vectors_model") != embedder.name:
                self.conn.execute("DELETE FROM vectors")
                self.conn.execute("DELETE FROM line_tokens")
                _set_meta(self.conn, "vectors_model", embedder.name)
            # Every document had its vector after the last call (all in one
            # transaction) and a new document's id is one more than the largest id
            # in docs (rowid allocation), so the missing ones are those above the
            # largest id with a vector: a range, not a scan of every id (which was
            # ~9 ms of each commit at 1,000 records).
            top = self.conn.execute("SELECT coalesce(max(doc_id), 0) FROM vectors").fetchone()[0]
            missing = [r[0] for r in self.conn.execute("SELECT id FROM docs WHERE id > ?",
                                                       (top,))]
            # A chunk's lines are tokenized here too (an embedder with ``token_ids``):
            # recall embeds a few hundred record lines per question, and a new process
            # then sums their token rows without the vocabulary or the Python BPE.
            tokens = getattr(embedder, "token_ids", None)
            for start in range(0, len(missing), 256):
                docs = list(self._select("id", missing[start:start + 256]))
                vecs = embedder.embed([embed_text(d) for d in docs])
                self.conn.executemany(
                    "INSERT OR REPLACE INTO vectors(doc_id, vec) VALUES (?, ?)",
                    [(d.id, _f32_bytes(v)) for d, v in zip(docs, vecs, strict=True)])
                chunks = [(d.id, record_lines(str(d.data.get("text", ""))))
                          for d in docs if d.kind == "chunk"] if tokens is not None else []
                if tokens is not None and chunks:
                    flat = tokens([ln for _, texts in chunks for ln in texts])
                    rows, at = [], 0
                    for doc_id, texts in chunks:
                        rows.append((doc_id, pack_lines(flat[at:at + len(texts)])))
                        at += len(texts)
                    self.conn.executemany(
                        "INSERT OR REPLACE INTO line_tokens(doc_id, ids) VALUES (?, ?)", rows)
                done += len(docs)
            _set_meta(self.conn, "vectors_gen", _meta(self.conn, "docs_gen") or "0")
        return done

    def vector_matrix(self, chunks: bool) -> tuple[list[int], Matrix]:
        """(doc ids, their float32 vectors as a Matrix) of the chunk documents or of all others.

        Cached per process by the index file and its document generation, so a
        long-lived process (the worker, the MCP server) reads the vectors once.
        """
        from dualtrace.memfs.vectors import Matrix

        # ``built`` too: a rebuilt index can reach the generation of the one it replaced
        # (both fresh builds of as many files) with other vectors under the same ids
        # (a file edited before the rebuild); its snapshot must not be the old one's.
        key = (str(self.path), id(self.conn) if self._memory else 0,
               _meta(self.conn, "vectors_model"), _meta(self.conn, "vectors_gen"), chunks,
               _meta(self.conn, "built"))
        hit = _VECTOR_CACHE.get(key[:2] + (chunks,))
        if hit is not None and hit[0] == key:
            return hit[1], hit[2]
        snapshot = None
        if not self._memory and key[2] and key[3]:
            # A new process (the CLI) would read ~20k blobs row by row; a snapshot of the
            # matrix beside the index, named by model and generation, loads in one read.
            # Derived like the index: a stale or broken one is ignored and rewritten.
            built = f"-{key[5]}" if key[5] else ""
            tag = "".join(c if c.isalnum() or c in "-_" else "_"
                          for c in f"{key[2]}-{key[3]}{built}")
            snapshot = self.path.with_name(
                f"vectors.{'chunks' if chunks else 'memories'}.{tag}{SNAPSHOT_SUFFIX}")
            try:
                ids, matrix = _read_snapshot(snapshot)
                _VECTOR_CACHE[key[:2] + (chunks,)] = (key, ids, matrix)
                return ids, matrix
            except (OSError, ValueError):
                pass
        op = "=" if chunks else "!="
        rows = self.conn.execute(
            f"SELECT v.doc_id, v.vec FROM vectors v JOIN docs d ON d.id = v.doc_id "
            f"WHERE d.kind {op} 'chunk' ORDER BY v.doc_id").fetchall()
        ids = [r[0] for r in rows]
        dim = len(rows[0][1]) // 4 if rows else 1
        matrix = Matrix(b"".join(r[1] for r in rows), len(rows), dim)
        _VECTOR_CACHE[key[:2] + (chunks,)] = (key, ids, matrix)
        if snapshot is not None:
            _write_snapshot(snapshot, ids, matrix)
        return ids, matrix

    def line_tokens(self, docs: Iterable[Doc], model: str) -> dict[str, list[int]]:
        """line -> its token ids, for the lines (``record_lines``) of these chunks whose
        ids ``ensure_vectors`` stored with model ``model``'s vectors; {} for another model."""
        chunks = {d.id: d for d in docs if d.kind == "chunk"}
        if not chunks or _meta(self.conn, "vectors_model") != model:
            return {}
        out: dict[str, list[int]] = {}
        for doc_id, blob in self._rows_in(
                "SELECT doc_id, ids FROM line_tokens WHERE doc_id IN ({marks})", list(chunks)):
            ids = unpack_lines(blob)
            texts = record_lines(str(chunks[doc_id].data.get("text", "")))
            if ids is not None and len(ids) == len(texts):
                out.update(zip(texts, ids, strict=True))
        return out

    def update_paths(self, paths: Iterable[str]) -> None:
        """Re-index just ``paths`` (after our own commit) without a full stat pass.

        Hand edits made at the same moment are caught by ``verify`` or by the next
        periodic full check (FULL_CHECK_SECONDS), so a commit costs O(paths), not
        O(store).
        """
        # Only what the layout reads is a memory: a path elsewhere (archive/, where
        # `forget` moves a memory, reached here by a sync's fast-forward) leaves the
        # index, as a full reindex would leave it out.
        folders = {d.relative_to(self.root).as_posix() for d in _memory_dirs(self.root)}
        with self.write():
            for rel in {p for p in paths if p.endswith(".md")}:
                if posixpath.dirname(rel) not in folders:
                    self._delete(rel)
                    continue
                try:
                    st = os.stat(self.root / rel)
                except OSError:
                    self._delete(rel)
                    continue
                self._index_file(rel, (st.st_mtime_ns, st.st_size))
            _set_meta(self.conn, "signature", cheap_signature(self.root))
            self._count()

    def verify(self, paths: Iterable[str]) -> bool:
        """True when every path still has the mtime/size it was indexed with; else re-sync."""
        stale = False
        for rel in set(paths):
            row = self.conn.execute("SELECT mtime_ns, size FROM files WHERE path = ?",
                                    (rel,)).fetchone()
            try:
                st = os.stat(self.root / rel)
                now: tuple[int, int] | None = (st.st_mtime_ns, st.st_size)
            except OSError:
                now = None
            if row is None or now != (row[0], row[1]):
                stale = True
                break
        if stale:
            with self.write():
                self._sync(force=False)
        return not stale

    # ---------------------------------------------------------- queries

    @property
    def doc_count(self) -> int:
        return int(_meta(self.conn, "docs") or 0)

    @property
    def unit_count(self) -> int:
        """Curated memories (session record chunks are not memories)."""
        return int(_meta(self.conn, "units") or 0)

    @property
    def chunk_count(self) -> int:
        return int(_meta(self.conn, "chunks") or 0)

    @property
    def record_count(self) -> int:
        return int(_meta(self.conn, "records") or 0)

    def count(self, types: tuple[str, ...] | None) -> int:
        """Documents of these types (all when None): the N of recall's IDF."""
        chunks = self.chunk_count
        if types and set(types) == {SESSION_TYPE}:
            return chunks
        return max(self.doc_count - chunks, 0)

    def doc_frequency(self, term: str, types: tuple[str, ...] | None = None) -> int:
        """How many documents of these types hold ``term`` (or one of its spellings).

        Memoised until the database changes: ``PRAGMA data_version`` moves when another
        connection commits, ``total_changes`` when this one writes (a rolled-back write
        too). One recall counts each word up to three times (the memories' and the
        records' IDF, the passage weights), and a long-lived process sees the same words
        again; a count of a word in most documents reads its whole posting list (~0.5 ms
        at 16k documents). The counts are shared by the process's Index objects on the
        same index (``_shared_counts``).
        """
        table, clause = _table_for(types)
        query = _expr(term) + clause
        self._check_version()
        found = self._df.get((table, query))
        if found is None:
            found = self._df[(table, query)] = self.conn.execute(
                f"SELECT count(*) FROM {table} WHERE {table} MATCH ?", (query,)).fetchone()[0]
        return found

    def _check_version(self) -> None:
        """Take the process's counts for the database as it is now when it changed since
        they were read (``_shared_counts``)."""
        version = (self.conn.execute("PRAGMA data_version").fetchone()[0],
                   self.conn.total_changes)
        if version != self._df_version:
            self._df = self._shared_counts()
            self._df_version = version

    def _shared_counts(self) -> dict[tuple[str, str], int]:
        """The process's document frequencies for this index file as it is now, shared
        by every Index opened on it (the MCP tools and ``recall()`` without ``index=``
        open one per query: ~11 counts a query, session 10).

        Valid while the connection reads the same build of the index (``built``: a
        random tag each build writes, read through this connection, so a connection
        still open on a file that a rebuild replaced never shares the new file's
        counts) holding the same documents (``docs_gen`` moves with every document
        written or deleted). Not shared inside a write transaction (its counts may be
        rolled back) nor for an in-memory index.
        """
        built = None if self._memory or self.conn.in_transaction else \
            _meta(self.conn, "built")
        if built is None:
            return {}
        key = (built, _meta(self.conn, "docs_gen"))
        path = str(self.path)
        hit = _SHARED_COUNTS.get(path)
        if hit is not None and hit[0] == key:
            return hit[1]
        counts: dict[tuple[str, str], int] = {}
        _SHARED_COUNTS[path] = (key, counts)
        return counts

    def seen_word(self, word: str) -> bool:
        """``seen_prefix``, asking for the word itself first (an exact term is one lookup;
        a prefix query reads every term that starts with it)."""
        query = _term(word)
        return any(self.conn.execute(f"SELECT 1 FROM {table} WHERE {table} MATCH ? LIMIT 1",
                                     (query,)).fetchone() for table in ("fts", "fts_chunks")) \
            or self.seen_prefix(word)

    def said_as_word(self, term: str) -> bool:
        """Whether some memory or session record says ``term`` as a word: a stem match in
        running text, or the word itself inside a compound name.

        The index splits a name into its words (``claude_code_log``, a path,
        ``highlight.js``) and stems every word, so "logging" matches the "log" of the
        project name in every file of claude-code-log. A name's part is the word it
        spells, nothing else: "logging" is said by "logging", "logs" or "log" in a sentence,
        or by a name part "logging", not by "claude_code_log" (review 8 F7). True when the
        word is not found at all (that is ``seen_word``'s question), when a text holding
        its stem has the word itself (one lookup), or when any of the first ``SAID_SCAN``
        documents holding its stem says it so. Memoised like doc_frequency.
        """
        key = ("said", term)
        self._check_version()
        found = self._df.get(key)
        if found is None:
            found = self._df[key] = int(self._said_as_word(term))
        return bool(found)

    def _said_as_word(self, term: str) -> bool:
        query = "{description body} : " + _expr(term)
        for table in ("fts", "fts_chunks"):
            # The word itself in the text (as a whole word, or the start of one) settles it
            # in one lookup, done in SQLite; the highlight scan is for the rest.
            if self.conn.execute(
                    f"SELECT 1 FROM {table} WHERE {table} MATCH ? AND "
                    "(instr(lower(body), ?) OR instr(lower(description), ?)) LIMIT 1",
                    (query, term, term)).fetchone():
                return True
        forms = _forms(term)
        seen = 0
        for table in ("fts", "fts_chunks"):
            rows = self.conn.execute(
                f"SELECT highlight({table}, 2, char(1), char(2)), "
                f"highlight({table}, 3, char(1), char(2)) FROM {table} "
                f"WHERE {table} MATCH ? LIMIT ?", (query, SAID_SCAN - seen))
            for row in rows:
                seen += 1
                for text in row:
                    for m in _MARKED.finditer(text or ""):
                        if m.group(1).lower() in forms or not _joined(text, m.start(), m.end()):
                            return True
            if seen >= SAID_SCAN:
                break
        return not seen

    def with_tool_arguments(self, ids: Iterable[int]) -> list[int]:
        """Which of these record chunks print a tool call with its JSON arguments."""
        return [rowid for rowid, body in self._rows_in(
            "SELECT rowid, body FROM fts_chunks WHERE body GLOB ? AND rowid IN ({marks})",
            [*ids], _TOOL_CALL_GLOB) if _TOOL_CALL_LINE.search(body or "")]

    def said_in(self, term: str, ids: Iterable[int]) -> set[int]:
        """Which of these record chunks say ``term`` as a word (``said_as_word``'s rule for
        a name's parts), outside the arguments of a tool call as the record prints them
        (``- 20:51 TaskOutput {"block": true, "timeout": 300000} rejected by the user``:
        the tool's vocabulary, not what the session talked about)."""
        id_list = list(ids)
        if not id_list:
            return set()
        forms = _forms(term)
        said: set[int] = set()
        for rowid, text in self._rows_in(
                "SELECT rowid, highlight(fts_chunks, 3, char(1), char(2)) FROM fts_chunks "
                "WHERE fts_chunks MATCH ? AND rowid IN ({marks})", id_list,
                "{description body} : " + _expr(term)):
            for m in _MARKED.finditer(text or ""):
                if (m.group(1).lower() in forms or not _joined(text, m.start(), m.end())) \
                        and not _in_tool_arguments(text, m.start()):
                    said.add(rowid)
                    break
        return said

    def seen_prefix(self, word: str) -> bool:
        """Whether any memory or session record holds a word starting with ``word``."""
        query = _term(word) + " *"
        return any(self.conn.execute(f"SELECT 1 FROM {table} WHERE {table} MATCH ? LIMIT 1",
                                     (query,)).fetchone() for table in ("fts", "fts_chunks"))

    def match(self, terms: list[str], types: tuple[str, ...] | None = None,
              limit: int = 200) -> list[tuple[int, float]]:
        """(doc id, bm25 relevance >= 0, larger is better) for docs matching any term."""
        if not terms:
            return []
        table, clause = _table_for(types)
        query = "(" + " OR ".join(_expr(t) for t in terms) + ")" + clause
        weights = ", ".join(str(w) for w in BM25_WEIGHTS)
        rows = self.conn.execute(
            f"SELECT rowid, bm25({table}, {weights}) AS s FROM {table} WHERE {table} MATCH ? "
            "ORDER BY s LIMIT ?", (query, limit)).fetchall()
        return [(r[0], -r[1]) for r in rows]

    def docs_matching_about(self, term: str, ids: Iterable[int]) -> tuple[set[int], set[int]]:
        """(ids containing ``term``, ids with it in their anchor or description).

        Two plain MATCH queries (the second with a column filter), not one with bm25:
        bm25 counts the term's documents over its whole posting list first, which for a
        word in most documents cost ~30 ms where the two lookups take ~1-5 ms
        (bench/bench_recall.py store, 16k documents).
        """
        id_list = list(ids)
        present = self.docs_matching(term, id_list)
        if not present:
            return present, set()
        return present, self.docs_matching(term, sorted(present), about=True)

    def docs_matching(self, term: str, ids: Iterable[int], *, about: bool = False,
                      chunks: bool = False) -> set[int]:
        """Which of ``ids`` contain ``term`` (``about``: in their anchor or description)."""
        id_list = list(ids)
        if not id_list:
            return set()
        table = "fts_chunks" if chunks else "fts"
        query = ("{anchor description} : " if about else "") + _expr(term)
        return {r[0] for r in self._rows_in(
            f"SELECT rowid FROM {table} WHERE {table} MATCH ? AND rowid IN ({{marks}})",
            id_list, query)}

    def hit_info(self, ids: Iterable[int]) -> dict[int, tuple[str, str, str, str | None]]:
        """id -> (unit, kind, type, superseded_by), without decoding the JSON fields."""
        return {r[0]: (r[1], r[2], r[3], r[4]) for r in self._rows_in(
            "SELECT id, unit, kind, type, superseded_by FROM docs WHERE id IN ({marks})",
            list(ids))}

    def anchors(self, ids: Iterable[int]) -> dict[int, str]:
        """id -> anchor, without decoding the JSON fields."""
        return dict(self._rows_in("SELECT id, anchor FROM docs WHERE id IN ({marks})", list(ids)))

    def superseded(self, units: Iterable[str]) -> dict[str, str]:
        """unit -> the memory that supersedes it, for the units whose fact says so."""
        return dict(self._rows_in(
            "SELECT unit, superseded_by FROM docs WHERE unit IN ({marks}) "
            "AND kind = 'fact' AND superseded_by IS NOT NULL", list(units)))

    def first_record_saying(self, text: str) -> Doc | None:
        """The earliest session-record chunk that holds ``text`` word for word (its
        first 12 words, as a phrase): where a bullet of a system file was first said."""
        said = re.findall(r"[a-z0-9]+", text.lower())[:12]
        if not said:
            return None
        phrase = '"' + " ".join(said) + '"'
        row = self.conn.execute(
            "SELECT d.id FROM fts_chunks JOIN docs d ON d.id = fts_chunks.rowid "
            "WHERE fts_chunks MATCH ? ORDER BY d.stored, d.id LIMIT 1",
            ("{body}: " + phrase,)).fetchone()
        return next(iter(self.docs([row[0]]).values()), None) if row else None

    def docs(self, ids: Iterable[int]) -> dict[int, Doc]:
        return {d.id: d for d in self._select("id", list(ids))}

    def docs_of_units(self, units: Iterable[str]) -> list[Doc]:
        return list(self._select("unit", list(units)))

    def records_by_date(self, limit: int, *, newest: bool = True) -> list[Doc]:
        """The chunks of the ``limit`` session records of the latest (or earliest) days,
        every chunk of each: "what did we do last time" asks for them by date."""
        order = "DESC" if newest else "ASC"
        paths = [r[0] for r in self.conn.execute(
            f"SELECT path FROM docs WHERE type = ? GROUP BY path ORDER BY MIN(stored) {order}, "
            f"path {order} LIMIT ?", (SESSION_TYPE, max(limit, 0)))]
        return list(self._select("path", paths))

    def record_days(self) -> list[str]:
        """The ISO days that hold a session record's turn, newest first."""
        return [r[0] for r in self.conn.execute(
            "SELECT DISTINCT stored FROM docs WHERE type = ? ORDER BY stored DESC",
            (SESSION_TYPE,))]

    def records_between(self, start: str, end: str) -> list[Doc]:
        """Every chunk of the session records with a turn dated from ``start`` to ``end``
        (ISO days, both included): "what did we do in July" asks for them by date."""
        paths = [r[0] for r in self.conn.execute(
            "SELECT DISTINCT path FROM docs WHERE type = ? AND substr(stored, 1, 10) BETWEEN ? "
            "AND ?", (SESSION_TYPE, start, end))]
        return list(self._select("path", paths))

    def docs_of_type(self, types: tuple[str, ...]) -> list[Doc]:
        marks = ",".join("?" * len(types))
        return list(self._rows(f"SELECT * FROM docs WHERE type IN ({marks})", types))

    def facts(self) -> list[Any]:
        """Every fact as a ``formats.Fact``, after a full stat check of the files (so
        as fresh as a scan), ordered by path. From the parsed fields the index keeps:
        without scores, session records and unknown frontmatter keys, so a caller that
        rewrites a memory reads its file (the encoder: ``PlanBuilder.current``).
        """
        from dualtrace.memfs import formats

        with self.write():
            self._sync(force=False)
        out = []
        for (raw,) in self.conn.execute("SELECT data FROM docs WHERE kind = 'fact' ORDER BY path"):
            d = json.loads(raw)
            out.append(formats.Fact(
                path=d["path"], type=d["type"], description=d["description"], body=d["body"],
                confidence=d["confidence"], stored=d["stored"],
                evidence_score=d["evidence_score"], linked_scene=d["linked_scene"],
                related=tuple(d["related"]), tier=d["tier"], updated=d["updated"],
                status=d["status"], sessions=tuple(d["sessions"]),
                supersedes=d["supersedes"], superseded_by=d["superseded_by"], scores=None))
        return out

    def _select(self, column: str, values: list[Any]) -> Iterator[Doc]:
        yield from map(_doc, self._rows_in(f"SELECT * FROM docs WHERE {column} IN ({{marks}})",
                                           values))

    def _rows_in(self, sql: str, keys: list[Any], *before: Any) -> Iterator[tuple[Any, ...]]:
        """The rows of ``sql``, whose ``{marks}`` is an IN list of ``keys``, 500 keys at a
        time (SQLite caps the number of bound parameters); ``before`` binds first."""
        for start in range(0, len(keys), 500):
            chunk = keys[start:start + 500]
            yield from self.conn.execute(sql.format(marks=",".join("?" * len(chunk))),
                                         (*before, *chunk))

    def _rows(self, sql: str, params: Iterable[Any]) -> Iterator[Doc]:
        yield from map(_doc, self.conn.execute(sql, tuple(params)))


_VECTOR_CACHE: dict[tuple[Any, ...], tuple[tuple[Any, ...], list[int], Matrix]] = {}
# Index file -> (its identity and document generation, word counts): Index._shared_counts.
_SHARED_COUNTS: dict[str, tuple[tuple[Any, ...], dict[tuple[str, str], int]]] = {}


# Vector snapshot file: magic, row count, dimension (little-endian uint64 each), the
# rows' doc ids (int64), then the float32 matrix, all little-endian. The matrix is
# memory-mapped on read, so a new process pays for the pages its one matrix product
# touches, not for a copy (the numpy .npz it replaced cost ~10-15 ms to read at 20k x 256).
SNAPSHOT_MAGIC = b"DTVEC01\n"
SNAPSHOT_SUFFIX = ".vec"
_SNAPSHOT_HEAD = len(SNAPSHOT_MAGIC) + 16


def _read_snapshot(path: Path) -> tuple[list[int], Matrix]:
    from dualtrace.memfs.vectors import Matrix

    with path.open("rb") as fh:
        head = fh.read(_SNAPSHOT_HEAD)
        if len(head) != _SNAPSHOT_HEAD or not head.startswith(SNAPSHOT_MAGIC):
            raise ValueError(f"{path} is not a vector snapshot")
        rows = int.from_bytes(head[-16:-8], "little")
        dim = int.from_bytes(head[-8:], "little")
        if dim < 1 or os.fstat(fh.fileno()).st_size != _SNAPSHOT_HEAD + rows * (8 + 4 * dim):
            raise ValueError(f"{path} is truncated or has the wrong size")
        ids = array("q")
        ids.frombytes(fh.read(8 * rows))
    if not LITTLE_ENDIAN:
        ids.byteswap()
    return ids.tolist(), Matrix.mapped(path, _SNAPSHOT_HEAD + 8 * rows, rows, dim)


def _f32_bytes(vec: Any) -> bytes:
    """A vector (any float32 buffer) as the bytes of a ``vectors`` row (native order)."""
    return memoryview(vec).cast("B").tobytes()


def _write_snapshot(path: Path, ids: list[int], matrix: Matrix) -> None:
    """Write the vector snapshot atomically and drop older ones of the same kind."""
    kind = path.name.split(".")[1]
    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    rows, dim = (len(ids), matrix.dim) if len(ids) else (0, 1)
    try:
        with tmp.open("wb") as fh:
            fh.write(SNAPSHOT_MAGIC + rows.to_bytes(8, "little") + dim.to_bytes(8, "little"))
            if rows:
                keys, values = array("q", ids), array("f", matrix.tobytes())
                if not LITTLE_ENDIAN:
                    keys.byteswap()
                    values.byteswap()
                fh.write(keys.tobytes())
                fh.write(values.tobytes())
        os.replace(tmp, path)
        # Older generations, and the .npz snapshots of earlier versions.
        for old in path.parent.glob(f"vectors.{kind}.*"):
            if old != path and ".tmp" not in old.name:
                with contextlib.suppress(OSError):
                    old.unlink()
    except OSError as exc:  # read-only state: the SQLite rows still answer
        log.info("vector snapshot %s not written: %s", path, exc)
        with contextlib.suppress(OSError):
            tmp.unlink()


# said_as_word: the matched tokens highlight() marks (\x01word\x02), and whether one is
# joined to a neighbouring word by "_", "/", "." or "-" (a part of a compound name). The
# scan stops after SAID_SCAN documents: a word said only in names that far is unsaid.
_MARKED = re.compile(r"\x01([^\x02]*)\x02")
_JOINERS = "_./-"
SAID_SCAN = 200
# A tool call as a record prints a refused one, with its JSON arguments (said_in).
_TOOL_CALL = re.compile(r"\s*(?:- )?\d{1,2}:\d{2} [A-Za-z_][\w.-]* \{")
_TOOL_CALL_LINE = re.compile(r"(?m)^\s*(?:- )?\d{1,2}:\d{2} [A-Za-z_][\w.-]* \{")
# The same, loosely, as a GLOB for SQLite to filter rows with before any is read here.
_TOOL_CALL_GLOB = "*[0-9]:[0-9][0-9] [A-Za-z_]* {*"


def _forms(term: str) -> set[str]:
    """The spellings of ``term`` that a name's part must equal (singular or plural)."""
    forms = {term, *spelling_variants(term)}
    return forms | {f + "s" for f in forms} | {f[:-1] for f in forms if f.endswith("s")}


def _in_tool_arguments(text: str, pos: int) -> bool:
    """Whether ``pos`` is inside the JSON arguments of a tool call line of a record."""
    start = text.rfind("\n", 0, pos) + 1
    call = _TOOL_CALL.match(text, start)
    if call is None or pos < call.end():
        return False
    end = text.find("\n", pos)
    return text.rfind("}", pos, len(text) if end < 0 else end) >= 0


def _joined(text: str, start: int, end: int) -> bool:
    """Whether the marked token text[start:end] is joined to a word before or after it."""
    before = text[max(start - 3, 0):start].replace("\x02", "")
    after = text[end:end + 3].replace("\x01", "")
    return (len(before) >= 2 and before[-1] in _JOINERS and before[-2].isalnum()) or (
        len(after) >= 2 and after[0] in _JOINERS and after[1].isalnum())


def _term(term: str) -> str:
    # Quoted: a user's word such as NOT, OR or NEAR must never become FTS5 syntax.
    return '"' + term.replace('"', '""') + '"'


# British and American spellings of one word ("colour" / "color", "analyse" / "analyze",
# "initialise" / "initialize", "centre" / "center", "licence" / "license"): a question
# word matches the other spelling too. Porter stems them apart. A generated form that is
# no word ("errour", "promize") matches nothing, so the rules stay simple.
_SUFFIX = r"(?=(?:s|es|ed|ing|er|ers|ation|ations|ite|ites|ful|able)?$)"
_SPELLINGS = tuple((re.compile(pattern), repl) for pattern, repl in (
    (r"(?<=[a-z]{3})our" + _SUFFIX, "or"),
    (r"(?<=[a-z]{2}[^aeiou])or" + _SUFFIX, "our"),
    (r"(?<=[a-z]{2})is(?=(?:e|es|ed|ing|er|ers|ation|ations)$)", "iz"),
    (r"(?<=[a-z]{2})iz(?=(?:e|es|ed|ing|er|ers|ation|ations)$)", "is"),
    (r"(?<=[a-z]{2})ys(?=(?:e|es|ed|ing|er|ers)$)", "yz"),
    (r"(?<=[a-z]{2})yz(?=(?:e|es|ed|ing|er|ers)$)", "ys"),
    (r"(?<=[a-z]{3})tre(?=s?$)", "ter"),
    (r"(?<=[a-z]{2}[^aeiou])ter(?=s?$)", "tre"),
    (r"(?<=[a-z]{3})ence(?=s?$)", "ense"),
    (r"(?<=[a-z]{3})ense(?=s?$)", "ence"),
))


def spelling_variants(word: str) -> list[str]:
    """The other spellings of ``word`` (``_SPELLINGS``), for a plain lowercase word."""
    if not word.isalpha() or not word.islower():
        return []
    out = []
    for pattern, repl in _SPELLINGS:
        variant = pattern.sub(repl, word)
        if variant != word and variant not in out:
            out.append(variant)
    return out


def _expr(term: str) -> str:
    """The FTS5 expression of one question word: the word or any of its spellings."""
    variants = spelling_variants(term)
    if not variants:
        return _term(term)
    return "(" + " OR ".join(_term(t) for t in (term, *variants)) + ")"


def _table_for(types: tuple[str, ...] | None) -> tuple[str, str]:
    """The FTS table to search and the type filter to add, for these types."""
    if types and set(types) == {SESSION_TYPE}:
        return "fts_chunks", ""
    if not types or set(CURATED_TYPES) <= set(types):
        return "fts", ""
    return "fts", _type_clause(tuple(t for t in types if t != SESSION_TYPE))


def _type_clause(types: tuple[str, ...] | None) -> str:
    if not types:
        return ""
    return " AND type : (" + " OR ".join(_term(t) for t in types) + ")"


def _connect(path: Path) -> sqlite3.Connection:
    # Autocommit mode: writes are grouped explicitly by Index.write().
    conn = sqlite3.connect(str(path), timeout=10.0, isolation_level=None)
    conn.execute("PRAGMA busy_timeout = 10000")
    # A derived, rebuildable index: WAL lets readers (recall, hooks) run beside the
    # writer, and synchronous=NORMAL skips an fsync per commit (a crash can only
    # lose the last update, which the freshness check then rebuilds).
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = NORMAL")
    conn.execute("SELECT count(*) FROM sqlite_master").fetchone()  # fail fast if not a db
    return conn


def _meta(conn: sqlite3.Connection, key: str) -> str | None:
    row = conn.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
    return row[0] if row else None


def _set_meta(conn: sqlite3.Connection, key: str, value: str) -> None:
    conn.execute("INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)", (key, value))


# ------------------------------------------------------------------ entry points


def reindex(root: Path | str) -> int:
    """Rebuild from scratch (``dualtrace reindex``); returns the number of memories indexed."""
    with Index.rebuild(root, in_memory_ok=False) as index:
        return index.unit_count


def update_after_commit(store: Any, paths: list[str]) -> None:
    """Called by MemoryStore.commit: keep the index in step. Never raises."""
    try:
        with Index.open(store.root, refresh=False, create=True) as index:
            index.update_paths(paths)
            # Vectors are computed here when the semantic extra is installed (the worker
            # after each session), so a later recall rarely has documents to embed.
            from dualtrace.memfs.embed import get_embedder

            embedder = get_embedder()
            if embedder is not None:
                index.ensure_vectors(embedder)
    except Exception as exc:  # noqa: BLE001 - a stale index is rebuilt later; a commit must stand
        log.warning("search index update after commit failed: %s", exc)
