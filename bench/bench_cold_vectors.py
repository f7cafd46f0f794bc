"""What a numpy-free cold `dualtrace recall` would cost, measured on the real store's data.

    python bench/bench_cold_vectors.py [--store DIR] [--queries 40] [--shortlist 300]

A new process pays ~65-90 ms to import numpy before its first vector operation (see
bench_recall_cli.py --phases); the semantic recall's own vector work is far smaller. This
bench prices the alternative before anyone builds it: the same vector work in pure Python,
on the rows and texts the product's recall really touches for each question of the store
(bench_recall_cli.py's, 10,000 memories + 1,000 records), as CPU time and as a ratio to
numpy's import CPU measured in the same run (the machine is noisy; the ratio is not):

- query: the question's token rows read from WordLlama's fp16 table with struct's "e"
  format, summed and normalised;
- search: 256-bit sign codes of every memory and chunk vector (XOR + int.bit_count),
  the ``--shortlist`` nearest by Hamming distance rescored by exact fp32 cosine;
- lines: every line the recall embeds (record chunks' lines for their 1/2/5-line windows
  and the passages), as token-row sums, plus the windows' cosines.

It also reports how often the shortlist keeps the exact top 30 (SEM_CANDIDATES) of the
full fp32 product that the product ranks by today: the one approximation of that design.
"""

from __future__ import annotations

import argparse
import heapq
import math
import os
import random
import resource
import statistics
import struct
import subprocess
import sys
import tempfile
import time
from operator import add, mul
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_recall  # noqa: E402  (bench/ is not a package)
import bench_recall_cli  # noqa: E402

from dualtrace.memfs import embed, recall  # noqa: E402
from dualtrace.memfs.index import Index  # noqa: E402


def child_cpu(code: str) -> float:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run([sys.executable, "-c", code], check=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime) * 1000


