"""Benchmark the hook fast path and the worker (issue 6).

    /work/venv/bin/python bench/bench_hook.py [--calls 200] [--sessions 100]

1. Hook wall time: ``dualtrace hook stop`` (the installed console script, stdin JSON,
   a live worker holding the debounced job, as during a real session) vs
   ``python -c pass`` with the same interpreter, interleaved call by call so machine
   noise hits both alike. Reports p50/p95 and the p50 ratio; target p50 <= 60 ms.
2. Worker throughput: N sessions (copies of the shipped example transcripts, each
   with its own id) ended via SessionEnd hooks; sessions/s from the first hook to
   the drained queue, and the median per-job encode time (offline backend).
3. Processes left once idle after those N sessions (target 0).

Everything runs in a temporary DUALTRACE_HOME/HOME; nothing touches the real home.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.hook_helpers import (  # noqa: E402 - after the path tweak
    claude_payload,
    hook_cmd,
    pids_of_workers,
    runs,
    wait_drained,
    worker_pid,
)

EXAMPLES = ROOT / "examples"


def pct(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(round(q * (len(values) - 1))))]


def timed(cmd: list[str], stdin: bytes, env: dict) -> float:
    t = time.perf_counter()
    subprocess.run(cmd, input=stdin, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                   env=env, check=False)
    return (time.perf_counter() - t) * 1000


def bench_hook(base: Path, calls: int, compile_each_time: bool = False) -> dict:
    state = base / "state-hook"
    env = dict(os.environ, DUALTRACE_HOME=str(state), HOME=str(base / "home"),
               DUALTRACE_MEMORY_DIR=str(base / "mem-hook"))
    env.pop("DUALTRACE_DEBOUNCE_SECONDS", None)  # the default 10 min debounce
    if not compile_each_time:
        # An installed package has bytecode (pip compiles it); this dev env sets
        # PYTHONDONTWRITEBYTECODE=1. Cache bytecode in the temp dir, for both commands.
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        env["PYTHONPYCACHEPREFIX"] = str(base / "pycache")
    transcript = base / "hook-session.jsonl"
    transcript.write_text((EXAMPLES / "pilot-1b-structured-logging.jsonl").read_text())
    payload = json.dumps(claude_payload("Stop", "bench-hook", transcript, str(base),
                                        stop_hook_active=False,
                                        last_assistant_message="done")).encode()
    hook = [*hook_cmd(), "hook", "stop"]
    via_click = [sys.executable, "-m", "dualtrace.cli", "hook", "stop"]
    baseline = [sys.executable, "-c", "pass"]
    for _ in range(5):  # warm the page cache and start the worker
        timed(hook, payload, env)
        timed(baseline, b"", env)
    hook_ms, base_ms, click_ms = [], [], []
    for i in range(calls):
        hook_ms.append(timed(hook, payload, env))
        base_ms.append(timed(baseline, b"", env))
        if i % 4 == 0:
            click_ms.append(timed(via_click, payload, env))
    pid = worker_pid(state)
    if pid:
        os.kill(pid, signal.SIGTERM)  # the worker we started, waiting out the debounce
    jobs = list((state / "queue").glob("*.json"))
    return {
        "calls": calls, "jobs_in_queue": len(jobs),
        "hook_p50": statistics.median(hook_ms), "hook_p95": pct(hook_ms, 0.95),
        "pass_p50": statistics.median(base_ms), "pass_p95": pct(base_ms, 0.95),
        "click_p50": statistics.median(click_ms), "click_calls": len(click_ms),
    }


def bench_worker(base: Path, sessions: int) -> dict:
    state = base / "state-worker"
    env = dict(os.environ, DUALTRACE_HOME=str(state), HOME=str(base / "home"),
               DUALTRACE_MEMORY_DIR=str(base / "mem-worker"), DUALTRACE_WORKER_POLL="0.1")
    sources = sorted(EXAMPLES.glob("*.jsonl"))
    folder = base / "sessions"
    folder.mkdir()
    hook = [*hook_cmd(), "hook", "session-end"]
    started = time.perf_counter()
    for n in range(sessions):
        sid = f"bench-{n:03d}"
        transcript = folder / f"{sid}.jsonl"
        text = sources[n % len(sources)].read_text()
        transcript.write_text(text.replace(json.loads(text.splitlines()[0])["sessionId"], sid))
        payload = json.dumps(claude_payload("SessionEnd", sid, transcript, str(base),
                                            reason="other")).encode()
        subprocess.run(hook, input=payload, env=env, check=False)
    fired = time.perf_counter() - started
    wait_drained(state, timeout=1800)
    total = time.perf_counter() - started
    records = runs(state)
    time.sleep(1.0)
    left = pids_of_workers(state)
    return {
        "sessions": sessions, "runs": len(records),
        "errors": sum(1 for r in records if r.get("error")),
        "committed": sum(1 for r in records if r.get("commit")),
        "fire_s": fired, "total_s": total, "per_s": sessions / total,
        "job_p50_s": statistics.median(r["duration"] for r in records),
        "processes_left": len(left),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--sessions", type=int, default=100)
    parser.add_argument("--no-bytecode", action="store_true",
                        help="keep PYTHONDONTWRITEBYTECODE (compile every module each call)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="dualtrace-bench-") as tmp:
        base = Path(tmp)
        (base / "home").mkdir()
        h = bench_hook(base, args.calls, args.no_bytecode)
        print(f"hook stop ({h['calls']} calls, console script, "
              f"{'no bytecode' if args.no_bytecode else 'bytecode cached'}): p50 {h['hook_p50']:.1f} ms, "
              f"p95 {h['hook_p95']:.1f} ms; jobs queued: {h['jobs_in_queue']}")
        print(f"python -c pass (same run):          p50 {h['pass_p50']:.1f} ms, "
              f"p95 {h['pass_p95']:.1f} ms")
        print(f"ratio hook/pass p50: {h['hook_p50'] / h['pass_p50']:.2f}x; "
              f"hook over bare interpreter: +{h['hook_p50'] - h['pass_p50']:.1f} ms")
        print(f"same hook via `python -m dualtrace.cli` (click, {h['click_calls']} calls): "
              f"p50 {h['click_p50']:.1f} ms")
        w = bench_worker(base, args.sessions)
        print(f"worker: {w['sessions']} sessions ended -> {w['runs']} runs, {w['errors']} errors, "
              f"{w['committed']} commits; hooks fired in {w['fire_s']:.1f}s, drained after "
              f"{w['total_s']:.1f}s = {w['per_s']:.2f} sessions/s; job p50 {w['job_p50_s']:.2f}s")
        print(f"worker processes left once idle: {w['processes_left']}")


if __name__ == "__main__":
    main()
