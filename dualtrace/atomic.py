"""The one crash-safe file writer: a temp file beside the target, then ``os.replace``.

Readers see the old file or the new one, never a torn mix (even on SIGKILL). Standard
library only, no ``tempfile`` import: the floor modules (config) and the hook fast path
may use it. The temp file is ``.<name>.<pid>.<random>.tmp``, which the memory
repository's .gitignore (``.*.tmp``) and the directory scans skip.
"""

from __future__ import annotations

import os

TYPE_CHECKING = False  # typing costs ~4 ms: the hook fast path writes its job files here
if TYPE_CHECKING:
    from typing import Any


def write_bytes(path: str | os.PathLike[str], data: bytes, *, fsync: bool = True,
                fsync_dir: bool | None = None, keep_mode: bool = False) -> None:
    """Replace ``path`` with ``data``, creating its folder.

    ``fsync``: flush the file and the rename to disk (memory files, cursors); off for
    files that are cheap to lose or re-make (status, settings files, the spend ledger).
    ``fsync_dir``: also flush the folder, so the rename survives a power cut (default:
    as ``fsync``); off where a lost rename only re-runs work (the queue's job files).
    ``keep_mode``: for files a person owns (their agent's settings, their config): an
    existing file keeps its permissions and a new one gets the umask's, as an editor
    would write it. Otherwise the file is private to the user (0600).
    """
    target = os.fspath(path)
    folder, name = os.path.split(target)
    if folder:
        os.makedirs(folder, exist_ok=True)
    mode: int | None = None
    if keep_mode:
        try:
            mode = os.stat(target).st_mode & 0o7777
        except OSError:
            mode = None
    tmp = os.path.join(folder, f".{name}.{os.getpid()}.{os.urandom(4).hex()}.tmp")
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
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    sync_dir = fsync if fsync_dir is None else fsync_dir
    if sync_dir:
        # Persist the rename itself; not supported on every platform/filesystem.
        try:
            dir_fd = os.open(folder or ".", os.O_RDONLY)
            try:
                os.fsync(dir_fd)
            finally:
                os.close(dir_fd)
        except OSError:
            pass


def write_text(path: str | os.PathLike[str], text: str, *, fsync: bool = True,
               fsync_dir: bool | None = None, keep_mode: bool = False) -> None:
    write_bytes(path, text.encode("utf-8"), fsync=fsync, fsync_dir=fsync_dir,
                keep_mode=keep_mode)


def write_json(path: str | os.PathLike[str], data: Any, *, fsync: bool = True,
               fsync_dir: bool | None = None, keep_mode: bool = False, **dumps: Any) -> None:
    """``write_text`` of ``json.dumps(data, **dumps)`` (``ensure_ascii=False`` unless given)."""
    import json

    dumps.setdefault("ensure_ascii", False)
    write_text(path, json.dumps(data, **dumps), fsync=fsync, fsync_dir=fsync_dir,
               keep_mode=keep_mode)
