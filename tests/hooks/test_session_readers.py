"""Host readers, format detection and cursor reading, on transcripts written for tests."""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

import pytest

from dualtrace.encoder.session import Event, truncate_middle
from dualtrace.errors import TranscriptError
from dualtrace.hooks.transcripts import LineReader, detect_format, read_transcript
from tests.conftest import DATA


@pytest.fixture
def claude(tmp_path: Path) -> Path:
    """A copy (with its subagents folder) so tests may append to it."""
    dst = tmp_path / "claude_session.jsonl"
    shutil.copy(DATA / "claude_session.jsonl", dst)
    shutil.copytree(DATA / "claude_session", tmp_path / "claude_session")
    return dst


def kinds(session) -> list[str]:
    return [e.kind for e in session.events]


def test_detects_each_format():
    assert detect_format(DATA / "claude_session.jsonl") == "claude-code"
    assert detect_format(DATA / "codex_session.jsonl") == "codex"
    assert detect_format(DATA / "plain_session.jsonl") == "plain"


def test_claude_session_model(claude: Path):
    s = read_transcript(claude)
    assert s.host == "claude-code"
    assert s.session_id == "c0ffee00-0000-4000-8000-000000000001"
    assert (s.cwd, s.git_branch, s.date) == ("/home/dev/proj", "feature/auth", "2026-03-02")
    # 10:00:01 is the isMeta caveat line: meta lines do not date a session (after /clear
    # the file starts with a copy of the old one's; tests/hooks/test_copied_meta_dates.py).
    assert s.started == "2026-03-02T10:00:02.000Z" and s.ended == "2026-03-02T10:21:00.000Z"
    assert s.skipped_lines == 1  # the "{not json" line
    noise = dict(s.noise)
    assert noise["progress"] == 1 and noise["file-history-snapshot"] == 1
    assert noise["queue-operation"] == 2 and noise["meta"] == 1
    assert noise["replayed"] == 1  # a resumed session replayed the first prompt
    users = [e.text for e in s.events if e.kind == "user"]
    # Slash-command, interrupted and meta lines are gone; injected tags are stripped.
    assert len(users) == 2
    assert "system-reminder" not in users[0] and users[0].endswith("token refresh.")
    assert users[1].startswith("Thanks. From now on")
    assistant = [e for e in s.events if e.kind == "assistant"]
    # msg_B was split over two lines: merged into one event.
    assert [e.text for e in assistant if e.detail is None] == [
        "Let me look at the refresh code.",
        "Part one of the plan.\n\nPart two: make refresh_token idempotent.",
    ]
    assert [e.detail for e in assistant].count("thinking") == 1


def test_claude_tools_edits_commands_commits(claude: Path):
    s = read_transcript(claude)
    cmds = [e for e in s.events if e.kind == "command"]
    assert [(e.command, e.exit_code, e.is_error) for e in cmds[:2]] == [
        ("pytest tests/test_auth.py -q", 1, True), ("pytest tests/test_auth.py -q", 0, False)]
    assert "AssertionError: 401 != 200" in cmds[0].result
    edits = [(e.path, e.edit_kind, e.agent) for e in s.events if e.kind == "edit"]
    assert edits == [("/home/dev/proj/src/auth/refresh.py", "modify", None),
                     ("/home/dev/proj/src/auth/lock.py", "create", None),
                     ("/home/dev/proj/api/user_session.py", "modify", "a11ce01")]
    commit = next(e for e in s.events if e.kind == "commit")
    assert (commit.text, commit.detail) == ("fix: serialize token refresh", "9f3c2ab")
    read = next(e for e in s.events if e.kind == "tool")
    assert (read.tool, read.text) == ("Read", "/home/dev/proj/src/auth/refresh.py")
    err = next(e for e in s.events if e.kind == "error")
    assert "529" in err.text


