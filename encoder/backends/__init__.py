"""Encoder backends: a ``typing.Protocol`` and a plain dict registry.

A backend reads an ``EncodeRequest`` (the redacted session, its digest, the gate
verdict and an index of relevant existing memories) and proposes operations to
the ``PlanBuilder``, which validates each one. Backends are imported lazily: the
anthropic SDK costs about a second to import and only its backend needs it.
"""

from __future__ import annotations

import importlib
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, TypedDict

from dualtrace.config import BACKENDS as config_backends
from dualtrace.config import Settings
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

    def add_tokens(self, api_usage: Any) -> None:
        """Add the token counts of one API reply's ``usage`` object."""
        for key, count in api_tokens(api_usage).items():
            setattr(self, key, getattr(self, key) + count)


class Tokens(TypedDict):
    input_tokens: int
    output_tokens: int
    cache_read_tokens: int
    cache_write_tokens: int


def api_tokens(api_usage: Any) -> Tokens:
    """Our four token counts from a Messages API ``usage`` object (Claude Code's JSON
    result has the same fields); absent or null counts are 0."""
    u = api_usage if isinstance(api_usage, dict) else {}
    return Tokens(input_tokens=int(u.get("input_tokens") or 0),
                  output_tokens=int(u.get("output_tokens") or 0),
                  cache_read_tokens=int(u.get("cache_read_input_tokens") or 0),
                  cache_write_tokens=int(u.get("cache_creation_input_tokens") or 0))


class Backend(Protocol):
    name: str

    def encode(self, request: EncodeRequest, builder: PlanBuilder) -> Usage: ...


# name -> "module:Class"; imported only when chosen. The table lives in config, which
# checks a configured backend's name against it when the config loads.
BACKENDS = config_backends


# What each backend sends off this machine, in one line (``install --backend`` prints it,
# the README's "What leaves your machine" says the same at more length).
DISCLOSURES: dict[str, str] = {
    "offline": "nothing leaves this machine: sessions are encoded here, by rules, with no model",
    "anthropic": "after each session, its redacted digest (up to digest_budget tokens) and the "
                 "descriptions of related memories are sent to the Anthropic API "
                 "({where}) and billed to {key}",
    "claude": "after each session, its redacted digest and the descriptions of related "
              "memories are given to `claude -p`, which sends them to Anthropic under your "
              "Claude Code login and billing",
}


def resolve_name(name: str, settings: Settings) -> str:
    """``auto`` is offline. A model backend runs only when it is named, in dualtrace's
    own config or on the command line: a key in the environment (Claude Code passes
    its ANTHROPIC_API_KEY to every hook) is not consent to send sessions to a model."""
    if name == "auto":
        return "offline"
    if name not in BACKENDS:
        raise DualtraceError(
            f"unknown backend {name!r}; choose one of auto, {', '.join(sorted(BACKENDS))}"
        )
    return name


def disclosure(name: str, settings: Settings) -> str:
    """One line: what choosing backend ``name`` sends off this machine, and where."""
    import os

    name = resolve_name(name, settings)
    where = (settings.base_url or os.environ.get("ANTHROPIC_BASE_URL")
             or "https://api.anthropic.com")
    key = "ANTHROPIC_API_KEY (or api_key in dualtrace's config)"
    return f"backend {name}: " + DISCLOSURES[name].format(where=where, key=key)


def offline_hint(transcript: str | None = None, memory_dir: str | None = None) -> str:
    """How to do the same job without a model, for the end of a backend error: the
    exact command, with the memory directory this run was writing to."""
    import shlex

    words = ["dualtrace", "encode", "--backend", "offline", transcript or "TRANSCRIPT"]
    if memory_dir:
        words += ["--memory-dir", memory_dir]
    what = " ".join(w if w == "TRANSCRIPT" else shlex.quote(w) for w in words)
    return f"to encode on this machine without a model, run `{what}` " \
           "(or set backend = \"offline\" in dualtrace's config)"


def get_backend(name: str, settings: Settings) -> Backend:
    name = resolve_name(name, settings)
    module_name, _, cls_name = BACKENDS[name].partition(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise DualtraceError(f"backend {name!r} is not available: {exc}") from exc
    return getattr(module, cls_name)(settings)
