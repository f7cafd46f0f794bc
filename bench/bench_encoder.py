"""Offline encoder benchmarks (issue 4).

1. Labelled set (bench/labelled_set.py): tier accuracy and update-vs-new accuracy
   of the offline encoder, sessions encoded in order into one memory directory.
2. Throughput: the full pipeline (read, redact, digest, gates, encode, validate,
   commit) on every Claude Code / Codex transcript of the shared corpus, on the
   labelled sessions, and on a synthetic 10 MB transcript; sessions per minute and
   median ms per session.

Usage: python bench/bench_encoder.py [--labelled] [--throughput] (default: both)
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
CORPUS = HERE.parent.parent / "shared" / "corpus"


def write_chat(path: Path, turns, day: int) -> None:
    with path.open("w") as fh:
        for i, (role, content) in enumerate(turns):
            ts = f"2026-02-{day:02d}T09:{i:02d}:00Z"
            fh.write(json.dumps({"role": role, "content": content, "timestamp": ts}) + "\n")


def classify(op: dict) -> str:
    if op["action"] in ("update", "upgrade"):
        return "update"
    if "supersedes" in (op.get("note") or ""):
        return "supersede"
    if op["action"] == "skip" and op.get("path") is None:
        return "none"
    return "new"


def labelled(tmp: Path) -> dict:
    from labelled_set import SESSIONS

    from dualtrace.pipeline import encode_session

    memdir = tmp / "labelled-mem"
    paths: dict[str, set[str]] = {}
    tier_ok = action_ok = total = 0
    misses = []
    for day, session in enumerate(SESSIONS, start=1):
        transcript = tmp / f"{session['key']}.jsonl"
        write_chat(transcript, session["turns"], day)
        report = encode_session(transcript, memory_dir=memdir, backend="offline")
        ops = [op for op in report.operations if op["action"] != "skip" or op.get("path")]
        paths[session["key"]] = {op["path"] for op in ops if op.get("path")}
        for exp in session["expect"]:
            total += 1
            if exp["type"] is None:
                got = None
                ok_tier = ok_action = not ops
            else:
                got = next((op for op in ops if op.get("type") == exp["type"]), None)
                ok_tier = got is not None and got["tier"] == exp["tier"]
                kind = classify(got) if got else "none"
                ok_action = kind == exp["action"]
                if ok_action and exp["action"] in ("update", "supersede"):
                    target = paths.get(exp["of"], set())
                    ok_action = got["path"] in target or any(
                        exp["action"] == "supersede" and p.startswith("decisions/") for p in target)
            tier_ok += ok_tier
            action_ok += ok_action
            if not (ok_tier and ok_action):
                misses.append({"session": session["key"], "expected": exp,
                               "got": {k: got[k] for k in ("type", "tier", "action", "path", "evidence")}
                               if got else None})
    return {"events": total, "tier_accuracy": round(tier_ok / total, 3),
            "update_vs_new_accuracy": round(action_ok / total, 3), "misses": misses}


def synthetic(path: Path, target_bytes: int = 10 * 1024 * 1024) -> None:
    """A Claude Code-shaped transcript of ~10 MB: many turns, big tool outputs, progress noise."""
    sid = "5e000000-0000-4000-8000-0000000000aa"
    n = 0
    with path.open("w") as fh:
        while fh.tell() < target_bytes:
            n += 1
            env = {"sessionId": sid, "cwd": "/home/dev/big", "gitBranch": "main", "isSidechain": False,
                   "userType": "external", "version": "2.1.38", "timestamp": f"2026-01-05T10:{n % 60:02d}:00Z"}
            fh.write(json.dumps({**env, "type": "progress", "uuid": f"p{n}", "data": {"x": "y" * 200}}) + "\n")
            text = ("We decided to keep the cache layer in `cache/lru.py` because the hit rate is 93%."
                    if n % 50 == 0 else f"Step {n}: please look at module_{n % 40}.py")
            fh.write(json.dumps({**env, "type": "user", "uuid": f"u{n}",
                                 "message": {"role": "user", "content": text}}) + "\n")
            fh.write(json.dumps({**env, "type": "assistant", "uuid": f"a{n}", "message": {
                "id": f"m{n}", "role": "assistant", "content": [
                    {"type": "tool_use", "id": f"t{n}", "name": "Read",
                     "input": {"file_path": f"/home/dev/big/module_{n % 40}.py"}}]}}) + "\n")
            fh.write(json.dumps({**env, "type": "user", "uuid": f"r{n}", "message": {
                "role": "user", "content": [{"type": "tool_result", "tool_use_id": f"t{n}",
                                             "content": "line of code\n" * 300}]}}) + "\n")


def throughput(tmp: Path) -> dict:
    from labelled_set import SESSIONS

    from dualtrace.pipeline import encode_session

    transcripts: list[Path] = []
    spotter = CORPUS / "claude-code" / "spotter"
    if spotter.is_dir():
        transcripts += sorted(spotter.glob("*.jsonl"))
    for sub in ("claudecode", "codex"):
        folder = CORPUS / "agentlogs" / sub
        if folder.is_dir():
            transcripts += sorted(folder.glob("*.jsonl"))
    for day, session in enumerate(SESSIONS, start=1):
        path = tmp / f"tp-{session['key']}.jsonl"
        write_chat(path, session["turns"], day)
        transcripts.append(path)
    results = {}
    times = []
    memdir = tmp / "tp-mem"
    started = time.perf_counter()
    for path in transcripts:
        t0 = time.perf_counter()
        encode_session(path, memory_dir=memdir, backend="offline")
        times.append((time.perf_counter() - t0) * 1000)
    wall = time.perf_counter() - started
    results["sessions"] = len(times)
    results["median_ms"] = round(statistics.median(times), 1)
    results["max_ms"] = round(max(times), 1)
    results["sessions_per_min"] = round(len(times) / wall * 60, 1)
    big = tmp / "synthetic-10mb.jsonl"
    synthetic(big)
    t0 = time.perf_counter()
    report = encode_session(big, memory_dir=tmp / "big-mem", backend="offline")
    results["synthetic_10mb_ms"] = round((time.perf_counter() - t0) * 1000, 1)
    results["synthetic_mb"] = round(big.stat().st_size / 1e6, 1)
    results["synthetic_ops"] = len(report.operations)
    return results


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--labelled", action="store_true")
    ap.add_argument("--throughput", action="store_true")
    args = ap.parse_args()
    both = not (args.labelled or args.throughput)
    with tempfile.TemporaryDirectory() as tmp:
        os.environ["DUALTRACE_HOME"] = str(Path(tmp) / "state")
        if args.labelled or both:
            print(json.dumps(labelled(Path(tmp)), indent=1))
        if args.throughput or both:
            print(json.dumps(throughput(Path(tmp)), indent=1))


if __name__ == "__main__":
    main()
