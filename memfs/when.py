"""When a question asks about: the days it names ("in July", "on March 3", "last week",
"2025-07-16", "three days ago", "the first week of July", "between September and October")
and the "first / last / latest / most recent / the time before last" it asks for.

Recall answers such a question from the session records by date, so the words that say
*when* are not evidence of *what*: they are taken out of the topic (``Span.words``).

Calendar names without a year ("in July", "on March 3") mean the latest such month or day
that is not after today and holds a recorded session, else the latest one not after today
(which then holds none, and recall says so). Relative names ("yesterday", "last week", "the
past 10 days") are counted back from today: a range with no session is reported empty, it
is never moved onto older sessions.
"""

from __future__ import annotations

import datetime as _dt
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

# English names, not the locale's (calendar.month_name follows LC_TIME); no calendar import
# on the prompt hook's path.
MONTHS = {name: n for n, name in enumerate(
    "january february march april may june july august september october november "
    "december".split(), 1)}
# Abbreviations only beside a day number or a year ("Mar 3", "Sept 2025"): alone, "mar" and
# "jan" are other words.
SHORT_MONTHS = {name[:3]: n for name, n in MONTHS.items()} | {"sept": 9}
# Month names that are also common words: alone they need a preposition before them
# ("in May", "during March"), a day or a year ("May 3", "March 2025").
AMBIGUOUS_MONTHS = frozenset({"may", "march"})
WEEKDAYS = {name: n for n, name in enumerate(
    "monday tuesday wednesday thursday friday saturday sunday".split())}
NUMBERS = {"a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6,
           "seven": 7, "eight": 8, "nine": 9, "ten": 10, "couple": 2, "couple of": 2,
           "few": 3}
FUZZY = frozenset({"few", "couple", "couple of"})

_MONTH = "|".join(sorted(MONTHS, key=len, reverse=True))
_ANY_MONTH = "|".join(sorted({*MONTHS, *SHORT_MONTHS}, key=len, reverse=True))
_DAY = r"(\d{1,2})(?:st|nd|rd|th)?"
_YEAR = r"((?:19|20)\d{2})"
_COUNT = r"(\d+|an?|one|two|three|four|five|six|seven|eight|nine|ten|few|couple(?: of)?)"
_UNIT = r"(day|week|month|year)s?"
_PREP = r"(?:in|during|of|since|from|until|till|through|throughout|over|for|back in)"

_ORDINAL = r"(first|1st|second|2nd|third|3rd|fourth|4th|last|final)"
_WEEK_OF = {"first": 1, "1st": 1, "second": 2, "2nd": 2, "third": 3, "3rd": 3, "fourth": 4,
            "4th": 4}
_EDGE = r"(?:early\s+|late\s+|mid-?)?"

