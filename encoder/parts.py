"""A later part of a session: where the encoder's view of it begins.

A session is encoded in parts (the Stop hook after each turn; a killed session caught up
by the sweep, then resumed). A part read alone from its cursor loses what it continues:
a turn cut in two at the boundary (the user's request on one side, the agent's fix and
passing run on the other), or a check that failed in the last turn and passes now. The
encoder then never sees the failure and the fix together, and the incident stored from
the first part stays "investigating" (review 7, F4).

So the encoder sees a part from the start of the turn the part continues, and from the
turn of a check that was still failing when the earlier part ended and that the part runs
again (a few turns back at most). The overlap was encoded before: the plan finds its memories again and makes them
updates or skips, never duplicates (as it does for ``encode --force``).
"""

from __future__ import annotations

from dataclasses import replace

from dualtrace.encoder.cues import check_command
from dualtrace.encoder.session import Event, Session

# How many turns before the boundary a still-failing check is looked for: a failure left
# longer than that is the earlier parts' own story (and a model backend reads each turn
# of the overlap again).
CONTEXT_TURNS = 3


def first_new(whole: Session, part: Session) -> int:
    """The index in ``whole`` of the part's first event.

    By the host's record id where the part's events carry one; otherwise counted from the
    end (the part's events are the whole's last ones). A pending tool call read again at
    the boundary may differ by an event or two: the window below starts at a turn anyway.
    """
    index = {e.uuid: i for i, e in enumerate(whole.events) if e.uuid}
    for n, e in enumerate(part.events):
        if e.uuid and e.uuid in index:
            return max(index[e.uuid] - n, 0)
    return max(len(whole.events) - len(part.events), 0)


def _is_request(e: Event) -> bool:
    return e.kind == "user" and e.agent is None and bool(e.text.strip())


def _turn_start(events: tuple[Event, ...], i: int) -> int:
    """The first event of the turn holding event ``i``: its first user message."""
    j = min(i, len(events))
    if j < len(events) and _is_request(events[j]) and (j == 0 or not _is_request(events[j - 1])):
        return j  # the part begins with a request: a turn boundary
    while j > 0 and not _is_request(events[j - 1]):
        j -= 1
    while j > 0 and _is_request(events[j - 1]):
        j -= 1  # consecutive user messages open one turn
    return j


def _check_of(e: Event) -> str | None:
    if e.kind != "command" or e.agent is not None:
        return None
    return check_command(e.command or e.text or "")


def _failing_at(events: tuple[Event, ...], end: int) -> list[int]:
    """Indexes of the last failed run of each check whose last run before ``end`` failed
    and that runs again from ``end`` on (this part may fix it, or see it fail again)."""
    last: dict[str, tuple[int, bool]] = {}
    for i, e in enumerate(events[:end]):
        key = _check_of(e)
        if key is not None:
            last[key] = (i, e.failed)
    again = {key for e in events[end:] if (key := _check_of(e)) is not None}
    return [i for key, (i, failed) in last.items() if failed and key in again]


def context_start(whole: Session, start: int) -> int:
    """Where the encoder's view of a part that begins at event ``start`` of ``whole`` starts."""
    events = whole.events
    if start <= 0:
        return 0
    begin = _turn_start(events, start)
    # The turns just before the boundary: a failure there is what this part may fix.
    earliest = begin
    for _ in range(CONTEXT_TURNS):
        if earliest == 0:
            break
        earliest = _turn_start(events, earliest - 1)
    for i in _failing_at(events, start):
        if i >= earliest:
            begin = min(begin, _turn_start(events, i))
    return begin


def window(whole: Session, part: Session) -> Session:
    """The part as the encoder sees it: ``whole``'s events from :func:`context_start` on,
    with the part's cursor and read counts (the cursor range is still the part's)."""
    begin = context_start(whole, first_new(whole, part))
    events = whole.events[begin:]
    times = [e.ts for e in events if e.ts]
    return replace(whole, events=events, cursor=part.cursor, raw_bytes=part.raw_bytes,
                   lines_read=part.lines_read, skipped_lines=part.skipped_lines,
                   started=min(times) if times else part.started,
                   ended=max(times) if times else part.ended)


__all__ = ["CONTEXT_TURNS", "context_start", "first_new", "window"]
