"""Same answers from two builds: every recall of the question sets, dumped and compared.

    python bench/bench_recall_answers.py dump --out FILE [--sessions DIR] [--sde DIR]
        [--store DIR] [--labelled] [--embedder auto|off]
    python bench/bench_recall_answers.py compare A.json B.json [--tol 1e-5]

``dump`` runs with the interpreter of the build under test (e.g. a non-editable venv
of main and one of a change) and writes, for every question, the state, the rendered
answer and each returned item's path, source, state and score:

- ``--sessions DIR``: bench/data/session_questions.json and the fresh set over a pool
  encoded by ``bench/eval_sessions.py --keep DIR``;
- ``--sde DIR``: every sde-bench task's bug report over ``bench/eval_sdebench.py --keep DIR``;
- ``--store DIR``: 200 questions of bench_recall over bench_recall_cli.py's store (DIR
  holds ``memory/``);
- ``--labelled``: tests/data/recall_questions.py's set over its own store (built here).

Each build should read its own copy of a pool (delete the copy's ``.dualtrace/`` so
the build under test computes the vectors too). ``compare`` reports every question
whose state, items or rendered text differ, and the largest score difference; it exits
1 when anything but a score within ``--tol`` differs.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import random
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))
CORPUS = ROOT.parent / "shared" / "corpus" / "sde-bench"


def _answer(result: object) -> dict:
    from dualtrace.memfs.recall import RecallResult

    assert isinstance(result, RecallResult)
    return {"state": result.state, "render": result.render(),
            "items": [{"path": m.path, "source": m.source, "state": m.state,
                       "score": m.score} for m in result.memories]}


def _questions_sessions() -> list[tuple[str, int]]:
    out = []
    for name in ("session_questions.json", "session_questions_fresh.json"):
        items = json.loads((ROOT / "bench" / "data" / name).read_text(encoding="utf-8"))
        out += [(i["question"], 3) for i in items["questions"]]
    return out


def _questions_sde() -> list[tuple[str, int]]:
    out = []
    for path in sorted((CORPUS / "tasks").glob("*.task.json")):
        task = json.loads(path.read_text(encoding="utf-8"))
        if task.get("source") in ("conversation", "conversation-amended"):
            out.append((task["bug_report"], 5))
    return out


def _questions_store(root: Path) -> list[tuple[str, int]]:
    import bench_recall

    anchors = (root / ".bench-anchors").read_text().split()
    return [(q, 5) for q in bench_recall.questions(root, anchors, random.Random(11), 200)]


def dump(args: argparse.Namespace) -> None:
    from dualtrace.memfs import embed
    from dualtrace.memfs.recall import recall

    if args.embedder == "off":
        embed.set_embedder(None)
    out: dict[str, dict] = {}

    def run(tag: str, root: Path | object, questions: list[tuple[str, int]]) -> None:
        for n, (q, limit) in enumerate(questions):
            out[f"{tag}:{n}:{q[:80]}"] = _answer(recall(root, q, limit=limit))

    if args.sessions:
        run("sessions", args.sessions, _questions_sessions())
    if args.sde:
        run("sde", args.sde, _questions_sde())
    if args.store:
        run("store", args.store / "memory", _questions_store(args.store / "memory"))
    if args.labelled:
        from dualtrace.memfs.store import MemoryStore

        spec = importlib.util.spec_from_file_location(
            "recall_questions", ROOT / "tests" / "data" / "recall_questions.py")
        assert spec is not None and spec.loader is not None
        rq = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(rq)
        with tempfile.TemporaryDirectory() as tmp:
            store = MemoryStore(Path(tmp) / "memory", project="project")
            rq.build(store)
            run("labelled", store, [(q, 5) for q, _g, _p in rq.QUESTIONS])
            store.close()
    out["_meta"] = {"numpy_imported": "numpy" in sys.modules,
                    "embedder": type(embed.get_embedder()).__name__}
    args.out.write_text(json.dumps(out, indent=0, sort_keys=True), encoding="utf-8")
    print(f"{len(out) - 1} answers -> {args.out} (numpy imported: {'numpy' in sys.modules})")


def compare(args: argparse.Namespace) -> int:
    a = json.loads(args.a.read_text(encoding="utf-8"))
    b = json.loads(args.b.read_text(encoding="utf-8"))
    print(f"A {args.a}: {a.pop('_meta', None)}\nB {args.b}: {b.pop('_meta', None)}")
    differ = []
    worst = 0.0
    for key in sorted(set(a) | set(b)):
        x, y = a.get(key), b.get(key)
        if x is None or y is None:
            differ.append((key, "missing in one"))
            continue
        strip = [{k: v for k, v in i.items() if k != "score"} for i in x["items"]]
        if x["state"] != y["state"] or strip != [
                {k: v for k, v in i.items() if k != "score"} for i in y["items"]]:
            differ.append((key, f"state/items {x['state']} {strip} vs {y['state']} "
                                f"{[i['path'] for i in y['items']]}"))
            continue
        if x["render"] != y["render"]:
            differ.append((key, "rendered text differs"))
        for i, j in zip(x["items"], y["items"], strict=True):
            worst = max(worst, abs(i["score"] - j["score"]))
    tags: dict[str, int] = {}
    for key in a:
        tags[key.split(":", 1)[0]] = tags.get(key.split(":", 1)[0], 0) + 1
    print(f"questions: {tags}; differing: {len(differ)}; largest score difference {worst:.2e}")
    for key, why in differ:
        print(f"  {key}: {why}")
    return 1 if differ or worst > args.tol else 0


def main() -> None:
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers(dest="cmd", required=True)
    d = sub.add_parser("dump")
    d.add_argument("--out", type=Path, required=True)
    d.add_argument("--sessions", type=Path)
    d.add_argument("--sde", type=Path)
    d.add_argument("--store", type=Path)
    d.add_argument("--labelled", action="store_true")
    d.add_argument("--embedder", choices=("auto", "off"), default="auto")
    c = sub.add_parser("compare")
    c.add_argument("a", type=Path)
    c.add_argument("b", type=Path)
    c.add_argument("--tol", type=float, default=1e-5)
    args = parser.parse_args()
    if args.cmd == "dump":
        dump(args)
    else:
        sys.exit(compare(args))


if __name__ == "__main__":
    main()
