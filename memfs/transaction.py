"""The storage transaction: write a changeset's files, commit them once, undo on failure.

The encoder proposes and validates (``encoder.plan.PlanBuilder.changeset``); only this
module writes its result into the memory directory. The store's lock is held from the
first write to the commit, and a failed commit puts the directory back, so a retried
job never reads its own half-written files as memories that already exist.
"""

from __future__ import annotations

from dataclasses import dataclass

from dualtrace.errors import DualtraceError
from dualtrace.memfs.store import MemoryStore

# (path relative to the memory dir, its text before or None if new, its new text)
Change = tuple[str, "str | None", str]


@dataclass(frozen=True)
class ChangeSet:
    """Every file one session changes, its commit message, and contradictions to record."""

    changes: tuple[Change, ...]
    message: str
    conflicts: tuple[tuple[str, str], ...] = ()  # (superseded decision, new decision)
    session_id: str | None = None
    date: str = ""


def commit(store: MemoryStore, changeset: ChangeSet) -> str | None:
    """Write every changed file atomically and make one commit; the sha, or None if empty."""
    changes = changeset.changes
    if not changes:
        return None
    with store.lock():
        existed = {rel: store.exists(rel) for rel, _o, _n in changes}
        try:
            for rel, _old, new in changes:
                store.write_text(rel, new)
            # With the session id, a resumed session amends its own unpushed commit.
            sha = store.commit([rel for rel, _o, _n in changes], changeset.message,
                               changeset.session_id)
        except BaseException:
            # Uncommitted files would be read back on the retry as memories that
            # already exist ("update" instead of "store"): put the directory back.
            _undo(store, changes, existed)
            raise
    if changeset.conflicts:
        from dualtrace.memfs.conflicts import record_conflict

        for old, new in changeset.conflicts:
            record_conflict(store, old, new, changeset.session_id, changeset.date)
    return sha


def _undo(store: MemoryStore, changes: tuple[Change, ...], existed: dict[str, bool]) -> None:
    """Best effort: restore what ``commit`` wrote before the git commit failed."""
    for rel, old, _new in changes:
        try:
            path = store.path(rel)
            if not existed[rel]:
                path.unlink(missing_ok=True)
                for parent in path.parents:  # folders this write created, if now empty
                    if parent == store.root or any(parent.iterdir()):
                        break
                    parent.rmdir()
            elif old is not None:
                store.write_text(rel, old)
        except (OSError, DualtraceError):
            continue
