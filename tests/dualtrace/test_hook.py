"""The hook fast path as the hosts run it: a real process, stdin JSON, exit 0, silence."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from dualtrace import config, queue
from tests import hook_helpers
from tests.hook_helpers import (
    PY,
    claude_payload,
    run_hook,
    runs,
    wait_drained,
)

BUDGET = 5.0  # seconds; the hosts' timeouts are 5-10 s, a healthy hook takes ~0.05 s

hook_env = hook_helpers.hook_env  # the fixture, shared with the other hook tests


def _transcript(tmp_path: Path, session: str = "s1") -> Path:
    path = tmp_path / "proj" / f"{session}.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text('{"type":"user","message":{"role":"user","content":"hi"}}\n')
    return path


def _log(state: Path) -> str:
    path = state / "logs" / "hook.log"
    return path.read_text() if path.exists() else ""


# Realistic secrets (public scanner test shapes); none may reach a file in the state dir.
GH_TOKEN = "ghp_" + "R8vNq2LxW7kTz4Hs9PcY3mBf6JdA1uEo0iGq"
DB_PASSWORD = "Tr0ub4dor&3-xK9q"
SECRETS = (GH_TOKEN, DB_PASSWORD, GH_TOKEN[-20:])


def _files_holding_secrets(state: Path) -> dict[str, list[str]]:
    """Every file under the state dir (queue, logs, runs, seen, letta, caches...) that
    holds one of SECRETS, with the ones it holds."""
    found: dict[str, list[str]] = {}
    for path in state.rglob("*"):
        if path.is_file():
            data = path.read_bytes()
            hits = [s for s in SECRETS if s.encode() in data]
            if hits:
                found[str(path.relative_to(state))] = hits
    return found


def test_stop_queues_a_debounced_job_silently(hook_env, state_dir, tmp_path):
    transcript = _transcript(tmp_path)
    payload = claude_payload("Stop", "s1", transcript, str(tmp_path), stop_hook_active=False,
                             last_assistant_message=f"done; pushed with {GH_TOKEN}")
    proc = run_hook("stop", payload, env=hook_env)
    assert proc.returncode == 0 and proc.stdout == b""
    jobs = queue.list_jobs(str(state_dir))
    assert len(jobs) == 1
    job = jobs[0]
    assert job["session_id"] == "s1" and job["host"] == "claude-code"
    assert job["transcript"] == str(transcript) and job["immediate"] is False
    assert job["events"] == {"stop": 1}
    # The payload's text is not queued (the worker reads the transcript): the job file
    # is in the state dir, where no secret may land.
    assert "last_assistant_message" not in job
    assert _files_holding_secrets(state_dir) == {}
    # A second Stop refreshes the same job (one file per session), not a second job.
    run_hook("stop", payload, env=hook_env)
    jobs = queue.list_jobs(str(state_dir))
    assert len(jobs) == 1 and jobs[0]["rev"] == 2 and jobs[0]["events"] == {"stop": 2}


@pytest.mark.parametrize("var", ["DUALTRACE_CHILD", "DUALTRACE_DISABLE"])
def test_child_and_disable_queue_nothing(hook_env, state_dir, tmp_path, var):
    env = dict(hook_env, **{var: "1"})
    transcript = _transcript(tmp_path)
    for event in ("stop", "session-end", "session-start"):
        proc = run_hook(event, claude_payload("Stop", "s1", transcript, str(tmp_path)), env=env)
        assert proc.returncode == 0 and proc.stdout == b"" and proc.stderr == b""
    assert not (state_dir / "queue").exists() or queue.list_jobs(str(state_dir)) == []
    assert not (state_dir / "worker.lock").exists()


def test_project_disabled_in_dualtrace_toml(hook_env, state_dir, tmp_path):
    project = tmp_path / "proj"
    transcript = _transcript(tmp_path)
    (project / "dualtrace.toml").write_text("enabled = false\n")
    proc = run_hook("session-end", claude_payload("SessionEnd", "s1", transcript, str(project)),
                    env=hook_env)
    assert proc.returncode == 0 and proc.stdout == b""
    assert queue.list_jobs(str(state_dir)) == []


@pytest.mark.parametrize("payload", [
    {"agent_id": "a1", "agent_type": "Explore"},
    {"hook_event_name": "SubagentStop"},
])
def test_subagent_events_are_ignored(hook_env, state_dir, tmp_path, payload):
    transcript = _transcript(tmp_path)
    body = claude_payload("Stop", "s1", transcript, str(tmp_path))
    body.update(payload)
    proc = run_hook("stop", body, env=hook_env)
    assert proc.returncode == 0 and proc.stdout == b""
    assert queue.list_jobs(str(state_dir)) == []


def _bom_payload(tmp_path: Path) -> bytes:
    return b"\xef\xbb\xbf" + json.dumps(claude_payload(
        "Stop", "bom", _transcript(tmp_path, "bom"), str(tmp_path))).encode()


@pytest.mark.parametrize("name,body,error", [
    ("garbage", b"\x00\xffnot json at all{{{", "not JSON"),
    ("empty", b"", "empty payload"),
    ("truncated", b'{"session_id": "s1", "transcript_path": "/x', "not JSON"),
    ("array", b"[1, 2]", "not an object"),
    ("huge", b'{"session_id": "' + b"x" * (20 * 1024 * 1024) + b'"}', "larger than"),
])
def test_bad_stdin_exits_zero_silently_and_logs(hook_env, state_dir, name, body, error):
    started = time.monotonic()
    proc = run_hook("stop", body, env=hook_env)
    elapsed = time.monotonic() - started
    assert proc.returncode == 0 and proc.stdout == b""
    assert elapsed < BUDGET, f"{name}: {elapsed:.2f}s"
    assert error in _log(state_dir)
    assert queue.list_jobs(str(state_dir)) == []


def test_bom_prefixed_payload_is_accepted(hook_env, state_dir, tmp_path):
    proc = run_hook("stop", _bom_payload(tmp_path), env=hook_env)
    assert proc.returncode == 0 and proc.stdout == b""
    assert [j["session_id"] for j in queue.list_jobs(str(state_dir))] == ["bom"]


def test_missing_transcript_is_logged_and_still_queued(hook_env, state_dir, tmp_path):
    missing = tmp_path / "gone.jsonl"
    proc = run_hook("stop", claude_payload("Stop", "s9", missing, str(tmp_path)), env=hook_env)
    assert proc.returncode == 0 and proc.stdout == b""
    assert "transcript not found yet" in _log(state_dir)
    assert [j["session_id"] for j in queue.list_jobs(str(state_dir))] == ["s9"]


def test_unwritable_queue_dir_exits_zero_and_logs(hook_env, state_dir, tmp_path):
    (state_dir / "queue").write_text("a file where the queue directory should be")
    transcript = _transcript(tmp_path)
    started = time.monotonic()
    proc = run_hook("session-end", claude_payload("SessionEnd", "s1", transcript,
                                                  str(tmp_path)), env=hook_env)
    assert time.monotonic() - started < BUDGET
    assert proc.returncode == 0 and proc.stdout == b""
    assert "session-end:" in _log(state_dir) and "Error" in _log(state_dir)


def test_unusable_state_dir_exits_zero_with_stderr_note(hook_env, tmp_path):
    blocker = tmp_path / "blocker"
    blocker.write_text("not a directory")
    env = dict(hook_env, DUALTRACE_HOME=str(blocker / "state"))
    proc = run_hook("stop", claude_payload("Stop", "s1", _transcript(tmp_path), str(tmp_path)),
                    env=env)
    assert proc.returncode == 0 and proc.stdout == b""
    assert b"dualtrace hook:" in proc.stderr


def test_stdin_left_open_times_out(hook_env, state_dir):
    # A host that never closes stdin: the hook gives up after its short timeout.
    proc = subprocess.Popen([PY, "-m", "dualtrace.hookcmd", "stop"], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, env=hook_env)
    try:
        proc.stdin.write(b'{"session_id": ')  # a partial body, then silence
        proc.stdin.flush()
        code = proc.wait(timeout=BUDGET)  # stdin stays open while we wait
        out = proc.stdout.read()
    finally:
        proc.kill()
        proc.wait()
        proc.stdin.close()
        proc.stdout.close()
    assert code == 0 and out == b""
    assert "stdin not closed" in _log(state_dir)


def test_session_start_sweeps_grown_transcripts(hook_env, state_dir, tmp_path):
    current = _transcript(tmp_path, "now")
    grown = _transcript(tmp_path, "killed")  # encoded once, then grew, never ended
    unseen = _transcript(tmp_path, "old")  # never seen by dualtrace: left alone
    seen_dir = state_dir / "seen"
    seen_dir.mkdir(parents=True)
    jid = queue.job_id("claude-code", "killed")
    (seen_dir / f"{jid}.json").write_text(json.dumps({"transcript": str(grown), "size": 1}))
    assert unseen.exists()
    proc = run_hook("session-start", claude_payload("SessionStart", "now", current,
                                                    str(tmp_path), source="startup"),
                    env=hook_env)
    assert proc.returncode == 0 and proc.stdout == b""
    wait_drained(state_dir)
    assert {r["session"] for r in runs(state_dir)} == {"killed"}
    assert "sweep" in (state_dir / "logs" / "worker.log").read_text()


def test_codex_notify_argument_and_null_transcript(hook_env, state_dir, tmp_path):
    note = {"type": "agent-turn-complete", "thread-id": "th-1", "turn-id": "t1",
            "cwd": str(tmp_path), "last-assistant-message": f"ok, token {GH_TOKEN}"}
    proc = run_hook("notify", None, args=(json.dumps(note),), env=hook_env)
    assert proc.returncode == 0 and proc.stdout == b""
    payload = {"session_id": "cx-2", "turn_id": "t9", "transcript_path": None,
               "cwd": str(tmp_path), "hook_event_name": "Stop", "model": "gpt-5"}
    proc = run_hook("stop", payload, env=hook_env)
    assert proc.returncode == 0
    jobs = {j["session_id"]: j for j in queue.list_jobs(str(state_dir))}
    assert set(jobs) == {"th-1", "cx-2"}
    assert all(j["host"] == "codex" for j in jobs.values())
    assert _files_holding_secrets(state_dir) == {}
    assert "last_assistant_message" not in jobs["th-1"] and jobs["cx-2"]["transcript"] is None


def test_letta_payloads_build_a_plain_chat_transcript(hook_env, state_dir, tmp_path):
    env = dict(hook_env, LETTA_AGENT_ID="agent-7", LETTA_HOOK_EVENT="Stop")
    stop = {"stop_reason": "end_turn", "message_count": 2, "tool_call_count": 1,
            "user_message": "We're switching sessions to Postgres instead of SQLite. The main "
                            "driver was that SQLite locked under concurrent writers. The "
                            f"staging password is {DB_PASSWORD} for now.",
            "assistant_message": "Switched.",
            "working_directory": str(tmp_path)}
    tool = {"tool_name": "Bash", "tool_input": {"command": f"git push https://{GH_TOKEN}@x"},
            "tool_result": f"3 passed; GITHUB_TOKEN={GH_TOKEN}",
            "working_directory": str(tmp_path)}
    # Each hook returns at once; its detached child redacts and writes, in arrival order
    # (the tool's line first although both children redact at the same time).
    assert run_hook("post-tool-use", tool, env=env, args=("--host", "letta")).returncode == 0
    assert run_hook("stop", stop, env=env, args=("--host", "letta")).returncode == 0
    end = {"agent_id": "agent-7", "conversation_id": "conv-1",
           "working_directory": str(tmp_path)}
    proc = run_hook("session-end", end, env=env, args=("--host", "letta"))
    assert proc.returncode == 0 and proc.stdout == b""
    wait_drained(state_dir)
    transcript = state_dir / "letta" / "conv-1.jsonl"
    lines = [json.loads(x) for x in transcript.read_text().splitlines()]
    assert [x["role"] for x in lines] == ["assistant", "user", "assistant"]
    assert "pytest" not in lines[0]["content"] and "[REDACTED:" in lines[0]["content"]
    assert lines[1]["content"].startswith(stop["user_message"][:60])
    assert "[REDACTED:" in lines[1]["content"]
    # Nothing of the payloads' secrets anywhere in the state dir (transcript, queue,
    # logs, runs, seen records), after the hooks *and* the worker ran.
    assert _files_holding_secrets(state_dir) == {}
    done = [r for r in runs(state_dir) if r["session"] == "conv-1"]
    assert done and all(r["host"] == "letta" for r in done)
    assert [r["error"] for r in done] == [None] * len(done)  # encoded, not parked
    assert done[-1].get("transcript") == str(transcript)
    assert done[-1]["commit"] and done[-1]["operations"]
    assert not (state_dir / "letta" / "agent-7.jsonl").exists()  # adopted by conv-1
    assert {j["id"] for j in queue.list_jobs(str(state_dir))} == set()


def test_no_stop_payload_text_reaches_the_state_dir(hook_env, state_dir, tmp_path):
    """A Claude Code session whose Stop payload and transcript carry secrets: after the
    real hooks and the worker, no file in the state dir holds one, and the session
    was still encoded from its transcript."""
    transcript = tmp_path / "proj" / "sec.jsonl"
    transcript.parent.mkdir(parents=True)
    hook_helpers.append_turn(transcript, "sec", str(tmp_path), 0)
    message = f"Deployed. I used the token {GH_TOKEN} and the DB password {DB_PASSWORD}."
    with transcript.open("a") as fh:
        fh.write(json.dumps({"type": "assistant", "sessionId": "sec", "uuid": "sec-x",
                             "timestamp": "2026-05-01T10:09:00.000Z", "message": {
                                 "id": "msg-sec", "role": "assistant", "model": "claude",
                                 "content": [{"type": "text", "text": message}]}}) + "\n")
    stop = claude_payload("Stop", "sec", transcript, str(tmp_path),
                          last_assistant_message=message)
    assert run_hook("stop", stop, env=hook_env).returncode == 0
    assert _files_holding_secrets(state_dir) == {}  # the queued job: no payload text
    end = claude_payload("SessionEnd", "sec", transcript, str(tmp_path), reason="exit")
    assert run_hook("session-end", end, env=hook_env).returncode == 0
    wait_drained(state_dir)
    (record,) = [r for r in runs(state_dir) if r["session"] == "sec"]
    assert record["error"] is None and record["commit"]
    assert _files_holding_secrets(state_dir) == {}


def test_fast_path_imports_nothing_heavy(hook_env, tmp_path):
    transcript = _transcript(tmp_path)
    body = json.dumps(claude_payload("Stop", "s1", transcript, str(tmp_path))).encode()
    script = Path(sys.executable).parent / "dualtrace"
    cmd = [PY, "-X", "importtime", str(script)] if script.is_file() else \
        [PY, "-X", "importtime", "-m", "dualtrace.hookcmd"]
    proc = subprocess.run([*cmd, "hook", "stop"], input=body, capture_output=True, env=hook_env)
    assert proc.returncode == 0
    modules = {line.split("|")[-1].strip() for line in proc.stderr.decode().splitlines()
               if line.startswith("import time:")}
    assert "dualtrace.hookcmd" in modules
    heavy = {"anthropic", "jinja2", "git", "yaml", "click", "dualtrace.pipeline",
             "dualtrace.config", "dataclasses", "subprocess",
             # the MCP SDK (~0.4 s) and what it pulls in belong to `dualtrace mcp` only
             "mcp", "mcp_types", "pydantic", "anyio", "dualtrace.mcp_server",
             "dualtrace.agent_tools"}
    assert not heavy & modules, heavy & modules


def test_prompt_and_session_start_hooks_never_import_the_mcp_sdk(hook_env, tmp_path):
    script = Path(sys.executable).parent / "dualtrace"
    cmd = [PY, "-X", "importtime", str(script)] if script.is_file() else \
        [PY, "-X", "importtime", "-m", "dualtrace.hookcmd"]
    transcript = _transcript(tmp_path)
    for event, name in (("prompt", "UserPromptSubmit"), ("session-start", "SessionStart")):
        payload = dict(claude_payload(name, "s2", transcript, str(tmp_path)),
                       prompt="why did we pick postgres", source="startup")
        proc = subprocess.run([*cmd, "hook", event], input=json.dumps(payload).encode(),
                              capture_output=True, env=hook_env)
        assert proc.returncode == 0
        modules = {line.split("|")[-1].strip() for line in proc.stderr.decode().splitlines()
                   if line.startswith("import time:")}
        assert "dualtrace.hookcmd" in modules
        assert not {"mcp", "mcp_types", "pydantic", "anyio", "dualtrace.mcp_server"} & modules


def test_fast_state_dir_matches_config(monkeypatch, tmp_path):
    assert queue.fast_state_dir() == str(config.state_dir())
    monkeypatch.delenv("DUALTRACE_HOME")
    assert queue.fast_state_dir() == str(config.state_dir())
    monkeypatch.setenv("DUALTRACE_HOME", str(tmp_path / "x" / ".." / "y"))
    assert queue.fast_state_dir() == str(config.state_dir())


def test_hook_never_exits_nonzero_on_unknown_event(hook_env, state_dir):
    proc = run_hook("bogus", b"{}", env=hook_env)
    assert proc.returncode == 0 and proc.stdout == b""
    assert "unknown hook event" in _log(state_dir)


def test_cli_module_route_works(hook_env, state_dir, tmp_path):
    body = json.dumps(claude_payload("Stop", "m1", _transcript(tmp_path), str(tmp_path)))
    proc = subprocess.run([PY, "-m", "dualtrace.cli", "hook", "stop"], input=body.encode(),
                          capture_output=True, env=hook_env)
    assert proc.returncode == 0 and proc.stdout == b""
    assert [j["session_id"] for j in queue.list_jobs(str(state_dir))] == ["m1"]
    assert os.path.exists(state_dir / "worker.lock")
