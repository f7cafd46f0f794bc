"""The storage transaction: write a changeset's files, commit them once, undo on failure.

The encoder proposes and validates (``encoder.plan.PlanBuilder.changeset``); only this
module writes its result into the memory directory. The store's lock is held from the
first write to the commit, and a failed commit puts the directory back, so a retried
job never reads its own half-written files as memories that already exist.

A process can die between the writes and the commit (SIGKILL, power loss) or be
unable to put the directory back (a full disk). So before the first write the whole
changeset is saved as a journal (``.dualtrace/txn.json``, gitignored) and removed
after the commit. Whoever takes the store's lock next finds the journal and
finishes the commit (``recover``), under the session's own message: the retried job
then sees its range committed, and no other session plans against, or commits,
files that hold this session's text.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from dualtrace import faults, logfile
from dualtrace.atomic import write_text as atomic_write_text
from dualtrace.errors import DualtraceError, GitError
from dualtrace.memfs.store import MemoryStore

JOURNAL = "txn.json"  # in the store's gitignored state folder

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
    with store.lock():  # taking it finishes an interrupted transaction first
        existed = {rel: store.exists(rel) for rel, _o, _n in changes}
        # Before any file: a full disk fails here and nothing was touched.
        _write_journal(store, changeset)
        try:
            for rel, _old, new in changes:
                faults.point("txn-write")
                store.write_text(rel, new)
            faults.point("txn-written")
            # With the session id, a resumed session amends its own unpushed commit.
            sha = store.commit([rel for rel, _o, _n in changes], changeset.message,
                               changeset.session_id)
            faults.point("txn-committed")
        except BaseException:
            # Uncommitted files would be read back on the retry as memories that
            # already exist ("update" instead of "store"): put the directory back.
            # If that fails too (the disk is full), the journal stays and the next
            # lock holder finishes the commit.
            if _undo(store, changes, existed):
                _drop_journal(store)
            raise
        _drop_journal(store)
    _record_conflicts(store, changeset)
    return sha


def _record_conflicts(store: MemoryStore, changeset: ChangeSet) -> None:
    if changeset.conflicts:
        from dualtrace.memfs.conflicts import record_conflict

        for old, new in changeset.conflicts:
            record_conflict(store, old, new, changeset.session_id, changeset.date)


# ------------------------------------------------------------------ the journal

def journal_path(store: MemoryStore):
    return store.state_path / JOURNAL


def _write_journal(store: MemoryStore, changeset: ChangeSet) -> None:
    data = {"changes": [list(c) for c in changeset.changes], "message": changeset.message,
            "conflicts": [list(c) for c in changeset.conflicts],
            "session_id": changeset.session_id, "date": changeset.date}
    atomic_write_text(journal_path(store), json.dumps(data, ensure_ascii=False) + "\n")


def _drop_journal(store: MemoryStore) -> None:
    try:
        journal_path(store).unlink(missing_ok=True)
    except OSError:
        pass  # the next recover finds everything committed and drops it then


def _read_journal(store: MemoryStore) -> ChangeSet | None:
    try:
        data = json.loads(journal_path(store).read_text(encoding="utf-8"))
        changes = tuple((str(rel), old if old is None else str(old), str(new))
                        for rel, old, new in data["changes"])
        return ChangeSet(changes, str(data["message"]),
                         tuple((str(a), str(b)) for a, b in data.get("conflicts") or ()),
                         data.get("session_id"), str(data.get("date") or ""))
    except FileNotFoundError:
        return None
    except (OSError, ValueError, TypeError, KeyError) as exc:
        # Torn or foreign: it can be only ours, written atomically, so this is damage;
        # say so instead of guessing what it meant.
        raise DualtraceError(
            f"{journal_path(store)} (an interrupted commit's journal) is unreadable: {exc}; "
            "check `git -C {0} status`, commit or discard what you find, then delete it"
            .format(store.root)) from None


def recover(store: MemoryStore) -> str | None:
    """Finish a transaction a dead process left behind (the store's lock is held).

    Every file still holding its text from before is written again; a file a person
    changed since is left as it is and named in the log. Then one commit with the
    session's own message (or none, when the commit had landed before the process
    died). Returns the sha of the commit made, if any.
    """
    changeset = _read_journal(store)
    if changeset is None:
        return None
    paths = []
    for rel, old, new in changeset.changes:
        path = store.path(rel)
        try:
            current = path.read_text(encoding="utf-8") if path.is_file() else None
        except (OSError, UnicodeDecodeError):
            current = ""
        if current == old and current != new:
            store.write_text(rel, new)
        elif current != new:
            _log(store, f"recovering an interrupted commit: {rel} changed since; left as it is")
            continue
        paths.append(rel)
    sha = None
    if paths and _uncommitted(store, paths):
        try:
            sha = store.commit(paths, changeset.message, changeset.session_id)
        except GitError as exc:
            raise GitError(f"an interrupted commit (session {changeset.session_id or '?'}) "
                           f"could not be finished: {exc}") from None
        _log(store, f"recovered an interrupted commit of session "
                    f"{changeset.session_id or '?'}: {sha}")
    _drop_journal(store)
    _record_conflicts(store, changeset)
    return sha


def _uncommitted(store: MemoryStore, paths: list[str]) -> bool:
    """True when any of ``paths`` differs from HEAD (or is not in it)."""
    import git

    try:  # --no-optional-locks: only look, never rewrite the index (the disk may be full)
        out = store.git.repo.git.execute(["git", "--no-optional-locks", "status",
                                          "--porcelain", "-uall", "--", *paths])
    except git.exc.GitCommandError as exc:
        raise GitError(f"git status failed in {store.root}: "
                       f"{' '.join(str(exc.stderr or exc).split())[:300]}") from None
    return bool(str(out).strip())


def _log(store: MemoryStore, message: str) -> None:
    try:
        logfile.append(store.state_path / "recovery.log", logfile.line(message))
    except OSError:
        pass


def _undo(store: MemoryStore, changes: tuple[Change, ...], existed: dict[str, bool]) -> bool:
    """Best effort: restore what ``commit`` wrote before the git commit failed.
    True when every file is back as it was."""
    complete = True
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
            complete = False
    if complete:
        # `git add` may have staged our text before the commit failed: unstage it.
        try:
            store.git.repo.git.execute(["git", "reset", "-q", "--", *[c[0] for c in changes]],
                                       with_exceptions=False)
        except Exception:  # noqa: BLE001 - the files are back; a stale stage is harmless
            pass
    return complete


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
