"""Recall quality on sde-bench, plus abstention on the labelled question set.

    python bench/eval_sdebench.py [--backend offline] [--keep DIR | --reuse DIR] [-v]

1. Every conversation task's chat(s) (amended tasks: the original, then the
   amendment) and the 140 decoy chats are written as plain-chat transcripts (JSONL of
   {"role", "content"}) into a temp dir (never the repo) and encoded one session per
   chat, in order, into one memory directory with the chosen encoder backend. Decoys
   are interleaved between tasks (about 4 after each task) so updates see a mixed store.
2. Each task's ``bug_report`` is recalled (limit 5). A hit is a returned memory that
   the task's own chat(s) stored or updated. Reported: hit@1, hit@5, MRR over all 33
   queries, how many tasks the encoder stored anything for, and for the 6 amended tasks
   whether the first memory returned was touched by the *later* chat and is not
   marked superseded; and how many facts chats of two subjects wrote (task + decoy, two
   tasks, two decoys): a merge across subjects, whatever the order (``--order``).
3. Abstention: the labelled set of tests/data/recall_questions.py (STATE C on
   never-stored questions, A/B on answerable ones).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CORPUS = Path(os.environ.get("DUALTRACE_CORPUS") or ROOT.parent / "shared" / "corpus") / "sde-bench"


def load_tasks() -> tuple[list[dict], list[dict]]:
    tasks = []
    for path in sorted((CORPUS / "tasks").glob("*.task.json")):
        task = json.loads(path.read_text(encoding="utf-8"))
        if task.get("source") in ("conversation", "conversation-amended"):
            tasks.append(task)
    decoys = json.loads((CORPUS / "decoy_conversations.json").read_text(encoding="utf-8"))
    return tasks, decoys


def chats_of(task: dict) -> list[list[dict]]:
    conv = task.get("conversations") or []
    if conv and isinstance(conv[0], list):
        return conv  # amended: [original, amendment]
    return [conv]


def write_chat(folder: Path, name: str, turns: list[dict]) -> Path:
    path = folder / f"{name}.jsonl"
    with path.open("w", encoding="utf-8") as fh:
        for turn in turns:
            fh.write(json.dumps({"role": turn["role"], "content": turn["text"]}) + "\n")
    return path


def op_paths(report) -> set[str]:
    out: set[str] = set()
    for op in report.operations:
        for key in ("path", "fact", "scene", "target", "moment"):
            value = op.get(key)
            if isinstance(value, str) and value.endswith(".md"):
                out.add(value)
    return out


def encode_all(memdir: Path, chats_dir: Path, backend: str,
               order: str = "interleaved") -> tuple[dict, list[str]]:
    from dualtrace.config import Settings
    from dualtrace.pipeline import encode_session

    tasks, decoys = load_tasks()
    touched: dict[str, list[set[str]]] = {}
    # which chats wrote each fact: a fact two subjects' chats wrote is a merge across
    # subjects (the order-robustness check scores by who wrote a memory, so it counts them)
    writers: dict[str, set[str]] = {}

    def wrote(source: str, report) -> set[str]:
        paths = op_paths(report)
        for p in paths:
            fact = _scene_to_fact(p)
            if fact.split("/")[0] in ("decisions", "incidents", "patterns", "learning"):
                writers.setdefault(fact, set()).add(source)
        return paths

    notes: list[str] = []
    settings = Settings()
    # interleaved: ~4 decoys after each task; tasks-first: every task chat, then the 140
    # decoys (another valid arrival order: recall must not depend on it)
    per_task = 0 if order == "tasks-first" else max(len(decoys) // max(len(tasks), 1), 1)
    queue = list(enumerate(decoys))
    for task in tasks:
        tid = task["task_id"]
        touched[tid] = []
        for n, turns in enumerate(chats_of(task)):
            path = write_chat(chats_dir, f"{tid}-{n}", turns)
            report = encode_session(path, memory_dir=memdir, backend=backend, settings=settings)
            touched[tid].append(wrote(tid, report))
            if report.skipped:
                notes.append(f"{tid}#{n}: skipped ({report.skipped[:80]})")
        for _ in range(per_task):
            if queue:
                i, decoy = queue.pop(0)
                wrote(f"decoy-{i:03d}", encode_session(write_chat(chats_dir, f"decoy-{i:03d}", decoy["turns"]),
                                                       memory_dir=memdir, backend=backend, settings=settings))
    for i, decoy in queue:
        wrote(f"decoy-{i:03d}", encode_session(write_chat(chats_dir, f"decoy-{i:03d}", decoy["turns"]),
                                               memory_dir=memdir, backend=backend, settings=settings))
    shared = [sorted(w) for w in writers.values() if len(w) > 1]
    return {"tasks": tasks, "touched": touched, "shared": shared}, notes


def _scene_to_fact(path: str) -> str:
    parts = path.split("/")
    return "/".join(parts[1:]) if parts[0] == "scenes" else path


def evaluate(memdir: Path, data: dict) -> dict:
    from dualtrace.memfs.recall import recall

    hit1 = hit5 = 0
    rr = 0.0
    encoded = 0
    amended_ok = amended_n = 0
    rows = []
    for task in data["tasks"]:
        tid = task["task_id"]
        sets = data["touched"][tid]
        relevant = {_scene_to_fact(p) for s in sets for p in s}
        encoded += bool(relevant)
        result = recall(memdir, task["bug_report"], limit=5)
        got = [m.path for m in result.memories]
        rank = next((i + 1 for i, p in enumerate(got) if p in relevant), None)
        hit1 += rank == 1
        hit5 += rank is not None
        rr += 1.0 / rank if rank else 0.0
        if task["source"] == "conversation-amended":
            amended_n += 1
            later = {_scene_to_fact(p) for p in sets[-1]} if sets else set()
            first = result.memories[0] if result.memories else None
            ok = bool(first and first.path in later and not first.superseded_by)
            amended_ok += ok
        rows.append((tid, result.state, rank, got[:3]))
    n = len(data["tasks"])
    return {"queries": n, "encoded_tasks": encoded, "hit@1": hit1 / n, "hit@5": hit5 / n,
            "mrr": rr / n, "amended": f"{amended_ok}/{amended_n}", "rows": rows}


def abstention() -> dict:
    from dualtrace.memfs.recall import recall
    from dualtrace.memfs.store import MemoryStore

    spec = importlib.util.spec_from_file_location(
        "recall_questions", ROOT / "tests" / "data" / "recall_questions.py")
    rq = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(rq)
    with tempfile.TemporaryDirectory() as tmp:
        store = MemoryStore(Path(tmp) / "memory", project="project")
        rq.build(store)
        never = [q for q, g, _ in rq.QUESTIONS if g == "never"]
        answerable = [q for q, g, _ in rq.QUESTIONS if g == "answerable"]
        c = sum(recall(store, q).state == "C" for q in never)
        ab = sum(recall(store, q).state in ("A", "B") for q in answerable)
        store.close()
    return {"never_C": f"{c}/{len(never)}", "answerable_AB": f"{ab}/{len(answerable)}"}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--backend", default="offline")
    parser.add_argument("--keep", type=Path, default=None, help="Keep the memory dir here.")
    parser.add_argument("--order", choices=("interleaved", "tasks-first"), default="interleaved",
                        help="session arrival order: decoys between tasks, or all task chats first")
    parser.add_argument("--reuse", type=Path, default=None,
                        help="Evaluate a directory written by --keep (no encoding).")
    parser.add_argument("-v", "--verbose", action="store_true")
    args = parser.parse_args()
    print("abstention:", json.dumps(abstention()))
    if not CORPUS.is_dir():
        print(f"sde-bench corpus not found at {CORPUS}; skipped")
        return
    if args.reuse:
        saved = json.loads((args.reuse / "touched.json").read_text(encoding="utf-8"))
        data = {"tasks": load_tasks()[0],
                "touched": {t: [set(s) for s in sets] for t, sets in saved.items()}}
        result = evaluate(args.reuse / "memory", data)
        print(json.dumps({k: (round(v, 3) if isinstance(v, float) else v)
                          for k, v in result.items() if k != "rows"}))
        if args.verbose:
            for row in result["rows"]:
                print(row)
        return
    with tempfile.TemporaryDirectory(prefix="dt-sde-") as tmp:
        base = Path(args.keep) if args.keep else Path(tmp)
        os.environ["DUALTRACE_HOME"] = str(base / "state")  # cursors etc. stay in the temp dir
        chats = base / "chats"
        chats.mkdir(parents=True, exist_ok=True)
        memdir = base / "memory"
        start = time.perf_counter()
        data, notes = encode_all(memdir, chats, args.backend, args.order)
        took = time.perf_counter() - start
        if args.keep:
            (base / "touched.json").write_text(json.dumps(
                {t: [sorted(s) for s in sets] for t, sets in data["touched"].items()}),
                encoding="utf-8")
        result = evaluate(memdir, data)
        # an amended task's first chat is its base task's chat: one subject
        tasks_of = [sorted({w.replace("-amended", "") for w in ws if not w.startswith("decoy-")})
                    for ws in data["shared"]]
        decoys_of = [[w for w in ws if w.startswith("decoy-")] for ws in data["shared"]]
        pairs = list(zip(tasks_of, decoys_of, strict=True))
        result["facts_by_two_chats"] = {"task+decoy": sum(1 for t, d in pairs if t and d),
                                        "two tasks": sum(1 for t, _ in pairs if len(t) > 1),
                                        "two decoys": sum(1 for t, d in pairs if not t and len(d) > 1)}
        files = sum(1 for _ in memdir.rglob("*.md"))
        print(f"encoded {len(list(chats.glob('*.jsonl')))} chats with backend={args.backend}, "
              f"order={args.order} "
              f"in {took:.0f}s -> {files} memory files; tasks with a stored memory: "
              f"{result['encoded_tasks']}/{result['queries']}")
        print(json.dumps({k: (round(v, 3) if isinstance(v, float) else v)
                          for k, v in result.items() if k != "rows"}))
        if args.verbose:
            for row in result["rows"]:
                print(row)
            for note in notes:
                print(note)


if __name__ == "__main__":
    sys.exit(main())
