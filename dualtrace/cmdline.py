"""What every command-line entry shares, without click: the one error handler.

``dualtrace.cli.main`` (click) and the click-free fast paths (``dualtrace.recallcmd``)
report an error the same way: an expected one (``DualtraceError``: bad input, a missing
directory, a git state to fix) is one ``Error: ...`` line, exit 1; a bug is one line
too, plus a pasteable report in ``<state>/logs/errors.log``.
"""

from __future__ import annotations

import sys
import traceback
from datetime import datetime, timezone
from pathlib import Path

from dualtrace import __version__, config, logfile
from dualtrace.errors import DualtraceError


def log_error(exc: BaseException, context: str = "") -> Path | None:
    """Append a pasteable report to <state>/logs/errors.log; never raises."""
    try:
        stamp = datetime.now(timezone.utc).isoformat(timespec="seconds")
        report = (f"--- {stamp} dualtrace {__version__} python {sys.version.split()[0]}\n"
                  f"argv: {sys.argv!r}\n" + (f"context: {context}\n" if context else "")
                  + "".join(traceback.format_exception(type(exc), exc, exc.__traceback__)))
        path = Path(logfile.path(config.state_dir(), "errors.log"))
        logfile.append(path, report)
        return path
    except Exception:  # noqa: BLE001 - the error log must never raise
        return None


_WARNED: set[str] = set()


def warn_settings(settings: config.Settings) -> None:
    """The config files' unknown keys (``Settings.warnings``), each once per process,
    as ``Warning: ...`` lines on stderr: the command still runs."""
    for line in settings.warnings:
        if line not in _WARNED:
            _WARNED.add(line)
            sys.stderr.write(f"Warning: {line}\n")


def report(exc: Exception) -> int:
    """Tell the person what went wrong (stderr, one line); the exit code."""
    if isinstance(exc, DualtraceError):
        # The user's to act on: one line, no report. errors.log keeps internal errors only.
        sys.stderr.write(f"Error: {exc}\n")
        return 1
    path = log_error(exc)
    where = f" (details in {path})" if path else ""
    sys.stderr.write(f"Error: internal error: {type(exc).__name__}: {exc}{where}\n")
    return 1
