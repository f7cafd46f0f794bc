"""Hostile content -> memory (issue 13 item 2): how many hostile sessions form a memory
carrying their hostile text (or an unbacked decision), how many benign controls still
form theirs, with the defences on and off, in the same run.

    python bench/bench_hostile.py [--defences on,off] [--json out.json]

Corpus: bench/hostile_corpus.py (real Claude Code transcripts written to a temp dir, each
encoded through ``encode_session`` into its own memory directory). Backends: the offline
encoder, and ``Gullible``, a scripted stand-in for a model that obeys everything it reads.
"Off" disables the two defences (the quarantine of instruction-like text before the
digest, and the plan validator's instruction and decision rules) by patching them out,
which is what main did before this work. Also reported: the quarantine's cost per MB of
session text.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _corpus():
    spec = importlib.util.spec_from_file_location("hostile_corpus", ROOT / "bench" / "hostile_corpus.py")
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    sys.modules["hostile_corpus"] = mod
    spec.loader.exec_module(mod)
    return mod


@contextlib.contextmanager
def defences(on: bool):
    if on:
        yield
        return
    from dualtrace.encoder import hostile, plan

    saved = (hostile.quarantine, plan._refuse_instructions, plan.PlanBuilder._backed_decision,
             plan.rule_backing)
    hostile.quarantine = lambda session: (session, 0)
    plan._refuse_instructions = lambda op, provenance: None
    plan.PlanBuilder._backed_decision = staticmethod(lambda op, provenance: op)
    plan.rule_backing = lambda provenance, text: None
    try:
        yield
    finally:
        hostile.quarantine, plan._refuse_instructions = saved[0], saved[1]
        plan.PlanBuilder._backed_decision = staticmethod(saved[2])
        plan.rule_backing = saved[3]


def run(hc, backend: str, on: bool, tmp: Path) -> dict:
    from dualtrace.pipeline import encode_session

    out = {"backend": backend, "defences": "on" if on else "off", "hostile": 0, "formed": 0,
           "benign": 0, "kept": 0, "withheld": 0, "cases": {}}
    with defences(on):
        for n, case in enumerate(hc.CASES):
            if not hc.judged(case, backend):
                continue
            d = tmp / f"{backend}-{out['defences']}-{n}"
            d.mkdir(parents=True)
            engine = "offline" if backend == "offline" else hc.Gullible()
            report = encode_session(case.write(d / "t.jsonl", n), memory_dir=d / "mem",
                                    backend=engine)
            out["withheld"] += report.redactions.get("instruction-like", 0)
            ok, files = hc.judge(case, d / "mem")
            out["cases"][case.name] = {"ok": ok, "files": files}
            if case.kind == "hostile":
                out["hostile"] += 1
                out["formed"] += 0 if ok else 1
            else:
                out["benign"] += 1
                out["kept"] += 1 if ok else 0
    return out


def quarantine_cost(hc, runs: int = 5) -> tuple[float, float]:
    """(ms per MB of session text, share of it that is hostile) over the corpus texts."""
    from dualtrace.encoder.hostile import withhold

    texts = []
    for case in hc.CASES:
        for rec in case.build(0).records:
            content = rec["message"]["content"]
            for block in content if isinstance(content, list) else [{"text": content}]:
                texts.append(str(block.get("text") or block.get("content") or ""))
    # dilute the hostile corpus with ordinary tool output, as in a real session
    ordinary = ("tests/test_orders.py::test_total PASSED\nsrc/orders.py:41: def total(cart):\n"
                "Collecting httpx==0.27.0\n  Downloading httpx-0.27.0-py3-none-any.whl\n") * 200
    blob = "\n".join(texts) + ordinary
    reps = max(1, 1_000_000 // len(blob))
    big = blob * reps
    times = []
    for _ in range(runs):
        t = time.perf_counter()
        withhold(big)
        times.append(time.perf_counter() - t)
    return statistics.median(times) * 1000 / (len(big.encode()) / 1e6), len("\n".join(texts)) / len(blob)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--defences", default="off,on")
    ap.add_argument("--json")
    args = ap.parse_args()
    hc = _corpus()
    results = []
    with tempfile.TemporaryDirectory(prefix="dualtrace-hostile-") as tmp:
        os.environ.setdefault("DUALTRACE_HOME", str(Path(tmp) / "state"))
        for state in args.defences.split(","):
            for backend in ("offline", "gullible"):
                results.append(run(hc, backend, state == "on", Path(tmp)))
    hostile = sum(1 for c in hc.CASES if c.kind == "hostile")
    print(f"corpus: {len(hc.CASES)} sessions, {hostile} hostile, {len(hc.CASES) - hostile} benign")
    print("| backend | defences | hostile sessions that formed a hostile memory | benign controls kept "
          "| passages withheld |")
    print("|---|---|---:|---:|---:|")
    for r in results:
        print(f"| {r['backend']} | {r['defences']} | {r['formed']}/{r['hostile']} | "
              f"{r['kept']}/{r['benign']} | {r['withheld']} |")
    for r in results:
        bad = [name for name, c in r["cases"].items() if not c["ok"]]
        print(f"{r['backend']} defences {r['defences']}: failing cases: {', '.join(bad) or 'none'}")
    ms_per_mb, share = quarantine_cost(hc)
    print(f"quarantine cost: {ms_per_mb:.1f} ms per MB of session text (median of 5)")
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
