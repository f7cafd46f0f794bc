"""Per-transcript read cursors in the state directory.

A cursor is the byte offset up to which a transcript has been encoded into one
memory directory. Encoding an unchanged transcript is then a no-op, and an appended
one encodes only what is new. A file that shrank or was replaced (another inode)
starts again from 0.

A cursor also names the memory repository's HEAD when it was saved. It is honoured
only while that commit is still in the directory's history: a memory directory that
was deleted, re-created or reset behind the cursor's back is encoded again from the
start, instead of the cursor claiming work that no longer exists.

A compressed transcript (Codex's ``rollout-*.jsonl.zst``, which replaces the plain
``.jsonl`` once idle) shares the cursor of the plain file it replaced: its offsets
count decompressed bytes, so a session encoded before compression is not encoded
again after it.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import asdict, dataclass
from pathlib import Path

from dualtrace import config


@dataclass(frozen=True)
class Cursor:
    path: str
    offset: int = 0
    inode: int | None = None
    session_id: str | None = None
    memory_dir: str | None = None
    # HEAD of the memory repository when saved ("" = no repository or no commit yet;
    # None = a cursor written before this field existed).
    head: str | None = None


def logical_path(path: str | os.PathLike[str]) -> Path:
    """The transcript's identity: ``x.jsonl.zst`` is the same transcript as ``x.jsonl``."""
    text = str(path)
    return Path(text[:-4] if text.endswith(".jsonl.zst") else text)


def _file(path: Path, memory_dir: str | None) -> Path:
    # Keyed by transcript *and* memory directory: encoding the same transcript into
    # a fresh memory directory must not be mistaken for "already encoded".
    key = hashlib.sha256(f"{path}\0{memory_dir or ''}".encode()).hexdigest()[:20]
    return config.state_dir() / "cursors" / f"{key}.json"


def load(path: Path, memory_dir: str | None = None) -> Cursor:
    """The saved cursor, or offset 0 when absent, unreadable, the file was replaced,
    or the memory directory no longer holds the history the cursor was saved against."""
    compressed = str(path).endswith(".zst")
    path = logical_path(path)
    try:
        data = json.loads(_file(path, memory_dir).read_text(encoding="utf-8"))
        cursor = Cursor(**{k: data.get(k) for k in Cursor.__dataclass_fields__})
    except (FileNotFoundError, ValueError, TypeError):
        return Cursor(str(path))
    if not compressed:  # a compressed file is finished: no inode or size to compare
        try:
            stat = path.stat()
        except OSError:
            stat = None
        if stat is not None and ((cursor.inode is not None and cursor.inode != stat.st_ino)
                                 or stat.st_size < (cursor.offset or 0)):
            return Cursor(str(path))
    if memory_dir and (cursor.offset or 0) > 0 and not _history_matches(cursor, Path(memory_dir)):
        # Keep the session id: the label of the session stays the same on re-encode.
        return Cursor(str(path), session_id=cursor.session_id)
    return cursor


def _history_matches(cursor: Cursor, memory_dir: Path) -> bool:
    from dualtrace.memfs.gitrepo import head_commit, in_history

    if not memory_dir.is_dir():
        return False
    if cursor.head:
        return in_history(memory_dir, cursor.head)
    if cursor.head == "":
        # Saved before the directory had any commit (every part so far was skipped):
        # still true only while it has none.
        return head_commit(memory_dir) is None
    return True  # a cursor from before `head` existed, on a directory that exists


def saved() -> list[Cursor]:
    """Every saved cursor (unreadable files skipped), e.g. to find a session's transcript."""
    folder = config.state_dir() / "cursors"
    out = []
    for path in sorted(folder.glob("*.json")) if folder.is_dir() else []:
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            out.append(Cursor(**{k: data.get(k) for k in Cursor.__dataclass_fields__}))
        except (OSError, ValueError, TypeError):
            continue
    return out


def save(cursor: Cursor) -> None:
    from dualtrace.atomic import write_text as atomic_write_text

    if cursor.path.endswith(".zst"):
        from dataclasses import replace

        cursor = replace(cursor, path=str(logical_path(cursor.path)), inode=None)
    target = _file(Path(cursor.path), cursor.memory_dir)
    atomic_write_text(target, json.dumps(asdict(cursor), indent=1) + "\n")


def current_head(memory_dir: Path | str | None) -> str:
    """What a cursor saved now should name as the memory directory's HEAD."""
    from dualtrace.memfs.gitrepo import head_commit

    return (head_commit(Path(memory_dir)) or "") if memory_dir else ""


def inode_of(path: Path) -> int | None:
    try:
        return os.stat(path).st_ino
    except OSError:
        return None
