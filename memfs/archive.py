"""Browsing and retiring memories by hand: ``dualtrace list`` and ``dualtrace forget``.

Nothing here runs on its own. Forgetting is a person's decision: the fact and its
moment move to ``archive/`` (same relative paths) in one commit that says what was
retired and why, so ``git revert`` or a move back restores them. The archive is not
a memory folder, so recall, injection and the encoder's duplicate guard no longer
see what was retired; the files themselves are never deleted.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from dualtrace.errors import DualtraceError
from dualtrace.memfs.formats import Fact, Moment, SystemFile
from dualtrace.memfs.store import MemoryStore

ARCHIVE = "archive"


@dataclass(frozen=True)
class Row:
    """One line of ``dualtrace list``."""

    type: str
    anchor: str
    path: str
    description: str
    stored: str
    confidence: str
    tier: str | None
    moment: str | None
    status: str | None
    superseded_by: str | None

    def to_dict(self) -> dict[str, str | None]:
        return dict(self.__dict__)


def list_memories(store: MemoryStore, *, kind: str | None = None, contains: str | None = None,
                  since: str | None = None, include_superseded: bool = True) -> list[Row]:
    """Every fact (newest first), filtered by type, a word in anchor or description,
    and the day it was stored (``since`` is an ISO date, inclusive)."""
    rows: list[Row] = []
    needle = contains.lower() if contains else None
    for memory in store.scan().memories:
        if not isinstance(memory, Fact):
            continue
        if kind and memory.type != kind:
            continue
        if since and (memory.stored or "") < since:
            continue
        if not include_superseded and memory.superseded_by:
            continue
        if needle and needle not in memory.anchor.lower() and needle not in memory.description.lower():
            continue
        rows.append(Row(memory.type, memory.anchor, memory.path, memory.description,
                        memory.stored, memory.confidence, memory.tier, memory.linked_scene,
                        memory.status, memory.superseded_by))
    rows.sort(key=lambda r: (r.stored or "", r.path), reverse=True)
    return rows


@dataclass(frozen=True)
class Retired:
    moved: tuple[tuple[str, str], ...]  # (from, to) relative paths
    commit: str
    # Files written or edited by hand and not committed yet: committed as they were,
    # first, so that `git revert` of the forget brings back exactly what was retired.
    kept: tuple[str, ...] = ()
    kept_commit: str | None = None


def retire(store: MemoryStore, target: str, *, reason: str = "",
           records: bool = False) -> Retired:
    """Move the memory ``target`` (anchor or path) and its moment into the archive, in
    one commit; with ``records``, the session records that hold its sessions too
    (:func:`records_of`). Under the store lock; a failed commit puts the files back."""
    memory, moment = store.lookup(target)
    if isinstance(memory, SystemFile):
        raise DualtraceError(f"{memory.path} is a system file (preferences or conventions); "
                             "edit its bullets by hand instead of forgetting the whole file")
    paths = [memory.path] + ([moment.path] if isinstance(moment, Moment) else [])
    if records:
        paths += records_of(store, memory, moment)
    subject = memory.path.removesuffix(".md")
    return _move(store, paths, f"mem: forget {subject}", reason)


def retire_record(store: MemoryStore, ref: str, *, reason: str = "") -> Retired:
    """Move the session record ``ref`` (path, session id or unique prefix) into the
    archive in one commit: recall stops quoting that session's words."""
    from dualtrace.memfs.sessions import LOCAL_RECORDS_DIR, read_record

    rel = read_record(store.root, ref).path
    if rel.startswith(LOCAL_RECORDS_DIR + "/"):
        raise DualtraceError(f"{rel} is a local record (never committed): delete "
                             f"{store.root / rel} to remove it")
    return _move(store, [rel], f"mem: forget session record {rel.removesuffix('.md')}", reason)


def records_of(store: MemoryStore, memory: object, moment: object | None) -> list[str]:
    """The committed session records of the sessions ``memory`` (and its moment) were
    drawn from: the episode recall can still quote after the memory is retired."""
    from dualtrace.memfs.sessions import RECORDS_DIR, find_record

    found: dict[str, None] = {}
    for item in (memory, moment):
        for rel in getattr(item, "records", ()) or ():
            if rel.startswith(RECORDS_DIR + "/") and (store.root / rel).is_file():
                found[rel] = None
    for sid in getattr(memory, "sessions", ()) or ():
        rel = find_record(store.root, str(sid))
        if rel is not None and rel.startswith(RECORDS_DIR + "/"):
            found[rel] = None
    return list(found)


def _move(store: MemoryStore, paths: list[str], subject: str, reason: str) -> Retired:
    """``paths`` to the same paths under archive/, one commit, the index updated."""
    moves = tuple((rel, f"{ARCHIVE}/{rel}") for rel in paths)
    for _, dest in moves:
        store.path(dest)  # confinement check
        if os.path.lexists(store.root / dest):
            raise DualtraceError(f"{dest} already exists: an earlier memory with this name was "
                                 "retired; move it away first")
    message = (f"{subject} (retired by hand to {ARCHIVE}/)\n\n"
               + (f"Reason: {' '.join(reason.split())[:300]}\n" if reason.strip() else "")
               + "Restore with `git revert` of this commit, or move the files back.\n")
    done: list[tuple[str, str]] = []
    with store.lock():
        kept = tuple(store.git.uncommitted([src for src, _ in moves]))
        kept_sha = None
        if kept:
            kept_sha = store.git.commit(
                list(kept), f"mem: commit {', '.join(kept)} as written by hand (before "
                "forget)\n\nThe file was not committed yet: kept as it was, so that a "
                "revert of the forget that follows brings it back.\n")
        try:
            for src, dest in moves:
                target_path = store.root / dest
                target_path.parent.mkdir(parents=True, exist_ok=True)
                os.replace(store.root / src, target_path)
                done.append((src, dest))
            sha = store.git.commit([p for pair in moves for p in pair], message)
        except BaseException:
            for src, dest in reversed(done):
                os.replace(store.root / dest, store.root / src)
            raise
    if not sha:
        raise DualtraceError(f"nothing to commit for {paths[0]} (is it tracked by git?)")
    # Only the old paths: the archive is not a memory folder and must not be indexed.
    store._after_commit([src for src, _ in moves])
    return Retired(moves, sha, kept, kept_sha)
