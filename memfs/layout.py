"""Which files of a memory directory are memories: the one listing every reader uses.

The layout is docs/PROTOCOL.md §2, and nothing deeper:

- ``system/*.md`` and ``system/<project>/*.md`` (bullet files);
- ``<fact folder>/*.md`` for each folder of the type table, plural or an accepted
  singular spelling (memfs/types.py). Fact folders are flat;
- ``scenes/*.md`` and ``scenes/<folder>/*.md`` (moments).

Never memories: anything whose name starts with a dot (``.git``, ``.dualtrace/`` with
the index and local session records, an editor's ``.obsidian/``, ``.draft.md``), a
symlink (file or folder: it could point anywhere), ``sessions/`` (session records,
listed by ``record_folders``), ``archive/`` (what ``dualtrace forget`` retired), files
at the top and any other folder. A markdown file inside a memory folder but deeper
than the layout (``decisions/old/x.md``) is not read by anything; ``stray_files``
names those, so ``dualtrace status`` can say so instead of leaving them unseen.

Only ``os.scandir``: the search index calls ``memory_folders`` before every query, and
the folders' own listings give the entry types without a stat per file.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

from dualtrace.memfs.types import MEMORY_TYPES

FACT_FOLDERS = frozenset([t.folder for t in MEMORY_TYPES]
                         + [a for t in MEMORY_TYPES for a in t.aliases])
# Folders whose sub-folders (one level) hold memories too.
NESTED = ("scenes", "system")
RECORDS = "sessions"
LOCAL_RECORDS = ".dualtrace/sessions"


def _entries(folder: str | Path) -> list[os.DirEntry[str]]:
    try:
        with os.scandir(folder) as it:
            return sorted(it, key=lambda e: e.name)
    except OSError:
        return []


def _folders(folder: str | Path) -> list[os.DirEntry[str]]:
    """The real (not linked) folders in ``folder`` whose names do not start with a dot."""
    return [e for e in _entries(folder)
            if not e.name.startswith(".") and e.is_dir(follow_symlinks=False)]


def memory_folders(root: Path) -> list[Path]:
    """The folders memory files live in, sorted (the top ones and the one level of
    sub-folders that ``system/`` and ``scenes/`` may have)."""
    out: list[Path] = []
    for top in _folders(root):
        if top.name in FACT_FOLDERS:
            out.append(Path(top.path))
        elif top.name in NESTED:
            out.append(Path(top.path))
            out.extend(Path(e.path) for e in _folders(top.path))
    return sorted(out)


def record_folders(root: Path) -> list[Path]:
    """The folders session records live in: ``sessions/`` and its months, and the same
    under ``.dualtrace/`` (``session_records = "local"``). Links are not followed."""
    out: list[Path] = []
    for base in (RECORDS, LOCAL_RECORDS):
        folder = Path(root) / base
        if folder.is_symlink() or not folder.is_dir():
            continue
        out.append(folder)
        out.extend(Path(e.path) for e in _folders(folder))
    return out


def markdown_files(folder: Path) -> Iterator[os.DirEntry[str]]:
    """The ``*.md`` regular files directly in ``folder``: no links, no dot-names."""
    for entry in _entries(folder):
        name = entry.name
        if name.endswith(".md") and not name.startswith("."):
            try:
                if entry.is_file(follow_symlinks=False):
                    yield entry
            except OSError:
                continue


def memory_files(root: Path) -> list[str]:
    """Relative (posix) paths of every memory file, sorted."""
    root = Path(root)
    return sorted(Path(e.path).relative_to(root).as_posix()
                  for folder in memory_folders(root) for e in markdown_files(folder))


def stray_files(root: Path) -> list[str]:
    """Markdown files under a memory folder that the layout does not read (in a
    sub-folder of a fact folder, or two levels down in ``system/`` or ``scenes/``)."""
    root = Path(root)
    out: list[str] = []
    pending = [Path(e.path) for folder in memory_folders(root) for e in _folders(folder)
               if not (folder.parent == root and folder.name in NESTED)]
    while pending:
        folder = pending.pop()
        out.extend(Path(e.path).relative_to(root).as_posix() for e in markdown_files(folder))
        pending.extend(Path(e.path) for e in _folders(folder))
    return sorted(out)
