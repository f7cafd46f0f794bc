"""The state-directory resolver, importable by the hook fast path.

Standard library only (no dataclasses, tomllib or pathlib-heavy work): the Stop
hook imports this on every turn. ``dualtrace.config.state_dir`` wraps it, so there
is exactly one rule for where queue, cursors and logs live.
"""

from __future__ import annotations

import os
import sys


def state_dir() -> str:
    """DUALTRACE_HOME, else the platform's user data directory, as a real path."""
    env = os.environ.get("DUALTRACE_HOME")
    if env:
        return os.path.realpath(os.path.expanduser(env))
    base = _xdg_data_home()
    if base is not None:
        return os.path.realpath(os.path.join(base, "dualtrace"))
    import platformdirs  # ~5 ms of imports: only where the plain XDG rule does not apply

    return os.path.realpath(platformdirs.user_data_dir("dualtrace", appauthor=False))


def _xdg_data_home() -> str | None:
    """Linux's user data base dir when it is unambiguous (what platformdirs answers
    there: an absolute ``$XDG_DATA_HOME``, else ``$HOME/.local/share`` for an absolute
    ``$HOME``); None for anything else (other systems, relative or padded values), which
    platformdirs resolves. tests/dualtrace/test_paths_fast.py checks the two agree."""
    if not sys.platform.startswith("linux"):
        return None
    xdg = os.environ.get("XDG_DATA_HOME", "")
    if xdg:
        return xdg if xdg.startswith("/") and xdg == xdg.strip() else None
    home = os.environ.get("HOME", "")
    if home.startswith("/") and home == home.strip():
        return os.path.join(home, ".local", "share")
    return None
