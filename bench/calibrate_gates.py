"""Calibrate recall's relevance gates with session records and paraphrases in the pool.

    python bench/calibrate_gates.py --pool DIR [--sde | --sde-kept KEPT] [--grid '{"rc": 0.7};...']

For each candidate (memory gate: coverage, semantic-only cosine, coverage + cosine;
record gate: the same three) it reports, on the *dev* split only:
- the session question set over a records pool (DIR from ``bench/eval_sessions.py
  --keep DIR``): direct / paraphrase answered in the top 3, never-discussed -> C;
- the labelled store of tests/data/recall_questions.py: never-stored -> C, answerable
  found in the top 3, and its paraphrases found in the top 3;
- sde-bench MRR and amended: ``--sde`` encodes sde-bench here once; ``--sde-kept KEPT``
  reuses a directory written by ``bench/eval_sdebench.py --keep KEPT`` (copied).
The held-out split is evaluated only by bench/eval_sessions.py, after choosing.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _load(name: str, path: Path):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--pool", type=Path, required=True)
    parser.add_argument("--sde", action="store_true", help="also measure sde-bench (re-encodes)")
    parser.add_argument("--sde-kept", type=Path, default=None,
                        help="sde-bench from a directory kept by eval_sdebench.py --keep")
    parser.add_argument("--grid", default="current",
                        help='"current", or candidates as JSON objects joined by ";"')
    args = parser.parse_args()

    from dualtrace.memfs import recall as R
    from dualtrace.memfs.index import Index
    from dualtrace.memfs.store import MemoryStore

    ev = _load("eval_sessions", ROOT / "bench" / "eval_sessions.py")
    rq = _load("recall_questions", ROOT / "tests" / "data" / "recall_questions.py")
    items = [q for q in json.loads(ev.QUESTIONS.read_text(encoding="utf-8"))["questions"]
             if q["split"] == "dev"]
    tmp = Path(tempfile.mkdtemp(prefix="dt-calib-"))
    store = MemoryStore(tmp / "labelled", project="project")
    rq.build(store)
    never = [q for q, g, _ in rq.QUESTIONS if g == "never"]
    answerable = [(q, p) for q, g, p in rq.QUESTIONS if g == "answerable"]
    sde = None
    if args.sde:
        sb = _load("eval_sdebench", ROOT / "bench" / "eval_sdebench.py")
        chats = tmp / "chats"
        chats.mkdir()
        data, _ = sb.encode_all(tmp / "sde", chats, "offline")
        sde = (sb, tmp / "sde", data)
    elif args.sde_kept:
        import shutil

        sb = _load("eval_sdebench", ROOT / "bench" / "eval_sdebench.py")
        shutil.copytree(args.sde_kept / "memory", tmp / "sde")
        saved = json.loads((args.sde_kept / "touched.json").read_text(encoding="utf-8"))
        data = {"tasks": sb.load_tasks()[0],
                "touched": {t: [set(s) for s in sets] for t, sets in saved.items()}}
        sde = (sb, tmp / "sde", data)
    pool_index = Index.open(args.pool)
    lab_index = Index.open(store.root)

    def run() -> dict:
        out: dict = {}
        tally = {"direct": [0, 0], "paraphrase": [0, 0], "never": [0, 0]}
        for item in items:
            result = R.recall(args.pool, item["question"], limit=3, index=pool_index)
            ok = result.state == "C" if item["kind"] == "never" else ev.judge(result, item)[0]
            tally[item["kind"]][0] += ok
            tally[item["kind"]][1] += 1
        out.update({k: f"{a}/{b}" for k, (a, b) in tally.items()})
        out["lab_never"] = f"{sum(R.recall(store, q, index=lab_index).state == 'C' for q in never)}/{len(never)}"
        out["lab_found"] = "{}/{}".format(sum(
            p in [m.path for m in R.recall(store, q, limit=3, index=lab_index).memories]
            for q, p in answerable), len(answerable))
        out["lab_para"] = "{}/{}".format(sum(
            p in [m.path for m in R.recall(store, q, limit=3, index=lab_index).memories]
            for q, p in rq.PARAPHRASES), len(rq.PARAPHRASES))
        if sde is not None:
            res = sde[0].evaluate(sde[1], sde[2])
            out["sde_mrr"] = round(res["mrr"], 3)
            out["amended"] = res["amended"]
        return out

    current = dict(mc=R.MEMORY_GATE.combo, mh=R.MEMORY_GATE.sem_high,
                   mf=R.MEMORY_GATE.sem_floor, mcf=R.MEMORY_GATE.cov_floor,
                   mlf=R.MEMORY_GATE.lex_sem_floor, mrc=R.MEMORY_GATE.rare_combo,
                   mrw=R.MEMORY_GATE.rare_words,
                   rt=R.RECORD_GATE.coverage, rh=R.RECORD_GATE.sem_high,
                   rc=R.RECORD_GATE.combo, rf=R.RECORD_GATE.sem_floor,
                   rcf=R.RECORD_GATE.cov_floor, rlf=R.RECORD_GATE.lex_sem_floor,
                   rrc=R.RECORD_GATE.rare_combo, rrw=R.RECORD_GATE.rare_words)
    if args.grid == "current":
        grid = [current]
    else:
        grid = [dict(current, **json.loads(g)) for g in args.grid.split(";")]
    for g in grid:
        R.MEMORY_GATE = R.Gate(R.THRESHOLD, g["mh"], g["mc"], g["mf"], g["mcf"],
                               lex_sem_floor=g["mlf"], rare_combo=g["mrc"],
                               rare_words=g["mrw"])
        R.RECORD_GATE = R.Gate(g["rt"], g["rh"], g["rc"], g["rf"], g["rcf"],
                               lex_sem_floor=g["rlf"], rare_combo=g["rrc"],
                               rare_words=g["rrw"])
        print(json.dumps({**g, **run()}), flush=True)
    pool_index.close()
    lab_index.close()
    store.close()


if __name__ == "__main__":
    sys.exit(main())
