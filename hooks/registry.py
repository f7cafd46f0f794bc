"""The one list of hosts. A new host is one module in hooks/ plus one line here.

Imported on the hook fast path: standard library only. A host module is imported
when it is first asked for.
"""

from __future__ import annotations

import importlib

TYPE_CHECKING = False  # typing costs ~4 ms on the hook fast path
if TYPE_CHECKING:
    from dualtrace.hooks.host import Host

HOSTS = {
    "claude-code": "dualtrace.hooks.claude_code",
    "codex": "dualtrace.hooks.codex",
    "letta": "dualtrace.hooks.letta",
}
DEFAULT = "claude-code"  # a payload no other host claims


def names() -> tuple[str, ...]:
    return tuple(HOSTS)


def get(name: str) -> Host:
    """The host module for ``name``; KeyError for a host dualtrace does not know."""
    module: Host = importlib.import_module(HOSTS[name])
    return module


def detect(payload: dict) -> str:
    """The host a hook payload came from (when the hook command gave no ``--host``)."""
    for name in HOSTS:
        if name != DEFAULT and get(name).detect(payload):
            return name
    return DEFAULT
