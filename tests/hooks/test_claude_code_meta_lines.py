"""Claude Code's ``isMeta`` user lines on real sessions: a Stop hook's blocking feedback
and a slash command's expansion (``/init``) reach the session record, labelled as what
they are, and never become the user's words (the encoder's "the user stated")."""

from __future__ import annotations

from dualtrace.encoder import records
from dualtrace.encoder.digest import build_digest
from dualtrace.hooks.transcripts import read_transcript
from tests.conftest import corpus_path

CCV = ("claude-code", "claude-code-viewer", "sample-project")
INIT = "1af7fc5e-8455-4414-9ccd-011d40f70b2a.jsonl"
STOP_HOOK = ("claude-code", "claude-reliability", "coverage-test-fix", "transcript.jsonl")


def _users(session) -> list[str]:
    return [e.text for e in session.events if e.kind == "user"]


def test_stop_hook_feedback_is_a_tool_event_and_a_failure_line_of_the_record(tmp_path):
    s = read_transcript(corpus_path(*STOP_HOOK))
    assert not any("hook feedback" in t or "Cannot exit" in t for t in _users(s))
    hooks = [e for e in s.events if e.detail == "hook-feedback"]
    assert [(e.kind, e.tool) for e in hooks] == [("tool", "Stop hook")] * 2
    assert "Cannot exit with untracked files" in hooks[1].result
    digest = build_digest(s).text
    assert not any(ln.split(": ", 1)[0].endswith("USER") and "hook" in ln.lower()
                   for ln in digest.splitlines())
    _, text = records.record_for(s, tmp_path, project="p", memories=())
    failures = [ln for ln in text.splitlines() if "Stop hook blocked the agent" in ln]
    assert len(failures) == 2
    assert "Cannot exit with untracked files" in failures[1] and "Before stopping" not in text
    assert "stop.sh" not in failures[1]  # the script's name is not the reason


def test_init_expansion_is_labelled_under_the_request_and_describes_the_session(tmp_path):
    s = read_transcript(corpus_path(*CCV, INIT))
    assert _users(s) == ["/init"]  # the user typed /init; Claude Code wrote the prompt
    (expansion,) = [e for e in s.events if e.detail == "command-expansion"]
    assert expansion.kind == "tool" and expansion.tool == "slash-command"
    assert expansion.result.startswith("Please analyze this codebase and create a CLAUDE.md")
    # Before: a bare "/init" was no request, so the session had no record at all.
    assert records.has_request(s)
    record, text = records.record_for(s, tmp_path, project="p", memories=())
    assert record.description.startswith(
        "/init: Please analyze this codebase and create a CLAUDE.md file")
    user = text.split("**User:**", 1)[1].split("**Agent:**", 1)[0]
    assert user.startswith("\n> /init\n>\n> (Claude Code's text for /init: \"Please analyze")
    assert len(user) < records.EXPANSION_CHARS + 120
    assert "empty repository" in text  # what the session found, for "what did /init do"


def test_other_meta_lines_stay_out():
    """The local-command caveat and a skill's text (spotter, claude-code-log sessions
    with such isMeta lines) are neither user words nor kept."""
    for parts in (("claude-code", "spotter", "ae4a77f8-aedd-4bc1-888f-c94edc91af04.jsonl"),
                  ("claude-code", "claude-code-log",
                   "-Users-dain-workspace-claude-code-log-sample",
                   "937c6e6b-27e7-4edd-86f1-ad28f9731841.jsonl")):
        s = read_transcript(corpus_path(*parts))
        assert not any(t.startswith(("Caveat:", "Base directory")) for t in _users(s))
        assert not any(e.detail in ("hook-feedback", "command-expansion") for e in s.events)
        assert dict(s.noise)["meta"] >= 1
