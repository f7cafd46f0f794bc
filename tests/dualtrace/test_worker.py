"""The worker end to end: hooks fired as the host does, the real pipeline (offline)."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import threading
import time
from pathlib import Path

from dualtrace import queue
from tests import hook_helpers
from tests.conftest import EXAMPLES
from tests.hook_helpers import (
    PY,
    append_turn,
    claude_payload,
    git_subjects,
    hook_cmd,
    no_workers_left,
    run_hook,
    runs,
    wait_drained,
    wait_until,
    worker_pid,
    worker_running,
)

hook_env = hook_helpers.hook_env  # the fixture, shared with the other hook tests


def _mem_commits(memdir: Path) -> list[str]:
    """Commits that wrote memories (the store's own init commit excluded)."""
    return [s for s in git_subjects(memdir) if "init" not in s.lower()]


def _split_turns(lines: list[str]) -> list[list[str]]:
    """Claude Code lines grouped by turn: a turn starts at a real user prompt."""
    turns: list[list[str]] = []
    for line in lines:
        rec = json.loads(line)
        content = (rec.get("message") or {}).get("content")
        starts = rec.get("type") == "user" and isinstance(content, str)
        if starts or not turns:
            turns.append([])
        turns[-1].append(line)
    return turns


def test_stop_per_turn_then_session_end_encodes_once(hook_env, state_dir, tmp_path):
    source = EXAMPLES / "pilot-1b-structured-logging.jsonl"
    lines = source.read_text().splitlines()
    session = json.loads(lines[0])["sessionId"]
    project = tmp_path / "shop-api"
    project.mkdir()
    transcript = tmp_path / "claude" / f"{session}.jsonl"
    transcript.parent.mkdir()
    turns = _split_turns(lines)
    assert len(turns) >= 2
    for turn in turns:
        with transcript.open("a") as fh:
            fh.write("\n".join(turn) + "\n")
        proc = run_hook("stop", claude_payload("Stop", session, transcript, str(project),
                                               stop_hook_active=False), env=hook_env)
        assert proc.returncode == 0 and proc.stdout == b""
    # Debounced (600 s): nothing encoded yet, the job waits in the queue.
    time.sleep(0.3)
    assert runs(state_dir) == []
    assert [j["events"] for j in queue.list_jobs(str(state_dir))] == [{"stop": len(turns)}]
    end = claude_payload("SessionEnd", session, transcript, str(project), reason="other")
    assert run_hook("session-end", end, env=hook_env).returncode == 0
    wait_drained(state_dir)
    records = runs(state_dir)
    assert len(records) == 1, records
    assert records[0]["error"] is None and records[0]["commit"]
    assert records[0]["backend"] == "offline" and records[0]["operations"]
    memdir = Path(hook_env["DUALTRACE_MEMORY_DIR"])
    assert len(_mem_commits(memdir)) == 1
    # A duplicate SessionEnd (plugin + settings copies both fire) encodes nothing new.
    assert run_hook("session-end", end, env=hook_env).returncode == 0
    wait_drained(state_dir)
    records = runs(state_dir)
    assert len(records) == 2 and records[1]["commit"] is None and records[1]["skipped"]
    assert len(_mem_commits(memdir)) == 1
    assert no_workers_left(state_dir)
    # worker.log says what each encode did, as README promises (review 7 F22).
    encodes = [line for line in (state_dir / "logs" / "worker.log").read_text().splitlines()
               if f" encode {session} " in line]
    assert len(encodes) == 2, encodes
    done, again = encodes
    head = f"encode {session} (claude-code, attempt 1): backend offline, "
    assert head in done and f": commit {records[0]['commit'][:12]}: store " in done, done
    assert re.search(r"backend offline, \d+ ms: commit", done), done
    stored = [op["path"] for op in records[0]["operations"] if op["action"] == "store"]
    assert stored and all(path in done for path in stored[:6]), done
    assert f"encode {session} (claude-code, attempt 1): backend -, " in again, again
    assert again.endswith(f": no commit: {records[1]['skipped']}"), again


def test_four_agents_end_twenty_sessions_at_once(hook_env, state_dir, tmp_path):
    mem_a, mem_b = tmp_path / "mem-a", tmp_path / "mem-b"
    sessions: dict[str, tuple[Path, Path]] = {}
    for agent in range(4):
        for n in range(5):
            sid = f"agent{agent}-s{n}"
            transcript = tmp_path / "t" / f"{sid}.jsonl"
            transcript.parent.mkdir(exist_ok=True)
            append_turn(transcript, sid, str(tmp_path), (agent + n) % 3)
            sessions[sid] = (transcript, mem_a if agent < 2 else mem_b)
    errors: list[str] = []

    def agent_loop(agent: int) -> None:
        for sid, (transcript, mem) in sessions.items():
            if not sid.startswith(f"agent{agent}-"):
                continue
            env = dict(hook_env, DUALTRACE_MEMORY_DIR=str(mem))
            for event, name in (("stop", "Stop"), ("session-end", "SessionEnd")):
                proc = subprocess.run(
                    [*hook_cmd(), "hook", event],
                    input=json.dumps(claude_payload(name, sid, transcript,
                                                    str(tmp_path))).encode(),
                    capture_output=True, env=env, timeout=30)
                if proc.returncode != 0 or proc.stdout:
                    errors.append(f"{sid} {event}: {proc.returncode} {proc.stdout!r}")

    started = time.monotonic()
    threads = [threading.Thread(target=agent_loop, args=(a,)) for a in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    fire_seconds = time.monotonic() - started
    assert not errors
    wait_drained(state_dir, timeout=240)
    records = runs(state_dir)
    by_session: dict[str, list[dict]] = {}
    for rec in records:
        by_session.setdefault(rec["session"], []).append(rec)
    assert set(by_session) == set(sessions), f"lost: {set(sessions) - set(by_session)}"
    for sid, recs in by_session.items():
        encoded = [r for r in recs if r["error"] is None and r["cursor"][1] > r["cursor"][0]]
        assert [r["error"] for r in recs if r["error"]] == [], sid
        assert len(encoded) == 1, (sid, recs)  # each transcript's bytes read exactly once
        assert recs[0]["memory_dir"] == str(sessions[sid][1])
    # One job at a time: run intervals never overlap (per memory dir, and here globally).
    spans = sorted((r["started_at"], r["finished_at"]) for r in records)
    assert all(a[1] <= b[0] for a, b in zip(spans, spans[1:], strict=False))
    assert queue.list_jobs(str(state_dir)) == []
    assert not list((state_dir / "queue").glob("*.tmp"))
    for mem in (mem_a, mem_b):
        fsck = subprocess.run(["git", "-C", str(mem), "fsck", "--no-progress"],
                              capture_output=True, text=True)
        assert fsck.returncode == 0, fsck.stderr
    assert no_workers_left(state_dir)
    print(f"fired 40 hook calls for 20 sessions in {fire_seconds:.2f}s")


def _kill_mid_job(hook_env, state_dir, tmp_path, phase: str) -> None:
    source = EXAMPLES / "pilot-5-session-storage.jsonl"
    session = json.loads(source.read_text().splitlines()[0])["sessionId"]
    folder = tmp_path / "claude"
    folder.mkdir()
    transcript = folder / f"{session}.jsonl"
    transcript.write_text(source.read_text())
    memdir = Path(hook_env["DUALTRACE_MEMORY_DIR"])
    env = dict(hook_env, DUALTRACE_WORKER_HOLD=f"{phase}:60")
    end = claude_payload("SessionEnd", session, transcript, str(tmp_path), reason="other")
    assert run_hook("session-end", end, env=env).returncode == 0
    job_file = Path(queue.job_path(str(state_dir), queue.job_id("claude-code", session)))
    wait_until(lambda: (queue.read_json(str(job_file)) or {}).get("status") == "running",
               what="job running")
    if phase == "after":  # encode_session returned: committed and cursor saved
        wait_until(lambda: list((state_dir / "cursors").glob("*.json")), what="cursor saved")
        assert len(_mem_commits(memdir)) == 1
    pid = worker_pid(state_dir)
    assert pid
    os.kill(pid, signal.SIGKILL)
    wait_until(lambda: not worker_running(state_dir), 10, what="dead worker's lock freed")
    assert json.loads(job_file.read_text())["status"] == "running"  # the crash left it so
    # The next session start anywhere in the project starts a worker that recovers it.
    other = folder / "other.jsonl"
    other.write_text("")
    start = claude_payload("SessionStart", "other", other, str(tmp_path), source="startup")
    assert run_hook("session-start", start, env=hook_env).returncode == 0
    wait_drained(state_dir)
    records = [r for r in runs(state_dir) if r["session"] == session]
    assert len(records) == 1 and records[0]["error"] is None, records
    assert records[0]["attempt"] == 2  # the killed attempt counted
    commits = _mem_commits(memdir)
    assert len(commits) == 1, commits
    assert "died during the job" in (state_dir / "logs" / "worker.log").read_text()
    assert no_workers_left(state_dir)


def test_worker_killed_before_encode_retries_and_completes(hook_env, state_dir, tmp_path):
    _kill_mid_job(hook_env, state_dir, tmp_path, "before")


def test_worker_killed_after_commit_does_not_duplicate(hook_env, state_dir, tmp_path):
    _kill_mid_job(hook_env, state_dir, tmp_path, "after")


def test_failures_back_off_then_park_and_retry_requeues(hook_env, state_dir, tmp_path):
    (state_dir / "config.toml").write_text("max_attempts = 3\n")
    env = dict(hook_env, DUALTRACE_RETRY_SECONDS="0.1")  # short: the doubling is the point
    transcript = tmp_path / "late.jsonl"
    end = claude_payload("SessionEnd", "late", transcript, str(tmp_path), reason="other")
    assert run_hook("session-end", end, env=env).returncode == 0
    wait_drained(state_dir)
    records = runs(state_dir)
    assert [r["attempt"] for r in records] == [1, 2, 3]
    assert all("transcript not found" in r["error"] for r in records)
    log = (state_dir / "logs" / "worker.log").read_text()
    for attempt in (1, 2, 3):
        assert re.search(rf"encode late \(claude-code, attempt {attempt}\): backend -, \d+ ms: "
                         r"failed: transcript not found", log), log
    gaps = [b["started_at"] - a["finished_at"] for a, b in zip(records, records[1:], strict=False)]
    assert gaps[0] >= 0.1 and gaps[1] >= 0.2  # exponential backoff
    jobs = queue.list_jobs(str(state_dir))
    assert [(j["status"], j["attempts"]) for j in jobs] == [("parked", 3)]
    status = subprocess.run([PY, "-m", "dualtrace.cli", "status"], capture_output=True,
                            text=True, env=env)
    assert status.returncode == 0, status.stderr
    assert "1 failed" in status.stdout and "transcript not found" in status.stdout
    # The transcript shows up; `dualtrace retry SESSION` re-queues and the worker runs it.
    transcript.write_text((EXAMPLES / "pilot-4-auth-401-session1.jsonl").read_text())
    proc = subprocess.run([PY, "-m", "dualtrace.cli", "retry", "late"], capture_output=True,
                          text=True, env=env)
    assert proc.returncode == 0 and "re-queued" in proc.stdout
    wait_drained(state_dir)
    last = runs(state_dir)[-1]
    assert last["session"] == "late" and last["error"] is None and last["attempt"] == 1
    assert queue.list_jobs(str(state_dir)) == []


def test_stop_during_a_run_keeps_the_new_turns_queued(hook_env, state_dir, tmp_path):
    transcript = tmp_path / "grow.jsonl"
    append_turn(transcript, "grow", str(tmp_path), 0)
    env = dict(hook_env, DUALTRACE_WORKER_HOLD="after:1.5")
    end = claude_payload("SessionEnd", "grow", transcript, str(tmp_path), reason="other")
    assert run_hook("session-end", end, env=env).returncode == 0
    jid = queue.job_id("claude-code", "grow")
    wait_until(lambda: (queue.read_json(queue.job_path(str(state_dir), jid)) or {})
               .get("status") == "running", what="job running")
    wait_until(lambda: list((state_dir / "cursors").glob("*.json")), what="first encode read")
    append_turn(transcript, "grow", str(tmp_path), 1)  # the session goes on meanwhile
    stop = claude_payload("Stop", "grow", transcript, str(tmp_path))
    assert run_hook("stop", stop, env=hook_env).returncode == 0
    wait_until(lambda: len(runs(state_dir)) == 1, what="first run")
    wait_until(lambda: not worker_running(state_dir), what="worker idle")
    job = queue.read_json(queue.job_path(str(state_dir), jid))
    assert job and job["status"] == "pending" and job["immediate"] is False
    assert run_hook("session-end", end, env=hook_env).returncode == 0
    wait_drained(state_dir)
    first, second = runs(state_dir)
    assert first["error"] is None and second["error"] is None
    assert second["cursor"][0] == first["cursor"][1] < second["cursor"][1]  # only the rest


def test_session_inside_memory_dir_is_not_encoded(hook_env, state_dir, tmp_path):
    memdir = Path(hook_env["DUALTRACE_MEMORY_DIR"])
    memdir.mkdir()
    transcript = tmp_path / "self.jsonl"
    append_turn(transcript, "self", str(memdir), 0)
    end = claude_payload("SessionEnd", "self", transcript, str(memdir), reason="other")
    assert run_hook("session-end", end, env=hook_env).returncode == 0
    wait_drained(state_dir)
    (record,) = runs(state_dir)
    assert record["skipped"] and "memory directory" in record["skipped"]
    assert record["commit"] is None and _mem_commits(memdir) == []
