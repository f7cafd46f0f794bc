"""Subject matching between a proposed memory and stored ones (no model, no index).

Used by the validator's duplicate guard ("the same subject under another anchor")
and as the fallback search for backends. Token overlap on anchor + description,
with stopwords removed and a light suffix stemmer, is deliberately conservative:
a false merge loses a memory's identity, a missed merge only costs a duplicate
the next encode can still catch.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

STOPWORDS = frozenset(
    """a an the and or but of to in on at for with from by is are was were be been being it its
    this that these those we our you your they their i me my he she as not no so than then
    there here into over under about after before again also just only very can could should
    would will shall may might do does did done have has had having use used using via per
    when what which who whom why how all any some more most other such same each both
    now new old get got make made one two""".split()
)
_WORD = re.compile(r"[a-z0-9]+")


def stem(word: str) -> str:
    for suffix in ("ing", "ed", "es", "s"):
        if len(word) > len(suffix) + 3 and word.endswith(suffix):
            return word[: -len(suffix)]
    return word


def tokens(text: str) -> set[str]:
    return {stem(w) for w in _WORD.findall(text.lower()) if w not in STOPWORDS and len(w) > 1}


_NAMED = re.compile(r"\b(?=[a-z]*\d)(?=\d*[a-z])[a-z0-9]+\b")
# a number with a unit or plural is a quantity, not a name: 401s, 500ms, 2gb, 3x, 4th
_QUANTITY = re.compile(r"\d+(?:s|ms|us|ns|px|em|kb|mb|gb|tb|k|m|x|th|st|nd|rd|h|d|w|y)")


def names(text: str) -> set[str]:
    """Tokens that name one thing: letters mixed with digits (kafka40, agent4, a0y, s3)."""
    return {t for t in _NAMED.findall(text.lower()) if not _QUANTITY.fullmatch(t)}


def distinct_subjects(a: str, b: str) -> bool:
    """True when each names something the other does not: "use kafka40 for the agent4 bus"
    and "use sqs23 for the agent7 bus" share their wording, not their subject."""
    na, nb = names(a), names(b)
    # each names something the other does not (a one-sided name may be a refinement:
    # "cap the retries" then "cap the retries via retry_v2")
    return bool(na - nb) and bool(nb - na)


def similarity(a: str, b: str) -> float:
    """Overlap coefficient-ish score in [0, 1] between two short subject strings."""
    ta, tb = tokens(a), tokens(b)
    if not ta or not tb:
        return 0.0
    inter = len(ta & tb)
    return inter / min(len(ta), len(tb)) * 0.5 + inter / len(ta | tb) * 0.5


def best_match(subject: str, candidates: Iterable[tuple[str, str]], threshold: float) -> str | None:
    """The key of the candidate (key, subject text) most similar to ``subject`` above threshold."""
    best_key, best_score = None, threshold
    for key, text in candidates:
        if distinct_subjects(subject, text):
            continue
        score = similarity(subject, text)
        if score >= best_score:
            best_key, best_score = key, score
    return best_key