_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = tuple(
    (kind, re.compile(p, re.I)) for kind, p in (
        # Before "last week" and the bare month: "the first week of July", "the last week
        # in June 2025" are seven days of that month.
        ("week_of", rf"\b(?:the\s+)?{_ORDINAL}\s+week\s+(?:of|in)\s+({_ANY_MONTH})\b\.?"
                    rf"(?:,?\s+{_YEAR}\b)?"),
        # "between 2025-07-10 and 2025-07-15", "from July 10 to July 15", "from July 10
        # to 15": both days included (before the single days they are made of).
        ("iso_day_range", r"\b(?:between|from)\s+(\d{4})-(\d{2})-(\d{2})\s+(?:and|to|until|"
                          r"till|through|-)\s+(\d{4})-(\d{2})-(\d{2})\b"),
        ("day_range", rf"\b(?:between|from)\s+({_ANY_MONTH})\.?\s+{_DAY}\s+(?:and|to|until|till|"
                      rf"through|-)\s+(?:({_ANY_MONTH})\.?\s+)?{_DAY}\b(?:,?\s+{_YEAR}\b)?"),
        # "the week of July 14": the Monday-to-Sunday week holding that day.
        ("week_of_day", rf"\b(?:the\s+)?week\s+of\s+(?:the\s+)?({_ANY_MONTH})\.?\s+{_DAY}\b"
                        rf"(?:,?\s+{_YEAR}\b)?"),
        # "between September and October", "from March to May 2025": both months whole.
        ("month_range", rf"\b(?:between|from)\s+{_EDGE}({_ANY_MONTH})\.?(?:,?\s+{_YEAR})?\s+"
                        rf"(?:and|to|until|till|through|-)\s+{_EDGE}({_ANY_MONTH})\b\.?"
                        rf"(?:,?\s+{_YEAR}\b)?"),
        ("iso_day", r"\b(\d{4})-(\d{2})-(\d{2})\b"),
        ("iso_month", r"\b(\d{4})-(\d{2})\b(?!-\d)"),
        ("month_day", rf"\b(?:on\s+)?({_ANY_MONTH})\.?\s+{_DAY}\b(?:,?\s+{_YEAR}\b)?"),
        ("day_month", rf"\b(?:on\s+)?(?:the\s+)?{_DAY}\s+(?:of\s+)?({_ANY_MONTH})\b\.?"
                      rf"(?:,?\s+{_YEAR}\b)?"),
        ("month_year", rf"\b(?:{_PREP}\s+)?(?:early\s+|late\s+|mid-?)?({_ANY_MONTH})\.?,?\s+"
                       rf"{_YEAR}\b"),
        ("month", rf"\b({_PREP}\s+)?(?:early\s+|late\s+|mid-?)?({_MONTH})\b"),
        ("year", rf"\b(?:in|during|since|through|throughout)\s+{_YEAR}\b"),
        ("today", r"\b(?:earlier\s+)?today\b|\bthis (?:morning|afternoon|evening)\b"),
        ("yesterday", r"\b(?:the day before yesterday|yesterday)\b"),
        ("this", r"\bthis (week|month|year)\b"),
        # "the past week", "in the last 10 days": a rolling range up to today; before
        # "last week", the calendar week before this one.
        ("past", rf"\b(?:(?:the\s+)?past|the\s+last)\s+(?:{_COUNT}\s+)?{_UNIT}\b"),
        ("previous", r"\b(?:last|previous) (week|month|year)\b"),
        ("ago", rf"\b{_COUNT}\s+{_UNIT}\s+ago\b"),
        # A weekday needs "on" / "last" before it: "the Monday standup" names no day.
        ("weekday", r"\b(?:on|last|this past)\s+(monday|tuesday|wednesday|thursday|"
                    r"friday|saturday|sunday)\b"),
    ))

_WORD = re.compile(r"[A-Za-z0-9]+")


@dataclass(frozen=True)
class Span:
    """The days a question asks about, both ends included, and the words that said so."""

    start: _dt.date
    end: _dt.date
    said: str  # the question's words that name the days ("in July", "last week")

    @property
    def words(self) -> frozenset[str]:
        """The lowercase words of ``said``: they say when, not what."""
        return frozenset(w.lower() for w in _WORD.findall(self.said))

    def holds(self, day: str) -> bool:
        """Whether the ISO day ``day`` ("2025-07-16", a longer timestamp too) is inside."""
        return self.start.isoformat() <= day[:10] <= self.end.isoformat()

    def describe(self) -> str:
        if self.start == _EARLIEST:
            return f"up to {self.end.isoformat()}"
        if self.start == self.end:
            return f"on {self.start.isoformat()}"
        return f"from {self.start.isoformat()} to {self.end.isoformat()}"


def _count(word: str | None) -> int:
    if not word:
        return 1
    word = word.lower()
    return int(word) if word.isdigit() else NUMBERS.get(word, 1)


