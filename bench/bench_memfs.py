"""memfs benchmarks (issue 2).

1. Write + commit of N memories, one commit per session, through MemoryStore
   (GitPython), against plain `git add <file> && git commit` subprocess calls for
   the same files in the same run. The two are interleaved (ours, baseline, ours,
   ...) so machine noise hits both alike. Reports medians and the ratio.
2. `dualtrace status` (a real CLI process) on a store of M files.

Usage: python bench/bench_memfs.py [--n 1000] [--status-files 10000]
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

from dualtrace.memfs import formats
from dualtrace.memfs.formats import Fact, Scores
from dualtrace.memfs.gitrepo import OpLine, commit_message
from dualtrace.memfs.store import MemoryStore

GIT_ENV = {**{k: v for k, v in os.environ.items() if not k.startswith("GIT_")},
           "GIT_AUTHOR_NAME": "b", "GIT_AUTHOR_EMAIL": "b@b", "GIT_COMMITTER_NAME": "b",
           "GIT_COMMITTER_EMAIL": "b@b"}


def fact(i: int) -> Fact:
    return Fact(path=formats.fact_path("decision", f"decision-number-{i}"), type="decision",
                description=f"Decision number {i} about module m{i % 37}",
                body=f"Rationale {i}. " * 20, confidence="HIGH", stored="2026-11-29",
                evidence_score=9, scores=Scores(3, 2, 2, 2), tier="RECORD", sessions=(f"s{i}",))


def bench_commits(n: int, base: Path) -> dict[str, float]:
    store = MemoryStore(base / "ours")
    plain = base / "plain"
    plain.mkdir()
    subprocess.run(["git", "init", "-q", "-b", "main"], cwd=plain, check=True, env=GIT_ENV)
    ours_ms, plain_ms = [], []
    for i in range(n):
        f = fact(i)
        t0 = time.perf_counter()
        with store.lock():
            store.write(f)
            store.commit([f.path], commit_message(f"s{i}", "bench",
                         [OpLine("store", f.path[:-3], "decision", 9)]))
        ours_ms.append((time.perf_counter() - t0) * 1000)

        t0 = time.perf_counter()
        target = plain / f.path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(formats.render_fact(f))
        subprocess.run(["git", "add", f.path], cwd=plain, check=True, env=GIT_ENV)
        subprocess.run(["git", "commit", "-q", "-m", f"store {f.path}"], cwd=plain, check=True,
                       env=GIT_ENV)
        plain_ms.append((time.perf_counter() - t0) * 1000)
    store.close()
    ours, base_med = statistics.median(ours_ms), statistics.median(plain_ms)
    return {"n": n, "ours_median_ms": ours, "plain_git_median_ms": base_med,
            "ratio": ours / base_med, "ours_p95_ms": sorted(ours_ms)[int(n * 0.95) - 1],
            "plain_p95_ms": sorted(plain_ms)[int(n * 0.95) - 1]}


def bench_status(files: int, base: Path, runs: int = 5) -> dict[str, float]:
    root = base / "big"
    store = MemoryStore(root)
    kinds = ["decision", "incident", "pattern", "learning"]
    for i in range(files):
        f = fact(i)
        kind = kinds[i % 4]
        f = Fact(**{**f.__dict__, "type": kind, "path": formats.fact_path(kind, f"memory-{i}")})
        path = root / f.path
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(formats.render_fact(f))
    subprocess.run(["git", "add", "-A"], cwd=root, check=True, env=GIT_ENV)
    subprocess.run(["git", "commit", "-q", "-m", "bulk"], cwd=root, check=True, env=GIT_ENV)
    store.close()
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        proc = subprocess.run([sys.executable, "-m", "dualtrace.cli", "status", "--memory-dir", str(root)],
                              capture_output=True, text=True)
        times.append((time.perf_counter() - t0) * 1000)
        assert proc.returncode == 0 and f"memories:   {files}" in proc.stdout, proc.stdout + proc.stderr
    return {"files": files, "status_median_ms": statistics.median(times), "status_max_ms": max(times)}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=1000)
    ap.add_argument("--status-files", type=int, default=10000)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        os.environ["DUALTRACE_HOME"] = str(Path(tmp) / "state")
        commits = bench_commits(args.n, Path(tmp))
        print("write+commit per session:", {k: round(v, 2) for k, v in commits.items()})
        status = bench_status(args.status_files, Path(tmp))
        print("dualtrace status:", {k: round(v, 1) for k, v in status.items()})


if __name__ == "__main__":
    main()
