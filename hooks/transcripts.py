"""Transcript entry point: format auto-detection and cursor-based line reading.

``read_transcript`` is what the worker and ``dualtrace digest`` call. It reads only
whole lines from a byte-offset cursor (the file grows while the host runs), skips and
counts malformed lines, and hands parsed records to the reader for the detected host.
"""

from __future__ import annotations

import json
import os
import re
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
# Pi, OpenCode and Cline are formats only (read by ``encode``, ``digest``, the bench):
# dualtrace installs no hooks for them, so they are not hosts (hooks/registry.py).
# OpenCode's export and Cline's api_conversation_history.json are one JSON document
# each, not JSON lines: their modules say ``DOCUMENT = True`` and get a DocumentReader.
READERS = {
    "claude-code": "dualtrace.hooks.claude_code",
    "codex": "dualtrace.hooks.codex",
    "letta": "dualtrace.hooks.letta",
    "pi": "dualtrace.hooks.pi",
    "opencode": "dualtrace.hooks.opencode",
    "cline": "dualtrace.hooks.cline",
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
# Pi's session entries (packages/coding-agent docs/session.md): a header line, then tree
# nodes with ``id`` and ``parentId``.
_PI_TYPES = frozenset({"message", "model_change", "thinking_level_change", "compaction",
                       "branch_summary", "custom", "custom_message", "label", "session_info"})
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
                 skip_types: frozenset[bytes] = frozenset(), stop: int | None = None) -> None:
        self.path = path
        self.cursor = cursor
        # Read no line that starts at or after ``stop`` (the end of an earlier read: the
        # whole session up to where a part ended, while the host appends more).
        self.stop = stop
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
                if self.stop is not None and pos >= self.stop:
                    break
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
    """The file's format (a READERS key), from its first records; OpenCode and Cline
    documents from the head of the document."""
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
            if kind in ("claude-code", "codex", "letta", "pi"):
                return kind  # their record shapes are unambiguous: no need to read on
            if kind:
                votes[kind] += 1
            if seen >= _DETECT_LINES:
                break
    best = max(FORMATS, key=lambda name: votes[name])
    if votes[best] == 0:
        document = _document_format(path)
        if document:
            return document
        raise TranscriptError(
            f"unknown transcript format: {path} (expected Claude Code, Codex, Letta Code, Pi, "
            'OpenCode, Cline or plain {"role", "content"} JSONL)'
        )
    return best


# The head of a whole-document transcript: OpenCode's export opens with the session's
# ``info`` (``"id": "ses_..."``) before its ``messages``; Cline's history is an array of
# Anthropic-style ``{"role", "content"}`` messages.
_OPENCODE_HEAD = re.compile(r'\A\s*\{\s*"info"\s*:\s*\{[^\[]*?"id"\s*:\s*"ses_')
_CLINE_HEAD = re.compile(r'\A\s*\[\s*\{\s*"role"\s*:\s*"(?:user|assistant)"\s*,\s*"content"\s*:')
_HEAD_BYTES = 64 * 1024


def _document_format(path: Path) -> str | None:
    with open_bytes(path) as fh:
        head = fh.read(_HEAD_BYTES).decode("utf-8", errors="replace").lstrip("\ufeff")
    if _OPENCODE_HEAD.match(head):
        return "opencode"
    if _CLINE_HEAD.match(head):
        return "cline"
    return None


# A whole-document transcript is parsed in memory: one bigger than this is refused.
MAX_DOCUMENT_BYTES = 512 * 1024 * 1024


