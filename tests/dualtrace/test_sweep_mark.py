"""SessionStart asks for a sweep (and starts a worker) only when the transcripts folder
changed since the worker last accounted for it (dualtrace/sweepmark.py): real hook
processes, started as `install` writes them, the real worker and real encodes. A
session that grew after its encode (killed before SessionEnd) is still caught up."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from dualtrace import queue, sweepmark
from dualtrace.hooks import install as inst
from tests import hook_helpers
from tests.hook_helpers import append_turn, claude_payload, run_hook, runs, wait_drained, wait_until

hook_env = hook_helpers.hook_env

pytestmark = pytest.mark.skipif(not os.path.isdir("/proc") or os.name == "nt",
                                reason="reads /proc for the processes a hook started")


def processes_of(state: Path) -> list[int]:
    """Live processes started with this state dir in their environment (a hook's fork
    before it execs the worker, the worker): any spawn shows here until it is done."""
    mark = f"DUALTRACE_HOME={state}".encode()
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            if mark in Path(f"/proc/{entry}/environ").read_bytes().split(b"\0"):
                found.append(int(entry))
        except OSError:
            continue
    return found


def worker_starts(state: Path) -> int:
    log = state / "logs" / "worker.log"
    return sum(1 for ln in log.read_text().splitlines() if ln.endswith(" start")) \
        if log.exists() else 0


def sweep_runs(state: Path) -> int:
    log = state / "logs" / "worker.log"
    return sum(1 for ln in log.read_text().splitlines() if " sweep " in ln)


def session_start(command: str, payload: dict, env: dict, state: Path) -> tuple[bytes, bool]:
    """The SessionStart entry as Claude Code runs it; (its stdout, whether it started a
    worker). A worker it started is alive (or its fork is) when the hook returns, or
    has already logged its start."""
    # A worker an earlier hook started may still be on its way out (or, having lost the
    # race for the lock, still starting): not this hook's.
    wait_until(lambda: not processes_of(state), 90, what="earlier workers to exit")
    starts = worker_starts(state)
    proc = subprocess.run(["/bin/sh", "-c", command], input=json.dumps(payload).encode(),
                          capture_output=True, env=env, timeout=60)
    assert proc.returncode == 0, proc.stderr[-2000:]
    alive = bool(processes_of(state))
    wait_until(lambda: not processes_of(state), 90, what="the hook's worker to exit")
    return proc.stdout, alive or worker_starts(state) > starts


def test_session_start_sweeps_only_when_the_transcripts_changed(hook_env, state_dir, tmp_path):
    project = tmp_path / "proj"
    folder = project / "transcripts"
    folder.mkdir(parents=True)
    command = inst.wanted_entries("claude-code", inst.dualtrace_command())[
        "SessionStart"]["hooks"][0]["command"]
    assert "fasthook.py" in command  # the entry install writes: the fast path first

    def start(session: str) -> tuple[bytes, bool]:
        payload = claude_payload("SessionStart", session, folder / f"{session}.jsonl",
                                 str(project), source="startup")
        return session_start(command, payload, hook_env, state_dir)

    def finish(session: str) -> None:
        for event, name in (("stop", "Stop"), ("session-end", "SessionEnd")):
            proc = run_hook(event, claude_payload(name, session, folder / f"{session}.jsonl",
                                                  str(project)), env=hook_env)
            assert proc.returncode == 0, proc.stderr
        wait_drained(state_dir)

    # Session a: its start has no mark to go by (sweep + worker); it is encoded at its end.
    _, started = start("s-a")
    assert started
    wait_drained(state_dir)
    append_turn(folder / "s-a.jsonl", "s-a", str(project), 0)
    finish("s-a")
    assert [r["session"] for r in runs(state_dir) if r.get("commit")] == ["s-a"]
    st = os.stat(folder / "s-a.jsonl")
    assert sweepmark.unchanged(str(state_dir), "claude-code", str(folder), None)
    assert json.loads(Path(sweepmark.mark_path(str(state_dir), "claude-code", str(folder)))
                      .read_text())["files"] == {"s-a.jsonl": [st.st_size, st.st_mtime_ns]}

    # Session b starts: s-a is as its encode read it, so no sweep is asked for. (Its
    # worker completes the text this first start after the memory dir appeared built.)
    sweeps = sweep_runs(state_dir)
    out, _ = start("s-b")
    assert b"additionalContext" in out
    wait_drained(state_dir)
    assert sweep_runs(state_dir) == sweeps
    append_turn(folder / "s-b.jsonl", "s-b", str(project), 1)
    finish("s-b")
    # Session c: the stored text is printed, and no sweep and no worker at all (the old
    # hook asked for a sweep and started a worker at every session start).
    out, started = start("s-c")
    assert b"additionalContext" in out
    assert not started, (state_dir / "logs" / "worker.log").read_text()
    assert not queue.list_jobs(str(state_dir)) and sweep_runs(state_dir) == sweeps

    # s-a resumed and killed before SessionEnd (no hook ran): it grew after its encode.
    # The next start sweeps, and the worker encodes the new turn.
    append_turn(folder / "s-a.jsonl", "s-a", str(project), 2)
    _, started = start("s-d")
    assert started
    wait_drained(state_dir)
    assert sweep_runs(state_dir) == sweeps + 1
    committed = [r["session"] for r in runs(state_dir) if r.get("commit")]
    assert committed == ["s-a", "s-b", "s-a"], committed
    # ... and then nothing changed again.
    assert not start("s-e")[1]


def test_the_mark_sees_every_change_to_the_folder(tmp_path, state_dir):
    folder = tmp_path / "t"
    folder.mkdir()
    (folder / "a.jsonl").write_text("1\n")
    (folder / "sub").mkdir()  # subagent folders are not the sweep's
    state, host = str(state_dir), "claude-code"
    assert not sweepmark.unchanged(state, host, str(folder), None)  # no mark yet
    sweepmark.record(state, host, str(folder), sweepmark.listing(str(folder)) or {},
                     str(folder / "asking.jsonl"))
    assert sweepmark.unchanged(state, host, str(folder), str(folder / "new.jsonl"))
    # The asking session's own transcript is never accounted for by its sweep.
    (folder / "asking.jsonl").write_text("x\n")
    sweepmark.record(state, host, str(folder), sweepmark.listing(str(folder)) or {},
                     str(folder / "asking.jsonl"))
    assert not sweepmark.unchanged(state, host, str(folder), str(folder / "other.jsonl"))
    assert sweepmark.unchanged(state, host, str(folder), str(folder / "asking.jsonl"))
    os.unlink(folder / "asking.jsonl")
    assert sweepmark.unchanged(state, host, str(folder), None)
    # Grown, touched (same size), added, removed: each one is a change.
    for change in (lambda: (folder / "a.jsonl").write_text("12\n"),
                   lambda: os.utime(folder / "a.jsonl", ns=(1, 1)),
                   lambda: (folder / "b.jsonl").write_text(""),
                   lambda: os.unlink(folder / "a.jsonl")):
        sweepmark.record(state, host, str(folder), sweepmark.listing(str(folder)) or {}, None)
        assert sweepmark.unchanged(state, host, str(folder), None)
        change()
        assert not sweepmark.unchanged(state, host, str(folder), None)
    # An encode updates its transcript's entry only where a sweep left a mark.
    sweepmark.record(state, host, str(folder), sweepmark.listing(str(folder)) or {}, None)
    (folder / "b.jsonl").write_text("turn\n")
    st = os.stat(folder / "b.jsonl")
    sweepmark.encoded(state, host, str(folder / "b.jsonl"), st.st_size, st.st_mtime_ns)
    assert sweepmark.unchanged(state, host, str(folder), None)
    other = tmp_path / "other"
    sweepmark.encoded(state, host, str(other / "c.jsonl"), 1, 1)
    assert not os.path.exists(sweepmark.mark_path(state, host, str(other)))
    # Another host's mark is its own.
    assert not sweepmark.unchanged(state, "codex", str(folder), None)
