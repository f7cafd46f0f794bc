"""Transcript entry point: format auto-detection and cursor-based line reading.

``read_transcript`` is what the worker and ``dualtrace digest`` call. It reads only
whole lines from a byte-offset cursor (the file grows while the host runs), skips and
counts malformed lines, and hands parsed records to the reader for the detected host.
"""

from __future__ import annotations

import json
import os
from collections import Counter
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

from dualtrace.encoder.session import Session
from dualtrace.errors import TranscriptError
from dualtrace.sanitize import safe_session_id

# Transcript formats -> the module whose ``read`` parses them. A host names its format
# (Host.TRANSCRIPT_FORMAT). Letta Code's own transcript.jsonl is "letta"; when it wrote
# none, the hook keeps one in the plain chat format, which the letta reader reads too.
READERS = {
    "claude-code": "dualtrace.hooks.claude_code",
    "codex": "dualtrace.hooks.codex",
    "letta": "dualtrace.hooks.letta",
    "plain": "dualtrace.hooks.plain",
}
FORMATS = tuple(READERS)


def format_for_host(host: str | None) -> str | None:
    """The transcript format a host's sessions are read with; None (detect) if unknown."""
    from dualtrace.hooks import registry

    return registry.get(host).TRANSCRIPT_FORMAT if host in registry.HOSTS else None

# A line longer than this is skipped (counted) while being read in bounded chunks,
# so one pathological record cannot take unbounded memory. Real records up to this
# size (a 50 MB tool output) are parsed normally: cost is linear in the line.
MAX_LINE_BYTES = 96 * 1024 * 1024
_SKIP_CHUNK = 1024 * 1024
# Detection looks at a few records from the start of the file; huge lines are not
# parsed for it (they are tool outputs, never the record that identifies a format).
_DETECT_LINES = 40
_DETECT_MAX_LINE = 4 * 1024 * 1024

_CODEX_TYPES = frozenset({"session_meta", "response_item", "event_msg", "turn_context", "compacted"})
_LETTA_KINDS = frozenset({"user", "assistant", "reasoning", "error", "tool_call"})
_CLAUDE_TYPES = frozenset(
    {"user", "assistant", "system", "progress", "file-history-snapshot", "queue-operation",
     "summary", "attachment", "custom-title", "agent-name", "tag", "last-prompt"}
)


# Codex rewrites idle rollouts as ``rollout-*.jsonl.zst`` and deletes the plain file. A
# compressed transcript is read as its decompressed bytes: offsets (cursors) are the
# same as in the plain file it replaced, so nothing is encoded twice.
COMPRESSED_SUFFIX = ".zst"
MAX_DECOMPRESSED = 1024 * 1024 * 1024


def is_compressed(path: str | os.PathLike[str]) -> bool:
    return str(path).endswith(COMPRESSED_SUFFIX)


def open_bytes(path: Path) -> Any:
    """A binary file object over the transcript's bytes (decompressed for ``.zst``)."""
    if not is_compressed(path):
        return path.open("rb")
    import io

    try:
        import zstandard
    except ImportError:  # pragma: no cover - a declared dependency
        raise TranscriptError(f"cannot read {path}: the zstandard package is missing") from None
    with path.open("rb") as raw:
        try:
            reader = zstandard.ZstdDecompressor().stream_reader(raw)
            data = reader.read(MAX_DECOMPRESSED + 1)
        except zstandard.ZstdError as exc:
            raise TranscriptError(f"cannot decompress {path}: {exc}") from None
    if len(data) > MAX_DECOMPRESSED:
        raise TranscriptError(f"{path} decompresses to more than {MAX_DECOMPRESSED} bytes")
    return io.BytesIO(data)


def first_line(path: Path, limit: int = 4 * 1024 * 1024) -> bytes:
    """The transcript's first line (a ``.zst`` is decompressed only that far)."""
    if not is_compressed(path):
        with path.open("rb") as fh:
            return fh.readline(limit)
    import zstandard

    with path.open("rb") as raw:
        try:
            reader = zstandard.ZstdDecompressor().stream_reader(raw)
            head = b""
            while b"\n" not in head and len(head) < limit:
                chunk = reader.read(65536)
                if not chunk:
                    break
                head += chunk
        except zstandard.ZstdError as exc:
            raise OSError(f"cannot decompress {path}: {exc}") from None
    return head.split(b"\n", 1)[0][:limit]


