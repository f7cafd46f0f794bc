"""The state-directory resolver, importable by the hook fast path.

Standard library only (no dataclasses, tomllib or pathlib-heavy work): the Stop
hook imports this on every turn. ``dualtrace.config.state_dir`` wraps it, so there
is exactly one rule for where queue, cursors and logs live.
"""

from __future__ import annotations

import os


def state_dir() -> str:
    """DUALTRACE_HOME, else the platform's user data directory, as a real path."""
    env = os.environ.get("DUALTRACE_HOME")
    if env:
        return os.path.realpath(os.path.expanduser(env))
    import platformdirs  # only when DUALTRACE_HOME is unset

    return os.path.realpath(platformdirs.user_data_dir("dualtrace", appauthor=False))
