"""Open conflicts, surfaced to the developer at the next session start.

Two kinds of record live in ``.dualtrace/conflicts.json``:
- a new decision superseded a stored one (``old``/``new``): both files are kept
  (marked ``superseded_by`` / ``supersedes``);
- a sync merge could not merge something (``kind: "merge"``, ``path``, ``detail``):
  both versions are kept in the file under a ``## Merge conflict`` heading.

The session-start injection shows records not yet shown, then marks them shown. The
file lives in the gitignored ``.dualtrace/`` folder: it is a notification queue, and
the durable truth stays in the memory files. It has its own lock (not the store's):
the merge driver runs inside a ``git merge`` that a sync started while holding the
store lock, and must still be able to record what it could not merge.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Protocol

from dualtrace.atomic import write_text as atomic_write_text

FILE = "conflicts.json"
LOCK = "conflicts.lock"


class _HasState(Protocol):  # the part of MemoryStore this module needs
    @property
    def state_path(self) -> Path: ...


def _load(state: Path) -> list[dict[str, Any]]:
    try:
        data = json.loads((state / FILE).read_text(encoding="utf-8"))
    except (FileNotFoundError, NotADirectoryError, ValueError):
        return []
    return [d for d in data if isinstance(d, dict)] if isinstance(data, list) else []


@contextlib.contextmanager
def _locked(state: Path) -> Iterator[None]:
    from filelock import FileLock

    state.mkdir(parents=True, exist_ok=True)
    with FileLock(str(state / LOCK), timeout=60):
        yield


def _save(state: Path, items: list[dict[str, Any]]) -> None:
    atomic_write_text(state / FILE, json.dumps(items, indent=1) + "\n")


def record_conflict(store: _HasState, old: str, new: str, session: str | None,
                    date: str) -> None:
    with _locked(store.state_path):
        items = _load(store.state_path)
        if any(i.get("old") == old and i.get("new") == new for i in items):
            return
        items.append({"old": old, "new": new, "session": session, "date": date, "shown": False})
        _save(store.state_path, items)


def record_merge_conflict(state: Path, path: str, detail: str, date: str) -> None:
    """A sync merge kept both versions of ``path``; ``detail`` says what differed."""
    with _locked(state):
        items = _load(state)
        if any(i.get("kind") == "merge" and i.get("path") == path and i.get("detail") == detail
               and not i.get("shown") for i in items):
            return
        items.append({"kind": "merge", "path": path, "detail": detail, "date": date,
                      "shown": False})
        _save(state, items)


def open_conflicts(store: _HasState) -> list[dict[str, Any]]:
    return [i for i in _load(store.state_path) if not i.get("shown")]


def describe(item: dict[str, Any]) -> str:
    """One line for the session-start context."""
    if item.get("kind") == "merge":
        return (f"{item.get('path')}: a sync merge kept both versions ({item.get('detail')}); "
                "see its 'Merge conflict' section")
    return (f"{item.get('new')} supersedes {item.get('old')}"
            f" (stored {item.get('date') or 'unknown'})")


def mark_shown(store: _HasState) -> None:
    with _locked(store.state_path):
        items = _load(store.state_path)
        if not any(not i.get("shown") for i in items):
            return
        for item in items:
            item["shown"] = True
        _save(store.state_path, items)
