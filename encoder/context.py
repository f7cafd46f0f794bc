"""The index of existing memories a backend sees: relevant ones, not the whole store."""

from __future__ import annotations

from collections.abc import Iterable

from dualtrace.encoder.backends import MemoryBrief
from dualtrace.encoder.matching import tokens
from dualtrace.memfs.formats import Fact


def brief(fact: Fact) -> MemoryBrief:
    return MemoryBrief(
        path=fact.path,
        anchor=fact.anchor,
        type=fact.type,
        description=fact.description,
        confidence=fact.confidence,
        updated=fact.updated or fact.stored,
        tier=fact.tier,
    )


def relevant_memories(facts: Iterable[Fact], text: str, limit: int = 25) -> tuple[MemoryBrief, ...]:
    """Of the stored ``facts``, those sharing the most subject words with the session, best
    first. The caller passes the plan's facts (``PlanBuilder.facts()``): one read of the
    search index per encode serves both."""
    wanted = tokens(text)
    scored = []
    for fact in facts:
        theirs = tokens(f"{fact.anchor.replace('-', ' ')} {fact.description}")
        if not theirs:
            continue
        overlap = len(wanted & theirs) / len(theirs)
        if overlap > 0:
            scored.append((overlap, fact.path, fact))
    scored.sort(key=lambda item: (-item[0], item[1]))
    return tuple(brief(fact) for _score, _path, fact in scored[:limit])
