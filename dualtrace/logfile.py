"""The one log writer: a file appended to, rotated past a size cap.

The hook (``<state>/logs/hook.log``), the worker (worker.log), the CLI's error reports
(errors.log) and the storage transaction's recovery notes (the memory dir's
``.dualtrace/recovery.log``) all write through ``append``. One ``os.write`` on an ``O_APPEND`` descriptor per entry,
so lines from concurrent hooks and workers never interleave mid-line. Past ``CAP``
bytes the file is renamed to ``<name>.1`` (one generation kept) before the write.
Standard library only, and only ``os``/``time``: the hook fast path imports it.
"""

from __future__ import annotations

import os
import time

TYPE_CHECKING = False  # typing costs ~4 ms in a hook
if TYPE_CHECKING:
    import logging
    from typing import Any

LOGS = "logs"
CAP = 1024 * 1024


def line(message: str) -> str:
    """``message`` as one log line: local time, pid, text."""
    return f"{time.strftime('%Y-%m-%dT%H:%M:%S')} pid={os.getpid()} {message}\n"


def path(state: str | os.PathLike[str], name: str) -> str:
    """``<state>/logs/<name>``."""
    return os.path.join(os.fspath(state), LOGS, name)


def append(path: str | os.PathLike[str], text: str, *, cap: int = CAP) -> None:
    """Append ``text`` to ``path`` (private to the user), creating its folder.

    Raises OSError when the log cannot be written (a full or read-only state dir): the
    caller decides where to say it instead.
    """
    path = os.fspath(path)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    try:
        if os.path.getsize(path) > cap:
            os.replace(path, path + ".1")
    except OSError:
        pass
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        os.write(fd, text.encode("utf-8", errors="replace"))
    finally:
        os.close(fd)


class LazyLogger:
    """``logging.getLogger(name)``, imported on the first message: a module the prompt
    hook imports (the recall stack) would pay ``logging``'s import, ~7 ms on an idle
    machine (threading, traceback, string...), before every prompt, for warnings that
    are almost never logged."""

    __slots__ = ("_name", "_logger")

    def __init__(self, name: str) -> None:
        self._name = name
        self._logger: logging.Logger | None = None

    def __getattr__(self, attr: str) -> Any:
        if self._logger is None:
            import logging

            self._logger = logging.getLogger(self._name)
        return getattr(self._logger, attr)
