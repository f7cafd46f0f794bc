"""Values from outside (transcripts, models, payloads) made safe for where they go.

Standard library only: the hook fast path may import it. Three places need it:

* a session id names a commit trailer, a record file and a queue job: it is read from
  a transcript anyone can write, so it becomes one safe token (``safe_session_id``);
* every value in a commit message is one line without control characters
  (``one_line``): a newline in a model's "reason" would otherwise forge a
  ``Dualtrace-Range`` trailer and make a later encode skip a session as done;
* text dualtrace injects into an agent escapes anything that looks like its own
  markers (``escape_markers``): a memory body holding ``</dualtrace-memory>`` cannot
  close the wrapper early and have the rest read as if it were not a memory.
"""

from __future__ import annotations

import re
import zlib

from dualtrace.markers import INJECT_CLOSE, INJECT_OPEN

SESSION_ID_MAX = 128
_SID_BAD = re.compile(r"[^A-Za-z0-9._:@+-]+")
_CONTROL = re.compile(r"[\x00-\x1f\x7f\u0085\u2028\u2029]+")
# Our markers and anything a reader could take for one: any case, spaces inside the
# brackets, a fullwidth or small-form bracket. (An HTML-escaped one is already text.)
_MARKER_LIKE = re.compile(r"[<\uff1c\ufe64](\s*/?\s*)(dualtrace-memory)", re.I)


def safe_session_id(session_id: str | None) -> str | None:
    """One token of ``[A-Za-z0-9._:@+-]``, at most 128 characters (idempotent).

    Real ids (UUIDs, Codex thread ids, Letta conversation ids) pass unchanged; any other
    value keeps its readable characters plus a checksum of the original, so two
    different hostile ids never collide into one.
    """
    if session_id is None:
        return None
    text = str(session_id)
    cleaned = _SID_BAD.sub("-", text).strip("-.")
    if cleaned == text and 0 < len(text) <= SESSION_ID_MAX:
        return text
    tag = f"{zlib.crc32(text.encode('utf-8', 'surrogatepass')):08x}"
    return f"{cleaned[:SESSION_ID_MAX - 9]}-{tag}" if cleaned else f"session-{tag}"


def one_line(value: object, limit: int = 200) -> str:
    """``value`` as a single line: control characters and line breaks become one space."""
    text = " ".join(_CONTROL.sub(" ", str(value)).split())
    return text if len(text) <= limit else text[:limit - 3].rstrip() + "..."


def escape_markers(text: str) -> str:
    """Every marker-like tag in ``text`` with its bracket escaped (``&lt;/dualtrace-memory>``):
    readable, but never our marker, and never stripped as one by the redactor."""
    if "dualtrace-memory" not in text.lower():
        return text
    return _MARKER_LIKE.sub(lambda m: "&lt;" + m.group(1) + m.group(2), text)


__all__ = ["INJECT_CLOSE", "INJECT_OPEN", "escape_markers", "one_line", "safe_session_id"]
