"""Recall: the three-state retrieval protocol of PROTOCOL.md 10 over the search index.

How a question is answered:
1. Content words are taken from the question (stop words and question words dropped).
2. Intent routing: "why did we ..." prefers decisions and system bullets, "seen this
   before" incidents, and so on (``INTENTS``). Routing *boosts* the routed types
   instead of filtering, so a match in another type still comes back: that is the
   "broaden before abstaining" rule applied in a single pass.
3. Candidates come from FTS5 bm25; a fact and its moment are scored as one memory.
4. Relevance is the IDF-weighted share of the question's content words that the
   memory contains (``coverage``, 0..1). Unlike bm25 it is comparable across
   questions and stores, so the abstention threshold is a fixed number calibrated
   on tests/data/recall_questions.json (docs/BENCHMARKS.md, "Recall").
5. Ranking mixes normalised bm25 with coverage; superseded memories sink below
   current ones and are shown as history.
6. State A = fact + moment, B = fact only, C = nothing passes the threshold.

No jinja2 here: templates cost ~70 ms of import time on the CLI and hook paths,
and the text is short, so it is built in Python.
"""

from __future__ import annotations

import datetime as _dt
import math
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dualtrace.memfs.index import Doc, Index

LABEL_A = "(STATE A retrieval: fact + scene, high confidence)"
LABEL_B = "(STATE B retrieval: fact only, medium confidence)"
LABEL_C = "(STATE C retrieval: no fact found, abstaining)"
ABSTAIN = "I don't have that stored in my memory."
LABELS = {"A": LABEL_A, "B": LABEL_B, "C": LABEL_C}
STALE_NOTE = ("I have this stored from {date}, but the referenced files may have "
              "changed since then.")
OFFER = "If you tell me the answer, dualtrace will store it from this session."

# Calibrated on tests/data/recall_questions.json (see docs/BENCHMARKS.md).
THRESHOLD = 0.5
# Words of the question that match nothing in the store still count against
# coverage, at this fraction of their (maximal) IDF weight: "test coverage
# threshold" against a store with no "coverage" must not look like a match on "test".
UNKNOWN_WEIGHT = 0.8
# Floor for a known word's weight: in a small store a word found in every memory
# would otherwise weigh ~0 and one unknown word would sink every answer.
IDF_FLOOR = 1.0
ROUTE_BOOST = 0.08
MAX_TERMS = 8
# A question with more content words than this is a pasted text (a bug report, a
# prompt): its words absent from the store say nothing about relevance, so
# coverage is measured against its heaviest *known* words only.
LONG_QUERY = 14
LONG_UNKNOWN = 0.3
COMMON_SHARE = 0.25
COMMON_MIN = 50
SUPERSEDED_FACTOR = 0.5
CANDIDATES = 40

STOPWORDS = frozenset("""
a about above after again against all also am an and any are aren as at be because been
before being below between both but by can cannot could couldn did didn do does doesn
doing don down during each else ever few for from further get got had hadn has hasn have
haven having he her here hers herself him himself his how i if in into is isn it its
itself just let me more most my myself no nor not now of off on once only or other ought
our ours ourselves out over own same shall she should shouldn so some such than that the
their theirs them themselves then there these they this those through to too under until
up us very was wasn we were weren what when where which while who whom why will with
won would wouldn you your yours yourself yourselves
tell know remember recall stored store memory memories thing things something anything
please thanks thank hey ok okay us one use used using way ways seen write wrote
written make made work works go goes going happen happened need want like
""".split())

_TYPE_WORDS = {
    "decision": "decision", "decisions": "decision", "decided": "decision",
    "incident": "incident", "incidents": "incident", "outage": "incident",
    "outages": "incident",
    "convention": "convention", "conventions": "convention", "rules": "convention",
    "preference": "preference", "preferences": "preference",
    "pattern": "pattern", "patterns": "pattern", "mistakes": "pattern",
    "learning": "learning", "learnings": "learning", "lessons": "learning",
}

INTENTS: tuple[tuple[re.Pattern[str], tuple[str, ...]], ...] = tuple(
    (re.compile(p, re.I), types) for p, types in (
        (r"\bwhy\b|\bdecid|\bdecision|\bchose\b|\bchoose\b|\bswitch|\binstead of\b|"
         r"\bwent with\b|\btrade-?off|\brationale\b|\bpicked\b",
         ("decision", "convention", "preference")),
        (r"\bseen (this|that|it) before\b|\bincident|\boutage|\berror|\bfail|\bcrash|"
         r"\bbroke|\bbug\b|\bexception|\btimeout|\bregression|\bflaky",
         ("incident",)),
        (r"\bconvention|\brule\b|\brules\b|\bnaming\b|\bstyle\b|\bstandard|"
         r"\bsupposed to\b", ("convention",)),
        (r"\bprefer|\blike to\b|\bhow should (i|we) write\b|\bhow do i like\b",
         ("convention", "preference")),
        (r"\bmistake|\bkeep (doing|making|forgetting)|\bpattern|\btend to\b|\brecurring\b",
         ("pattern",)),
        (r"\blearn|\blesson|\brealiz", ("learning",)),
    )
)

