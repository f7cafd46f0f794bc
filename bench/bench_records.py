"""Session records at scale: 1,000 synthetic sessions -> record size, commit time, repo size.

Each synthetic session is a Claude Code transcript (JSONL, read by the real reader) with
3-20 turns of pseudo-English requests and answers, test runs that fail and pass, edits and
commits. Every session goes through the real record path (read -> redact -> gate ->
build -> budget -> render -> commit, ``pipeline.record_past_session``), one commit each.

Reported: median / p90 / max record size; per-session time (median of the first 100
sessions, the baseline, beside the last 100: their ratio shows how commit cost grows with
the repository); .git size before and after ``git gc``; the search index size; and the
same record sizes over the real transcripts in the shared corpus.

    python bench/bench_records.py              # 1,000 sessions
    python bench/bench_records.py --sessions 200
    python bench/bench_records.py --profile     # where the growth comes from

``--profile`` runs cProfile over the first 100 and the last 100 sessions and lists the
functions whose time per session grew most between the two (cumulative, ms per session).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CORPUS = ROOT.parent / "shared" / "corpus" / "claude-code"

WORDS = ("the a to of and in for on with that this is it we should use add fix test run "
         "build config cache session token request response error handler module function "
         "class method file path log logging json parser index query database migration "
         "schema table column retry timeout lock queue worker hook commit branch merge "
         "review deploy staging production latency memory leak race condition flaky CI "
         "pipeline lint type check mypy ruff pytest coverage fixture mock service client "
         "server endpoint auth middleware refresh idempotent cursor offset batch stream "
         "because instead rather than decided keep drop switch from now on always never "
         "please can you could we why does what when how it fails passes returns raises").split()


def sentence(rng: random.Random, n: int) -> str:
    words = [rng.choice(WORDS) for _ in range(n)]
    return " ".join(words).capitalize() + rng.choice(".?.!.")


def paragraph(rng: random.Random, chars: int) -> str:
    out: list[str] = []
    size = 0
    while size < chars:
        s = sentence(rng, rng.randint(6, 18))
        out.append(s)
        size += len(s) + 1
    return " ".join(out)


def lognormal_chars(rng: random.Random, median: float, sigma: float, cap: int) -> int:
    return max(20, min(cap, int(rng.lognormvariate(0, sigma) * median)))


def synthetic_transcript(path: Path, n: int, rng: random.Random) -> None:
    sid = f"{n:08x}-{rng.getrandbits(16):04x}-4{rng.getrandbits(12):03x}-8{rng.getrandbits(12):03x}-{rng.getrandbits(48):012x}"
    day = f"2026-{1 + n * 12 // 1000:02d}-{1 + n % 28:02d}"
    lines: list[dict] = []
    k = 0

    def add(kind: str, content) -> None:
        nonlocal k
        k += 1
        msg = {"role": kind, "content": content}
        if kind == "assistant":
            msg["id"] = f"m{k}"
        lines.append({"type": kind, "uuid": f"{sid}-{k}", "sessionId": sid,
                      "cwd": "/home/dev/proj", "gitBranch": "main",
                      "timestamp": f"{day}T{9 + k // 60 % 12:02d}:{k % 60:02d}:00.000Z",
                      "message": msg})

    def tool(name: str, data: dict, result: str, error: bool = False) -> None:
        add("assistant", [{"type": "tool_use", "id": f"t{k}", "name": name, "input": data}])
        add("user", [{"type": "tool_result", "tool_use_id": f"t{k - 1}", "content": result,
                      "is_error": error}])

    turns = max(1, min(20, int(rng.lognormvariate(1.6, 0.6))))
    for _turn in range(turns):
        add("user", paragraph(rng, lognormal_chars(rng, 180, 0.9, 6000)))
        for _step in range(rng.randint(0, 6)):
            roll = rng.random()
            if roll < 0.3:
                tool("Read", {"file_path": f"/home/dev/proj/src/mod_{rng.randint(1, 40)}.py"},
                     paragraph(rng, 800))
            elif roll < 0.55:
                tool("Edit", {"file_path": f"/home/dev/proj/src/mod_{rng.randint(1, 40)}.py",
                              "old_string": "a", "new_string": "b"}, "The file has been updated.")
            elif roll < 0.8:
                failed = rng.random() < 0.3
                out = (f"FAILED tests/test_{rng.randint(1, 9)}.py::test_x - AssertionError\n"
                       + paragraph(rng, 600) + "\n1 failed") if failed else "12 passed in 0.5s"
                tool("Bash", {"command": f"pytest -q tests/test_{rng.randint(1, 9)}.py"}, out, failed)
            else:
                add("assistant", [{"type": "text", "text": paragraph(rng, 200)}])
        if rng.random() < 0.25:
            sha = f"{rng.getrandbits(28):07x}"
            tool("Bash", {"command": f"git commit -am '{sentence(rng, 5)}'"},
                 f"[main {sha}] {sentence(rng, 5)}")
        add("assistant", [{"type": "text", "text": paragraph(rng, lognormal_chars(rng, 500, 0.8, 8000))}])
    with path.open("w") as fh:
        fh.writelines(json.dumps(line) + "\n" for line in lines)


def du(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


def pct(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))]


WINDOW = 100


def _profiles(n: int) -> dict[int, object]:
    """One profiler for the first WINDOW sessions, one for the last WINDOW."""
    import cProfile

    first, last = cProfile.Profile(), cProfile.Profile()
    out: dict[int, object] = {}
    for i in range(min(WINDOW, n)):
        out[i] = first
        out[n - 1 - i] = last
    return out


def _growth(profiles: dict[int, object], n: int) -> None:
    import pstats

    def per_session(prof: object) -> dict[str, tuple[float, float]]:
        stats = pstats.Stats(prof).stats  # type: ignore[attr-defined, arg-type]
        out = {}
        for (file, line, name), (_cc, _nc, tt, ct, _callers) in stats.items():
            where = f"{Path(file).name}:{line}({name})"
            out[where] = (tt * 1000 / WINDOW, ct * 1000 / WINDOW)
        return out

    first, last = per_session(profiles[0]), per_session(profiles[n - 1])
    rows = sorted(((last[k][1] - first.get(k, (0.0, 0.0))[1], k) for k in last), reverse=True)
    print(f"\ngrowth, cumulative ms per session (first {WINDOW} -> last {WINDOW}):")
    for delta, key in rows[:25]:
        a = first.get(key, (0.0, 0.0))
        b = last[key]
        print(f"  {a[1]:8.1f} -> {b[1]:8.1f} ({delta:+7.1f})  self {a[0]:6.1f} -> {b[0]:6.1f}"
              f"  {key}")


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sessions", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=11)
    parser.add_argument("--profile", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-records-") as tmp:
        base = Path(tmp)
        os.environ["DUALTRACE_HOME"] = str(base / "state")
        os.environ["HOME"] = str(base / "home")
        (base / "home").mkdir()
        from dualtrace.config import Settings
        from dualtrace.memfs import sessions as records
        from dualtrace.pipeline import record_past_session

        settings = Settings()
        rng = random.Random(args.seed)
        folder = base / "transcripts"
        folder.mkdir()
        paths = []
        for n in range(args.sessions):
            path = folder / f"s{n:04d}.jsonl"
            synthetic_transcript(path, n, rng)
            paths.append(path)
        mem = base / "mem"
        times: list[float] = []
        profiles = _profiles(len(paths)) if args.profile else {}
        for n, path in enumerate(paths):
            prof = profiles.get(n)
            if prof is not None:
                prof.enable()
            start = time.perf_counter()
            report = record_past_session(path, memory_dir=mem, settings=settings, facts=[])
            times.append((time.perf_counter() - start) * 1000)
            if prof is not None:
                prof.disable()
            assert report.commit, (path, report.skipped)
        sizes = [(mem / i.path).stat().st_size for i in records.list_records(mem)]
        git_before = du(mem / ".git")
        subprocess.run(["git", "-C", str(mem), "gc", "-q", "--aggressive"], check=True)
        git_after = du(mem / ".git")
        work = sum(sizes)
        from dualtrace.memfs.index import index_path, reindex

        start = time.perf_counter()
        reindex(mem)
        reindex_ms = (time.perf_counter() - start) * 1000
        index_bytes = index_path(mem).stat().st_size
        start = time.perf_counter()
        listed = records.list_records(mem, limit=3)
        list3_ms = (time.perf_counter() - start) * 1000
        first, last = times[:100], times[-100:]
        print(f"sessions: {len(sizes)} (seed {args.seed})")
        print(f"record size: median {statistics.median(sizes) / 1024:.1f} KB, p90 "
              f"{pct(sizes, 0.9) / 1024:.1f} KB, max {max(sizes) / 1024:.1f} KB, "
              f"total {work / 1e6:.2f} MB")
        print(f"per-session record+commit: median first 100 {statistics.median(first):.1f} ms, "
              f"last 100 {statistics.median(last):.1f} ms (ratio "
              f"{statistics.median(last) / statistics.median(first):.2f}), all p90 "
              f"{pct(times, 0.9):.1f} ms")
        print(f".git: {git_before / 1e6:.2f} MB before gc, {git_after / 1e6:.2f} MB after gc; "
              f"repo on disk after gc (work tree records + .git): {(git_after + work) / 1e6:.2f} MB")
        print(f"search index: {index_bytes / 1e6:.2f} MB after reindex ({reindex_ms:.0f} ms)")
        print(f"list_records(limit=3) over {len(sizes)} records: {list3_ms:.1f} ms "
              f"-> {[i.path.rsplit('/', 1)[-1] for i in listed]}")
        if profiles:
            _growth(profiles, len(paths))
        # The real transcripts: record sizes under the default budget.
        real = sorted(p for p in CORPUS.rglob("*.jsonl") if "subagents" not in p.parts)
        if real:
            mem2 = base / "mem-real"
            got = []
            for path in real:
                report = record_past_session(path, memory_dir=mem2, settings=settings, facts=[])
                if report.record:
                    got.append((path, (mem2 / report.record).stat().st_size,
                                path.stat().st_size))
            rsizes = [s for _p, s, _r in got]
            print(f"real corpus: {len(got)} records from {len(real)} transcripts; record size "
                  f"median {statistics.median(rsizes) / 1024:.1f} KB, max "
                  f"{max(rsizes) / 1024:.1f} KB; transcripts median "
                  f"{statistics.median(r for _p, _s, r in got) / 1024:.0f} KB")
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    sys.exit(main())
