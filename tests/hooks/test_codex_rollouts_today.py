"""Codex rollouts as Codex 0.16x writes them: item_completed messages, and .jsonl.zst files."""

from __future__ import annotations

import json
from pathlib import Path

import zstandard

from dualtrace.hooks.transcripts import read_transcript
from dualtrace.pipeline import encode_session

SID = "01a230a5-2b6b-7ad2-a329-4717cb562096"
TURN = "01a230a5-2ba9-7841-b7af-bcb723de477c"
ASK = ("We decided to use PostgreSQL, not MySQL, for the billing service, because billing "
       "needs row-level locking for invoice updates.")
ANSWER = "Understood: billing uses PostgreSQL rather than MySQL for row-level locking."


def _rec(kind: str, payload: dict, ts: str = "2026-12-01T08:07:41.000Z") -> str:
    return json.dumps({"timestamp": ts, "type": kind, "payload": payload})


def _meta(cwd: Path) -> str:
    return _rec("session_meta", {"id": SID, "session_id": SID, "cwd": str(cwd),
                                 "cli_version": "0.169.0", "source": "exec",
                                 "timestamp": "2026-12-01T08:07:40.677Z"})


def _completed(kind: str, content: list[dict]) -> str:
    return _rec("event_msg", {"type": "item_completed", "thread_id": SID, "turn_id": TURN,
                              "item": {"type": kind, "id": "i1", "content": content}})


def both_shapes(cwd: Path) -> list[str]:
    """What codex exec 0.169.0 wrote for one turn (trimmed): each message twice."""
    passthrough = {"internal_chat_message_metadata_passthrough": {"turn_id": TURN}}
    return [
        _meta(cwd),
        _rec("event_msg", {"type": "task_started", "turn_id": TURN}),
        _rec("turn_context", {"turn_id": TURN, "cwd": str(cwd)}),
        _rec("response_item", {"type": "message", "role": "user", "content": [
            {"type": "input_text", "text": ASK}], **passthrough}),
        _completed("UserMessage", [{"type": "text", "text": ASK, "text_elements": []}]),
        _completed("AgentMessage", [{"type": "Text", "text": ANSWER}]),
        _rec("response_item", {"type": "message", "role": "assistant", "status": "completed",
                               "content": [{"type": "output_text", "text": ANSWER}],
                               **passthrough}),
        _rec("event_msg", {"type": "task_complete", "turn_id": TURN,
                           "last_agent_message": ANSWER}),
    ]


def _messages(session) -> list[tuple[str, str]]:
    return [(e.kind, e.text) for e in session.events if e.kind in ("user", "assistant")]


def test_a_message_in_both_shapes_counts_once(tmp_path):
    path = tmp_path / f"rollout-2026-12-01T08-07-40-{SID}.jsonl"
    path.write_text("\n".join(both_shapes(tmp_path)) + "\n")
    session = read_transcript(path)
    assert session.host == "codex" and session.session_id == SID
    assert _messages(session) == [("user", ASK), ("assistant", ANSWER)]
    assert dict(session.noise)["duplicate-message"] == 2


def test_new_style_only_messages_are_read(tmp_path):
    lines = [_meta(tmp_path),
             _completed("UserMessage", [{"type": "text", "text": ASK}]),
             _completed("AgentMessage", [{"type": "Text", "text": ANSWER}]),
             _completed("Reasoning", [{"type": "text", "text": "hmm"}])]
    path = tmp_path / "rollout-new.jsonl"
    path.write_text("\n".join(lines) + "\n")
    assert _messages(read_transcript(path)) == [("user", ASK), ("assistant", ANSWER)]


def test_the_same_words_in_a_later_turn_are_kept(tmp_path):
    lines = both_shapes(tmp_path)
    later = [line.replace(TURN, "turn-2") for line in lines[1:]]
    path = tmp_path / "rollout-two.jsonl"
    path.write_text("\n".join(lines + later) + "\n")
    assert len(_messages(read_transcript(path))) == 4


def _compress(plain: Path) -> Path:
    packed = plain.with_name(plain.name + ".zst")
    packed.write_bytes(zstandard.ZstdCompressor().compress(plain.read_bytes()))
    return packed