_AGGREGATE = re.compile(
    r"\b(list|all|every|each|history of|so far|have we had|have we made|have i made|"
    r"what (incidents|decisions|conventions|preferences|patterns|mistakes|learnings|outages)|"
    r"which (incidents|decisions|conventions|patterns))\b", re.I)
_TOKEN = re.compile(r"[a-z0-9]+")
_HOW = re.compile(r"\bhow (long|many|much|often)\b")
_FILE_REF = re.compile(
    r"(?<![\w/.-])((?:[\w.-]+/)*[\w-]+\.(?:py|pyi|js|jsx|ts|tsx|go|rs|java|kt|rb|php|c|h|cc|"
    r"cpp|hpp|cs|swift|sql|sh|toml|ya?ml|json|ini|cfg|md))\b")


# ------------------------------------------------------------------ results


@dataclass(frozen=True)
class RecalledMemory:
    path: str
    type: str
    confidence: str
    stored: str
    score: float
    fact: Any = None  # formats.Fact | formats.SystemFile | None
    moment: Any = None  # formats.Moment | None
    bullet: str | None = None
    superseded_by: str | None = None
    stale: str | None = None

    @property
    def state(self) -> str:
        return "A" if self.moment is not None else "B"

    def to_dict(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "type": self.type,
            "confidence": self.confidence,
            "stored": self.stored,
            "score": round(self.score, 4),
            "moment": self.moment.path if self.moment is not None else None,
            "bullet": self.bullet,
            "superseded_by": self.superseded_by,
            "stale": self.stale,
        }


@dataclass(frozen=True)
class RecallResult:
    question: str
    state: str
    memories: tuple[RecalledMemory, ...] = ()
    aggregation: bool = False
    terms: tuple[str, ...] = field(default=(), compare=False)

    @property
    def label(self) -> str:
        return LABELS[self.state]

    def to_dict(self) -> dict[str, Any]:
        return {
            "question": self.question,
            "state": self.state,
            "label": self.label,
            "aggregation": self.aggregation,
            "message": ABSTAIN if self.state == "C" else None,
            "memories": [m.to_dict() for m in self.memories],
        }

    def render(self, *, max_chars: int | None = None) -> str:
        if self.state == "C":
            return f"{ABSTAIN}\n{LABEL_C}\n{OFFER}\n"
        head = [self.label]
        if self.aggregation:
            head.append(f"{len(self.memories)} matching memories, oldest first (by Timeline):")
        parts = ["\n".join(head)]
        for n, memory in enumerate(self.memories, 1):
            parts.append(render_memory(memory, n))
        text = "\n\n".join(parts) + "\n"
        if max_chars is not None and len(text) > max_chars:
            text = _cut(text, max_chars)
        return text


def _cut(text: str, limit: int, marker: str = "\n[...]\n") -> str:
    """Shorten ``text`` to ``limit`` characters at a line break when one is near."""
    cut = text[: max(limit - len(marker), 0)]
    nl = cut.rfind("\n")
    if nl > limit // 2:
        cut = cut[:nl]
    return cut + marker


def _indent(text: str, pad: str = "   ") -> str:
    return "\n".join(pad + line if line.strip() else "" for line in text.strip().splitlines())


def render_memory(memory: RecalledMemory, n: int | None = None) -> str:
    """One memory as text: the moment first (read it first), then the fact."""
    num = f"{n}. " if n is not None else ""
    tail = f", superseded by {memory.superseded_by} (history)" if memory.superseded_by else ""
    lines = [f"{num}{memory.path}  [{memory.type}, {memory.confidence}, stored "
             f"{memory.stored or 'unknown'}{tail}]"]
    moment = memory.moment
    if moment is not None:
        lines.append(f"   Moment ({moment.path}):")
        if moment.narrative:
            lines.append(_indent(moment.narrative, "     "))
        for entry in moment.timeline:
            lines.append(f"     Timeline: {entry}")
        if moment.prior:
            lines.append(f"     Prior: {moment.prior}")
        if moment.after:
            lines.append(f"     After: {moment.after}")
    if memory.bullet is not None:
        lines.append(f"   Fact: {memory.bullet}")
    elif memory.fact is not None:
        fact = memory.fact
        lines.append(f"   Fact: {fact.description}")
        status = getattr(fact, "status", None)
        if status:
            lines.append(f"   Status: {status}")
        body = getattr(fact, "body", "")
        if body:
            lines.append(_indent(body, "     "))
    if memory.stale:
        lines.append(f"   Note: {memory.stale}")
    return "\n".join(lines)


