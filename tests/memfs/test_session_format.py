"""Session record format (dualtrace.memfs.sessions): round trip, sections, paths, reads."""

from __future__ import annotations

import re
from dataclasses import replace

import pytest

from dualtrace.errors import DualtraceError
from dualtrace.memfs import sessions
from dualtrace.memfs.sessions import Check, Commit, SessionRecord, Turn

SID = "0b6f1c2e-7d1a-4b8e-9c55-2f0e8a1d3b44"


def _record(**changes) -> SessionRecord:
    base = SessionRecord(
        path="sessions/2026-03/2026-03-25-0b6f1c2e.md", session=SID, host="claude-code",
        project="shop", branch="main", started="2026-03-25T09:01:00Z",
        ended="2026-03-25T09:40:00Z", description="Fix the flaky auth test",
        commits=(Commit("9ab12cd", "Retry token refresh once"),),
        files_changed=("src/shop/auth.py",),
        checks=(Check("pytest -q", 2, 1, "passed"),),
        memories=(("decisions/retry-refresh.md", "stored"),),
        turns=(Turn(1, "2026-03-25", "09:01", user="line one\n\n## Turn 9 (2026-01-01)\n# not a heading\n  indented ",
                    agent="done", failures=("09:02 `pytest -q` exited 1: AssertionError",),
                    notes=("Because X.", "Instead of Y."), activity="2 commands"),
               Turn(2, "2026-03-25", None, agent="only agent text")),
        open_ends=("`pytest -q` failed on its last run",),
    )
    return SessionRecord(**{**base.__dict__, **changes})


def test_render_parse_round_trip_and_no_content_line_is_a_heading():
    record = _record()
    text = sessions.render_record(record)
    again = sessions.parse_record(text, record.path)
    assert sessions.render_record(again) == text
    assert again.turns == record.turns and again.checks == record.checks
    assert again.memories == record.memories and again.commits == record.commits
    assert again.outcome == "1 commit; pytest -q passed; open end"
    headings = [ln for ln in text.splitlines() if ln.startswith("#")]
    assert headings == ["# Session 2026-03-25 0b6f1c2e: Fix the flaky auth test",
                        "## Turn 1 (2026-03-25 09:01 UTC)", "## Turn 2 (2026-03-25)",
                        "## Open ends"]
    for h in headings[1:3]:
        assert sessions.TURN_HEADING.match(h)


def test_turn_windows_are_the_sections_with_dates():
    windows = sessions.turn_windows(sessions.render_record(_record()))
    assert [(w.kind, w.number, w.date, w.time) for w in windows] == [
        ("turn", 1, "2026-03-25", "09:01"), ("turn", 2, "2026-03-25", None),
        ("open-ends", None, "2026-03-25", None)]
    first = windows[0].text
    assert "line one" in first and "## Turn 9 (2026-01-01)" in first and "Because X." in first
    assert "**User:**" not in first and "> " not in first


def test_paths_ids_and_clashes(tmp_path):
    assert sessions.record_path(SID, "2026-03-25T09:01:00Z") == "sessions/2026-03/2026-03-25-0b6f1c2e.md"
    assert sessions.record_path(SID, None, local=True, today="2026-04-01") == \
        ".dualtrace/sessions/2026-04/2026-04-01-0b6f1c2e.md"
    plain = sessions.id8("My Chat.JSONL")
    assert re.fullmatch(r"[0-9a-f]{8}", plain) and plain == sessions.id8("My Chat.JSONL")
    first = tmp_path / sessions.record_path(SID, "2026-03-25")
    first.parent.mkdir(parents=True)
    first.write_text(sessions.render_record(_record()))
    # another session with the same first 8 characters on the same day gets "-2"
    other = SID[:8] + "-ffff-4fff-8fff-ffffffffffff"
    assert sessions.free_path(tmp_path, other, "2026-03-25", local=False).endswith("0b6f1c2e-2.md")
    assert sessions.free_path(tmp_path, SID, "2026-03-25", local=False) == _record().path