def content_size(path: Path) -> int:
    """Size of the transcript's bytes (decompressed for ``.zst``)."""
    if not is_compressed(path):
        return path.stat().st_size
    with open_bytes(path) as fh:
        return len(fh.getbuffer())


class LineReader:
    """Iterate JSON records of whole lines from ``cursor``; track where reading stopped.

    After iteration, ``end`` is the offset of the first byte not consumed (the start of
    a partial last line, or EOF), ``skipped`` counts malformed or oversized lines.
    """

    def __init__(self, path: Path, cursor: int = 0, max_line: int = MAX_LINE_BYTES,
                 skip_types: frozenset[bytes] = frozenset()) -> None:
        self.path = path
        self.cursor = cursor
        self.max_line = max_line
        self.end = cursor
        self.skipped = 0
        self.lines = 0
        # Record types dropped *before* JSON parsing (see _prefiltered); counted here.
        self.skip_types = skip_types
        self.prefiltered: Counter[str] = Counter()

    def _prefiltered(self, line: bytes) -> bool:
        """True for a known-noise record, recognized from its first ``"type":"..."``.

        Claude Code writes compact JSON with the envelope (including the top-level
        ``type``) before any nested data, and progress records are ~40% of a
        transcript's bytes: skipping them unparsed is the largest single speed-up.
        A line whose first type key is something else is simply parsed.
        """
        i = line.find(b'"type":"', 0, 1024)
        if i < 0:
            return False
        j = line.find(b'"', i + 8, i + 64)
        if j < 0:
            return False
        rtype = line[i + 8:j]
        if rtype in self.skip_types:
            self.prefiltered[rtype.decode("ascii", "replace")] += 1
            return True
        return False

    def records(self) -> Iterator[dict[str, Any]]:
        with open_bytes(self.path) as fh:
            fh.seek(self.cursor)
            pos = self.cursor
            while True:
                line = fh.readline(self.max_line + 1)
                if not line:
                    break
                if not line.endswith(b"\n"):
                    if len(line) > self.max_line:
                        skipped_to = _skip_rest(fh, pos + len(line))
                        if skipped_to is None:  # oversized *and* unfinished: wait
                            break
                        pos = skipped_to
                        self.end = pos
                        self.skipped += 1
                        continue
                    # A partial last line: a writer may still be appending it. A line
                    # that is already a complete JSON object is safe to take (an
                    # object's strict prefix is never valid JSON); otherwise leave it.
                    obj = _parse(line)
                    if isinstance(obj, dict):
                        self.lines += 1
                        self.end = pos + len(line)
                        yield obj
                    break
                pos += len(line)
                self.end = pos
                if not line.strip():
                    continue
                self.lines += 1
                if self.skip_types and self._prefiltered(line):
                    continue
                obj = _parse(line)
                if isinstance(obj, dict):
                    yield obj
                else:
                    self.skipped += 1


def _skip_rest(fh: Any, pos: int) -> int | None:
    """Consume an oversized line in bounded chunks; offset after it, or None at EOF."""
    while True:
        chunk = fh.readline(_SKIP_CHUNK)
        if not chunk:
            return None
        pos += len(chunk)
        if chunk.endswith(b"\n"):
            return pos


def _parse(line: bytes) -> Any:
    try:
        return json.loads(line)
    except ValueError:
        pass
    # Invalid UTF-8 is replaced rather than losing the whole record.
    try:
        return json.loads(line.decode("utf-8", errors="replace"))
    except ValueError:
        return None