# ------------------------------------------------------------------ question analysis


def content_terms(text: str, *, keep_type_words: bool = True) -> list[str]:
    """Lowercase content words of ``text`` in order, without duplicates or stop words."""
    seen: dict[str, None] = {}
    # "how long", "how many", "how much": the second word belongs to the question form.
    text = _HOW.sub(" ", text.lower())
    for token in _TOKEN.findall(text):
        if len(token) < 2 or token in STOPWORDS:
            continue
        if not keep_type_words and token in _TYPE_WORDS:
            continue
        seen.setdefault(token, None)
    return list(seen)


def routed_types(question: str) -> tuple[str, ...]:
    out: list[str] = []
    for pattern, types in INTENTS:
        if pattern.search(question):
            out.extend(t for t in types if t not in out)
    return tuple(out)


def aggregation_types(question: str) -> tuple[str, ...] | None:
    """The types an aggregation question asks for (() = any), or None if not aggregation."""
    match = _AGGREGATE.search(question)
    if not match:
        return None
    # "...shows up in the merged list..." in a bug report is not a request to list
    # memories: the cue must open the question, or the question must be short.
    if len(question[: match.start()].split()) > 6 and len(content_terms(question)) > LONG_QUERY:
        return None
    types: list[str] = []
    for token in _TOKEN.findall(question.lower()):
        kind = _TYPE_WORDS.get(token)
        if kind and kind not in types and token.endswith("s"):
            types.append(kind)
    return tuple(types)


# ------------------------------------------------------------------ recall


@dataclass
class _Unit:
    key: str
    bm25: float = 0.0
    ids: list[int] = field(default_factory=list)
    coverage: float = 0.0
    final: float = 0.0
    type: str = ""
    superseded_by: str | None = None
    docs: list[Doc] = field(default_factory=list)


def _root_of(store: Any) -> Path:
    # A pathlib.Path has a ``root`` attribute too ("/"): test for paths first.
    if isinstance(store, (str, os.PathLike)):
        return Path(store)
    return Path(store.root)


def recall(store: Any, question: str, *, limit: int = 5, type: str | None = None,  # noqa: A002
           settings: Any = None, project_root: Path | str | None = None,
           index: Index | None = None) -> RecallResult:
    """Answer ``question`` from the memory store (a MemoryStore or its root path)."""
    if settings is None:
        from dualtrace.config import Settings

        settings = Settings()
    root = _root_of(store)
    own = index is None
    if index is None:
        index = Index.open(root)
    try:
        result = _recall(index, question, limit=max(limit, 1), only=type, settings=settings,
                         project_root=project_root)
        # Never show a file that changed since it was indexed: re-check what we return.
        shown = [p for m in result.memories for p in _paths_of(m)]
        if shown and not index.verify(shown):
            result = _recall(index, question, limit=max(limit, 1), only=type,
                             settings=settings, project_root=project_root)
        return result
    finally:
        if own:
            index.close()


def _paths_of(memory: RecalledMemory) -> list[str]:
    out = [memory.path]
    if memory.moment is not None:
        out.append(memory.moment.path)
    return out


def _recall(index: Index, question: str, *, limit: int, only: str | None, settings: Any,
            project_root: Path | str | None) -> RecallResult:
    type_filter = (only,) if only else None
    agg = aggregation_types(question)
    if agg is not None:
        return _aggregate(index, question, agg if not only else (only,), settings, project_root)
    terms = content_terms(question)
    units = _score(index, terms, type_filter, routed_types(question))
    passing = [u for u in units if u.coverage >= THRESHOLD]
    if not passing:
        return RecallResult(question, "C", terms=tuple(terms))
    _complete(index, passing[:limit])
    memories = [_materialise(index, u, settings, project_root) for u in passing[:limit]]
    state = memories[0].state
    return RecallResult(question, state, tuple(memories), terms=tuple(terms))