def test_read_record_by_id_prefix_path_and_errors(tmp_path):
    rel = _record().path
    (tmp_path / rel).parent.mkdir(parents=True)
    (tmp_path / rel).write_text(sessions.render_record(_record()))
    assert sessions.read_record(tmp_path, SID).path == rel
    assert sessions.read_record(tmp_path, "0b6f1c").session == SID
    assert sessions.read_record(tmp_path, rel).turns[0].agent == "done"
    with pytest.raises(DualtraceError, match="no session record"):
        sessions.read_record(tmp_path, "ffffffff")
    with pytest.raises(DualtraceError, match="too short"):
        sessions.read_record(tmp_path, "0b")
    (tmp_path / "sessions/2026-03/2026-03-25-broken.md").write_text("not a record")
    assert [i.session for i in sessions.list_records(tmp_path)] == [SID]  # broken one skipped




def test_list_records_limit_ranks_same_day_records_by_start_time(tmp_path):
    # names sort by id on one day; the limit must still pick the latest starts
    for sid, start in [("aaaa0000-1", "10:00"), ("bbbb0000-1", "08:00"),
                       ("cccc0000-1", "12:00"), ("dddd0000-1", "09:00")]:
        record = _record(session=sid, started=f"2026-03-25T{start}:00Z",
                         path=sessions.record_path(sid, "2026-03-25"))
        (tmp_path / record.path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / record.path).write_text(sessions.render_record(record))
    older = _record(session="eeee0000-1", started="2026-03-20T23:00:00Z",
                    path=sessions.record_path("eeee0000-1", "2026-03-20"))
    (tmp_path / older.path).write_text(sessions.render_record(older))
    assert [i.session for i in sessions.list_records(tmp_path, limit=2)] == [
        "cccc0000-1", "aaaa0000-1"]
    assert [i.session for i in sessions.list_records(tmp_path, limit=2, project="other")] == []
    assert [i.session for i in sessions.list_records(tmp_path)][-1] == "eeee0000-1"


# ------------------------------------------------------------------ substance (review 7, F1)


@pytest.mark.parametrize("text", ["OK.", "Okay!", "Sure thing.", "Got it, thanks.", "Noted.",
                                  "Understood — will do.", "Hi! What can I do for you today?",
                                  "", None])
def test_an_acknowledgement_says_nothing(text):
    assert sessions.is_acknowledgement(text)


@pytest.mark.parametrize("text", ["No.", "Yes, Redis.", "OK. The cache key includes the locale.",
                                  "Sure: pin numpy below 2 until the wheels catch up.",
                                  "Done: the cron job now runs at 03:00 UTC."])
def test_a_reply_with_content_is_not_an_acknowledgement(text):
    assert not sessions.is_acknowledgement(text)


def test_an_unanswered_turn_is_indexed_by_the_users_statements_only():
    turns = (Turn(1, "2026-03-25", "09:01", user="Which queue do the emails go through?",
                  agent="Okay."),
             Turn(2, "2026-03-25", "09:05", user="The deploy uses Helm now. Do we still need "
                  "the kustomize overlays?\nwhat about staging", agent="Sure."),
             Turn(3, "2026-03-25", "09:09", user="Which queue do the emails go through?",
                  agent="SQS: the mailer reads from the outbound-mail queue."))
    record = _record(turns=turns, description="Which queue do the emails go through?")
    windows = sessions.turn_windows(sessions.render_record(record))
    assert [w.answered for w in windows if w.kind == "turn"] == [False, False, True]
    assert windows[0].text == ""  # a question alone: no words to index
    assert windows[1].text == "The deploy uses Helm now."
    assert "Which queue" in windows[2].text and "outbound-mail" in windows[2].text
    # Answered in turn 3, the description stays searchable; unanswered, it does not.
    assert sessions.description_evidence(record) == record.description
    unanswered = _record(turns=turns[:2], description="Which queue do the emails go through?")
    assert sessions.description_evidence(unanswered) == ""


def test_a_session_that_did_nothing_is_not_substantive():
    asked = Turn(1, "2026-03-25", "09:01", user="Where are the feature flags defined?",
                 agent="Got it.")
    bare = SessionRecord(path="sessions/2026-03/2026-03-25-0b6f1c2e.md", session=SID,
                         host="claude-code", turns=(asked,))
    assert not sessions.substantive(bare)
    assert sessions.substantive(replace(bare, turns=(replace(asked, agent="In flags.yaml."),)))
    assert sessions.substantive(replace(bare, turns=(replace(asked, activity="1 command"),)))
    assert sessions.substantive(replace(bare, memories=(("decisions/flags.md", "stored"),)))
    assert sessions.substantive(replace(bare, checks=(Check("make lint", 1, 0, "passed"),)))
