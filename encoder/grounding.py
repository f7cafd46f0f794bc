"""Grounding: a moment may assert only what the session contains.

``check_moment`` rejects a proposed moment whose specifics (paths, calls, error names,
numbers, SHAs, dates) are not in the redacted session text, that names no concrete
artifact, or that lacks a temporal marker (docs/PROTOCOL.md §5).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from dualtrace.encoder.operations import MomentDraft, Rejected


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
    # Names dualtrace itself gives the session (its short id, which moments cite as
    # "session 3fa2b1c9"): a hash of a long id looks like a commit and is in no transcript.
    names: frozenset[str] = frozenset()

    def has(self, token: str) -> bool:
        token = token.strip().lower()
        return bool(token) and (token in self._haystack or token == self.date.lower()
                                or token in self.names)

    @property
    def _haystack(self) -> str:
        cached = self.__dict__.get("_hay")
        if cached is None:
            cached = self.text.lower() + "\n" + "\n".join(a.lower() for a in self.artifacts)
            object.__setattr__(self, "_hay", cached)
        return cached


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


def check_moment(draft: MomentDraft, anchor: str, grounding: Grounding) -> None:
    """Reject a moment with invented specifics, no artifact, or no temporal marker."""
    if not draft.narrative.strip():
        raise Rejected("moment narrative is empty")
    if not draft.marker.strip():
        raise Rejected("moment needs a temporal marker for its Timeline (commit, PR, release, or the session date)")
    if not draft.what.strip():
        raise Rejected("moment Timeline needs what happened")
    text = "\n".join((draft.narrative, draft.what, draft.marker, draft.prior, draft.after))
    text = text.replace(anchor, " ")
    for name in grounding.names:  # "session 7970beb2": no number 7970 of the session's
        text = re.sub(re.escape(name), " ", text, flags=re.I)
    invented = sorted(s for s in specifics(text) if not grounding.has(s))
    if invented:
        raise Rejected(
            "moment mentions specifics that are not in the session (no invented specifics): "
            + ", ".join(invented[:8])
        )
    lowered = draft.narrative.lower() + " " + draft.what.lower()
    # Whole sentences extracted as "error messages" would make any quote count:
    # only short, artifact-sized strings qualify.
    artifacts = [a for a in grounding.artifacts
                 if 3 <= len(a) <= 120 and len(a.split()) <= 8 and a.lower() in lowered]
    grounded_specifics = [s for s in specifics(draft.narrative + " " + draft.what)
                          if not s.replace(",", "").replace(".", "").isdigit()]
    if not artifacts and not grounded_specifics:
        raise Rejected(
            "moment names no concrete artifact from the session (a file path, function, "
            "error message, command or commit)"
        )


SUMMARY_MAX = 600


def check_summary(text: str, grounding: Grounding) -> str:
    """A model's summary paragraph for the session record, as it will be written.

    Validated like a moment: every specific it asserts (path, call, error name, number,
    SHA, date) must be in the session. It is one plain paragraph of at most
    ``SUMMARY_MAX`` characters (it sits in the record above the session's own words,
    marked as the model's, and must not look like a heading or a quote of the session).
    """
    paragraph = " ".join(text.split())
    if not paragraph:
        raise Rejected("session summary is empty")
    if len(paragraph) > SUMMARY_MAX:
        raise Rejected(f"session summary is {len(paragraph)} characters; at most {SUMMARY_MAX}")
    if paragraph[:1] in "#>|-*`" or "\n" in text.strip() and re.search(r"^\s*#", text, re.M):
        raise Rejected("session summary must be one plain paragraph (no headings, quotes or "
                       "lists)")
    invented = sorted(s for s in specifics(paragraph) if not grounding.has(s))
    if invented:
        raise Rejected("session summary mentions specifics that are not in the session (no "
                       "invented specifics): " + ", ".join(invented[:8]))
    return paragraph


def timeline_line(anchor: str, what: str, marker: str) -> str:
    what = " ".join(what.split()).rstrip(".")
    marker = " ".join(marker.split()).strip("[]")
    return f"{anchor} -> {what} [{marker}]"
