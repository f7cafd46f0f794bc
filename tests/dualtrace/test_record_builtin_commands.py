"""Claude Code's own commands (/compact, /clear, /model ...) are not requests (review 7,
F27): no turn, no "the last request has no answer" open end. A custom command's
arguments still are the user's request (#12 item 1)."""

from __future__ import annotations

from pathlib import Path

from dualtrace.hooks.claude_code import clean_user_text
from dualtrace.memfs.sessions import parse_record
from tests.conftest import corpus_path
from tests.e2e.test_session_records import Transcript, encode


def _command(name: str, args: str = "") -> str:
    # what Claude Code 2.1 writes for a typed slash command
    return (f"<command-name>{name}</command-name>\n            <command-message>{name[1:]}"
            f"</command-message>\n            <command-args>{args}</command-args>")


def _record(memdir: Path):
    (path,) = memdir.glob("sessions/*/*.md")
    return parse_record(path.read_text(), str(path))


def test_built_in_commands_are_no_turn_and_no_open_end(memdir, tmp_path):
    t = Transcript(tmp_path / "t.jsonl")
    t.user(_command("/fix", "the flaky auth test"))  # a custom command: the request
    t.bash("pytest -q tests/test_auth.py", "12 passed in 0.4s")
    t.say("The auth tests pass now; the retry covers the staging proxy's dropped call.")
    for name, args in (("/compact", ""), ("/compact", "keep the retry decision"),
                       ("/model", "sonnet"), ("/cost", ""), ("/add-dir", "../lib")):
        t.user(_command(name, args))
        t.user("<local-command-stdout>Compacted (ctrl+o to see full summary)"
               "</local-command-stdout>")
    encode(memdir, t.write())
    record = _record(memdir)
    assert [turn.user for turn in record.turns] == ["/fix the flaky auth test"]
    assert record.open_ends == ()
    assert record.description == "/fix the flaky auth test"


def test_a_built_in_that_prompts_the_agent_and_a_custom_command_stay_requests():
    assert clean_user_text(_command("/review", "the auth module")) == "/review the auth module"
    assert clean_user_text(_command("/deploy", "staging")) == "/deploy staging"
    assert clean_user_text(_command("/compact", "keep the API decisions")) == ""
    assert clean_user_text(_command("/model", "opus")) == ""


def test_a_real_compact_is_not_an_unanswered_request(memdir):
    # agentlogs' compact fixture: a question, its answer, then the user's /compact
    encode(memdir, corpus_path("agentlogs", "claudecode", "compact.jsonl"))
    record = _record(memdir)
    assert [turn.user for turn in record.turns] == ["how are you doing"]
    assert record.open_ends == ()
