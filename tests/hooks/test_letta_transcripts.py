"""Letta Code's own transcripts (~/.letta/transcripts/<agent>/<conversation>/transcript.jsonl):
the reader, where they are, and the hooks and sweep using them (real hook processes).

Record shapes are Letta Code's (src/cli/helpers/reflectionTranscript.ts: kind, text,
captured_at, source_line_id, source_message_id; tool_call: name, argsText, resultText,
resultOk). HOME is a temp dir (tests/conftest.py), so ~/.letta is too.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from dualtrace import queue
from dualtrace.hooks import letta
from dualtrace.hooks.transcripts import detect_format, read_transcript
from tests import hook_helpers
from tests.hook_helpers import hook_children_done, run_hook, runs, wait_drained, wait_until

hook_env = hook_helpers.hook_env

DECISION = ("<system-reminder>The current working directory is /srv/app.</system-reminder>"
            "We're switching session storage to Postgres instead of SQLite. The main driver "
            "was that SQLite locked under concurrent writers.")
AT = "2026-11-30T10:00:0{}.000Z"


def rec(kind: str, n: int, **fields) -> dict:
    return {"kind": kind, "captured_at": AT.format(n), "source_line_id": f"line-{n}", **fields}


def tool(n: int, name: str, args: dict | str, result: str, ok: bool | None = True) -> dict:
    return rec("tool_call", n, name=name, resultText=result, resultOk=ok,
               argsText=args if isinstance(args, str) else json.dumps(args))


SESSION = [
    rec("user", 0, text=DECISION, source_message_id="message-u1"),
    rec("reasoning", 1, text="The settings module picks the backend."),
    tool(2, "Edit", {"file_path": "src/settings.py", "old_string": "sqlite", "new_string":
                     "postgres"}, "The file src/settings.py has been updated."),
    tool(3, "Bash", {"command": "pytest -q"}, "1 failed, 2 passed", ok=False),
    tool(4, "ApplyPatch", {"input": "*** Begin Patch\n*** Add File: migrations/0007.sql\n+x\n"
                                    "*** End Patch\n"}, "Done"),
    tool(5, "Bash", {"command": "git commit -m 'Sessions in Postgres'"},
         "[main 9c3d5e7] Sessions in Postgres\n 2 files changed"),
    rec("assistant", 6, text="Switched session storage to", source_message_id="message-a1"),
    # the same line written again, complete: it replaces the first
    rec("assistant", 6, text="Switched session storage to Postgres; the tests pass.",
        source_message_id="message-a1"),
    rec("error", 7, text="Rate limited by the model provider"),
]


def write(path: Path, records: list[dict]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a", encoding="utf-8") as fh:
        for r in records:
            fh.write(json.dumps(r) + "\n")
    return path


def native(agent: str, conversation: str, records: list[dict] = SESSION) -> Path:
    return write(Path(letta.native_path(agent, conversation)), records)


# ------------------------------------------------------------------ the reader


def test_reader_maps_letta_records_to_session_events():
    path = native("agent-1", "conv-9")
    assert path == Path.home() / ".letta/transcripts/agent-1/conv-9/transcript.jsonl"
    assert detect_format(path) == "letta"
    s = read_transcript(path)  # auto-detected
    assert s.session_id == "conv-9" and s.host == "letta"
    assert (s.started, s.ended) == (AT.format(0), AT.format(7))
    kinds = [(e.kind, e.tool, e.detail) for e in s.events]
    assert kinds == [
        ("user", None, None), ("assistant", None, "thinking"), ("edit", "Edit", None),
        ("command", "Bash", None), ("edit", "ApplyPatch", None), ("command", "Bash", None),
        ("commit", None, "9c3d5e7"), ("assistant", None, None),
        ("error", None, "letta-error")]
    user, _, edit, failed, patch, commit_cmd, commit, said, error = s.events
    assert user.text.startswith("We're switching session storage")  # reminder dropped
    assert "system-reminder" not in user.text and user.uuid == "message-u1"
    assert edit.path == "src/settings.py" and edit.text == "- sqlite\n+ postgres"
    assert failed.command == "pytest -q" and failed.is_error and failed.exit_code == 1
    assert (patch.path, patch.edit_kind) == ("migrations/0007.sql", "create")
    assert commit_cmd.exit_code == 0 and commit.text == "Sessions in Postgres"
    assert said.text == "Switched session storage to Postgres; the tests pass."
    assert error.is_error and error.text == "Rate limited by the model provider"
    assert s.skipped_lines == 0


def test_reader_reads_from_a_cursor_and_the_plain_payload_log_too(tmp_path):
    path = native("agent-1", "conv-9", SESSION[:1])
    first = read_transcript(path, fmt="letta")
    write(path, SESSION[6:7])
    rest = read_transcript(path, cursor=first.cursor, fmt="letta")
    assert [e.kind for e in rest.events] == ["assistant"] and rest.session_id == "conv-9"
    # dualtrace's own log (older Letta Code without transcripts) is the same host's format
    log = write(tmp_path / "conv-1.jsonl", [{"role": "user", "content": "hello there"},
                                           {"role": "assistant", "content": "hi"}])
    plain = read_transcript(log, fmt=letta.TRANSCRIPT_FORMAT)
    assert [e.kind for e in plain.events] == ["user", "assistant"] and plain.host == "letta"


def test_paths_follow_letta_rules(monkeypatch, tmp_path):
    monkeypatch.setenv("LETTA_TRANSCRIPT_ROOT", str(tmp_path / "root"))
    assert letta.native_path("agent/x", "conv 1") == str(
        tmp_path / "root" / "agent_x" / "conv_1" / "transcript.jsonl")
    assert letta.segment("..") == "unknown" and letta.segment("") == "unknown"
    a = native("agent-1", "conv-a")
    b = native("agent-1", "conv-b")
    native("agent-2", "conv-c")
    os.utime(a, (1, 1))
    assert letta.latest_native("agent-1") == str(b)
    assert letta.sibling_transcripts(str(a)) == [str(a), str(b)]
    assert letta.sibling_transcripts(str(tmp_path / "state" / "letta" / "c.jsonl")) == []
    assert letta.session_of(str(a)) == "conv-a"
    assert letta.find_transcript("conv-c") == letta.native_path("agent-2", "conv-c")
    assert letta.find_transcript("nope") is None


# ------------------------------------------------------------------ hooks (real processes)


def test_hooks_use_lettas_transcript_instead_of_logging_payloads(hook_env, state_dir, tmp_path):
    project = tmp_path / "project"
    project.mkdir()
    path = native("agent-7", "conv-42")
    env = dict(hook_env, LETTA_AGENT_ID="agent-7")
    tool_payload = {"event_type": "PostToolUse", "tool_name": "Bash",
                    "tool_input": {"command": "pytest"}, "tool_result":
                    {"status": "success", "output": "3 passed"},
                    "working_directory": str(project)}
    # Stop names no conversation: the agent's transcript written last is this one
    stop = {"event_type": "Stop", "stop_reason": "end_turn", "working_directory": str(project),
            "user_message": "PAYLOAD-ONLY words", "assistant_message": "PAYLOAD-ONLY reply"}
    for event, payload in (("post-tool-use", tool_payload), ("stop", stop)):
        proc = run_hook(event, payload, env=env)  # detected as Letta by event_type
        assert proc.returncode == 0 and proc.stdout == b"" and proc.stderr == b""
    jobs = queue.list_jobs(str(state_dir))  # queued by the hook itself: no detached child
    assert [(j["host"], j["session_id"], j["transcript"]) for j in jobs] == [
        ("letta", "conv-42", str(path))]
    assert not (state_dir / letta.DIR).exists()  # no payload log kept
    end = {"event_type": "SessionEnd", "agent_id": "agent-7", "conversation_id": "conv-42",
           "working_directory": str(project)}
    proc = run_hook("session-end", end, env=env)
    assert proc.returncode == 0 and proc.stdout == b""
    wait_drained(state_dir)
    done = [r for r in runs(state_dir) if r["session"] == "conv-42"]
    assert done and all(r["host"] == "letta" for r in done)
    assert [r["error"] for r in done] == [None] * len(done)  # encoded, not parked
    assert done[-1]["transcript"] == str(path) and done[-1]["commit"]
    memory = Path(env["DUALTRACE_MEMORY_DIR"])
    stored = "\n".join(p.read_text() for p in memory.rglob("*.md") if ".git" not in p.parts)
    assert "Postgres" in stored and "PAYLOAD-ONLY" not in stored


def test_session_start_sweeps_the_agents_grown_conversations(hook_env, state_dir, tmp_path):
    project = tmp_path / "project"
    project.mkdir()
    grown = native("agent-7", "conv-killed")  # encoded once, then grew, never ended
    native("agent-7", "conv-unseen")  # never seen by dualtrace: left alone
    native("agent-8", "conv-other-agent")
    seen = state_dir / queue.SEEN
    seen.mkdir(parents=True)
    for conv in ("conv-killed", "conv-other-agent"):
        path = letta.native_path("agent-8" if conv == "conv-other-agent" else "agent-7", conv)
        (seen / f"{queue.job_id('letta', conv)}.json").write_text(
            json.dumps({"transcript": path, "size": 1}))
    start = {"event_type": "SessionStart", "agent_id": "agent-7", "conversation_id": "conv-new",
             "is_new_session": True, "working_directory": str(project)}
    proc = run_hook("session-start", start, env=hook_env)
    assert proc.returncode == 0
    wait_drained(state_dir)
    done = runs(state_dir)
    assert {r["session"] for r in done} == {"conv-killed"}
    assert [r["error"] for r in done] == [None] * len(done)
    assert done[-1]["transcript"] == str(grown) and done[-1]["commit"]
    assert "sweep" in (state_dir / "logs" / "worker.log").read_text()


@pytest.mark.parametrize("conversation", [None, "conv-1"])
def test_without_lettas_transcript_the_payload_log_is_kept(hook_env, state_dir, tmp_path,
                                                          conversation):
    """An older Letta Code (no ~/.letta/transcripts): payloads are logged as before."""
    env = dict(hook_env, LETTA_AGENT_ID="agent-7")
    stop = {"event_type": "Stop", "working_directory": str(tmp_path),
            "user_message": "hello", "assistant_message": "hi"}
    if conversation:
        stop["conversation_id"] = conversation
    assert run_hook("stop", stop, env=env).returncode == 0
    # the hook's detached child redacts and writes the lines, then queues the session
    wait_until(lambda: hook_children_done(state_dir) and queue.list_jobs(str(state_dir)), 60,
               what="the payload lines kept and the session queued")
    [job] = queue.list_jobs(str(state_dir))
    key = conversation or "agent-7"
    assert job["transcript"] == str(state_dir / letta.DIR / f"{key}.jsonl")
    assert Path(job["transcript"]).is_file()


# ------------------------------------------------------------------ two conversations at once


def _letta_env(hook_env: dict) -> dict:
    """Letta Code's hook runner drops LETTA_AGENT_ID unless the payload has an agent_id
    (src/hooks/executor.ts), so a Stop hook sees neither the agent nor the conversation."""
    return {k: v for k, v in hook_env.items() if k != "LETTA_AGENT_ID"}


def _prompt(env: dict, project: Path, conversation: str, text: str) -> None:
    payload = {"event_type": "UserPromptSubmit", "prompt": text, "is_command": False,
               "agent_id": "agent-7", "conversation_id": conversation,
               "working_directory": str(project)}
    proc = run_hook("prompt", payload, env=env)
    assert proc.returncode == 0 and proc.stderr == b"", proc.stderr


def _stop(env: dict, project: Path, user_message: str | None) -> None:
    payload = {"event_type": "Stop", "stop_reason": "end_turn", "message_count": 2,
               "working_directory": str(project), "assistant_message": "Done."}
    if user_message is not None:
        payload["user_message"] = user_message
    proc = run_hook("stop", payload, env=env)
    assert proc.returncode == 0 and proc.stdout == b"" and proc.stderr == b"", proc.stderr


def test_stop_queues_its_own_conversation_when_two_of_one_agent_run_at_once(
        hook_env, state_dir, tmp_path):
    project = tmp_path / "project"
    project.mkdir()
    a, b = native("agent-7", "conv-a"), native("agent-7", "conv-b")
    os.utime(a, (1_000_000, 1_000_000))  # conv-b's transcript is the one written last
    env = _letta_env(hook_env)
    _prompt(env, project, "conv-a", "Why did the login test fail on CI? token sk-live-123")
    _prompt(env, project, "conv-b", "Rename the settings module")

    def jobs() -> list[tuple[str, str]]:
        return sorted((j["session_id"], j["transcript"]) for j in queue.list_jobs(str(state_dir)))

    _stop(env, project, "Why did the login test fail on CI? token sk-live-123")
    assert jobs() == [("conv-a", str(a))]  # not conv-b, the newest file
    _stop(env, project, "Rename the settings module")
    assert jobs() == [("conv-a", str(a)), ("conv-b", str(b))]
    assert not (state_dir / letta.DIR / "letta.jsonl").exists()  # no payload log kept
    # The turn records hold ids, never the prompt's words.
    records = list((state_dir / letta.DIR / letta.TURNS).iterdir())
    assert len(records) == 2
    text = "".join(p.read_text() for p in records)
    assert "conv-a" in text and "login" not in text and "sk-live" not in text

    # The same two Stops with no debounce: the real worker encodes each conversation
    # from its own transcript.
    for job in queue.list_jobs(str(state_dir)):
        queue.remove(str(state_dir), job["id"])
    env["DUALTRACE_DEBOUNCE_SECONDS"] = "0"
    _stop(env, project, "Rename the settings module")
    _stop(env, project, "Why did the login test fail on CI? token sk-live-123")
    wait_drained(state_dir)
    done = runs(state_dir)
    assert {(r["session"], r["transcript"]) for r in done} == {("conv-a", str(a)),
                                                                ("conv-b", str(b))}
    assert [r["error"] for r in done] == [None] * len(done)
    assert any(r["commit"] for r in done)


def test_stop_without_user_message_takes_the_last_prompt_in_its_directory(
        hook_env, state_dir, tmp_path):
    """An older Stop payload (no user_message): the conversation of the last prompt
    submitted in this working directory, not the agent's newest transcript."""
    here, there = tmp_path / "here", tmp_path / "there"
    here.mkdir()
    there.mkdir()
    a = native("agent-7", "conv-here")
    native("agent-7", "conv-there")  # written last
    os.utime(a, (1_000_000, 1_000_000))
    env = _letta_env(hook_env)
    _prompt(env, here, "conv-here", "first question")
    _prompt(env, there, "conv-there", "second question")
    _stop(env, here, None)
    assert [(j["session_id"], j["transcript"]) for j in queue.list_jobs(str(state_dir))] == [
        ("conv-here", str(a))]


