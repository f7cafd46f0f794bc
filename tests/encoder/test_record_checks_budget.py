"""A session record's budget: the checks that passed come after the agent's notes.

With one check pattern for records and the offline encoder (encoder/cues.CHECK_COMMAND),
records list the Elixir and task-runner checks too. A session of many `mix credo` /
`mix compile` runs then had a frontmatter (the checks list and the outcome line) that
took the body's budget, and the agent's notes were dropped first: on the question set
that lost one answer (bench/eval_sessions.py, a63). Now passed checks are what goes."""

from __future__ import annotations

from dualtrace.encoder import cues
from dualtrace.encoder.backends import work
from dualtrace.encoder.records import record_for
from dualtrace.hooks.transcripts import read_transcript
from dualtrace.memfs import sessions
from tests.e2e.test_session_records import Transcript

NOTE = ("We decided to suppress the credo check for that one line, because the compiler "
        "warns the alias is unused when its only use is inside a rescue block.")


def _session(tmp_path):
    t = Transcript(tmp_path / "credo.jsonl", cwd="/home/dev/spotter")
    t.user("Add the active session registry: a GenServer with an ETS table that tracks "
           "each session's lifecycle (active, ended, inactive), sweeps stale sessions "
           "every 15s with a 90s TTL and broadcasts on the session_activity topic. "
           "Then make credo and the compiler agree on the tmux alias.")
    t.say(NOTE)
    for i in range(12):  # 24 passing checks (timestamps stay within one hour)
        t.bash(f"mix credo --strict lib/spotter/services/module_{i}.ex 2>&1", "no issues")
        t.bash(f"mix compile --warnings-as-errors lib/spotter/module_{i}.ex", "Compiled")
    t.bash("mix dialyzer 2>&1", "lib/spotter/registry.ex:12: no local return", failed=True)
    t.say("Done. Dialyzer still reports one warning I could not fix.")
    t.user("Summarize what the registry does for the README.")
    t.say("The registry keeps one row per session in an ETS table. " * 16)
    return read_transcript(t.write())


def test_one_check_pattern_for_records_and_the_offline_encoder():
    assert work.CHECK_COMMAND is cues.CHECK_COMMAND
    assert not hasattr(cues, "FAILING_CHECK")


def test_passed_checks_leave_the_budget_before_the_notes(tmp_path):
    session = _session(tmp_path)
    record, text = record_for(session, tmp_path, project="spotter", memories=(), budget=4000)
    assert NOTE in text  # the notes stay
    assert len(text.encode()) <= 4000  # and the file keeps its budget
    failed = [c for c in record.checks if c.outcome == "failed"]
    assert [c.command for c in failed] == ["mix dialyzer 2>&1"]  # a failed check always stays
    kept = [c.command for c in record.checks if c.outcome == "passed"]
    assert 0 < len(kept) < 20 and kept[-1].startswith("mix compile --warnings-as-errors")
    assert "module_11" in kept[-1]  # the latest ones are the ones kept
    assert record.omitted >= 19 - len(kept)  # MAX_CHECKS = 20, one of them failed
    # the file says what it left out, and parses back to the same checks
    assert sessions.parse_record(text, record.path).checks == record.checks


def test_a_record_within_its_budget_keeps_every_check(tmp_path):
    session = _session(tmp_path)
    record, text = record_for(session, tmp_path, project="spotter", memories=(), budget=60000)
    assert record.omitted == 0 and NOTE in text
    assert len(record.checks) == 20  # MAX_CHECKS: the latest twenty, as before
