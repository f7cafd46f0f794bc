"""Fault points for tests: make a real process fail at a named window.

``DUALTRACE_FAULT="<point>:<action>[,<point>:<action>...]"`` arms points; code calls
``faults.point("<point>")`` at the window. Unset (every real run), a point costs one
environment lookup. Each armed point fires once per process. Actions:

``kill``      SIGKILL this process (a crash: nothing after the point runs)
``stop``      SIGSTOP this process (a paused or swapped-out process; the test SIGCONTs it)
``enospc``    raise ``OSError(ENOSPC)`` (a full disk, as the OS reports it)
``sleep=S``   sleep S seconds (a slow step)

Points:

``txn-written``     memfs.transaction: the changeset's files are written and
                    journaled, the git commit has not run
``txn-committed``   memfs.transaction: git committed, the journal not yet removed
``txn-write``       memfs.transaction: before each file write (``enospc``: disk full)
``worker-settings`` worker: while it loads a project's settings (to schedule a job)
``warm-listen``     mcp_warm: a warm server holds its lock, before it listens
``warm-exit``       mcp_warm: a session's fork has sent its exit status, before it exits
"""

from __future__ import annotations

import os

ENV = "DUALTRACE_FAULT"
_fired: set[str] = set()


def point(name: str) -> None:
    spec = os.environ.get(ENV)
    if not spec or name in _fired:
        return
    for item in spec.split(","):
        where, _, action = item.strip().partition(":")
        if where == name:
            _fired.add(name)
            _fire(name, action)


def _fire(name: str, action: str) -> None:
    import signal

    if action == "kill":
        os.kill(os.getpid(), signal.SIGKILL)
    elif action == "stop":
        os.kill(os.getpid(), signal.SIGSTOP)
    elif action == "enospc":
        import errno

        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC) + f" (fault point {name})")
    elif action.startswith("sleep="):
        import time

        time.sleep(float(action.split("=", 1)[1]))
