"""The one crash-safe file writer: a temp file beside the target, then ``os.replace``.

Readers see the old file or the new one, never a torn mix (even on SIGKILL). Standard
library only, no ``tempfile`` import: the floor modules (config) and the hook fast path
may use it. The temp file is ``.<name>.<pid>.<random>.tmp``, which the memory
repository's .gitignore (``.*.tmp``) and the directory scans skip.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import Any


def write_bytes(path: str | os.PathLike[str], data: bytes, *, fsync: bool = True,
                keep_mode: bool = False) -> None:
    """Replace ``path`` with ``data``, creating its folder.

    ``fsync``: flush the file and the rename to disk (memory files, cursors); off for
    files that are cheap to lose or re-make (status, settings files, the spend ledger).
    ``keep_mode``: for files a person owns (their agent's settings, their config): an
    existing file keeps its permissions and a new one gets the umask's, as an editor
    would write it. Otherwise the file is private to the user (0600).
    """
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    mode: int | None = None
    if keep_mode:
        try:
            mode = os.stat(target).st_mode & 0o7777
        except OSError:
            mode = None
    tmp = target.with_name(f".{target.name}.{os.getpid()}.{os.urandom(4).hex()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL,
                 0o666 if keep_mode and mode is None else 0o600)
    try:
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
            if mode is not None:
                os.fchmod(fd, mode)
            if fsync:
                os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    if fsync:
        # Persist the rename itself; not supported on every platform/filesystem.
        with contextlib.suppress(OSError):
            dir_fd = os.open(target.parent, os.O_RDONLY)
            try:
                os.fsync(dir_fd)
            finally:
                os.close(dir_fd)


def write_text(path: str | os.PathLike[str], text: str, *, fsync: bool = True,
               keep_mode: bool = False) -> None:
    write_bytes(path, text.encode("utf-8"), fsync=fsync, keep_mode=keep_mode)


def write_json(path: str | os.PathLike[str], data: Any, *, fsync: bool = True,
               keep_mode: bool = False, **dumps: Any) -> None:
    """``write_text`` of ``json.dumps(data, **dumps)`` (``ensure_ascii=False`` unless given)."""
    import json

    dumps.setdefault("ensure_ascii", False)
    write_text(path, json.dumps(data, **dumps), fsync=fsync, keep_mode=keep_mode)