def _month_end(year: int, month: int) -> _dt.date:
    after = _dt.date(year + month // 12, month % 12 + 1, 1)
    return after - _dt.timedelta(days=1)


def _minus_months(day: _dt.date, months: int) -> _dt.date:
    total = day.year * 12 + day.month - 1 - months
    year, month = divmod(total, 12)
    return _dt.date(year, month + 1, min(day.day, _month_end(year, month + 1).day))


def _latest(candidates: list[tuple[_dt.date, _dt.date]], days: Callable[[], Sequence[str]],
            today: _dt.date) -> tuple[_dt.date, _dt.date] | None:
    """Of yearless calendar spans (newest first), the first holding a recorded day, else
    the newest one that has begun by ``today``."""
    begun = [(a, b) for a, b in candidates if a <= today]
    recorded = days()
    for a, b in begun:
        lo, hi = a.isoformat(), b.isoformat()
        if any(lo <= d[:10] <= hi for d in recorded):
            return a, b
    return begun[0] if begun else None


def _valid(year: int, month: int, day: int) -> _dt.date | None:
    try:
        return _dt.date(year, month, day)
    except ValueError:
        return None


def _month_of(word: str) -> int:
    word = word.lower().rstrip(".")
    return MONTHS.get(word) or SHORT_MONTHS.get(word, 0)


def span_of(question: str, today: _dt.date,
            days: Callable[[], Sequence[str]] = tuple) -> Span | None:
    """The days ``question`` asks about, or None when it names none.

    ``days``: returns the ISO days that hold a recorded session (read only for a yearless
    name: it resolves "in July" to the latest July with sessions). The first pattern that
    matches decides (most specific first).
    """
    years = range(today.year, today.year - 30, -1)
    loaded: list[Sequence[str]] = []

    def recorded() -> Sequence[str]:
        if not loaded:
            loaded.append(days())
        return loaded[0]

    for kind, pattern in _PATTERNS:
        for m in pattern.finditer(question):
            found = _span(kind, m, today, recorded, years)
            if found is not None:
                if kind in _POINTS:
                    found = _open_ended(question, m, found, today)
                return Span(found[0], found[1], m.group(0).strip())
    return None


# A named month, day or year after "since", "after", "before", "until" is one end of the
# span, not the span ("what broke since May?" asks May to today). Review 14 G1.
_POINTS = frozenset({"iso_day", "iso_month", "month_day", "day_month", "month_year", "month", "year"})
_OPEN_WORD = re.compile(r"\b(since|from|after|before|until|till|prior to|up to)\s+(?:the\s+)?$", re.I)
_EARLIEST = _dt.date(1970, 1, 1)


def _open_ended(question: str, m: re.Match[str], found: tuple[_dt.date, _dt.date],
                today: _dt.date) -> tuple[_dt.date, _dt.date]:
    said = m.group(0).strip()
    first = said.split()[0].lower() if said else ""
    word = first if first in ("since", "from", "until", "till") else None
    if word is None:
        before = _OPEN_WORD.search(question[:m.start()] + " ")
        word = before.group(1).lower() if before else None
    start, end = found
    if word in ("since", "from"):
        return start, max(today, end)
    if word == "after":
        return end + _dt.timedelta(days=1), max(today, end + _dt.timedelta(days=1))
    if word in ("before", "prior to"):
        return _EARLIEST, start - _dt.timedelta(days=1)
    if word in ("until", "till", "up to"):
        return _EARLIEST, end
    return found


def _span(kind: str, m: re.Match[str], today: _dt.date, days: Callable[[], Sequence[str]],
          years: range) -> tuple[_dt.date, _dt.date] | None:
    g = m.groups()
    if kind == "iso_day_range":
        a = _valid(int(g[0]), int(g[1]), int(g[2]))
        b = _valid(int(g[3]), int(g[4]), int(g[5]))
        return (min(a, b), max(a, b)) if a and b else None
    if kind == "day_range":
        m1, d1 = _month_of(g[0]), int(g[1])
        m2, d2 = (_month_of(g[2]) if g[2] else m1), int(g[3])
        if not (m1 and m2):
            return None

        def days_of(year: int) -> tuple[_dt.date, _dt.date] | None:
            a = _valid(year, m1, d1)
            b = _valid(year + (1 if (m2, d2) < (m1, d1) else 0), m2, d2)
            return (a, b) if a and b else None

        if g[4]:  # the year stands after the end: "from December 28 to January 3, 2025"
            return days_of(int(g[4]) - (1 if (m2, d2) < (m1, d1) else 0))
        spans = [x for x in (days_of(y) for y in years) if x]
        return _latest(spans, days, today)
    if kind == "week_of_day":
        month = _month_of(g[0])

        def week_of(year: int) -> tuple[_dt.date, _dt.date] | None:
            day = _valid(year, month, int(g[1])) if month else None
            if day is None:
                return None
            monday = day - _dt.timedelta(days=day.weekday())
            return monday, monday + _dt.timedelta(days=6)

        if g[2]:
            return week_of(int(g[2]))
        weeks = [x for x in (week_of(y) for y in years) if x]
        return _latest(weeks, days, today)
    if kind == "week_of":
        month, nth = _month_of(g[1]), g[0].lower()

        def week(year: int) -> tuple[_dt.date, _dt.date]:
            if nth in ("last", "final"):
                end = _month_end(year, month)
                return end - _dt.timedelta(days=6), end
            first = _dt.date(year, month, 7 * (_WEEK_OF[nth] - 1) + 1)
            return first, first + _dt.timedelta(days=6)

        if not month:
            return None
        if g[2]:
            return week(int(g[2]))
        return _latest([week(y) for y in years], days, today)
    if kind == "month_range":
        m1, y1, m2, y2 = _month_of(g[0]), g[1], _month_of(g[2]), g[3]
        if not (m1 and m2):
            return None
        wraps = m2 < m1  # "from November to February": into the next year

        def months(year: int) -> tuple[_dt.date, _dt.date]:
            end_year = year + 1 if wraps else year
            return _dt.date(year, m1, 1), _month_end(end_year, m2)

        if y1:
            return months(int(y1))
        if y2:
            return months(int(y2) - 1 if wraps else int(y2))
        return _latest([months(y) for y in years], days, today)
    if kind == "iso_day":
        day = _valid(int(g[0]), int(g[1]), int(g[2]))
        return (day, day) if day else None
    if kind == "iso_month":
        if not 1 <= int(g[1]) <= 12:
            return None
        return _dt.date(int(g[0]), int(g[1]), 1), _month_end(int(g[0]), int(g[1]))
    if kind in ("month_day", "day_month"):
        word, num = (g[0], g[1]) if kind == "month_day" else (g[1], g[0])
        month, n = _month_of(word), int(num)
        if not month or not 1 <= n <= 31:
            return None
        if g[2]:
            day = _valid(int(g[2]), month, n)
            return (day, day) if day else None
        spans = [(d, d) for d in (_valid(y, month, n) for y in years) if d]
        return _latest(spans, days, today)
    if kind == "month_year":
        month = _month_of(g[0])
        if not month:
            return None
        return _dt.date(int(g[1]), month, 1), _month_end(int(g[1]), month)
    if kind == "month":
        prep, word = g[0], g[1].lower()
        if word in AMBIGUOUS_MONTHS and not prep:
            return None
        month = MONTHS[word]
        return _latest([(_dt.date(y, month, 1), _month_end(y, month)) for y in years],
                       days, today)
    if kind == "year":
        year = int(g[0])
        return _dt.date(year, 1, 1), _dt.date(year, 12, 31)
    if kind == "today":
        return today, today
    if kind == "yesterday":
        back = 2 if m.group(0).lower().startswith("the day before") else 1
        day = today - _dt.timedelta(days=back)
        return day, day
    if kind in ("this", "previous"):
        unit = g[0].lower()
        if unit == "week":
            monday = today - _dt.timedelta(days=today.weekday())
            if kind == "this":
                return monday, today
            return monday - _dt.timedelta(days=7), monday - _dt.timedelta(days=1)
        if unit == "month":
            first = today.replace(day=1)
            if kind == "this":
                return first, today
            prev = first - _dt.timedelta(days=1)
            return prev.replace(day=1), prev
        if kind == "this":
            return today.replace(month=1, day=1), today
        return _dt.date(today.year - 1, 1, 1), _dt.date(today.year - 1, 12, 31)
    if kind == "ago":
        n, unit = _count(g[0]), g[1].lower()
        if unit == "day" and g[0].lower() in FUZZY:
            # "a few days ago", "a couple of days ago": not one day.
            return today - _dt.timedelta(days=2 * n), today - _dt.timedelta(days=1)
        if unit == "day":
            day = today - _dt.timedelta(days=n)
            return day, day
        if unit == "week":
            monday = today - _dt.timedelta(days=today.weekday() + 7 * n)
            return monday, monday + _dt.timedelta(days=6)
        if unit == "month":
            first = _minus_months(today.replace(day=1), n)
            return first, _month_end(first.year, first.month)
        return _dt.date(today.year - n, 1, 1), _dt.date(today.year - n, 12, 31)
    if kind == "past":
        n, unit = _count(g[0]), g[1].lower()
        if unit == "day":
            start = today - _dt.timedelta(days=n - 1)
        elif unit == "week":
            start = today - _dt.timedelta(days=7 * n - 1)
        elif unit == "month":
            start = _minus_months(today, n) + _dt.timedelta(days=1)
        else:
            start = today.replace(year=today.year - n) + _dt.timedelta(days=1)
        return start, today
    if kind == "weekday":
        back = (today.weekday() - WEEKDAYS[g[0].lower()]) % 7 or 7
        day = today - _dt.timedelta(days=back)
        return day, day
    return None


# ------------------------------------------------------------------ first / last

_FIRST = re.compile(r"\b(first|originally|initially|earliest|to begin with|the first time)\b",
                    re.I)
# "last time", "did we last", "most recent", "latest", "last changed / touched / worked on":
# not "last week" (a range) nor "the last 3 days".
# The kinds of memory a "last ..." question names, and the sizes it may give them ("our last
# big decision"): one list for this pattern and recall's kind-by-date answer.
KIND_NOUNS = r"(?:incident|decision|bug|crash|failure|outage|learning|lesson|convention|rule|choice|fix)"
KIND_ADJECTIVES = ("big", "major", "important", "main", "key", "real", "serious")
_SIZE = r"(?:(?:" + "|".join(KIND_ADJECTIVES) + r")\s+)?"
_LAST = re.compile(r"\b(last time|did we last|have we last|"
                   r"last (?:session|update|change|touch|did|work)\w*|last \w+ed\b|"
                   # "what was the last incident / decision?": a kind of memory, not a range
                   r"last " + _SIZE + KIND_NOUNS + r"(?:s|es)?\b|"
                   r"last thing (?:we|i) (?:decided|agreed|fixed|learned|chose)\b|"
                   r"most recent(?:ly)?|latest|previous(?:ly)?|recently|lately)\b", re.I)
# "the last three sessions", "our first 2 sessions": how many to show.
_HOW_MANY = re.compile(rf"\b(last|first|latest|earliest|recent|previous)\s+{_COUNT}\s+"
                       r"(?:sessions|times|chats|conversations)\b", re.I)


# "the time before last", "the session before the last one", "the penultimate session":
# the newest session but one.
_BEFORE_LAST = re.compile(r"\b(?:(?:the\s+)?(?:time|session|chat|conversation|one)\s+before\s+"
                          r"(?:the\s+)?last(?:\s+(?:one|time|session))?|penultimate(?:\s+session)?"
                          r"|second[- ]to[- ]last(?:\s+session)?|last\s+but\s+one)\b", re.I)


def before_last(question: str) -> bool:
    """The question asks for the session before the latest one."""
    return bool(_BEFORE_LAST.search(question))


def order_of(question: str) -> str | None:
    """"first" / "last" for a question about when something happened first or last."""
    if _LAST.search(question) or _BEFORE_LAST.search(question):
        return "last"
    many = _HOW_MANY.search(question)
    if many:
        return "first" if many.group(1).lower() in ("first", "earliest") else "last"
    if _FIRST.search(question) and re.search(r"\b(when|what|which|how)\b", question, re.I):
        return "first"
    return None


def sessions_asked(question: str) -> int | None:
    """How many sessions "the last three sessions" asks for (None: not said)."""
    m = _HOW_MANY.search(question)
    return _count(m.group(2)) if m else None


def frame_words(question: str) -> frozenset[str]:
    """The words that ask how many sessions ("last three sessions"): not the topic."""
    found = [m.group(0) for m in (_HOW_MANY.search(question), _BEFORE_LAST.search(question)) if m]
    return frozenset(w.lower() for text in found for w in _WORD.findall(text))
