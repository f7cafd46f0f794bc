"""Open decision conflicts, surfaced to the developer at the next session start.

When a new decision supersedes a stored one, both files are kept (marked
``superseded_by`` / ``supersedes``) and a conflict record is appended here. The
session-start injection shows records not yet shown, then marks them shown. The
file lives in the gitignored ``.dualtrace/`` folder: it is a notification queue,
and the durable truth stays in the two decision files.
"""

from __future__ import annotations

import json
from typing import Any

from dualtrace.memfs.atomic import atomic_write_text
from dualtrace.memfs.store import MemoryStore

FILE = "conflicts.json"


def _load(store: MemoryStore) -> list[dict[str, Any]]:
    path = store.state_path / FILE
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (FileNotFoundError, ValueError):
        return []
    return [d for d in data if isinstance(d, dict)] if isinstance(data, list) else []


def record_conflict(store: MemoryStore, old: str, new: str, session: str | None, date: str) -> None:
    with store.lock():
        items = _load(store)
        if any(i.get("old") == old and i.get("new") == new for i in items):
            return
        items.append({"old": old, "new": new, "session": session, "date": date, "shown": False})
        atomic_write_text(store.state_path / FILE, json.dumps(items, indent=1) + "\n")


def open_conflicts(store: MemoryStore) -> list[dict[str, Any]]:
    return [i for i in _load(store) if not i.get("shown")]


def mark_shown(store: MemoryStore) -> None:
    with store.lock():
        items = _load(store)
        if not any(not i.get("shown") for i in items):
            return
        for item in items:
            item["shown"] = True
        atomic_write_text(store.state_path / FILE, json.dumps(items, indent=1) + "\n")
