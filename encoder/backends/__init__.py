"""Encoder backends: a ``typing.Protocol`` and a plain dict registry.

A backend reads an ``EncodeRequest`` (the redacted session, its digest, the gate
verdict and an index of relevant existing memories) and proposes operations to
the ``PlanBuilder``, which validates each one. Backends are imported lazily: the
anthropic SDK costs about a second to import and only its backend needs it.
"""

from __future__ import annotations

import importlib
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from dualtrace.config import Settings, api_key
from dualtrace.errors import DualtraceError

if TYPE_CHECKING:
    from dualtrace.encoder.plan import Context, PlanBuilder


@dataclass(frozen=True)
class MemoryBrief:
    """One line of the existing-memory index a backend sees (never the whole store)."""

    path: str
    anchor: str
    type: str
    description: str
    confidence: str
    updated: str
    tier: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class EncodeRequest:
    session: Any  # dualtrace.encoder.session.Session, already redacted
    digest: Any  # dualtrace.encoder.digest.Digest
    gates: Any  # dualtrace.encoder.gates.GateVerdict
    memories: tuple[MemoryBrief, ...]
    settings: Settings
    ctx: Context


@dataclass
class Usage:
    """Token use and cost of one encode, for the run report."""

    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    requests: int = 0
    turns: int = 0
    cost_usd: float = 0.0
    model: str | None = None
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


class Backend(Protocol):
    name: str

    def encode(self, request: EncodeRequest, builder: PlanBuilder) -> Usage: ...


# name -> "module:Class"; imported only when chosen.
BACKENDS: dict[str, str] = {
    "offline": "dualtrace.encoder.backends.offline:OfflineBackend",
    "anthropic": "dualtrace.encoder.backends.anthropic:AnthropicBackend",
    "claude": "dualtrace.encoder.backends.claude_cli:ClaudeCliBackend",
}


def resolve_name(name: str, settings: Settings) -> str:
    """``auto`` is the Anthropic sub-agent when a key is configured, else offline."""
    if name == "auto":
        return "anthropic" if api_key(settings) else "offline"
    if name not in BACKENDS:
        raise DualtraceError(
            f"unknown backend {name!r}; choose one of auto, {', '.join(sorted(BACKENDS))}"
        )
    return name


def get_backend(name: str, settings: Settings) -> Backend:
    name = resolve_name(name, settings)
    module_name, _, cls_name = BACKENDS[name].partition(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise DualtraceError(f"backend {name!r} is not available: {exc}") from exc
    return getattr(module, cls_name)(settings)