def test_claude_subagents_and_compaction(claude: Path):
    s = read_transcript(claude)
    subs = [e for e in s.events if e.kind == "subagent"]
    # Warmup and acompact-* files are skipped; the Task is linked to its file.
    assert len(subs) == 1
    assert subs[0].agent == "a11ce01" and subs[0].text == "Audit other refresh callers"
    assert "1 commands" not in subs[0].detail and "edited: /home/dev/proj/api/user_session.py" \
        in subs[0].detail
    comp = [e for e in s.events if e.kind == "compaction"]
    assert len(comp) == 1
    assert comp[0].text.endswith("serialize token refresh with a lock.")
    assert "preTokens=170000" in comp[0].detail
    order = kinds(s)
    assert order.index("compaction") > order.index("commit")


def test_stop_payload_appended_only_when_file_lags(claude: Path):
    s = read_transcript(claude, last_assistant_message="All done: refresh is serialized.")
    assert s.events[-1].kind == "assistant" and s.events[-1].detail == "stop-payload"
    assert s.events[-1].text == "All done: refresh is serialized."
    same = read_transcript(claude, last_assistant_message="Part two: make refresh_token idempotent.")
    # The payload is already the file's last assistant text: nothing is added.
    texts = [e.text for e in same.events if e.kind == "assistant"]
    assert sum("Part two" in t for t in texts) == 1


def test_codex_reader(tmp_path: Path):
    s = read_transcript(DATA / "codex_session.jsonl")
    assert (s.host, s.session_id, s.cwd, s.git_branch) == (
        "codex", "019c0000-aaaa-7000-8000-000000000002", "/home/dev/proj", "main")
    # Developer/environment messages and event_msg duplicates are dropped.
    assert [e.text for e in s.events if e.kind == "user"] == [
        "We're switching to JSON structured logging instead of plain text."]
    cmds = [(e.command, e.exit_code) for e in s.events if e.kind == "command"]
    assert cmds == [("pytest -q tests/test_log.py", 1), ("pytest -q tests/test_log.py", 0)]
    assert [(e.path, e.edit_kind) for e in s.events if e.kind == "edit"] == [
        ("src/log.py", "modify"), ("src/log_format.py", "create")]
    assert [e.kind for e in s.events].count("compaction") == 1
    assert sum(1 for e in s.events if e.kind == "assistant" and e.detail is None) == 1


def test_plain_reader():
    s = read_transcript(DATA / "plain_session.jsonl")
    assert s.host == "plain"
    assert kinds(s) == ["user", "assistant", "tool"]
    assert s.events[0].ts == "2026-03-02T10:01:00.000Z"


@pytest.mark.parametrize("content,message", [
    (None, "not found"), (b"", "empty"), (b'{"foo": 1}\n{"bar": 2}\n', "unknown transcript format"),
    (b"hello\nworld\n", "unknown transcript format"),
])
def test_clear_errors(tmp_path: Path, content, message):
    path = tmp_path / "t.jsonl"
    if content is not None:
        path.write_bytes(content)
    with pytest.raises(TranscriptError, match=message):
        read_transcript(path)


def test_directory_and_bad_cursor_are_errors(tmp_path: Path):
    with pytest.raises(TranscriptError, match="directory"):
        read_transcript(tmp_path)
    with pytest.raises(TranscriptError, match="cursor"):
        read_transcript(DATA / "plain_session.jsonl", cursor=10**9)
    with pytest.raises(TranscriptError, match="unknown transcript format"):
        read_transcript(DATA / "plain_session.jsonl", fmt="gemini")


def _line(role: str, text: str, minute: int) -> bytes:
    return (json.dumps({"role": role, "content": text,
                        "timestamp": f"2026-03-02T11:{minute:02d}:00Z"}) + "\n").encode()


