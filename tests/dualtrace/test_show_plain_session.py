"""`dualtrace show SESSION` on the record of a plain JSONL chat (issue 11).

A plain transcript (``{"role", "content"}`` lines, the shape `encode` reads for hosts
without a transcript of their own) names its session after the file ("chat") and may
carry no timestamps. `show chat` said "no memory with anchor or path 'chat'" (only a
hex-looking id was tried as a session), and the record's turns were headed
"(0000-00-00)", a date nobody said, which recall then quoted.
"""

from __future__ import annotations

import json

from dualtrace.memfs.sessions import parse_record, read_record, turn_windows
from tests.e2e.test_session_records import cli

REQUEST = ("We decided to use Postgres 16 for session storage because Redis lost data on "
           "restart. Please switch the session store.")
ANSWER = "Switched the session store to Postgres 16; the Redis client is removed."


def _encode_plain_chat(tmp_path):
    chat = tmp_path / "chat.jsonl"
    chat.write_text("".join(json.dumps(line) + "\n" for line in (
        {"role": "user", "content": REQUEST}, {"role": "assistant", "content": ANSWER})),
        encoding="utf-8")
    mem = tmp_path / "mem"
    enc = cli("encode", "--memory-dir", str(mem), str(chat), cwd=tmp_path)
    assert enc.returncode == 0, enc.stderr
    return mem


def test_show_finds_a_plain_chats_record_by_the_id_sessions_lists(tmp_path):
    mem = _encode_plain_chat(tmp_path)
    listed = json.loads(cli("sessions", "--memory-dir", str(mem), "--json").stdout)
    assert [(r["session"], r["host"], r["date"]) for r in listed] == [("chat", "plain", None)]
    show = cli("show", "chat", "--memory-dir", str(mem))
    assert show.returncode == 0, show.stderr
    assert show.stdout.startswith(f"==> {listed[0]['path']}\n")
    assert REQUEST in show.stdout and ANSWER in show.stdout
    # Undated, and said so: no made-up date in the record, its index chunks or recall.
    text = (mem / listed[0]["path"]).read_text(encoding="utf-8")
    assert "0000-00-00" not in text
    assert "\n## Turn 1\n" in text and "# Session undated " in text
    assert read_record(mem, "chat").turns[0].date is None
    recall = cli("recall", "--memory-dir", str(mem), "--type", "session",
                 "Redis lost data on restart")
    assert recall.returncode == 0, recall.stderr
    assert "[session chat, undated, Turn 1]" in recall.stdout and "0000" not in recall.stdout
    # A name that is neither a memory nor a session is still the memory error.
    missing = cli("show", "nothere", "--memory-dir", str(mem))
    assert missing.returncode == 1
    assert missing.stderr.strip() == "Error: no memory with anchor or path 'nothere'"


def test_a_memory_anchor_still_wins_over_a_session_of_the_same_name(tmp_path):
    mem = _encode_plain_chat(tmp_path)
    anchor = next((mem / "decisions").glob("*.md")).stem
    show = cli("show", anchor, "--memory-dir", str(mem))
    assert show.returncode == 0 and show.stdout.startswith(f"==> decisions/{anchor}.md")


def test_a_record_written_with_the_old_placeholder_date_reads_as_undated():
    old = ("---\ntype: session\nschema: 1\nsession: chat\nhost: plain\nstarted: null\n---\n\n"
           "# Session undated 31e06f7d\n\n## Turn 1 (0000-00-00)\n\n**User:**\n> hi there\n")
    record = parse_record(old, "sessions/2026-12/2026-12-01-31e06f7d.md")
    assert record.turns[0].date is None and record.turns[0].user == "hi there"
    assert [w.date for w in turn_windows(old)] == [None]