def main() -> None:
    import numpy as np

    parser = argparse.ArgumentParser()
    parser.add_argument("--store", type=Path, required=True)
    parser.add_argument("--queries", type=int, default=40)
    parser.add_argument("--shortlist", type=int, default=300)
    parser.add_argument("--center", action="store_true",
                        help="sign codes of (vector - the matrix's mean vector): the shared "
                             "direction of a static model's vectors says nothing")
    args = parser.parse_args()
    # The vocabulary cache goes to a state dir of this run's own, never the person's.
    os.environ.setdefault("DUALTRACE_HOME", tempfile.mkdtemp(prefix="dt-bench-cold-"))
    root = args.store / "memory"
    anchors = bench_recall_cli.build_store(root, 10000, 1000)
    qs = bench_recall.questions(root, anchors, random.Random(5), args.queries)
    model = embed.get_embedder()
    if not isinstance(model, embed.WordLlamaEmbedder):
        raise SystemExit("needs the semantic extra (WordLlama)")
    raw_table = model._table  # the fp16 memory map: its bytes are what struct reads
    row = struct.Struct(f"<{model.dim}e")
    with Index.open(root) as index:
        mats = {kind: index.vector_matrix(kind == "chunks") for kind in ("memories", "chunks")}
    means = {kind: (np.asarray(m).mean(axis=0) if args.center else np.zeros(m.shape[1]))
             for kind, (_, m) in mats.items()}
    codes = {kind: [int.from_bytes(b, "little") for b in
                    np.packbits(np.asarray(m) > means[kind], axis=1, bitorder="little")]
             for kind, (_, m) in mats.items()}
    mean_lists = {kind: [float(x) for x in v] for kind, v in means.items()}
    fp32 = {kind: np.ascontiguousarray(m, dtype="<f4").tobytes() for kind, (_, m) in mats.items()}
    vrow = struct.Struct(f"<{model.dim}f")

    # The texts the product's recall embeds for each question (its line cache bypassed).
    seen: list[list[str]] = []
    real = recall._embed_cached

    def spy(embedder: object, texts: list[str]) -> object:
        seen[-1].extend(texts)
        recall._LINE_CACHE.clear()
        return real(embedder, texts)

    recall._embed_cached = spy  # type: ignore[assignment]
    cpu = {"query": [], "search": [], "lines": []}
    kept: list[float] = []
    lines_n: list[int] = []
    tokens_n: list[int] = []
    for q in qs:
        seen.append([])
        recall.recall(root, q, embedder=model)
        texts = list(dict.fromkeys(seen[-1]))
        qids = model.token_ids([q])[0]
        line_ids = model.token_ids(texts) if texts else []
        lines_n.append(len(texts))
        tokens_n.append(sum(map(len, line_ids)))
        rows: dict[int, tuple[float, ...]] = {}

        def vec(ids: list[int], rows: dict[int, tuple[float, ...]] = rows) -> list[float]:
            acc = [0.0] * model.dim
            for i in ids:
                r = rows.get(i)
                if r is None:
                    r = rows[i] = row.unpack_from(raw_table, 2 * model.dim * i)
                acc = list(map(add, acc, r))
            return acc

        start = time.process_time()
        qv = vec(qids)
        norm = math.sqrt(sum(map(mul, qv, qv))) or 1.0
        qv = [x / norm for x in qv]
        cpu["query"].append((time.process_time() - start) * 1000)
        start = time.process_time()
        tops = {}
        for kind, cs in codes.items():
            qcode = sum(1 << k for k, (x, c) in enumerate(zip(qv, mean_lists[kind], strict=True)) if x > c)
            near = heapq.nsmallest(args.shortlist, range(len(cs)),
                                   key=lambda i, cs=cs: (cs[i] ^ qcode).bit_count())
            blob = fp32[kind]
            sims = [(sum(map(mul, vrow.unpack_from(blob, 4 * model.dim * i), qv)), i)
                    for i in near]
            tops[kind] = [i for _, i in heapq.nlargest(30, sims)]
        cpu["search"].append((time.process_time() - start) * 1000)
        start = time.process_time()
        vecs = [vec(ids) for ids in line_ids]
        for k in (1, 2, 5):
            for a in range(0, max(len(vecs) - k + 1, 0)):
                run = vecs[a]
                for b in vecs[a + 1:a + k]:
                    run = list(map(add, run, b))
                n = math.sqrt(sum(map(mul, run, run))) or 1.0
                _ = sum(map(mul, run, qv)) / n
        cpu["lines"].append((time.process_time() - start) * 1000)
        qv32 = np.asarray(qv, dtype=np.float32)
        for kind, (_, m) in mats.items():
            exact = np.argsort(-(np.asarray(m) @ qv32), kind="stable")[:30]
            kept.append(len(set(exact.tolist()) & set(tops[kind])) / 30)
    recall._embed_cached = real  # type: ignore[assignment]
    imports = [child_cpu("import numpy") - child_cpu("pass") for _ in range(9)]
    numpy_cpu = statistics.median(imports)
    total = sum(statistics.median(v) for v in cpu.values())
    print(f"{len(qs)} questions; per question: {statistics.median(lines_n):.0f} lines, "
          f"{statistics.median(tokens_n):.0f} line tokens (medians); shortlist "
          f"{args.shortlist}")
    print()
    print("| pure-Python part | CPU p50 | / numpy import CPU |")
    print("|---|---|---|")
    for name, values in cpu.items():
        med = statistics.median(values)
        print(f"| {name} | {med:.1f} ms | {med / numpy_cpu:.2f} |")
    print(f"| all three | {total:.1f} ms | {total / numpy_cpu:.2f} |")
    print(f"| `import numpy` (above `python -c pass`) | {numpy_cpu:.1f} ms | 1.00 |")
    print()
    full = sum(k == 1.0 for k in kept)
    print(f"exact fp32 top 30 kept by the Hamming shortlist: {full}/{len(kept)} searches in "
          f"full, mean {statistics.mean(kept):.3f}, worst {min(kept):.2f}")


if __name__ == "__main__":
    main()
