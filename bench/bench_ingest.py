"""Ingest benchmark: parse + redact + digest vs a bare json.loads loop, digest size, memory.

Usage: python bench/bench_ingest.py [--runs N] [FILES...]
Default files: every Claude Code transcript in ../shared/corpus/claude-code/spotter.
Targets (issue 3): throughput ratio <= 3x the bare loop on the same file in the same
run; median digest >= 15x smaller than the raw transcript (tokens, chars/4);
peak memory on the largest file < 10x its size (tracemalloc, Python allocations).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
import tracemalloc
from pathlib import Path

from dualtrace.encoder.digest import build_digest
from dualtrace.encoder.gates import evaluate
from dualtrace.encoder.redact import Redactor, redact_session
from dualtrace.hooks.transcripts import read_transcript

ROOT = Path(__file__).resolve().parent.parent
CORPUS = ROOT.parent / "shared" / "corpus" / "claude-code" / "spotter"


def bare_loop(path: Path) -> int:
    n = 0
    with path.open("rb") as fh:
        for line in fh:
            json.loads(line)
            n += 1
    return n


def pipeline(path: Path, redactor: Redactor):
    session = read_transcript(path)
    red, counts = redact_session(session, redactor)
    digest = build_digest(red)
    evaluate(red)
    return session, digest


def median_time(fn, runs: int) -> float:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("files", nargs="*", type=Path)
    args = ap.parse_args()
    files = args.files or sorted(CORPUS.glob("*.jsonl"))
    if not files:
        print(f"no transcripts found (looked in {CORPUS})", file=sys.stderr)
        return 2
    redactor = Redactor()
    pipeline(files[0], redactor)  # warm-up: compile the redaction rules once
    rows = []
    print(f"{'file':<24}{'MB':>6}{'json MB/s':>11}{'ours MB/s':>11}{'ratio':>7}"
          f"{'raw tok':>9}{'digest tok':>11}{'smaller':>9}")
    for path in files:
        size = path.stat().st_size
        base = median_time(lambda p=path: bare_loop(p), args.runs)
        ours = median_time(lambda p=path: pipeline(p, redactor), args.runs)
        _, digest = pipeline(path, redactor)
        st = digest.stats
        smaller = st["raw_tokens"] / max(st["digest_tokens"], 1)
        rows.append((path, size, base, ours, smaller, st))
        print(f"{path.name[:22]:<24}{size / 1e6:>6.2f}{size / 1e6 / base:>11.1f}"
              f"{size / 1e6 / ours:>11.1f}{ours / base:>7.2f}{st['raw_tokens']:>9}"
              f"{st['digest_tokens']:>11}{smaller:>8.1f}x")
    ratios = [r[3] / r[2] for r in rows]
    smalls = [r[4] for r in rows]
    print(f"\nmedian throughput ratio (ours / bare json.loads): {statistics.median(ratios):.2f}x "
          f"(max {max(ratios):.2f}x)")
    print(f"median digest reduction: {statistics.median(smalls):.1f}x (min {min(smalls):.1f}x)")
    big = max(rows, key=lambda r: r[1])
    st = big[5]
    print(f"dropped in {big[0].name[:22]}: lookups {st['noise_dropped']}, for budget "
          f"{st['dropped_by_kind']}, folded retries/edits {st['folded']}, "
          f"noise records {st['noise_records']}")
    tracemalloc.start()
    pipeline(big[0], redactor)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    print(f"peak memory on largest file ({big[1] / 1e6:.2f} MB): {peak / 1e6:.1f} MB = "
          f"{peak / big[1]:.1f}x file size")
    return 0


if __name__ == "__main__":
    sys.exit(main())
