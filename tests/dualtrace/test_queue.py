"""The durable queue on real files: ids, atomic refresh, concurrency, retry, status."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from dualtrace import queue

PY = sys.executable


def test_job_ids_are_file_safe_and_unique():
    assert queue.job_id("claude-code", "abc-123") == "claude-code--abc-123"
    a, b = queue.job_id("codex", "a/b"), queue.job_id("codex", "a:b")
    assert a != b and "/" not in a and ":" not in b
    assert queue.job_id("letta", "..") .startswith("letta--session-")


def test_touch_refreshes_one_file_and_keeps_immediate(state_dir):
    s = str(state_dir)
    queue.touch(s, host="claude-code", session_id="s1", event="stop", immediate=False,
                transcript="/t/s1.jsonl", cwd="/p", now=100.0)
    job = queue.touch(s, host="claude-code", session_id="s1", event="session-end",
                      immediate=True, now=105.0)
    assert job["rev"] == 2 and job["immediate"] is True and job["transcript"] == "/t/s1.jsonl"
    job = queue.touch(s, host="claude-code", session_id="s1", event="stop", immediate=False,
                      now=110.0)
    assert job["immediate"] is True  # a later Stop does not undo SessionEnd
    assert job["events"] == {"stop": 2, "session-end": 1} and job["dirty_at"] == 110.0
    assert [p.name for p in (state_dir / "queue").iterdir() if p.suffix == ".json"] == [
        "claude-code--s1.json"]


def test_due_at_applies_debounce_and_backoff():
    job = {"dirty_at": 100.0, "immediate": False, "not_before": 0.0}
    assert queue.due_at(job, 600) == 700.0
    assert queue.due_at({**job, "immediate": True}, 600) == 100.0
    assert queue.due_at({**job, "immediate": True, "not_before": 250.0}, 600) == 250.0


def test_concurrent_processes_never_lose_or_tear_an_update(state_dir):
    # 6 processes x 40 touches of the same session, plus 6 x 40 of their own sessions.
    code = (
        "import sys; from dualtrace import queue\n"
        "s, n = sys.argv[1], sys.argv[2]\n"
        "for i in range(40):\n"
        "    queue.touch(s, host='claude-code', session_id='shared', event='stop',"
        " immediate=False)\n"
        "    queue.touch(s, host='claude-code', session_id='own-' + n, event='stop',"
        " immediate=False)\n"
    )
    procs = [subprocess.Popen([PY, "-c", code, str(state_dir), str(n)]) for n in range(6)]
    assert all(p.wait(timeout=120) == 0 for p in procs)
    jobs = {j["session_id"]: j for j in queue.list_jobs(str(state_dir))}
    assert jobs["shared"]["rev"] == 240 and jobs["shared"]["events"] == {"stop": 240}
    assert all(jobs[f"own-{n}"]["rev"] == 40 for n in range(6))
    assert not [p for p in os.listdir(state_dir / "queue") if p.endswith(".tmp")]


def test_corrupt_job_file_is_reported_not_fatal(state_dir):
    s = str(state_dir)
    queue.touch(s, host="claude-code", session_id="ok", event="stop", immediate=False)
    (state_dir / "queue" / "claude-code--bad.json").write_text('{"status": "pend')
    jobs = queue.list_jobs(s)
    assert {j.get("status") for j in jobs} == {"pending", "corrupt"}
    summary = queue.status_summary(s)
    assert summary["counts"]["corrupt"] == 1 and summary["counts"]["pending"] == 1
    # A hook touching the corrupt session rewrites it whole.
    job = queue.touch(s, host="claude-code", session_id="bad", event="stop", immediate=True)
    assert job["rev"] == 1 and json.loads((state_dir / "queue" / "claude-code--bad.json")
                                          .read_text())["status"] == "pending"


def test_retry_requeues_parked_jobs_only(state_dir):
    s = str(state_dir)
    for sid in ("a", "b", "c"):
        queue.touch(s, host="claude-code", session_id=sid, event="stop", immediate=False)
    for sid, status, err in (("a", "parked", "boom"), ("b", "pending", None)):
        path = queue.job_path(s, queue.job_id("claude-code", sid))
        job = queue.read_json(path)
        job.update(status=status, last_error=err, attempts=4 if err else 0)
        queue.atomic_write_json(path, job)
    assert queue.retry(s, "nope") == []
    assert queue.retry(s) == ["claude-code--a"]
    job = queue.read_json(queue.job_path(s, "claude-code--a"))
    assert (job["status"], job["attempts"], job["immediate"]) == ("pending", 0, True)


def test_status_summary_and_lines(state_dir):
    s = str(state_dir)
    queue.touch(s, host="claude-code", session_id="q", event="stop", immediate=False)
    path = queue.job_path(s, queue.job_id("claude-code", "q"))
    job = queue.read_json(path)
    job.update(status="parked", last_error="BackendError: model unreachable", attempts=4)
    queue.atomic_write_json(path, job)
    queue.append_line(str(state_dir / queue.RUNS), {
        "session": "q", "backend": "offline", "duration": 1.25, "finished_at": 0,
        "operations": [{"action": "store"}], "tokens": 0, "error": None})
    summary = queue.status_summary(s)
    assert summary["counts"]["parked"] == 1 and summary["worker"]["running"] is False
    lines = "\n".join(queue.format_status(summary))
    assert "1 failed" in lines and "model unreachable" in lines and "1 ops" in lines


def test_a_stop_during_the_encode_it_is_covered_by_does_not_requeue(state_dir, tmp_path):
    """Stop and SessionEnd of one turn now run concurrently (background hook entries): a
    Stop that lands while SessionEnd's encode runs, for a transcript unchanged since that
    run began, leaves no debounced re-run behind; one for newer content still does."""
    state = str(state_dir)
    transcript = tmp_path / "t.jsonl"
    transcript.write_text("{}\n")
    args = dict(host="claude-code", session_id="s1", transcript=str(transcript))
    job = queue.touch(state, event="session-end", immediate=True, **args)
    started = job["dirty_at"] + 5.0
    job.update(status=queue.RUNNING, started_at=started, immediate=False)
    queue.atomic_write_json(queue.job_path(state, job["id"]), job)
    os.utime(transcript, (started - 1.0, started - 1.0))  # written before the run began
    assert queue.touch(state, event="stop", immediate=False, **args)["rev"] == job["rev"]
    os.utime(transcript, (started + 1.0, started + 1.0))  # a new turn during the run
    assert queue.touch(state, event="stop", immediate=False, **args)["rev"] == job["rev"] + 1
