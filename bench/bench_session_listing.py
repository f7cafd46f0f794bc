"""Listing questions over session records ("which sessions were about W"): the old
400-candidate cap against every chunk as a candidate, on bench_recall_cli's store.

    python bench/bench_session_listing.py --store DIR [--runs 2]

DIR is a ``bench_recall_cli.py --store`` directory (10,000 memories + 1,000 records).
Words are drawn from the record chunks and picked near 30 / 100 / 300 / 600 / 1,000 /
2,000 / 4,000 turns; for each, the number of sessions listed and the median time (lexical
recall, ``embedder=None``) with the cap and without it.
"""

from __future__ import annotations

import argparse
import random
import statistics
import time
from pathlib import Path

from dualtrace.memfs import recall as recall_mod
from dualtrace.memfs.index import Index


def words_by_turns(root: Path, rng: random.Random) -> list[tuple[int, str]]:
    with Index.open(root) as index:
        words: set[str] = set()
        for (body,) in index.conn.execute("SELECT body FROM fts_chunks LIMIT 300"):
            words.update(w for w in body.split() if w.isalpha() and len(w) > 4)
        pool = sorted(words)
        rng.shuffle(pool)
        return sorted((index.doc_frequency(w, (recall_mod.SESSION_TYPE,)), w)
                      for w in pool[:400])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--store", type=Path, required=True)
    parser.add_argument("--runs", type=int, default=2)
    args = parser.parse_args()
    root = args.store / "memory"
    dfs = words_by_turns(root, random.Random(3))
    picked = sorted({min(dfs, key=lambda d, t=t: abs(d[0] - t))
                     for t in (30, 100, 300, 600, 1000, 2000, 4000)})
    score = recall_mod._score

    def capped(*a, candidates: int = recall_mod.CANDIDATES, **k):  # the old behaviour
        return score(*a, candidates=min(candidates, 400), **k)

    print("| word in N turns | sessions, cap 400 | sessions, no cap | time cap / no cap |")
    print("|---|---|---|---|")
    for turns, word in picked:
        question = f"which sessions were about {word}"
        out = {}
        for cap in (400, None):
            # The cap as it was (400 chunk candidates) or as it is (every chunk).
            recall_mod._score = capped if cap else score
            times = []
            for _ in range(args.runs):
                start = time.perf_counter()
                result = recall_mod.recall(root, question, embedder=None)
                times.append((time.perf_counter() - start) * 1000)
            listed = len(result.memories) if result.state != "C" else 0
            out[cap] = (listed, statistics.median(times))
        recall_mod._score = score
        print(f"| {turns} | {out[400][0]} | {out[None][0]} | "
              f"{out[400][1]:.0f} / {out[None][1]:.0f} ms |")


if __name__ == "__main__":
    main()