class DocumentReader:
    """The elements of the one array a JSON-document transcript holds, in order.

    Cline rewrites its whole history file on every message and OpenCode's export is one
    object, so a byte offset in the file says nothing by itself. Offsets here count from
    the array's ``[``: an element keeps its offset when the host rewrites the file with
    more elements after it (or, for OpenCode, a longer title in front of it). ``end``
    is where the last whole element read ends, ``cursor`` where a previous read
    stopped; elements that end at or before the cursor were read then and are skipped.
    A document cut short (the host is writing it) yields its whole elements and stops;
    one that is malformed inside yields the elements before the damage and counts the
    rest as one skipped part. ``head`` holds the members before the array (an object
    document's other keys; ``{}`` for a bare array).
    """

    def __init__(self, path: Path, cursor: int = 0, max_bytes: int = MAX_DOCUMENT_BYTES,
                 stop: int | None = None) -> None:
        self.path = path
        self.cursor = cursor
        self.stop = stop  # as LineReader's: no element that ends after it
        self.max_bytes = max_bytes
        self.end = cursor
        self.skipped = 0
        self.lines = 0  # elements read
        self.head: dict[str, Any] = {}

    def _text(self) -> str:
        with open_bytes(self.path) as fh:
            data = fh.read(self.max_bytes + 1)
        if len(data) > self.max_bytes:
            raise TranscriptError(f"{self.path} is larger than {self.max_bytes} bytes")
        return data.decode("utf-8", errors="replace")

    def elements(self, key: str | None = None) -> Iterator[Any]:
        """The array's elements: the document itself (``key`` None) or its member ``key``."""
        text = self._text()
        decoder = json.JSONDecoder()
        i = _skip_ws(text, 0)
        if text.startswith("\ufeff", i):
            i = _skip_ws(text, i + 1)
        if key is not None:
            member = self._to_member(text, i, key, decoder)
            if member is None:
                return
            i = member
        if not text.startswith("[", i):
            self.skipped += 1
            return
        start = i
        i += 1
        done = 0  # bytes of text[start:i] already counted (offsets are UTF-8 bytes)
        counted = start
        while True:
            i = _skip_ws(text, i)
            if i >= len(text) or text[i] == "]":
                return
            try:
                obj, after = decoder.raw_decode(text, i)
            except ValueError:
                if not _truncated(text):
                    self.skipped += 1
                return
            done += len(text[counted:after].encode("utf-8", errors="surrogatepass"))
            counted = after
            if self.stop is not None and done > self.stop:
                return
            self.lines += 1
            if done > self.cursor:
                self.end = done
                yield obj
            i = _skip_ws(text, after)
            if i < len(text) and text[i] == ",":
                i += 1
            elif i < len(text) and text[i] != "]":
                self.skipped += 1
                return

    def _to_member(self, text: str, i: int, key: str, decoder: json.JSONDecoder) -> int | None:
        """Walk an object's members up to ``key``; the index of its value, or None."""
        if not text.startswith("{", i):
            self.skipped += 1
            return None
        i += 1
        while True:
            i = _skip_ws(text, i)
            if i >= len(text) or text[i] == "}":
                return None
            try:
                name, i = decoder.raw_decode(text, i)
                i = _skip_ws(text, i)
                if not text.startswith(":", i) or not isinstance(name, str):
                    raise ValueError("not a member")
                i = _skip_ws(text, i + 1)
                if name == key:
                    return i
                value, i = decoder.raw_decode(text, i)
            except ValueError:
                if not _truncated(text):
                    self.skipped += 1
                return None
            self.head[name] = value
            i = _skip_ws(text, i)
            if text.startswith(",", i):
                i += 1


def _skip_ws(text: str, i: int) -> int:
    n = len(text)
    while i < n and text[i] in " \t\r\n":
        i += 1
    return i


def _truncated(text: str) -> bool:
    """True for a document a writer has not finished: a whole one ends with its closing
    bracket, so damage before the end is malformed text, not a write in progress."""
    return not text.rstrip().endswith(("]", "}"))


# Whole-document transcripts that live under a fixed name in a folder of their own (a
# Cline task is ``<task id>/api_conversation_history.json``).
DOCUMENT_FILE_NAMES = ("api_conversation_history.json",)


def transcripts_under(folder: Path) -> list[Path]:
    """The transcripts in a folder tree, for ``backfill FOLDER``: JSON-lines files (a
    Claude Code session's ``subagents/`` are read with their parent) and the files the
    JSON-document hosts keep under their fixed names."""
    found = [p for p in folder.rglob("*.jsonl") if "subagents" not in p.parts]
    for name in DOCUMENT_FILE_NAMES:
        found.extend(folder.rglob(name))
    return sorted(found)


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
    try:  # a JSON-document transcript (OpenCode, Cline) says where inside its text
        fmt = _document_format(path)
        return read_transcript(path, fmt=fmt).cwd if fmt else None
    except (OSError, TranscriptError, ValueError):
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
    if rtype == "session" and "version" in obj and "cwd" in obj and "id" in obj:
        return "pi"
    if rtype in _PI_TYPES and "parentId" in obj and "id" in obj:
        return "pi"
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
    stop: int | None = None,
) -> Session:
    """Read a transcript (or its unread tail from ``cursor``) into a :class:`Session`.

    ``stop``: read only the lines that start before this offset (the file may have grown
    since an earlier read ended there). Raises TranscriptError for a missing, empty or unrecognized file. Reading past
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
    reader: LineReader | DocumentReader
    if getattr(reader_module, "DOCUMENT", False):
        reader = DocumentReader(p, cursor, stop=stop)
    else:
        reader = LineReader(p, cursor, max_line, skip_types=reader_module.PREFILTER_TYPES,
                            stop=stop)
    session = reader_module.read(reader, last_assistant_message=last_assistant_message)
    # The id names commits, records and cursors: anyone can write it into a transcript.
    safe = safe_session_id(session.session_id)
    return session if safe == session.session_id else replace(session, session_id=safe)
