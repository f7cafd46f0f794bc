"""Import the parts of the ``mcp`` SDK a stdio server uses, and not the rest.

A host waits for ``dualtrace mcp`` to answer ``initialize`` before its session starts
(Claude Code: every ``claude -p`` turn), and importing the SDK is nearly all of that
wait. Two things in the SDK cost start-up time for nothing here:

- ``mcp/__init__.py`` and ``mcp/server/__init__.py`` import the whole client (httpx2,
  the SSE and streamable-HTTP clients) and the high-level ``MCPServer`` (its resource,
  prompt and tool managers) whenever any submodule is imported, though a low-level stdio
  server needs neither. ``lazy_packages`` registers those two packages without running
  their ``__init__``: submodules import as usual, and the first use of a name only the
  ``__init__`` defines (``mcp.Client``, ``from mcp.server import MCPServer``) runs it then,
  so nothing that imports the SDK the ordinary way behaves differently.
- ``mcp_types`` builds the pydantic validators of every wire model of both protocol
  eras at import; a session uses a handful. ``defer_wire_models`` sets pydantic's own
  ``defer_build`` on their base (``mcp_types._wire_base.WireModel``) before those models
  are defined: each is built on its first validation instead. The models themselves,
  and what they accept, are unchanged.

Both are no-ops when the SDK is already imported or its layout differs (a newer SDK):
the server then imports it the ordinary way. bench/bench_mcp_start.py measures them.
"""

from __future__ import annotations

import importlib.util
import sys

PACKAGES = ("mcp", "mcp.server")


def lazy_packages() -> None:
    if any(name in sys.modules for name in PACKAGES):
        return  # imported the ordinary way already (a test process, a client)
    done: list[str] = []
    try:
        for name in PACKAGES:
            _register(name)
            done.append(name)
    except Exception:  # noqa: BLE001 - an unexpected layout: import it the ordinary way
        for name in done:
            sys.modules.pop(name, None)


def _register(name: str) -> None:
    spec = importlib.util.find_spec(name)
    if spec is None or spec.loader is None or spec.submodule_search_locations is None:
        raise ImportError(name)
    module = importlib.util.module_from_spec(spec)  # __path__, __spec__, __file__; not run
    loader = spec.loader

    def __getattr__(attr: str) -> object:
        """A name the package's ``__init__`` defines: run it now (once), then answer."""
        del module.__dict__["__getattr__"]
        loader.exec_module(module)
        return getattr(module, attr)

    module.__dict__["__getattr__"] = __getattr__
    sys.modules[name] = module
    parent, _, child = name.rpartition(".")
    if parent:
        setattr(sys.modules[parent], child, module)


def defer_wire_models() -> None:
    if "mcp_types._v2025_11_25" in sys.modules:
        return
    try:
        from mcp_types._wire_base import WireModel
    except ImportError:
        return
    WireModel.model_config["defer_build"] = True


def load() -> None:
    """Call before the first import of ``mcp`` or ``mcp_types`` in the process."""
    lazy_packages()
    defer_wire_models()


__all__ = ["load", "lazy_packages", "defer_wire_models"]
