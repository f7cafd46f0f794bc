"""How an encode reads the stored facts: parsing every file (``store.scan()``) vs the
search index (``store.facts()``: a stat of every file, changed ones re-read).

    python bench/bench_encode_facts.py [--sizes 1000 5000] [--runs 7]

For each store size (bench_recall's synthetic store: facts, half with a scene, a
bullet file; indexed as after a commit) it checks that both give the same facts (every
field the encoder reads), then times, interleaved A/B in one process:
  facts    reading the facts alone;
  encode   a whole dry-run offline encode of a shipped example (digest, gates, the
           offline encoder, the plan's duplicate guard) with each way of reading.
Medians (ms) and the ratio index/scan; the load average is printed beside them.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench_recall import build  # noqa: E402

from dualtrace.memfs.index import Index  # noqa: E402
from dualtrace.memfs.store import MemoryStore  # noqa: E402

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "pilot-4-auth-401-session1.jsonl"
FIELDS = ("path", "type", "description", "body", "confidence", "stored", "updated", "tier",
          "status", "superseded_by", "supersedes", "sessions", "related", "linked_scene",
          "evidence_score")


def _key(fact) -> tuple:
    return tuple(getattr(fact, f) for f in FIELDS)


def _encode(root: Path, via_index: bool) -> float:
    from dualtrace import pipeline

    real = MemoryStore.facts
    if not via_index:
        MemoryStore.facts = lambda self: self.scan().facts()  # type: ignore[method-assign]
    try:
        start = time.perf_counter()
        pipeline.encode_session(EXAMPLE, memory_dir=root, backend="offline", dry_run=True,
                                force=True)
        return (time.perf_counter() - start) * 1000
    finally:
        MemoryStore.facts = real  # type: ignore[method-assign]


def bench(n: int, runs: int) -> None:
    with tempfile.TemporaryDirectory(prefix="bench-encode-facts-") as tmp:
        root = Path(tmp) / "memory"
        build(root, n)
        Index.open(root, create=True).close()  # as update_after_commit leaves it
        store = MemoryStore(root)
        scanned, indexed = store.scan().facts(), store.facts()
        same = sorted(map(_key, scanned)) == sorted(map(_key, indexed))
        print(f"n={n}: {len(scanned)} facts; index gives the same facts: {same}")
        if not same:
            sys.exit(1)
        times: dict[str, list[float]] = {"facts/scan": [], "facts/index": [],
                                         "encode/scan": [], "encode/index": []}
        _encode(root, True)  # warm imports and caches for both
        for _ in range(runs):
            for way in ("scan", "index"):
                start = time.perf_counter()
                _ = store.scan().facts() if way == "scan" else store.facts()
                times[f"facts/{way}"].append((time.perf_counter() - start) * 1000)
                times[f"encode/{way}"].append(_encode(root, way == "index"))
        load = os.getloadavg()[0]
        for what in ("facts", "encode"):
            a = statistics.median(times[f"{what}/scan"])
            b = statistics.median(times[f"{what}/index"])
            print(f"  {what:<7} scan {a:8.1f} ms   index {b:8.1f} ms   index/scan {b / a:.2f}"
                  f"   (median of {runs}, load {load:.1f})")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", type=int, nargs="+", default=[1000, 5000])
    ap.add_argument("--runs", type=int, default=7)
    args = ap.parse_args()
    os.environ.setdefault("DUALTRACE_HOME", tempfile.mkdtemp(prefix="bench-encode-facts-home-"))
    for n in args.sizes:
        bench(n, args.runs)


if __name__ == "__main__":
    main()
