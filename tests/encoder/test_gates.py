"""Cheap gates (docs/PROTOCOL.md §11) on sessions written for the test."""

from __future__ import annotations

import json
from pathlib import Path

from dualtrace.encoder.gates import evaluate
from dualtrace.hooks.transcripts import read_transcript
from tests.conftest import DATA


def plain(tmp_path: Path, *messages: str):
    path = tmp_path / "p.jsonl"
    path.write_text("".join(json.dumps({"role": r, "content": t}) + "\n"
                            for r, t in zip(["user", "assistant"] * len(messages), messages,
                                            strict=False)))
    return read_transcript(path)


def claude_with_tools(tmp_path: Path, calls: list[tuple[str, dict, str, bool]]):
    """calls: (tool name, input, result text, is_error)."""
    lines = [{"type": "user", "uuid": "u0", "sessionId": "s", "timestamp": "2026-03-05T09:00:00Z",
              "message": {"content": "do the work"}}]
    for i, (name, data, result, err) in enumerate(calls):
        ts = f"2026-03-05T09:{i + 1:02d}:00Z"
        lines.append({"type": "assistant", "uuid": f"a{i}", "sessionId": "s", "timestamp": ts,
                      "message": {"id": f"m{i}", "content": [
                          {"type": "tool_use", "id": f"t{i}", "name": name, "input": data}]}})
        lines.append({"type": "user", "uuid": f"r{i}", "sessionId": "s", "timestamp": ts,
                      "message": {"content": [{"type": "tool_result", "tool_use_id": f"t{i}",
                                               "content": result, "is_error": err}]}})
    path = tmp_path / "c.jsonl"
    path.write_text("\n".join(json.dumps(x) for x in lines) + "\n")
    return read_transcript(path)


def test_small_talk_skips_backend(tmp_path: Path):
    v = evaluate(plain(tmp_path, "What does this function return?", "It returns a list."))
    assert not v.activity and not v.signal and v.min_tier is None and v.skip_backend
    assert any("skip backend" in r for r in v.reasons)


def test_stated_preference_is_a_user_signal(tmp_path: Path):
    # Pilot 1A: routed to system/human.md by the encoder, so the gate must not skip it.
    v = evaluate(plain(tmp_path, "I like to keep my functions under 30 lines. If it's getting "
                                 "longer I break it up.", "Noted."))
    assert not v.activity and v.signal and not v.skip_backend
    assert any("user phrase" in r for r in v.reasons)


def test_routine_activity_alone_skips_backend(tmp_path: Path):
    s = claude_with_tools(tmp_path, [("Edit", {"file_path": "/p/a.py", "old_string": "a",
                                               "new_string": "b"}, "ok", False)])
    v = evaluate(s)
    assert v.activity and not v.signal and v.min_tier is None and v.skip_backend


def test_pilot_decision_is_signal_without_activity(tmp_path: Path):
    v = evaluate(plain(tmp_path, "We're switching to JSON structured logging instead of plain "
                                 "text. The main driver was that our Datadog pipeline couldn't "
                                 "parse free-form strings reliably."))
    assert v.signal and not v.activity and not v.skip_backend and v.min_tier is None
    assert any("decision phrase" in r for r in v.reasons)


def test_convention_phrase(tmp_path: Path):
    v = evaluate(plain(tmp_path, "From now on, never commit directly to main."))
    assert v.signal and any("convention phrase" in r for r in v.reasons)


def test_reads_only_are_no_activity(tmp_path: Path):
    s = claude_with_tools(tmp_path, [("Read", {"file_path": "/p/a.py"}, "x", False),
                                     ("Grep", {"pattern": "foo"}, "a.py:1", False)])
    v = evaluate(s)
    assert not v.activity and v.skip_backend


def test_three_file_edits_is_record(tmp_path: Path):
    edits = [("Edit", {"file_path": f"/p/f{i}.py", "old_string": "a", "new_string": "b"}, "ok",
              False) for i in range(3)]
    v = evaluate(claude_with_tools(tmp_path, edits))
    assert v.activity and v.signal and v.min_tier == "RECORD"
    assert v.file_edits == 3 and v.files_changed == 3
    two = evaluate(claude_with_tools(tmp_path, edits[:2] + [edits[0]]))
    assert two.min_tier is None and two.file_edits == 3 and two.files_changed == 2


def test_failed_edit_does_not_count(tmp_path: Path):
    calls = [("Edit", {"file_path": f"/p/f{i}.py"}, "String not found", True) for i in range(3)]
    v = evaluate(claude_with_tools(tmp_path, calls))
    assert v.file_edits == 0 and v.min_tier is None


def test_commit_is_record(tmp_path: Path):
    v = evaluate(claude_with_tools(tmp_path, [("Bash", {"command": "git commit -m 'x'"},
                                               "[main 1a2b3c4] x\n 1 file changed", False)]))
    assert v.commits == 1 and v.min_tier == "RECORD"


def test_error_fix_pass_is_full(tmp_path: Path):
    test = {"command": "pytest -q"}
    calls = [("Bash", test, "Exit code 1\n1 failed", True),
             ("Edit", {"file_path": "/p/a.py"}, "ok", False),
             ("Bash", test, "3 passed", False)]
    v = evaluate(claude_with_tools(tmp_path, calls))
    assert v.fix_arc and v.min_tier == "FULL" and v.failed_commands == 1
    # Without the edit in between it is a flaky rerun, not a fix.
    v2 = evaluate(claude_with_tools(tmp_path, [calls[0], calls[2]]))
    assert not v2.fix_arc and v2.min_tier is None


def test_fixture_sessions():
    assert evaluate(read_transcript(DATA / "claude_session.jsonl")).min_tier == "FULL"
    v = evaluate(read_transcript(DATA / "plain_session.jsonl"))
    assert v.signal and not v.activity


def test_gate_reasons_count_in_english(run_cli):
    """New-user review 5: the gate line read "3 file edits (1 files)", "1 commands"."""
    from tests.conftest import EXAMPLES

    out = run_cli("digest", str(EXAMPLES / "pilot-4-auth-401-session1.jsonl")).output
    assert "activity: 0 file edits (0 files), 1 command (1 failed), 0 commits" in out, out