def test_growing_file_read_twice_through_cursor(tmp_path: Path):
    path = tmp_path / "grow.jsonl"
    first = _line("user", "first question", 1) + _line("assistant", "first answer", 2)
    partial = _line("user", "second question", 3)
    path.write_bytes(first + partial[:15])  # the writer is mid-line
    s1 = read_transcript(path)
    assert [e.text for e in s1.events] == ["first question", "first answer"]
    assert s1.cursor == len(first)  # the partial line is left for the next read
    with path.open("ab") as fh:
        fh.write(partial[15:] + _line("assistant", "second answer", 4))
    s2 = read_transcript(path, cursor=s1.cursor)
    assert [e.text for e in s2.events] == ["second question", "second answer"]
    assert s2.cursor == path.stat().st_size
    assert s2.raw_bytes == path.stat().st_size - s1.cursor
    s3 = read_transcript(path, cursor=s2.cursor)  # nothing new: empty, not an error
    assert s3.events == () and s3.cursor == s2.cursor


def test_claude_incremental_read_matches_whole_read(claude: Path):
    data = claude.read_bytes()
    cut = data.index(b"\n", len(data) // 2) + 1
    whole = read_transcript(claude)
    claude.write_bytes(data[:cut])
    a = read_transcript(claude)
    claude.write_bytes(data)
    b = read_transcript(claude, cursor=a.cursor)
    assert a.cursor == cut and b.cursor == len(data)
    assert b.session_id == whole.session_id
    whole_cmds = [e.command for e in whole.events if e.kind == "command"]
    assert [e.command for e in a.events + b.events if e.kind == "command"] == whole_cmds


def test_complete_last_line_without_newline_is_taken(tmp_path: Path):
    path = tmp_path / "t.jsonl"
    path.write_bytes(_line("user", "a", 1) + _line("assistant", "b", 2).rstrip(b"\n"))
    s = read_transcript(path)
    assert [e.text for e in s.events] == ["a", "b"] and s.cursor == path.stat().st_size


def test_malformed_and_invalid_utf8_lines(tmp_path: Path):
    path = tmp_path / "t.jsonl"
    bad_utf8 = b'{"role": "user", "content": "caf\xe9 \xff ok"}\n'
    path.write_bytes(_line("user", "start", 1) + b"{broken\n" + b"[1, 2]\n" + bad_utf8
                     + b'{"role": "user", "content": {"weird": true}}\n')
    s = read_transcript(path)
    assert s.skipped_lines == 2
    assert [e.text for e in s.events] == ["start", "caf\ufffd \ufffd ok"]


def test_huge_line_is_linear_and_truncated(tmp_path: Path):
    path = tmp_path / "big.jsonl"
    huge = "x" * (50 * 1024 * 1024)
    with path.open("w") as fh:
        fh.write(json.dumps({"role": "user", "content": "before"}) + "\n")
        fh.write(json.dumps({"role": "tool", "name": "Bash", "content": huge}) + "\n")
        fh.write(json.dumps({"role": "user", "content": "after"}) + "\n")
    del huge
    start = time.perf_counter()
    s = read_transcript(path)
    elapsed = time.perf_counter() - start
    assert [e.kind for e in s.events] == ["user", "tool", "user"]
    assert len(s.events[1].result) <= 4000 and "truncated" in s.events[1].result
    assert elapsed < 20  # linear: about a second; quadratic would take minutes


def test_oversized_line_skipped_in_bounded_chunks(tmp_path: Path):
    path = tmp_path / "t.jsonl"
    path.write_bytes(_line("user", "a", 1) + _line("tool", "y" * 5000, 2) + _line("user", "b", 3))
    s = read_transcript(path, max_line=1000)
    assert [e.text for e in s.events] == ["a", "b"] and s.skipped_lines == 1
    reader = LineReader(path, max_line=1000)
    assert len(list(reader.records())) == 2 and reader.end == path.stat().st_size


def test_truncate_middle_and_event_kinds():
    text = "a" * 100 + "b" * 100
    cut = truncate_middle(text, 80)
    assert len(cut) <= 80 and cut.startswith("a") and cut.endswith("b") and "truncated" in cut
    assert truncate_middle("short", 80) == "short"
    with pytest.raises(ValueError):
        Event("bogus", None)
