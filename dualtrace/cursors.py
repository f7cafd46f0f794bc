"""Per-transcript read cursors in the state directory.

A cursor is the byte offset up to which a transcript has been encoded. Encoding
an unchanged transcript is then a no-op, and an appended one encodes only what is
new. A file that shrank or was replaced (another inode) starts again from 0.

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
    """The saved cursor, or offset 0 when absent, unreadable, or the file was replaced."""
    compressed = str(path).endswith(".zst")
    path = logical_path(path)
    try:
        data = json.loads(_file(path, memory_dir).read_text(encoding="utf-8"))
        cursor = Cursor(**{k: data.get(k) for k in Cursor.__dataclass_fields__})
    except (FileNotFoundError, ValueError, TypeError):
        return Cursor(str(path))
    if compressed:
        return cursor  # a finished file: no inode or size of the original to compare
    try:
        stat = path.stat()
    except OSError:
        return cursor
    if (cursor.inode is not None and cursor.inode != stat.st_ino) or stat.st_size < (cursor.offset or 0):
        return Cursor(str(path))
    return cursor


def save(cursor: Cursor) -> None:
    from dualtrace.memfs.atomic import atomic_write_text

    if cursor.path.endswith(".zst"):
        from dataclasses import replace

        cursor = replace(cursor, path=str(logical_path(cursor.path)), inode=None)
    target = _file(Path(cursor.path), cursor.memory_dir)
    atomic_write_text(target, json.dumps(asdict(cursor), indent=1) + "\n")


def inode_of(path: Path) -> int | None:
    try:
        return os.stat(path).st_ino
    except OSError:
        return None
