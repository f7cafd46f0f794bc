"""An idle worker's cost: read calls and CPU while it waits for debounced jobs.

A real worker process (``python -m dualtrace.worker``) in a temporary state directory
with N pending Stop jobs that come due in 10 minutes: it waits for them (MAX_WAIT
15 min) and should cost nothing meanwhile. Sampled from /proc/<pid>/io (syscr: read
calls of any kind) and /proc/<pid>/stat (CPU ticks) over an idle window, after the
worker's start-up. The baseline is the worker module of an older commit run the same
way in the same run (``--baseline-ref``, default 0cacb6a, before issue 13's fix).

    python bench/bench_idle_worker.py                     # 20 jobs, 5 s, 3 runs each
    python bench/bench_idle_worker.py --jobs 100 --seconds 10 --poll 0.5
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def sample(pid: int) -> tuple[int, int]:
    io = dict(line.split(": ") for line in Path(f"/proc/{pid}/io").read_text().splitlines())
    stat = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return int(io["syscr"]), int(stat[11]) + int(stat[12])


def one_run(worker: list[str], jobs: int, seconds: float, poll: float) -> tuple[float, float]:
    from dualtrace import queue

    with tempfile.TemporaryDirectory(prefix="dualtrace-idle-") as tmp:
        state = Path(tmp) / "state"
        state.mkdir()
        for n in range(jobs):
            queue.touch(str(state), host="claude-code", session_id=f"s{n}", event="stop",
                        immediate=False, transcript=f"{tmp}/s{n}.jsonl", cwd=tmp,
                        memory_dir=f"{tmp}/memory")
        env = dict(os.environ, DUALTRACE_HOME=str(state), HOME=tmp,
                   DUALTRACE_DEBOUNCE_SECONDS="600", DUALTRACE_WORKER_MAX_WAIT="900",
                   DUALTRACE_WORKER_POLL=str(poll))
        proc = subprocess.Popen(worker, env=env, cwd=tmp, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL)
        try:
            deadline = time.monotonic() + 30
            while not (state / "logs" / "worker.log").exists() and time.monotonic() < deadline:
                time.sleep(0.05)
            time.sleep(1.0)  # past imports and the first scans
            reads, cpu = sample(proc.pid)
            time.sleep(seconds)
            reads2, cpu2 = sample(proc.pid)
        finally:
            proc.kill()
            proc.wait()
    tick_ms = 1000 / os.sysconf("SC_CLK_TCK")
    return (reads2 - reads) / seconds, (cpu2 - cpu) * tick_ms / seconds


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--jobs", type=int, default=20)
    ap.add_argument("--seconds", type=float, default=5.0)
    ap.add_argument("--poll", type=float, default=0.5, help="DUALTRACE_WORKER_POLL")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--baseline-ref", default="0cacb6a")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="dualtrace-old-worker-") as tmp:
        old = Path(tmp) / "old_worker.py"
        old.write_text(subprocess.run(["git", "-C", str(ROOT), "show",
                                       f"{args.baseline_ref}:dualtrace/worker.py"],
                                      capture_output=True, text=True, check=True).stdout)
        workers = {f"worker at {args.baseline_ref}": [sys.executable, str(old)],
                   "worker now": [sys.executable, "-m", "dualtrace.worker"]}
        results: dict[str, list[tuple[float, float]]] = {k: [] for k in workers}
        for _ in range(args.runs):  # interleaved: both see the same machine load
            for name, cmd in workers.items():
                results[name].append(one_run(cmd, args.jobs, args.seconds, args.poll))
    print(f"{args.jobs} debounced jobs, poll {args.poll} s, {args.seconds} s idle window, "
          f"median of {args.runs} runs")
    print(f"{'':<22}{'read calls/s':>14}{'CPU ms/s':>10}")
    for name, rows in results.items():
        reads = statistics.median(r for r, _ in rows)
        cpu = statistics.median(c for _, c in rows)
        print(f"{name:<22}{reads:>14.1f}{cpu:>10.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
