"""What a session record keeps of the agent's words between tool calls (issue 11: the
user's words and the agent's conclusions first, repeated tool noise last).

Built with the real Claude Code reader from transcripts written line by line, and on a
real corpus session; the budget through ``records.fit`` itself.
"""

from __future__ import annotations

import pytest

from dualtrace.encoder.records import fit, is_minor_note, record_for
from dualtrace.hooks.transcripts import read_transcript
from dualtrace.memfs.sessions import Turn, render_body
from tests.conftest import CORPUS
from tests.e2e.test_session_records import Transcript
from tests.memfs.test_session_format import _record

CAUSE = ("SQLite cannot change a column's nullability in place. I need to rewrite the "
         "migration as a copy of the table.")


def _migration_session(tmp_path) -> Transcript:
    t = Transcript(tmp_path / "s.jsonl")
    t.user("Add the state column to annotations")
    t.say("Let me check the generated migration.")
    t.bash("mix ecto.migrate", "** (Exqlite.Error) near \"ALTER\": syntax error", failed=True)
    t.say(CAUSE)
    t.edit("/home/dev/shop/priv/repo/migrations/20260211_add_state.exs")
    t.say("Now add the index.")
    t.say("Clean compile.")
    t.bash("mix ecto.migrate", "migrated")
    t.say("Done: the state column is added; the migration copies the table.")
    return t


def test_the_agents_explanation_between_tool_calls_is_kept_its_narration_is_not(tmp_path):
    session = read_transcript(_migration_session(tmp_path).write())
    record, text = record_for(session, tmp_path, project="shop", memories=())
    turn = record.turns[0]
    assert turn.agent == "Done: the state column is added; the migration copies the table."
    assert CAUSE in turn.notes  # verbatim, neither a decision word nor a "because" in it
    assert CAUSE in text
    for said in ("Let me check the generated migration.", "Now add the index.", "Clean compile."):
        assert said not in text  # what the agent was about to do: the tools' lines say it
    assert is_minor_note(CAUSE)


def test_a_subagents_report_is_kept_as_a_note_of_the_turn_that_started_it(tmp_path):
    t = Transcript(tmp_path / "s.jsonl")
    t.user("Which Next.js version does the project use?")
    t.add("assistant", [{"type": "tool_use", "id": "task1", "name": "Task",
                         "input": {"description": "Check package configuration",
                                   "prompt": "Read package.json", "subagent_type": "general-purpose"}}])
    t.add("user", [{"type": "tool_result", "tool_use_id": "task1",
                    "content": "Next.js: 15.5.2 (upgraded from the documented v14). React: 19.1.0."}])
    t.say("The project is on Next.js 15.")
    record, text = record_for(read_transcript(t.write()), tmp_path, project="shop", memories=())
    notes = record.turns[0].notes
    assert notes == ('Subagent "Check package configuration": Next.js: 15.5.2 (upgraded from '
                     'the documented v14). React: 19.1.0.',)
    assert is_minor_note(notes[0])
    assert "1 subagent" in (record.turns[0].activity or "")


def test_the_budget_drops_minor_notes_first_oldest_first_then_decisions():
    decision = "We decided to keep SQLite because the app ships as one binary."
    minor = [f"The endpoint {n} isn't configured for the test env." for n in range(30)]
    turns = (Turn(1, "2026-03-25", "09:01", user="Add the endpoint", agent="Done.",
                  failures=("09:02 `mix test` exited 1: boom",),
                  notes=(decision, *minor[:15]), activity="3 commands"),
             Turn(2, "2026-03-25", "09:20", user="And the other one", agent="Done too.",
                  notes=tuple(minor[15:])))
    record = _record(turns=turns)
    full = len(render_body(record).encode("utf-8"))
    # Room for about half of the minor notes: the oldest go, the decision stays.
    budget = full - sum(len(m) + 4 for m in minor[:14])
    fitted = fit(record, budget)
    assert len(render_body(fitted).encode("utf-8")) <= budget
    kept = [n for t in fitted.turns for n in t.notes]
    assert decision in kept
    assert minor[-1] in kept and minor[0] not in kept
    assert fitted.turns[0].activity is None  # tool noise went before any of the agent's words
    assert fitted.turns[0].failures == turns[0].failures
    assert fitted.omitted == record.omitted + 1 + sum(m not in kept for m in minor)
    # Room for no minor note at all: they all go before the decision or the failure line.
    bare = _record(turns=(Turn(1, "2026-03-25", "09:01", user="Add the endpoint", agent="Done.",
                               failures=turns[0].failures, notes=(decision,)),
                          Turn(2, "2026-03-25", "09:20", user="And the other one",
                               agent="Done too.")))
    tight = fit(record, len(render_body(bare).encode("utf-8")))
    kept = [n for t in tight.turns for n in t.notes]
    assert kept == [decision]
    assert tight.turns[0].failures == turns[0].failures


SPOTTER = CORPUS / "claude-code" / "spotter"


@pytest.mark.skipif(not SPOTTER.is_dir(), reason="shared corpus not available")
def test_a_real_sessions_record_keeps_why_the_migration_was_rewritten(tmp_path):
    """spotter 258c7280: the agent said why it rewrote the generated migration between
    two tool calls, in words no decision pattern matches; the record had dropped it."""
    path = next(SPOTTER.glob("258c7280-*.jsonl"))
    record, text = record_for(read_transcript(path), tmp_path, project="spotter", memories=())
    assert ("The auto-generated migration uses `ALTER TABLE ... modify` which SQLite doesn't "
            "support for nullability changes. I need to rewrite it with a SQLite-safe table "
            "rewrite pattern.") in text
    assert len(text.encode("utf-8")) <= 12000
    assert "No ConnCase module — tests use raw `ExUnit.Case`." in text  # a finding, kept
    for narration in ("Let me force a clean recompile.",
                      "Now let me update the tests and verify compilation."):
        assert narration not in text
    # Narration that gives a reason stays.
    assert "Let me apply all remaining changes in one batch to avoid intermediate" in text