def detect_format(path: Path) -> str:
    """claude-code, codex, letta or plain, from the first records of the file."""
    votes = {name: 0 for name in FORMATS}
    seen = 0
    with open_bytes(path) as fh:
        for _ in range(_DETECT_LINES * 4):
            line = fh.readline(_DETECT_MAX_LINE + 1)
            if not line:
                break
            if len(line) > _DETECT_MAX_LINE or not line.strip():
                if len(line) > _DETECT_MAX_LINE:
                    _skip_rest(fh, 0)
                continue
            obj = _parse(line)
            if not isinstance(obj, dict):
                continue
            seen += 1
            kind = _record_format(obj)
            if kind in ("claude-code", "codex", "letta"):
                return kind  # their record shapes are unambiguous: no need to read on
            if kind:
                votes[kind] += 1
            if seen >= _DETECT_LINES:
                break
    best = max(FORMATS, key=lambda name: votes[name])
    if votes[best] == 0:
        raise TranscriptError(
            f"unknown transcript format: {path} (expected Claude Code, Codex, Letta Code or plain "
            '{"role", "content"} JSONL)'
        )
    return best


def working_directory(path: Path, max_records: int = 200) -> str | None:
    """The directory the session ran in, from the transcript's first records, or None.

    Claude Code and plain chats carry ``cwd`` on their records, Codex in its
    ``session_meta`` / ``turn_context`` payloads, Letta's payload log as
    ``working_directory``. Never raises: an unreadable file is the encoder's to report.
    """
    try:
        reader = LineReader(path, max_line=_DETECT_MAX_LINE)
        for n, obj in enumerate(reader.records()):
            payload = obj.get("payload")
            for holder in (obj, payload if isinstance(payload, dict) else {}):
                for key in ("cwd", "working_directory"):
                    value = holder.get(key)
                    if isinstance(value, str) and value.strip():
                        return value
            if n >= max_records:
                break
    except (OSError, TranscriptError, ValueError):
        return None
    return None


def _record_format(obj: dict[str, Any]) -> str | None:
    rtype = obj.get("type")
    if not isinstance(rtype, str):
        rtype = None
    if rtype in _CODEX_TYPES and isinstance(obj.get("payload"), dict):
        return "codex"
    if rtype in _CLAUDE_TYPES and (
        "uuid" in obj or "sessionId" in obj or "message" in obj or "leafUuid" in obj
        or "snapshot" in obj
    ):
        return "claude-code"
    if obj.get("kind") in _LETTA_KINDS and ("captured_at" in obj or "source_line_id" in obj):
        return "letta"
    if isinstance(obj.get("role"), str) and "content" in obj:
        return "plain"
    return None


def read_transcript(
    path: str | os.PathLike[str],
    *,
    cursor: int = 0,
    fmt: str | None = None,
    last_assistant_message: str | None = None,
    max_line: int = MAX_LINE_BYTES,
) -> Session:
    """Read a transcript (or its unread tail from ``cursor``) into a :class:`Session`.

    Raises TranscriptError for a missing, empty or unrecognized file. Reading past
    the end (cursor at EOF) is not an error: it returns a session with no events.
    """
    p = Path(path)
    try:
        size = content_size(p)
    except FileNotFoundError:
        raise TranscriptError(f"transcript not found: {p}") from None
    except OSError as exc:
        raise TranscriptError(f"cannot read transcript {p}: {exc.strerror or exc}") from None
    if p.is_dir():
        raise TranscriptError(f"transcript is a directory: {p}")
    if size == 0:
        raise TranscriptError(f"transcript is empty: {p}")
    if cursor < 0 or cursor > size:
        raise TranscriptError(f"cursor {cursor} outside transcript {p} ({size} bytes)")
    if fmt is None:
        fmt = detect_format(p)
    elif fmt not in FORMATS:
        raise TranscriptError(f"unknown transcript format {fmt!r} (expected one of {FORMATS})")
    import importlib

    reader_module = importlib.import_module(READERS[fmt])
    reader = LineReader(p, cursor, max_line, skip_types=reader_module.PREFILTER_TYPES)
    session = reader_module.read(reader, last_assistant_message=last_assistant_message)
    # The id names commits, records and cursors: anyone can write it into a transcript.
    safe = safe_session_id(session.session_id)
    return session if safe == session.session_id else replace(session, session_id=safe)