def _score(index: Index, terms: list[str], types: tuple[str, ...] | None,
           routed: tuple[str, ...], candidates: int = CANDIDATES) -> list[_Unit]:
    if not terms:
        return []
    total = index.doc_count or 1
    idf: dict[str, float] = {}
    known: list[str] = []
    common: list[str] = []
    for term in terms:
        df = index.doc_frequency(term, types)
        weight = max(math.log(1 + (total - df + 0.5) / (df + 0.5)), IDF_FLOOR)
        if df > max(total * COMMON_SHARE, COMMON_MIN):
            # In a quarter of all memories: no evidence of relevance, and scanning its
            # postings for coverage would dominate the query time on a big store.
            common.append(term)
        elif df:
            known.append(term)
            idf[term] = weight
        else:
            idf[term] = weight * UNKNOWN_WEIGHT
    if not known:
        known, common = common, []
        for term in known:
            idf[term] = IDF_FLOOR
    if not known:
        return []
    # A long text (a bug report, a prompt) is not expected to be covered word for word:
    # relevance is measured against its MAX_TERMS heaviest words.
    if len(terms) > LONG_QUERY:
        pool = [idf[t] for t in known] + [
            idf[t] * LONG_UNKNOWN / UNKNOWN_WEIGHT for t in idf if t not in known]
    else:
        pool = list(idf.values())
    denominator = sum(sorted(pool, reverse=True)[:MAX_TERMS])
    units: dict[str, _Unit] = {}
    hits = index.match(known, types, limit=candidates * 4)
    info = index.hit_info(i for i, _ in hits)
    for doc_id, score in hits:
        meta = info.get(doc_id)
        if meta is None:
            continue
        unit = units.setdefault(meta[0], _Unit(meta[0], type=meta[2]))
        # A fact and its moment both matching is stronger evidence than either alone,
        # but the second document counts for less (it repeats the first).
        unit.bm25 = max(unit.bm25, score) + 0.5 * min(unit.bm25, score)
        unit.ids.append(doc_id)
    ranked = sorted(units.values(), key=lambda u: -u.bm25)[:candidates]
    all_ids = [i for u in ranked for i in u.ids]
    for term in known:
        present = index.docs_matching(term, all_ids)
        for unit in ranked:
            if any(i in present for i in unit.ids):
                unit.coverage += idf[term]
    for unit in ranked:
        unit.coverage = min(unit.coverage, denominator)
    best = ranked[0].bm25 if ranked else 1.0
    superseded = index.superseded(u.key for u in ranked)
    for unit in ranked:
        unit.coverage /= denominator
        unit.final = 0.5 * unit.bm25 / best + 0.5 * unit.coverage
        if routed and unit.type in routed:
            unit.final += ROUTE_BOOST
        unit.superseded_by = superseded.get(unit.key)
        if unit.superseded_by:
            unit.final *= SUPERSEDED_FACTOR  # still shown (as history) when it passes
    ranked.sort(key=lambda u: -u.final)
    return _successors_first(ranked)


def _complete(index: Index, units: list[_Unit]) -> None:
    """Load every document of these units (a moment that did not match the words, say)."""
    by_key = {u.key: u for u in units}
    for doc in index.docs_of_units(by_key):
        unit = by_key[doc.unit]
        if all(d.id != doc.id for d in unit.docs):
            unit.docs.append(doc)


def _superseded_by(unit: _Unit) -> str | None:
    if unit.superseded_by:
        return unit.superseded_by
    for doc in unit.docs:
        if doc.kind == "fact" and doc.superseded_by:
            return doc.superseded_by
    return None


def _successors_first(units: list[_Unit]) -> list[_Unit]:
    """A superseded memory never ranks above the memory that supersedes it."""
    keys = [u.key for u in units]
    out = list(units)
    for unit in units:
        succ = _superseded_by(unit)
        if succ and succ in keys:
            i, j = out.index(unit), next(k for k, u in enumerate(out) if u.key == succ)
            if i < j:
                out.insert(j, out.pop(i))
    return out


def _aggregate(index: Index, question: str, types: tuple[str, ...], settings: Any,
               project_root: Path | str | None) -> RecallResult:
    topic = content_terms(question, keep_type_words=False)
    topic = [t for t in topic if t not in ("list", "every", "had", "made", "far", "history")]
    if topic:
        units = [u for u in _score(index, topic, types or None, (), candidates=200)
                 if u.coverage >= THRESHOLD]
    else:
        groups: dict[str, _Unit] = {}
        for doc in index.docs_of_type(types or ("decision", "incident", "pattern", "learning")):
            groups.setdefault(doc.unit, _Unit(doc.unit, coverage=1.0, final=1.0)).docs.append(doc)
        units = list(groups.values())
    if not units:
        return RecallResult(question, "C", aggregation=True, terms=tuple(topic))
    if topic:
        _complete(index, units)
    memories = [_materialise(index, u, settings, project_root) for u in units]
    memories.sort(key=_timeline_key)
    state = "A" if any(m.state == "A" for m in memories) else "B"
    return RecallResult(question, state, tuple(memories), aggregation=True, terms=tuple(topic))