# ------------------------------------------------------------------ backfill without paths


def test_backfill_without_paths_finds_the_projects_letta_conversations(tmp_path):
    import subprocess
    import sys

    project = tmp_path / "project"
    (project / ".letta").mkdir(parents=True)
    # letta-code's LocalProjectSettings: the agents this directory used
    (project / ".letta" / "settings.local.json").write_text(json.dumps({
        "lastAgent": "agent-7",
        "sessionsByServer": {"api.letta.com": {"agentId": "agent-9", "conversationId": "c"}},
        "permissions": {"allow": []}}))
    mine = [native("agent-7", "conv-1"), native("agent-9", "conv-9")]
    native("agent-8", "conv-elsewhere")  # another project's agent
    assert sorted(letta.project_transcripts(project)) == sorted(mine)

    memory = tmp_path / "memory"
    proc = subprocess.run([sys.executable, "-m", "dualtrace.cli", "backfill", "--backend",
                           "offline", "--memory-dir", str(memory)], cwd=project,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert "2 transcript(s): 2 encoded" in proc.stdout, proc.stdout
    log = subprocess.run(["git", "-C", str(memory), "log", "--format=%B"], capture_output=True,
                         text=True, check=True).stdout
    assert "conv-1" in log and "conv-9" in log and "conv-elsewhere" not in log
