"""The operations a backend proposes (Store, Update, Skip), parsed from tool input.

A backend - offline heuristics, a model with tools, ``claude -p`` - only *proposes*
these; ``encoder.plan.PlanBuilder`` decides what becomes of each (``Outcome``), and
``Rejected`` carries a reason a model can act on.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from dualtrace.errors import DualtraceError
from dualtrace.memfs.formats import CONFIDENCE, SCORE_KEYS, TYPES, Scores


class Rejected(DualtraceError):
    """An operation the validator refuses; the message says why (sent back to a model)."""


@dataclass(frozen=True)
class MomentDraft:
    narrative: str
    what: str  # what happened, for the Timeline line
    marker: str  # temporal marker: commit, PR, release, session date...
    prior: str = ""
    after: str = ""


@dataclass(frozen=True)
class Store:
    type: str
    anchor: str
    description: str
    body: str
    scores: Scores
    confidence: str = "MEDIUM"
    status: str | None = None
    related: tuple[str, ...] = ()
    moment: MomentDraft | None = None
    supersedes: str | None = None  # path of a stored decision this one contradicts
    bullet: str | None = None  # conventions/preferences: the bullet text (default: description)


@dataclass(frozen=True)
class Update:
    target: str  # path (decisions/x.md) or anchor
    reason: str
    body: str = ""  # a new paragraph, appended with the date
    description: str | None = None
    confidence: str | None = None
    confidence_reason: str | None = None  # required to lower confidence
    status: str | None = None
    what: str | None = None  # a new Timeline entry: what happened ...
    marker: str | None = None  # ... and when
    moment: MomentDraft | None = None  # creates the scene when the memory becomes FULL
    scores: Scores | None = None


@dataclass(frozen=True)
class Skip:
    reason: str
    scores: Scores | None = None
    subject: str = ""


Operation = Store | Update | Skip


@dataclass(frozen=True)
class Outcome:
    """What the validator made of one proposed operation."""

    action: str  # store | update | upgrade | bullet | skip | supersede
    path: str | None
    tier: str
    scores: Scores | None
    confidence: str | None
    note: str = ""
    kind: str | None = None  # the memory type (decision, incident, ...)

    def to_dict(self) -> dict[str, Any]:
        return {
            "action": self.action,
            "type": self.kind,
            "path": self.path,
            "tier": self.tier,
            "scores": self.scores.as_dict() if self.scores else None,
            "evidence": self.scores.total if self.scores else None,
            "confidence": self.confidence,
            "note": self.note,
        }


# ------------------------------------------------------------------ parsing tool input


def _req_str(data: dict[str, Any], key: str, limit: int = 20000) -> str:
    value = data.get(key)
    if not isinstance(value, str) or not value.strip():
        raise Rejected(f"'{key}' is required and must be a non-empty string")
    if len(value) > limit:
        raise Rejected(f"'{key}' is longer than {limit} characters")
    return value.strip()


def _opt_str(data: dict[str, Any], key: str, limit: int = 20000) -> str | None:
    value = data.get(key)
    if value is None or value == "":
        return None
    if not isinstance(value, str):
        raise Rejected(f"'{key}' must be a string")
    if len(value) > limit:
        raise Rejected(f"'{key}' is longer than {limit} characters")
    return value.strip() or None


def parse_scores(value: Any) -> Scores:
    if not isinstance(value, dict):
        raise Rejected(f"'scores' must be an object with {', '.join(SCORE_KEYS)} (each 0-3)")
    out = {}
    for key in SCORE_KEYS:
        raw = value.get(key)
        if isinstance(raw, bool) or not isinstance(raw, int) or not 0 <= raw <= 3:
            raise Rejected(f"score '{key}' must be an integer 0-3, got {raw!r}")
        out[key] = raw
    return Scores(**out)


def _confidence(value: Any, default: str | None) -> str | None:
    if value is None or value == "":
        return default
    if not isinstance(value, str) or value.upper() not in CONFIDENCE:
        raise Rejected(f"confidence must be HIGH, MEDIUM or LOW, got {value!r}")
    return value.upper()


def parse_moment(value: Any) -> MomentDraft | None:
    if value is None:
        return None
    if not isinstance(value, dict):
        raise Rejected("'moment' must be an object with narrative, what, marker, prior, after")
    return MomentDraft(
        narrative=_req_str(value, "narrative", 4000),
        what=_req_str(value, "what", 400),
        marker=_req_str(value, "marker", 200),
        prior=_opt_str(value, "prior", 1000) or "",
        after=_opt_str(value, "after", 1000) or "",
    )


def parse_store(data: dict[str, Any]) -> Store:
    kind = data.get("type")
    if kind not in TYPES:
        raise Rejected(f"unknown type {kind!r}; expected one of {', '.join(TYPES)}")
    related = data.get("related") or []
    if not isinstance(related, list) or not all(isinstance(r, str) for r in related):
        raise Rejected("'related' must be a list of memory paths")
    return Store(
        type=kind,
        anchor=_req_str(data, "anchor", 200),
        description=_req_str(data, "description", 500),
        body=_req_str(data, "body"),
        scores=parse_scores(data.get("scores")),
        confidence=_confidence(data.get("confidence"), "MEDIUM") or "MEDIUM",
        status=_opt_str(data, "status", 40),
        related=tuple(related),
        moment=parse_moment(data.get("moment")),
        supersedes=_opt_str(data, "supersedes", 300),
        bullet=_opt_str(data, "bullet", 500),
    )


def parse_update(data: dict[str, Any]) -> Update:
    scores = data.get("scores")
    return Update(
        target=_req_str(data, "target", 300),
        reason=_req_str(data, "reason", 200),
        body=_opt_str(data, "body") or "",
        description=_opt_str(data, "description", 500),
        confidence=_confidence(data.get("confidence"), None),
        confidence_reason=_opt_str(data, "confidence_reason", 500),
        status=_opt_str(data, "status", 40),
        what=_opt_str(data, "what", 400),
        marker=_opt_str(data, "marker", 200),
        moment=parse_moment(data.get("moment")),
        scores=parse_scores(scores) if scores is not None else None,
    )


def parse_skip(data: dict[str, Any]) -> Skip:
    scores = data.get("scores")
    return Skip(
        reason=_req_str(data, "reason", 500),
        scores=parse_scores(scores) if scores is not None else None,
        subject=_opt_str(data, "subject", 300) or "",
    )


def parse_operation(data: dict[str, Any]) -> Operation:
    """A JSON plan entry: {"op": "store"|"update"|"skip", ...fields}."""
    if not isinstance(data, dict):
        raise Rejected("each operation must be a JSON object")
    op = data.get("op")
    if op == "store":
        return parse_store(data)
    if op == "update":
        return parse_update(data)
    if op == "skip":
        return parse_skip(data)
    raise Rejected(f"unknown op {op!r}; expected store, update or skip (nothing can be deleted)")