def test_zst_rollout_reads_like_the_plain_one(tmp_path):
    plain = tmp_path / f"rollout-2026-12-01T08-07-40-{SID}.jsonl"
    plain.write_text("\n".join(both_shapes(tmp_path)) + "\n")
    packed = _compress(plain)
    a, b = read_transcript(plain), read_transcript(packed)
    assert _messages(a) == _messages(b) and b.session_id == SID
    assert a.cursor == b.cursor == plain.stat().st_size
    # From a cursor, only the tail (decompressed offsets, as in the plain file).
    cut = len("\n".join(both_shapes(tmp_path)[:5])) + 1
    tail = read_transcript(packed, cursor=cut)
    assert _messages(tail) == [("assistant", ANSWER)] and tail.session_id == SID


def test_compressing_a_rollout_after_its_encode_encodes_nothing_twice(tmp_path):
    plain = tmp_path / "sessions" / f"rollout-2026-12-01T08-07-40-{SID}.jsonl"
    plain.parent.mkdir()
    plain.write_text("\n".join(both_shapes(tmp_path)) + "\n")
    memdir = tmp_path / "mem"
    first = encode_session(plain, memory_dir=memdir, backend="offline")
    assert first.commit, first.skipped
    packed = _compress(plain)
    plain.unlink()  # what Codex does to an idle rollout
    again = encode_session(packed, memory_dir=memdir, backend="offline")
    assert again.commit is None
    assert again.skipped == "nothing new in the transcript since the last encode"


def test_a_zst_never_seen_before_is_encoded(tmp_path):
    plain = tmp_path / "rollout-x.jsonl"
    plain.write_text("\n".join(both_shapes(tmp_path)) + "\n")
    packed = _compress(plain)
    plain.unlink()
    report = encode_session(packed, memory_dir=tmp_path / "mem", backend="offline")
    assert report.commit and report.host == "codex"


def test_rollouts_are_found_compressed_or_not(tmp_path, monkeypatch):
    from dualtrace.hooks import codex

    home = tmp_path / "codex-home"
    day = home / "sessions" / "2026" / "12" / "01"
    day.mkdir(parents=True)
    monkeypatch.setenv("CODEX_HOME", str(home))
    project = tmp_path / "proj"
    project.mkdir()
    old = day / f"rollout-2026-12-01T08-00-00-{SID}.jsonl"
    old.write_text("\n".join(both_shapes(project)) + "\n")
    _compress(old)
    assert codex.find_rollout(SID) == str(old)  # the live plain file wins over its .zst
    old.unlink()
    assert codex.find_rollout(SID) == str(old) + ".zst"
    other = day / "rollout-2026-12-01T09-00-00-other.jsonl"
    other.write_text("\n".join(both_shapes(tmp_path / "elsewhere")) + "\n")
    assert codex.project_transcripts(project.resolve()) == [Path(str(old) + ".zst")]


def test_an_attached_image_is_no_words_of_the_user(tmp_path):
    """Codex frames a pasted image with text blocks ``<image name=[Image #1]>`` and
    ``</image>`` (review 8 F18): they were the user's first words, so the session record's
    description read "<image name=[Image #1]>". The image stays "[image]" in the turn; the
    description is the question asked about it."""
    question = "why does the usage label wrap on the team dashboard? [Image #1]"
    lines = both_shapes(tmp_path)
    lines[3] = _rec("response_item", {"type": "message", "role": "user", "content": [
        {"type": "input_text", "text": "<image name=[Image #1]>"},
        {"type": "input_image", "image_url": "data:image/png;base64,iVBORw0KGgo="},
        {"type": "input_text", "text": "</image>"},
        {"type": "input_text", "text": question}]})
    del lines[4]  # the item_completed copy of the same message
    path = tmp_path / f"rollout-2026-12-01T08-07-40-{SID}.jsonl"
    path.write_text("\n".join(lines) + "\n")
    assert _messages(read_transcript(path))[0] == ("user", "[image]\n" + question)
    report = encode_session(path, memory_dir=tmp_path / "mem", backend="offline")
    assert report.commit
    record = next((tmp_path / "mem" / "sessions").rglob("*.md")).read_text()
    assert "description: why does the usage label wrap on the team dashboard?" in record, record
    assert "<image" not in record
