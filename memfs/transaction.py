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


# ------------------------------------------------------------------ the person's own memory

HUMAN_FILE = "system/human.md"


def is_personal(rel: str) -> bool:
    """Files that belong to the person rather than the project: their preferences
    (system/human.md) and the scenes of preferences."""
    return rel == HUMAN_FILE or rel.startswith("scenes/preferences/")


def rebase_personal(changeset: ChangeSet, user_store: MemoryStore) -> ChangeSet:
    """The personal part of a session, re-applied to the person's own memory.

    The encoder planned against the project's copy of system/human.md; what the
    session *added* there (new bullets) is added to the person's file, which keeps
    every project's bullets. A scene is written as planned.
    """
    from dualtrace.memfs import formats
    from dualtrace.memfs.formats import SystemFile

    rebased: list[Change] = []
    for rel, old, new in changeset.changes:
        current = user_store.read_text(rel) if user_store.exists(rel) else None
        if rel == HUMAN_FILE:
            earlier = formats.parse(old, rel) if old else None
            before = earlier.bullets if isinstance(earlier, SystemFile) else ()
            after = formats.parse(new, rel)
            human = user_store.human_file()
            for bullet in after.bullets if isinstance(after, SystemFile) else ():
                if bullet not in before:
                    human = human.with_bullet(bullet)
            new = formats.render_memory(human)
        if new != current:
            rebased.append((rel, current, new))
    return ChangeSet(tuple(rebased), changeset.message if rebased else "", (),
                     changeset.session_id, changeset.date)
