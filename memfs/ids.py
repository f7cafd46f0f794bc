"""Session ids as files and people see them: light (the read path imports it, not
``sessions``, which brings yaml)."""

from __future__ import annotations

import re

_ID8 = re.compile(r"^[0-9a-z]{8}")
_UUID8 = re.compile(r"^[0-9a-f]{8}-")
SHORT_WHOLE = 16  # an id this short is shown whole


def id8(session_id: str) -> str:
    """The file-name id: the id's first 8 characters when they are [0-9a-z] (a uuid's),
    else a short hash of the id."""
    low = session_id.lower()
    if _ID8.match(low):
        return low[:8]
    import hashlib  # here: the recall path imports this module and never needs it

    return hashlib.sha256(session_id.encode("utf-8")).hexdigest()[:8]


def short_id(session_id: str) -> str:
    """How a session is named to a person (listings, recall, injected context, commit
    subjects), and what ``dualtrace show`` takes back: a uuid's first 8 characters; a
    short id whole (Cline's task ids are millisecond timestamps, so two tasks a minute
    apart share their first 8 digits); else the file name's id (:func:`id8`), by which
    ``show`` finds the record (OpenCode's ``ses_...`` ids begin with a clock too)."""
    if _UUID8.match(session_id.lower()):
        return session_id[:8].lower()
    if len(session_id) <= SHORT_WHOLE:
        return session_id
    return id8(session_id)
