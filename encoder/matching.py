"""Subject matching between a proposed memory and stored ones (no model, no index).

Used by the validator's duplicate guard ("the same subject under another anchor")
and as the fallback search for backends. Token overlap on anchor + description,
with stopwords removed and a light suffix stemmer, is deliberately conservative:
a false merge loses a memory's identity, a missed merge only costs a duplicate
the next encode can still catch.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable

from dualtrace import words

# English function words (dualtrace.words) plus words that name no subject here.
NO_SUBJECT = frozenset({"done", "new", "old", "two"})
STOPWORDS = words.STOPWORDS | NO_SUBJECT


def stem(word: str) -> str:
    for suffix in ("ing", "ed", "es", "s"):
        if len(word) > len(suffix) + 3 and word.endswith(suffix):
            return word[: -len(suffix)]
    return word


def tokens(text: str) -> set[str]:
    return {stem(w) for w in words.content_words(text, STOPWORDS)}


_NAMED = re.compile(r"\b(?=[a-z]*\d)(?=\d*[a-z])[a-z0-9]+\b")
# a number with a unit or plural is a quantity, not a name: 401s, 500ms, 2gb, 3x, 4th
_QUANTITY = re.compile(r"\d+(?:s|ms|us|ns|px|em|kb|mb|gb|tb|k|m|x|th|st|nd|rd|h|d|w|y)")


# A work item named after its tracker's word ("bead `spotter-fum`", "issue #12", "ticket
# web-7"), and a tracker key (PROJ-123): the id is the item's name, whatever its letters.
_WORK_ITEM = re.compile(r"\b(?:bead|issue|ticket|task|story|epic|bug|card|pr|pull request)\s+[`'\"(]?"
                        r"(#\d+|[a-z][a-z0-9]*(?:[-.][a-z0-9]+)+|[a-z]+\d[a-z0-9]*)\b", re.I)
_TRACKER_KEY = re.compile(r"\b[A-Z][A-Z0-9]{1,9}-\d+\b")
# a compound name before the kind of thing it names: "the purge-webhook test", "the
# usage_exporter job" (sde-bench: four chats' "unrelated heads-up: the X test is flaky on
# CI" were one incident)
# first parts of hyphenated modifiers, not names ("the end-to-end tests", "pre-commit hooks")
_MODIFIER = frozenset({"pre", "post", "non", "re", "self", "co", "multi", "cross", "sub", "inter", "anti",
                       "de", "un", "over", "under", "out", "semi", "well", "all", "end", "high", "low",
                       "full", "half", "real", "long", "short", "third", "built", "front", "back", "server",
                       "client", "open", "read", "write", "single", "per"})
_NAMED_THING = re.compile(r"\b([a-z][a-z0-9]*(?:[-_][a-z0-9]+)+)\s+(?:tests?|suites?|services?|modules?|jobs?"
                          r"|workers?|flags?|endpoints?|queues?|tables?|scripts?|hooks?|packages?|pipelines?"
                          r"|buckets?|topics?|clusters?|crates?|bots?)\b", re.I)


def names(text: str) -> set[str]:
    """Tokens that name one thing: letters mixed with digits (kafka40, agent4, a0y, s3),
    work-item ids (bead spotter-fum, issue #12), tracker keys (PROJ-123) and compound names
    of a test, job, service ... (the purge-webhook test)."""
    found = {t for t in _NAMED.findall(text.lower()) if not _QUANTITY.fullmatch(t)}
    found.update(m.lower() for m in _WORK_ITEM.findall(text))
    found.update(m.lower() for m in _TRACKER_KEY.findall(text))
    found.update(m.lower() for m in _NAMED_THING.findall(text)
                 if re.split(r"[-_]", m.lower(), maxsplit=1)[0] not in _MODIFIER)
    return found


def distinct_subjects(a: str, b: str) -> bool:
    """True when each names something the other does not: "use kafka40 for the agent4 bus"
    and "use sqs23 for the agent7 bus" share their wording, not their subject."""
    na, nb = names(a), names(b)
    # each names something the other does not (a one-sided name may be a refinement:
    # "cap the retries" then "cap the retries via retry_v2")
    return bool(na - nb) and bool(nb - na)


def same_word(a: str, b: str) -> bool:
    """Two stemmed tokens are one word's forms: equal, one the other's start ("cach" /
    "cache"), or sharing their first six letters ("migrat" in migration / migrating);
    "service" and "server" stay two words."""
    if a == b:
        return True
    short, long_ = sorted((a, b), key=len)
    return (len(short) >= 4 and long_.startswith(short)) or (len(short) >= 6 and a[:6] == b[:6])


# ------------------------------------------------------------------ a choice's scope

# What a decision applies to: the phrase after "for" / "in" / "across" / "within" in its
# statement (not "on": "work on X", "build on X" name the work, not where a choice holds) ("PostgreSQL for the billing service", "Redis for caching", "SQLite in
# the tests"), read before its reason ("because ...") and never an idiom ("for now", "in
# order to", "on second thought") or a goal ("for performance").
_SCOPE = re.compile(
    r"\b(?:for|in|across|within)\s+(?:(?:the|our|all|every|each|this|its|a|an|both|new)\s+)*"
    r"([a-z0-9][\w.+#/-]*(?:\s+(?!(?:too|as|also|because|since|so|but|and|or|instead|rather|with|to|from"
    r"|over|by|for|in|on|until|when|where|which|that|is|are|was|were|will|we|it|now)\b)[a-z0-9][\w.+#/-]*){0,3})", re.I)
_NOT_SCOPE = frozenset({
    "now", "time", "order", "favor", "favour", "place", "example", "general", "end", "second", "later",
    "future", "purpose", "sure", "instance", "case", "fact", "short", "addition", "particular", "practice",
    "theory", "turn", "advance", "part", "detail", "reference", "free", "good", "real", "today", "while",
    "performance", "speed", "consistency", "simplicity", "safety", "security", "reliability", "clarity",
    "readability", "compatibility", "correctness", "convenience", "cost", "sanity", "quarter", "sprint",
    "week", "month", "year", "release", "mind", "thought", "top", "front", "line", "sight", "progress"})
_REASON_CUT = re.compile(r"\b(?:because|since|so that|due to|given that|as it|as they|the reason)\b|[:;(\u2014]| -- ", re.I)
_EXTENDS = re.compile(r"\b(?:too|as well|also)\b", re.I)


def scope_of(text: str) -> set[str]:
    """The tokens of what a decision applies to (see above); empty when it names none."""
    said = _REASON_CUT.split(text, maxsplit=1)[0]
    for m in _SCOPE.finditer(said):
        words = [w.strip(".-/") for w in m.group(1).lower().split()]
        words = [w for w in words if w and w not in STOPWORDS]
        if words and words[0] not in _NOT_SCOPE:
            return {stem(w) for w in words if w not in _NOT_SCOPE}
    return set()


def distinct_scopes(a: str, b: str) -> bool:
    """True when two decisions apply one choice to different things: "PostgreSQL for the
    billing service" and "PostgreSQL for the analytics warehouse too" (scopes that share
    no word), or a statement that extends a choice ("... for analytics too", "as well")
    beside one that names no scope. The same scope ("PostgreSQL for billing", "sticking
    with PostgreSQL for billing: ...") is one subject."""
    sa, sb = scope_of(a), scope_of(b)
    if sa and sb:
        return not any(same_word(x, y) for x in sa for y in sb)
    extends_a = bool(sa) and bool(_EXTENDS.search(_REASON_CUT.split(a, maxsplit=1)[0]))
    extends_b = bool(sb) and bool(_EXTENDS.search(_REASON_CUT.split(b, maxsplit=1)[0]))
    return (extends_a and not sb) or (extends_b and not sa)


def shared_choice(a: str, b: str) -> bool:
    """Two decisions of :func:`distinct_scopes` that name the same choice (a word of
    theirs outside both scopes: "postgresql"): related memories, not one."""
    sa, sb = scope_of(a), scope_of(b)
    ta = {t for t in tokens(_REASON_CUT.split(a, maxsplit=1)[0]) if t not in sa and len(t) > 2}
    tb = {t for t in tokens(_REASON_CUT.split(b, maxsplit=1)[0]) if t not in sb and len(t) > 2}
    return bool((ta & tb) - _CHOICE_VERBS)


def same_scope(a: str, b: str) -> bool:
    """Two decisions that make the same choice for the same thing, one scope within the
    other ("PostgreSQL for billing" / "sticking with PostgreSQL for the billing service:
    ..."): one subject, whatever else their wording says (a new reason)."""
    sa, sb = scope_of(a), scope_of(b)
    if not sa or not sb:
        return False
    small, big = sorted((sa, sb), key=len)
    return (all(any(same_word(x, y) for y in big) for x in small) and shared_choice(a, b)
            and not distinct_subjects(a, b))


_CHOICE_VERBS = frozenset({"decid", "decide", "chose", "choose", "go", "going", "adopt", "switch", "move",
                           "keep", "stick", "stay", "pick", "settl", "opted", "want", "run", "store",
                           "standardiz", "standardis", "we'll", "let's", "lets", "will"})


def similarity(a: str, b: str) -> float:
    """Overlap coefficient-ish score in [0, 1] between two short subject strings."""
    ta, tb = tokens(a), tokens(b)
    if not ta or not tb:
        return 0.0
    inter = len(ta & tb)
    return inter / min(len(ta), len(tb)) * 0.5 + inter / len(ta | tb) * 0.5


def own_words(mine: set[str], theirs: set[str], spread: Counter[str]) -> set[str]:
    """The words ``mine`` shares with ``theirs`` and with no other memory (``spread``: in how
    many of the memories compared, ``theirs`` included, each word occurs)."""
    return {t for t in mine & theirs if spread[t] <= 1}


def spread_of(texts: Iterable[set[str]]) -> Counter[str]:
    return Counter(t for words_ in texts for t in words_)


def best_match(subject: str, candidates: Iterable[tuple[str, str]], threshold: float) -> str | None:
    """The key of the candidate (key, subject text) most similar to ``subject`` above threshold.

    Among several candidates, one is only the same subject when it shares a word with
    ``subject`` that no other candidate has: words every memory of a project shares (its
    name, "bead", "epic", "work on") say nothing about which one is meant."""
    listed = [(key, text, tokens(text)) for key, text in candidates]
    spread = spread_of(theirs for _, _, theirs in listed)
    mine = tokens(subject)
    best_key, best_score = None, threshold
    for key, text, theirs in listed:
        if distinct_subjects(subject, text):
            continue
        if len(listed) > 1 and not own_words(mine, theirs, spread):
            continue
        score = similarity(subject, text)
        if score >= best_score:
            best_key, best_score = key, score
    return best_key


# ------------------------------------------------------------------ failures

# What an incident's failure is: the test that failed, the error type, the checker's rule.
_SIGNATURE_LINE = re.compile(r"^Failure signature:\s*(.+)$", re.M)
# (a test module's or file's name, "test_cart.py", "tests.test_cart.CartTest", is no test:
# two tests of one file are two failures)
_TEST_ID = re.compile(r"\b(test_[a-z0-9_]{3,}|Test[A-Z]\w{2,})\b(?!\.\w)")
_ERROR_NAME = re.compile(r"\b([A-Z]\w*(?:Error|Exception|Failure))\b")
_RULE_ID = re.compile(r"\b(report[A-Z]\w{3,})\b|\b(?:error|warning)\[([\w-]{3,})\]"
                      r"|\b([A-Z]{1,3}\d{3,4})\b|\[([a-z]+(?:-[a-z]+){1,4})\]")
# error types that say only that *something* failed: never a failure's identity
GENERIC_ERRORS = frozenset({"AssertionError", "Error", "Exception", "RuntimeError", "Failure",
                             "TestFailure", "ExUnit.AssertionError"})


def failure_keys(text: str) -> tuple[str | None, set[str], set[str]]:
    """(the encoder's recorded signature, failing test ids, specific error types and
    checker rules) an incident's text names."""
    line = _SIGNATURE_LINE.search(text)
    tests = {m.lower() for m in _TEST_ID.findall(text)}
    errors = {m for m in _ERROR_NAME.findall(text) if m not in GENERIC_ERRORS}
    for groups in _RULE_ID.findall(text):
        errors.update(g.lower() for g in groups if g)
    return (line.group(1).strip() if line else None), tests, errors


def distinct_failures(a: str, b: str) -> bool:
    """True when two incidents' texts name different failures: disjoint failing tests;
    else recorded signatures that mostly differ; else (no test named) disjoint specific
    errors and rules. A failure that names nothing can never be told apart (False)."""
    sig_a, tests_a, errors_a = failure_keys(a)
    sig_b, tests_b, errors_b = failure_keys(b)
    if tests_a and tests_b:
        return not tests_a & tests_b
    if sig_a and sig_b:
        ta, tb = tokens(sig_a), tokens(sig_b)
        if ta and tb:
            # the same check's output gives the same signature; a shared module or
            # function name alone is not one failure ("sync_session_file/2 is idempotent"
            # and "sync_session_file/2 keeps the order" are two tests)
            return len(ta & tb) / min(len(ta), len(tb)) < 0.75
    if errors_a and errors_b and not (tests_a or tests_b):
        return not errors_a & errors_b
    return False


def same_failure(a: str, b: str) -> bool:
    """True when two incidents' texts name one failure: the same failing tests; else
    recorded signatures that mostly agree; else (no test named) the same specific errors
    and rules. Texts that name nothing are never the same by this test."""
    sig_a, tests_a, errors_a = failure_keys(a)
    sig_b, tests_b, errors_b = failure_keys(b)
    if tests_a or tests_b:
        return tests_a == tests_b
    if sig_a and sig_b:
        ta, tb = tokens(sig_a), tokens(sig_b)
        return bool(ta and tb) and len(ta & tb) / min(len(ta), len(tb)) >= 0.75
    return bool(errors_a) and errors_a == errors_b
