"""Transcript reading on real Claude Code sessions (issue 12, item 1): what the user said
is user text; host wrappers, slash-command echoes and inline sidechains are not."""

from __future__ import annotations

import json
from pathlib import Path

from dualtrace.encoder.digest import build_digest
from dualtrace.hooks.transcripts import read_transcript
from tests.conftest import corpus_path

CCL = ("claude-code", "claude-code-log", "-Users-dain-workspace-claude-code-log-sample")
CCV = ("claude-code", "claude-code-viewer", "sample-project")
REJECTED = ("The user doesn't want to proceed with this tool use. The tool use was rejected "
            "(eg. if it was a file edit, the new_string was NOT written to the file). STOP what "
            "you are doing and wait for the user to tell you how to proceed.")


def main_users(session):
    return [e for e in session.events if e.kind == "user" and e.agent is None]


def test_rejected_edits_are_not_changes_and_the_correction_is_the_user(tmp_path):
    path = corpus_path(*CCL, "0d3a8e6f-290f-4105-a327-a2496e5e2a83.jsonl")
    s = read_transcript(path)
    rejected = [e for e in s.events if e.detail == "rejected"]
    assert len(rejected) == 3 and all(e.kind == "tool" and e.is_error for e in rejected)
    # the three MultiEdit calls the user refused were never written: no edit event for them
    refused = {e.uuid for e in rejected}
    assert not any(e.kind == "edit" and e.uuid in refused for e in s.events)
    said = [e.text for e in main_users(s)]
    assert said[1] == "You can set group.visible using the vis library which is less work"


def test_a_rejection_reason_reaches_the_digest_as_a_user_statement(tmp_path):
    src = corpus_path(*CCL, "0d3a8e6f-290f-4105-a327-a2496e5e2a83.jsonl")
    lines = src.read_text(encoding="utf-8").splitlines()
    out = []
    done = False
    for line in lines:
        rec = json.loads(line)
        content = rec.get("message", {}).get("content") if rec.get("type") == "user" else None
        if not done and isinstance(content, list) and any(
                b.get("type") == "tool_result" and b.get("is_error") for b in content):
            for b in content:
                if b.get("type") == "tool_result" and b.get("is_error"):
                    # the newer host's wording when the user types a reason with the rejection
                    b["content"] = (REJECTED + " The user provided the following reason for the "
                                    "rejection: use pnpm, never npm, in this repo")
            done = True
        out.append(json.dumps(rec))
    path = tmp_path / "with-reason.jsonl"
    path.write_text("\n".join(out) + "\n", encoding="utf-8")
    s = read_transcript(path)
    reasons = [e for e in main_users(s) if (e.detail or "").startswith("rejection")]
    assert [e.text for e in reasons] == ["use pnpm, never npm, in this repo"]
    digest = build_digest(s).text
    assert "USER: use pnpm, never npm, in this repo" in digest
    assert "exit 1" not in digest.split("use pnpm")[0][-200:]


def test_slash_command_arguments_are_the_request_and_sidechains_are_not_the_main_thread():
    s = read_transcript(corpus_path(*CCV, "fe5e1c67-53e7-4862-81ae-d0e013e3270b.jsonl"))
    said = [e.text for e in main_users(s)]
    # "/orchestrator <arguments>" is what the user typed and asked; its expanded template
    # (isMeta) and the 405 inline sidechain records are not the user speaking
    assert said == ["/orchestrator create TODO app by Next.js",
                    "Thanks! Please update CLAUDE.md for current changes"]
    side = [e for e in s.events if e.agent == "sidechain"]
    assert len(side) > 100
    assert any(e.kind == "user" for e in side)  # the prompts the agent wrote to its sub-agents
    assert any(e.kind == "edit" for e in side)  # their edits are still the session's work
    s2 = read_transcript(corpus_path(*CCV, "5c0375b4-57a5-4f26-b12d-d022ee4e51b7.jsonl"))
    assert main_users(s2)[0].text == "/orchestrator @CLAUDE.md を最新の状態にアップデートしてください"


def test_shell_wrappers_are_a_command_never_user_text():
    s = read_transcript(corpus_path(*CCL, "cbc0f75b-b36d-4efd-a7da-ac800ea30eb6.jsonl"))
    for e in main_users(s):
        assert "<bash" not in e.text and "test session starts" not in e.text
        assert "local-command" not in e.text and "command-name" not in e.text
    shell = [e for e in s.events if e.tool == "user-shell"]
    assert len(shell) == 1
    assert shell[0].command == 'uv run pytest -m "not (tui or browser)" -v'
    assert shell[0].exit_code == 1 and "FAILED" in shell[0].result  # kept as context
    assert [e.text for e in main_users(s)] == [
        "Can you please update these tests? We're not doing these complex path selections, just "
        "picking the latest one from the list we got from messages"]


def test_ide_context_is_a_tool_event_not_user_text(tmp_path):
    src = corpus_path(*CCL, "b45ad5d8-81fb-4bcb-baba-19d9f503d731.jsonl")
    out = []
    for line in src.read_text(encoding="utf-8").splitlines():
        rec = json.loads(line)
        content = rec.get("message", {}).get("content") if rec.get("type") == "user" else None
        if isinstance(content, str) and content.startswith("Can you please help"):
            rec["message"]["content"] = (
                "<ide_opened_file>The user opened the file claude_code_log/utils.py in the IDE."
                "</ide_opened_file><ide_selection>def extract_working_directories(</ide_selection>"
                + content)
        out.append(json.dumps(rec))
    path = tmp_path / "ide.jsonl"
    path.write_text("\n".join(out) + "\n", encoding="utf-8")
    s = read_transcript(path)
    users = main_users(s)
    assert users[0].text.startswith("Can you please help")
    ide = [e for e in s.events if e.tool == "ide"]
    assert [e.detail for e in ide] == ["ide_opened_file", "ide_selection"]
    assert "claude_code_log/utils.py" in ide[0].text


def test_real_sessions_never_quote_wrappers_in_memories(tmp_path, monkeypatch):
    from dualtrace.pipeline import encode_session

    monkeypatch.setenv("DUALTRACE_HOME", str(tmp_path / "state"))
    memdir = tmp_path / "mem"
    for name in ("cbc0f75b-b36d-4efd-a7da-ac800ea30eb6.jsonl", "71c9afe9-d9cc-4583-86b3-e62ba682b83a.jsonl"):
        encode_session(corpus_path(*CCL, name), memory_dir=memdir, backend="offline")
    texts = [p.read_text(encoding="utf-8") for p in Path(memdir).rglob("*.md")
             if ".dualtrace" not in p.parts and "sessions" not in p.relative_to(memdir).parts]
    assert texts
    for text in texts:
        for marker in ("<bash", "bash-stdout", "local-command", "command-name", "test session starts",
                       "diff --git", "@@ -"):
            assert marker not in text
    # The session records quote the user verbatim (a patch the user pasted stays), but
    # never the host's wrappers.
    records = list((Path(memdir) / "sessions").rglob("*.md"))
    assert len(records) == 2
    for path in records:
        text = path.read_text(encoding="utf-8")
        for marker in ("<bash", "bash-stdout", "local-command", "command-name"):
            assert marker not in text