_DATE = re.compile(r"\b(\d{4}-\d{2}-\d{2})\b")


def _timeline_key(memory: RecalledMemory) -> tuple[str, str]:
    """Oldest first: the first dated Timeline entry, else the stored date."""
    date = ""
    if memory.moment is not None:
        for entry in memory.moment.timeline:
            found = _DATE.search(entry)
            if found:
                date = found.group(1)
                break
    stored = memory.fact.stored if memory.fact is not None and hasattr(memory.fact, "stored") \
        else memory.stored
    return (date or stored or memory.stored or "9999", memory.path)


# ------------------------------------------------------------------ materialise


def _materialise(index: Index, unit: _Unit, settings: Any,
                 project_root: Path | str | None) -> RecalledMemory:
    from dualtrace.memfs import formats

    fact_doc = next((d for d in unit.docs if d.kind == "fact"), None)
    moment_doc = next((d for d in unit.docs if d.kind == "moment"), None)
    bullet_doc = next((d for d in unit.docs if d.kind == "bullet"), None)
    moment = _moment(formats, moment_doc.data) if moment_doc else None
    fact: Any = None
    bullet = None
    if fact_doc is not None:
        fact = _fact(formats, fact_doc.data)
        path, kind, conf = fact.path, fact.type, fact.confidence
        stored = fact.updated or fact.stored
    elif bullet_doc is not None:
        data = bullet_doc.data
        fact = formats.SystemFile(path=data["path"], description=data["description"])
        bullet = data["bullet"]
        path, kind, conf, stored = data["path"], bullet_doc.type, "MEDIUM", ""
    else:
        assert moment is not None and moment_doc is not None
        linked = moment.linked_fact
        if linked.startswith("system/"):
            fact = formats.SystemFile(path=linked, description="")
        path, kind, conf = moment.path, moment_doc.type, moment.confidence
        stored = moment.updated or moment.stored
    stale = _staleness(stored, [fact, moment], settings, project_root)
    return RecalledMemory(path=path, type=kind, confidence=conf, stored=stored,
                          score=unit.coverage, fact=fact, moment=moment, bullet=bullet,
                          superseded_by=_superseded_by(unit), stale=stale)


def _fact(formats: Any, data: dict[str, Any]) -> Any:
    return formats.Fact(
        path=data["path"], type=data["type"], description=data["description"],
        body=data["body"], confidence=data["confidence"], stored=data["stored"],
        evidence_score=data.get("evidence_score"), linked_scene=data.get("linked_scene"),
        related=tuple(data.get("related") or ()), tier=data.get("tier"),
        updated=data.get("updated"), status=data.get("status"),
        sessions=tuple(data.get("sessions") or ()), supersedes=data.get("supersedes"),
        superseded_by=data.get("superseded_by"),
    )


def _moment(formats: Any, data: dict[str, Any]) -> Any:
    return formats.Moment(
        path=data["path"], anchor=data["anchor"], description=data["description"],
        linked_fact=data["linked_fact"], narrative=data["narrative"],
        timeline=tuple(data.get("timeline") or ()), prior=data.get("prior", ""),
        after=data.get("after", ""), confidence=data["confidence"], stored=data["stored"],
        updated=data.get("updated"),
    )


def _staleness(stored: str, records: list[Any], settings: Any,
               project_root: Path | str | None) -> str | None:
    """The PROTOCOL.md 10 staleness note, or None.

    Stale when the memory is older than ``settings.stale_days``, or when a project
    file it names was modified after the day it was stored (file mtime: no git
    process on the recall path).
    """
    try:
        day = _dt.date.fromisoformat(stored[:10])
    except ValueError:
        return None
    note = STALE_NOTE.format(date=day.isoformat())
    if (_dt.date.today() - day).days > int(getattr(settings, "stale_days", 180)):
        return note
    if project_root is None:
        return None
    base = Path(project_root)
    end_of_day = _dt.datetime.combine(day + _dt.timedelta(days=1), _dt.time()).timestamp()
    for record in records:
        if record is None:
            continue
        text = " ".join(str(getattr(record, k, "")) for k in
                        ("body", "description", "narrative", "prior", "after"))
        for rel in set(_FILE_REF.findall(text)):
            try:
                if os.stat(base / rel).st_mtime > end_of_day:
                    return note
            except (OSError, ValueError):
                continue
    return None
