"""The plan every backend proposes, and the validator that decides what is written.

Backends (offline heuristics, a model with tools, ``claude -p``) only *propose*
operations: Store, Update, Skip. ``PlanBuilder.add`` applies the rules of
PROTOCOL.md 6-8 in code - score ranges, tier routing and overrides, the duplicate
guard, confidence and Timeline monotonicity, system-file bullets, supersession,
and grounding of moments in the session - and either accepts an operation
(possibly rewritten, e.g. a duplicate Store becomes an Update) or raises
``Rejected`` with a reason a model can act on. ``apply`` writes the accepted
result atomically and commits it once.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass, field, replace
from typing import Any

from dualtrace.encoder.matching import best_match
from dualtrace.errors import DualtraceError, PathError
from dualtrace.memfs import formats
from dualtrace.memfs.anchors import check_anchor
from dualtrace.memfs.formats import (
    CONFIDENCE,
    FACT_FOLDER_TYPES,
    SCORE_KEYS,
    TYPES,
    Fact,
    Memory,
    Moment,
    Scores,
    SystemFile,
    tier_for,
)
from dualtrace.memfs.gitrepo import OpLine, commit_message
from dualtrace.memfs.store import MemoryStore

# Stakes override (PROTOCOL.md 7): FULL once the score reaches 5.
_STAKES_INCIDENT = re.compile(
    r"\b(outage|down ?time|data loss|lost data|corrupt\w*|security|breach|leak\w*|"
    r"vulnerab\w*|exploit\w*|production (?:down|incident)|sev ?[01]|p0)\b", re.I)
_IRREVERSIBLE = re.compile(
    r"\b(migrat\w*|database|schema|api contract|public api|breaking change|"
    r"framework|switch(?:ing|ed)? (?:from|to)|rewrite|replac\w* \w+ with)\b", re.I)
SIMILAR_THRESHOLD = 0.5


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


class LazyArtifacts:
    """Artifacts computed on first use: most sessions never propose a moment."""

    def __init__(self, compute: Any) -> None:
        self._compute = compute
        self._value: frozenset[str] | None = None

    def _get(self) -> frozenset[str]:
        if self._value is None:
            self._value = frozenset(self._compute())
        return self._value

    def __iter__(self):
        return iter(self._get())

    def __contains__(self, item: object) -> bool:
        return item in self._get()

    def __len__(self) -> int:
        return len(self._get())


@dataclass(frozen=True)
class Grounding:
    """What the session contains. Moment specifics must appear here."""

    text: str  # the redacted session text (digest and events), any case
    date: str  # session date YYYY-MM-DD
    artifacts: frozenset[str] | LazyArtifacts = frozenset()

    def has(self, token: str) -> bool:
        token = token.strip().lower()
        return bool(token) and (token in self._haystack or token == self.date.lower())

    @property
    def _haystack(self) -> str:
        cached = self.__dict__.get("_hay")
        if cached is None:
            cached = self.text.lower() + "\n" + "\n".join(a.lower() for a in self.artifacts)
            object.__setattr__(self, "_hay", cached)
        return cached


@dataclass(frozen=True)
class Context:
    session_id: str | None
    backend: str
    date: str
    grounding: Grounding
    project: str = "project"
    trailers: tuple[str, ...] = ()  # extra commit trailers (e.g. the transcript range)


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


# ------------------------------------------------------------------ grounding

_PATH = re.compile(r"(?<![\w/.-])(?:\.{0,2}/)?(?:[\w.-]+/)+[\w.-]+|(?<![\w/.-])[\w-]+\.(?:py|js|ts|tsx|jsx|go|rs|rb|java|kt|c|h|cpp|hpp|cs|php|sql|yml|yaml|json|toml|ini|cfg|md|sh|html|css|lock|txt|env)\b")
_CALL = re.compile(r"\b([A-Za-z_][\w.]*)\(\)")
_ERROR = re.compile(r"\b[A-Z]\w*(?:Error|Exception)\b")
_NUMBER = re.compile(r"(?<![\w.])\d[\d,.]*\d|(?<![\w.])\d(?![\w])")
_SHA = re.compile(r"\b[0-9a-f]{7,40}\b")
_DATE_TIME = re.compile(r"\b\d{4}-\d{2}-\d{2}(?:[T ]\d{2}:\d{2}(?::\d{2})?)?\b|\b\d{1,2}:\d{2}\b")


def specifics(text: str) -> set[str]:
    """Concrete tokens a moment asserts: paths, calls, error names, numbers, SHAs."""
    found: set[str] = set()
    # Dates and clock times are one specific each, not three numbers.
    for m in _DATE_TIME.finditer(text):
        found.add(m.group(0))
    text = _DATE_TIME.sub(" ", text)
    for pattern in (_PATH, _ERROR, _SHA):
        found.update(m.group(0).strip(".,;:") for m in pattern.finditer(text))
    found.update(m.group(1) for m in _CALL.finditer(text))
    found.update(m.group(0).rstrip(".,") for m in _NUMBER.finditer(text))
    return {f for f in found if f}


def check_moment(draft: MomentDraft, anchor: str, ctx: Context) -> None:
    """Reject a moment with invented specifics, no artifact, or no temporal marker."""
    if not draft.narrative.strip():
        raise Rejected("moment narrative is empty")
    if not draft.marker.strip():
        raise Rejected("moment needs a temporal marker for its Timeline (commit, PR, release, or the session date)")
    if not draft.what.strip():
        raise Rejected("moment Timeline needs what happened")
    text = "\n".join((draft.narrative, draft.what, draft.marker, draft.prior, draft.after))
    text = text.replace(anchor, " ")
    invented = sorted(s for s in specifics(text) if not ctx.grounding.has(s))
    if invented:
        raise Rejected(
            "moment mentions specifics that are not in the session (no invented specifics): "
            + ", ".join(invented[:8])
        )
    lowered = draft.narrative.lower() + " " + draft.what.lower()
    # Whole sentences extracted as "error messages" would make any quote count:
    # only short, artifact-sized strings qualify.
    artifacts = [a for a in ctx.grounding.artifacts
                 if 3 <= len(a) <= 120 and len(a.split()) <= 8 and a.lower() in lowered]
    grounded_specifics = [s for s in specifics(draft.narrative + " " + draft.what)
                          if not s.replace(",", "").replace(".", "").isdigit()]
    if not artifacts and not grounded_specifics:
        raise Rejected(
            "moment names no concrete artifact from the session (a file path, function, "
            "error message, command or commit)"
        )


def timeline_line(anchor: str, what: str, marker: str) -> str:
    what = " ".join(what.split()).rstrip(".")
    marker = " ".join(marker.split()).strip("[]")
    return f"{anchor} -> {what} [{marker}]"


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


# ------------------------------------------------------------------ the builder


@dataclass
class PlanBuilder:
    """Accumulates validated operations for one session and applies them as one commit."""

    store: MemoryStore
    ctx: Context
    pending: dict[str, Memory] = field(default_factory=dict)
    oplines: list[OpLine] = field(default_factory=list)
    outcomes: list[Outcome] = field(default_factory=list)
    conflicts: list[tuple[str, str]] = field(default_factory=list)
    _facts_cache: list[Fact] | None = None

    # ---- state

    def current(self, rel: str) -> Memory | None:
        if rel in self.pending:
            return self.pending[rel]
        try:
            if self.store.exists(rel):
                return self.store.read(rel)
        except PathError:
            raise
        except DualtraceError:
            return None
        return None

    def facts(self) -> list[Fact]:
        if self._facts_cache is None:
            self._facts_cache = self.store.scan().facts()
        merged = {f.path: f for f in self._facts_cache}
        merged.update({p: m for p, m in self.pending.items() if isinstance(m, Fact)})
        return list(merged.values())

    def _put(self, memory: Memory) -> None:
        self.pending[memory.path] = memory

    def _record(self, outcome: Outcome, opline: OpLine | None) -> Outcome:
        self.outcomes.append(outcome)
        if opline is not None:
            # One line per memory per session: a later op on the same target replaces it,
            # but a memory created in this session stays a "store".
            earlier = next((o for o in self.oplines if o.target == opline.target), None)
            if earlier is not None and earlier.verb == "store" and opline.verb != "store":
                opline = OpLine("store", earlier.target, earlier.detail,
                                max(earlier.score or 0, opline.score or 0))
            self.oplines = [o for o in self.oplines if o.target != opline.target] + [opline]
        return outcome

    # ---- entry point

    def add(self, op: Operation) -> Outcome:
        from dualtrace.encoder.redact import redact_fields

        # Whatever a backend proposes (a model may echo or invent a credential) passes
        # the session's redactor before anything is validated, written or committed.
        op = redact_fields(op)
        if isinstance(op, Skip):
            return self._record(Outcome("skip", None, "SKIP", op.scores, None, op.reason), None)
        if isinstance(op, Store):
            outcome = self._store(op)
            kind = op.type
        elif isinstance(op, Update):
            outcome = self._update(op)
            kind = _type_of_path(outcome.path)
        else:
            raise Rejected(f"unknown operation {type(op).__name__}")
        if outcome.kind is None:
            outcome = replace(outcome, kind=kind)
            self.outcomes[-1] = outcome
        return outcome

    # ---- routing

    def route(self, op: Store) -> str:
        total = op.scores.total
        tier = tier_for(total)
        text = f"{op.description}\n{op.body}"
        if total >= 5 and (
            (op.type == "incident" and _STAKES_INCIDENT.search(text))
            or (op.type == "decision" and _IRREVERSIBLE.search(text))
        ):
            tier = "FULL"
        if op.type == "decision" and total >= 5 and op.scores.rationale >= 2:
            tier = "FULL"
        if op.type == "learning" and total >= 5 and op.scores.rationale >= 2:
            tier = "FULL"  # a learning progression that passes 5
        if op.type == "pattern" and tier == "FULL":
            tier = "RECORD"  # first sighting; the second (an update) upgrades it
        return tier

    # ---- store

    def _store(self, op: Store) -> Outcome:
        check_anchor(op.anchor)
        anchor = op.anchor
        for prefix in ("decision-", "incident-", "convention-", "preference-", "pattern-", "learning-"):
            if anchor.startswith(prefix) and len(anchor) > len(prefix):
                anchor = anchor[len(prefix):]
        op = replace(op, anchor=anchor)
        tier = self.route(op)
        if op.type in ("convention", "preference"):
            return self._bullet(op, tier)
        if tier == "SKIP":
            return self._record(Outcome("skip", None, "SKIP", op.scores, None,
                                        f"evidence {op.scores.total} < 5: not encoded"), None)
        rel = formats.fact_path(op.type, anchor)
        existing = self._existing_for(op, rel)
        if existing is not None:
            upd = Update(
                target=existing.path,
                reason="recurred" if op.type == "incident" else "revisited",
                body=op.body,
                description=op.description,
                confidence=op.confidence,
                status=op.status,
                what=op.moment.what if op.moment else None,
                marker=op.moment.marker if op.moment else None,
                moment=op.moment,
                scores=op.scores,
            )
            outcome = self._update(upd)
            return replace(outcome, note=f"same subject as {existing.path}: updated in place"
                           + (f"; {outcome.note}" if outcome.note else ""))
        if op.supersedes:
            old = self.current(op.supersedes)
            if not isinstance(old, Fact) or old.type != "decision":
                raise Rejected(f"supersedes {op.supersedes!r} is not a stored decision")
        moment = None
        note = ""
        if tier == "FULL":
            if op.moment is None:
                tier, note = "RECORD", "no moment proposed: stored as fact only"
            else:
                check_moment(op.moment, anchor, self.ctx)
                moment = self._new_moment(op.type, anchor, op.description, op.moment,
                                          rel, op.confidence)
        fact = Fact(
            path=rel,
            type=op.type,
            description=op.description,
            body=op.body.strip(),
            confidence=op.confidence,
            stored=self.ctx.date,
            evidence_score=op.scores.total,
            linked_scene=moment.path if moment else None,
            related=tuple(op.related),
            scores=op.scores,
            tier=tier,
            status=op.status,
            sessions=(self.ctx.session_id,) if self.ctx.session_id else (),
            supersedes=op.supersedes,
        )
        self._put(fact)
        if moment:
            self._put(moment)
        if op.supersedes:
            old = self.current(op.supersedes)
            assert isinstance(old, Fact)
            self._put(replace(old, superseded_by=rel, updated=self.ctx.date))
            self.conflicts.append((op.supersedes, rel))
            note = (note + "; " if note else "") + f"supersedes {op.supersedes} (both kept)"
        target = rel.removesuffix(".md")
        return self._record(
            Outcome("store", rel, tier, op.scores, op.confidence, note),
            OpLine("store", target, op.type, op.scores.total),
        )

    def _existing_for(self, op: Store, rel: str) -> Fact | None:
        found = self.current(rel)
        if isinstance(found, Fact):
            return found
        alias = self.store.find_fact(op.type, op.anchor) if rel not in self.pending else None
        if alias is not None:
            return alias
        candidates = [
            (f.path, f"{f.anchor.replace('-', ' ')} {f.description}")
            for f in self.facts()
            if f.type == op.type and f.path != op.supersedes and not f.superseded_by
        ]
        key = best_match(f"{op.anchor.replace('-', ' ')} {op.description}", candidates,
                         SIMILAR_THRESHOLD)
        if key is None:
            return None
        found = self.current(key)
        return found if isinstance(found, Fact) else None

    def _new_moment(self, kind: str, anchor: str, description: str, draft: MomentDraft,
                    linked_fact: str, confidence: str) -> Moment:
        topic = " ".join(description.split())
        if len(topic) > 90:
            topic = topic[:87].rstrip() + "..."
        return Moment(
            path=formats.scene_path(kind, anchor),
            anchor=anchor,
            description=f"Scene cue for {anchor} -- {topic}",
            linked_fact=linked_fact,
            narrative=draft.narrative.strip(),
            timeline=(timeline_line(anchor, draft.what, draft.marker),),
            prior=draft.prior.strip(),
            after=draft.after.strip(),
            confidence=confidence,
            stored=self.ctx.date,
        )

    # ---- conventions and preferences

    def _bullet(self, op: Store, tier: str) -> Outcome:
        system = (self._system(formats.human_path(), "human") if op.type == "preference"
                  else self._system(formats.conventions_path(self.ctx.project), "conventions"))
        text = op.bullet or op.description
        updated = system.with_bullet(text)
        changed = updated is not system
        if changed:
            self._put(updated)
        target = system.path.removesuffix(".md")
        moment = None
        if tier == "FULL" and op.moment is not None:
            check_moment(op.moment, op.anchor, self.ctx)
            rel = formats.scene_path(op.type, op.anchor)
            current = self.current(rel)
            if isinstance(current, Moment):
                line = timeline_line(op.anchor, op.moment.what, op.moment.marker)
                if line not in current.timeline:
                    moment = replace(current, timeline=current.timeline + (line,),
                                     updated=self.ctx.date)
            else:
                moment = self._new_moment(op.type, op.anchor, op.description, op.moment,
                                          system.path, op.confidence)
            if moment is not None:
                self._put(moment)
        if not changed and moment is None:
            return self._record(Outcome("skip", system.path, tier, op.scores, None,
                                        "already stored"), None)
        detail = f"{op.type} bullet" if moment is None else f"{op.type} bullet + scene"
        action = "bullet" if moment is None else "store"
        return self._record(
            Outcome(action, moment.path if moment else system.path, tier, op.scores,
                    op.confidence, f"bullet in {system.path}"),
            OpLine("update" if moment is None else "store",
                   target if moment is None else moment.path.removesuffix(".md"),
                   detail, op.scores.total),
        )

    def _system(self, rel: str, which: str) -> SystemFile:
        current = self.current(rel)
        if isinstance(current, SystemFile):
            return current
        if which == "human":
            return self.store.human_file()
        return self.store.conventions_file(self.ctx.project)

    # ---- update

    def _resolve_target(self, target: str) -> Fact:
        target = target.strip()
        if "/" in target or target.endswith(".md"):
            rel = target if target.endswith(".md") else f"{target}.md"
            memory = self.current(rel)
            if isinstance(memory, Moment):
                memory = self.current(memory.linked_fact) if memory.linked_fact else None
            if isinstance(memory, Fact):
                return memory
            raise Rejected(f"update target {target!r} is not a stored fact")
        check_anchor(target)
        for kind in FACT_FOLDER_TYPES:
            memory = self.current(formats.fact_path(kind, target))
            if isinstance(memory, Fact):
                return memory
            found = self.store.find_fact(kind, target)
            if found is not None:
                return found
        raise Rejected(f"no stored fact with anchor {target!r}; use store for a new memory")

    def _update(self, op: Update) -> Outcome:
        fact = self._resolve_target(op.target)
        note: list[str] = []
        confidence = fact.confidence
        if op.confidence:
            rank = CONFIDENCE.index
            if rank(op.confidence) < rank(fact.confidence) and not op.confidence_reason:
                note.append(f"kept confidence {fact.confidence} (lowering needs a reason)")
            else:
                confidence = op.confidence
        body = fact.body
        if op.body.strip():
            paragraph = " ".join(op.body.split())
            if paragraph not in " ".join(fact.body.split()):
                session = f", session {self.ctx.session_id[:8]}" if self.ctx.session_id else ""
                body = f"{fact.body.rstrip()}\n\n**Update {self.ctx.date}{session}:** {op.body.strip()}"
        scores = fact.scores
        evidence = fact.evidence_score
        if op.scores is not None:
            if scores is None or op.scores.total > scores.total:
                scores = op.scores
            evidence = max(evidence or 0, op.scores.total)
        sessions = fact.sessions
        if self.ctx.session_id and self.ctx.session_id not in sessions:
            sessions = sessions + (self.ctx.session_id,)
        new = replace(
            fact,
            description=op.description or fact.description,
            body=body,
            confidence=confidence,
            status=op.status or fact.status,
            scores=scores,
            evidence_score=evidence,
            sessions=sessions,
            updated=self.ctx.date,
        )
        # Timeline: append to the existing scene, or create the scene (upgrade).
        verb = "update"
        moment_path = fact.linked_scene or formats.scene_path(fact.type, fact.anchor)
        scene = self.current(moment_path)
        draft = op.moment
        what = op.what or (draft.what if draft else None)
        marker = op.marker or (draft.marker if draft else None)
        wants_full = (
            (evidence or 0) >= 8
            or fact.type == "pattern"  # an update of a pattern is a further sighting
            or fact.tier == "FULL"
        )
        if isinstance(scene, Moment):
            if what and marker:
                if draft is not None:
                    check_moment(draft, fact.anchor, self.ctx)
                else:
                    check_moment(MomentDraft(scene.narrative, what, marker), fact.anchor, self.ctx)
                line = timeline_line(fact.anchor, what, marker)
                if line not in scene.timeline:
                    self._put(replace(scene, timeline=scene.timeline + (line,),
                                      confidence=confidence, updated=self.ctx.date))
        elif draft is not None and wants_full:
            check_moment(draft, fact.anchor, self.ctx)
            scene = self._new_moment(fact.type, fact.anchor, new.description, draft,
                                     fact.path, confidence)
            self._put(scene)
            new = replace(new, linked_scene=scene.path, tier="FULL")
            verb = "upgrade"
        if new == fact and not any(p == moment_path for p in self.pending):
            return self._record(Outcome("skip", fact.path, fact.tier or "RECORD", op.scores,
                                        confidence, "nothing new"), None)
        self._put(new)
        tier = new.tier or ("FULL" if new.linked_scene else "RECORD")
        target = fact.path.removesuffix(".md")
        detail = "added scene" if verb == "upgrade" else op.reason
        return self._record(
            Outcome(verb, fact.path, tier, scores, confidence, "; ".join(note)),
            OpLine(verb, target, detail, evidence),
        )

    # ---- output

    def changes(self) -> list[tuple[str, str | None, str]]:
        """(path, old text or None, new text) for every file that would change."""
        out = []
        for rel, memory in sorted(self.pending.items()):
            new = formats.render_memory(memory)
            try:
                old = self.store.read_text(rel) if self.store.exists(rel) else None
            except DualtraceError:
                old = None
            if old != new:
                out.append((rel, old, new))
        return out

    def diff(self) -> str:
        chunks = []
        for rel, old, new in self.changes():
            chunks.extend(difflib.unified_diff(
                (old or "").splitlines(keepends=True), new.splitlines(keepends=True),
                fromfile=f"a/{rel}" if old is not None else "/dev/null", tofile=f"b/{rel}",
            ))
        return "".join(chunks)

    def message(self) -> str | None:
        if not self.oplines:
            return None
        return commit_message(self.ctx.session_id, self.ctx.backend, self.oplines,
                              self.ctx.trailers)

    def apply(self) -> str | None:
        """Write every pending file atomically and make one commit. Returns the sha."""
        changes = self.changes()
        if not changes or not self.oplines:
            return None
        with self.store.lock():
            existed = {rel: self.store.exists(rel) for rel, _o, _n in changes}
            try:
                for rel, _old, new in changes:
                    self.store.write_text(rel, new)
                sha = self.store.commit([rel for rel, _o, _n in changes], self.message() or "")
            except BaseException:
                # Uncommitted files would be read back on the retry as memories that
                # already exist ("update" instead of "store"): put the directory back.
                self._undo(changes, existed)
                raise
        if self.conflicts:
            from dualtrace.memfs.conflicts import record_conflict

            for old, new in self.conflicts:
                record_conflict(self.store, old, new, self.ctx.session_id, self.ctx.date)
        return sha

    def _undo(self, changes: list[tuple[str, str | None, str]], existed: dict[str, bool]) -> None:
        """Best effort: restore what ``apply`` wrote before its commit failed."""
        for rel, old, _new in changes:
            try:
                path = self.store.path(rel)
                if not existed[rel]:
                    path.unlink(missing_ok=True)
                    for parent in path.parents:  # folders this write created, if now empty
                        if parent == self.store.root or any(parent.iterdir()):
                            break
                        parent.rmdir()
                elif old is not None:
                    self.store.write_text(rel, old)
            except (OSError, DualtraceError):
                continue


def _type_of_path(path: str | None) -> str | None:
    if not path:
        return None
    parts = path.split("/")
    folder = parts[1] if parts[0] == "scenes" and len(parts) > 2 else parts[0]
    if folder == "system":
        return "preference" if path.endswith("human.md") else "convention"
    canonical = formats.canonical_folder(folder)
    return formats.TYPE_OF_CATEGORY.get(canonical) if canonical else None
