"""Recall speed on synthetic stores: in-process, through the CLI, the prompt hook, index updates.

    /work/venv/bin/python bench/bench_recall.py [--sizes 1000 10000] [--cli-runs 30]
        [--records 1000] [--embedder auto|off]

Builds a synthetic memory directory per size in a temp dir (facts of all four folder
types, every other one with a moment, plus system bullets; vocabulary drawn from a
fixed pseudo-word lexicon so bm25 sees a realistic long tail), then measures
- index build (``dualtrace reindex`` equivalent),
- recall in-process (``recall(root, q)``: opens the index, freshness check, query, close),
- ``dualtrace recall`` end to end as a new process, vs ``python -c pass`` in the same run,
- ``dualtrace hook prompt`` end to end (p95 is the target), same baseline,
- index update per commit (``update_after_commit`` after a one-file commit).
With ``--records N``, N synthetic session records (8 turns each, in the write side's
format) are added to every store; with the semantic extra installed the vectors of every
document are computed once after the index build (reported as "vectors"), as the worker
does after each commit. ``--embedder off`` measures the lexical path alone.
Prints a markdown table for docs/BENCHMARKS.md.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from dualtrace.memfs import formats
from dualtrace.memfs import index as index_mod
from dualtrace.memfs.recall import recall

TYPES = ("decision", "incident", "pattern", "learning")
COMMON = ("the we use module service request cache test error config api client retry "
          "timeout database queue worker deploy build migration schema token session log "
          "handler route model view user order payment report export import").split()


def lexicon(rng: random.Random, n: int = 4000) -> list[str]:
    syll = ["ka", "lo", "mi", "ne", "ru", "ta", "po", "si", "ve", "zu", "gra", "dor", "fen"]
    words: set[str] = set()
    while len(words) < n:
        words.add("".join(rng.choice(syll) for _ in range(rng.randint(2, 4))))
    return sorted(words)


def text(rng: random.Random, lex: list[str], n: int) -> str:
    # Zipf-ish: common words often, the lexicon's head more than its tail.
    out = []
    for _ in range(n):
        if rng.random() < 0.35:
            out.append(rng.choice(COMMON))
        else:
            out.append(lex[min(int(rng.paretovariate(0.7)) - 1, len(lex) - 1)]
                       if rng.random() < 0.3 else rng.choice(lex))
    return " ".join(out)


def build(root: Path, n: int, seed: int = 7) -> list[str]:
    rng = random.Random(seed)
    lex = lexicon(rng)
    anchors: list[str] = []
    subprocess.run(["git", "init", "-q", "-b", "main", str(root)], check=True)
    (root / ".gitignore").write_text(".dualtrace/\n")
    for i in range(n):
        kind = TYPES[i % 4]
        anchor = f"{rng.choice(lex)}-{rng.choice(lex)}-{i}"
        anchors.append(anchor)
        path = formats.fact_path(kind, anchor)
        full = i % 2 == 0
        fact = formats.Fact(path=path, type=kind, description=text(rng, lex, 14),
                            body=text(rng, lex, 90), stored="2026-10-01",
                            evidence_score=rng.randint(5, 12),
                            linked_scene=formats.scene_path(kind, anchor) if full else None)
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text(formats.render_fact(fact), encoding="utf-8")
        if full:
            moment = formats.Moment(path=formats.scene_path(kind, anchor), anchor=anchor,
                                    description=f"Scene cue for {anchor}", linked_fact=path,
                                    narrative=text(rng, lex, 70),
                                    timeline=(f"{anchor} -> {text(rng, lex, 6)} [2026-10-01]",),
                                    stored="2026-10-01")
            (root / moment.path).parent.mkdir(parents=True, exist_ok=True)
            (root / moment.path).write_text(formats.render_moment(moment), encoding="utf-8")
    (root / "system").mkdir()
    bullets = "\n".join(f"- {text(rng, lex, 12)}" for _ in range(30))
    (root / "system" / "human.md").write_text(f"---\ndescription: prefs\n---\n\n{bullets}\n")
    env = {**os.environ, "GIT_AUTHOR_NAME": "b", "GIT_AUTHOR_EMAIL": "b@x",
           "GIT_COMMITTER_NAME": "b", "GIT_COMMITTER_EMAIL": "b@x"}
    subprocess.run(["git", "-C", str(root), "add", "."], check=True, env=env)
    subprocess.run(["git", "-C", str(root), "commit", "-q", "-m", "bench"], check=True, env=env)
    return anchors


def build_records(root: Path, n: int, seed: int = 11) -> None:
    """N session records of 8 turns each, rendered by the write side's own code."""
    from dualtrace.memfs import sessions

    rng = random.Random(seed)
    lex = lexicon(rng)
    for i in range(n):
        day = f"2026-{1 + i % 12:02d}-{1 + i % 28:02d}"
        sid = f"{i:08x}-0000-4000-8000-{rng.getrandbits(48):012x}"
        started = f"{day}T10:00:00Z"
        turns = tuple(sessions.Turn(number=t + 1, date=day, time=f"{10 + t // 6:02d}:{t * 7 % 60:02d}",
                                    user=text(rng, lex, 40), agent=text(rng, lex, 160))
                      for t in range(8))
        rel = sessions.record_path(sid, started)
        record = sessions.SessionRecord(path=rel, session=sid, host="claude-code",
                                        project="bench", started=started, ended=started,
                                        description=text(rng, lex, 10), turns=turns)
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(sessions.render_record(record), encoding="utf-8")


def questions(root: Path, anchors: list[str], rng: random.Random, k: int) -> list[str]:
    out = []
    for i in range(k):
        anchor = rng.choice(anchors)
        kind = TYPES[int(anchor.rsplit("-", 1)[1]) % 4]
        fact = formats.parse_fact((root / formats.fact_path(kind, anchor)).read_text(), "x")
        words = fact.description.split()
        if i % 3 == 2:  # never-stored flavour
            out.append(f"why do we use zyxwv {words[0]} qqqfoo")
        else:
            out.append("why did we " + " ".join(rng.sample(words, 4)))
    return out


def pct(values: list[float], p: float) -> float:
    values = sorted(values)
    return values[min(int(round(p / 100 * (len(values) - 1))), len(values) - 1)]


def timed_runs(cmd: list[str], runs: int, env: dict[str, str], stdin: str | None = None,
               cwd: str | None = None) -> list[float]:
    out = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run(cmd, input=stdin, capture_output=True, text=True, env=env, check=False,
                       cwd=cwd)
        out.append((time.perf_counter() - start) * 1000)
    return out


def bench_size(n: int, cli_runs: int, inproc: int, records: int = 0,
               embedder: str = "auto") -> dict[str, float]:
    from dualtrace.memfs import embed

    rng = random.Random(n)
    tmp = Path(tempfile.mkdtemp(prefix=f"dt-bench-{n}-"))
    root = tmp / "memory"
    if records:
        root.mkdir(parents=True)
        build_records(root, records)
    anchors = build(root, n)
    res: dict[str, float] = {"memories": n, "records": records}
    start = time.perf_counter()
    index_mod.reindex(root)
    res["build_s"] = time.perf_counter() - start
    model = embed.get_embedder() if embedder == "auto" else None
    if embedder == "off":
        embed.set_embedder(None)
    res["embedder"] = model.name if model else "off"  # type: ignore[assignment]
    res["vectors_s"] = 0.0
    if model is not None:
        start = time.perf_counter()
        with index_mod.Index.open(root) as index:
            index.ensure_vectors(model)
        res["vectors_s"] = time.perf_counter() - start
    res["index_mb"] = index_mod.index_path(root).stat().st_size / 1e6
    qs = questions(root, anchors, rng, inproc)
    states = {"A": 0, "B": 0, "C": 0}
    times = []
    for q in qs:
        start = time.perf_counter()
        result = recall(root, q)
        times.append((time.perf_counter() - start) * 1000)
        states[result.state] += 1
    res["inproc_p50"] = statistics.median(times)
    res["inproc_p95"] = pct(times, 95)
    res["states"] = json.dumps(states)  # type: ignore[assignment]
    exe = str(Path(sys.executable).with_name("dualtrace"))
    state = tmp / "state"
    state.mkdir()
    env = {**os.environ, "DUALTRACE_MEMORY_DIR": str(root), "DUALTRACE_HOME": str(state)}
    if embedder == "off":
        env["DUALTRACE_EMBEDDER"] = "off"
    # An installed package has .pyc files; this dev environment sets
    # PYTHONDONTWRITEBYTECODE=1, which would recompile every module on every call.
    # Cache bytecode in the temp dir (for the baseline too, alike).
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env["PYTHONPYCACHEPREFIX"] = str(state / "pycache")
    base = timed_runs([sys.executable, "-c", "pass"], cli_runs, env)
    res["python_p50"] = statistics.median(base)
    cli = []
    for q in qs[:cli_runs]:
        cli += timed_runs([exe, "recall", q], 1, env, cwd=str(tmp))
    res["cli_p50"] = statistics.median(cli)
    res["cli_p95"] = pct(cli, 95)
    hook = []
    for q in qs[:cli_runs]:
        payload = json.dumps({"session_id": "bench", "transcript_path": str(tmp / "t.jsonl"),
                              "cwd": str(tmp), "hook_event_name": "UserPromptSubmit",
                              "prompt": q})
        hook += timed_runs([exe, "hook", "prompt"], 1, env, stdin=payload, cwd=str(tmp))
    res["hook_p50"] = statistics.median(hook)
    res["hook_p95"] = pct(hook, 95)
    # Index update after a one-file commit (what MemoryStore.commit triggers).
    from dualtrace.memfs.store import MemoryStore

    store = MemoryStore(root, project="bench")
    upd = []
    for i in range(10):
        rel = store.write(formats.Fact(path=f"decisions/bench-new-{i}.md", type="decision",
                                       description=f"bench decision {i} kalopo",
                                       body="x", stored="2026-11-01"))
        start = time.perf_counter()
        store.git.commit([rel], f"mem: store decisions/bench-new-{i} (decision, evidence:5)\n")
        mid = time.perf_counter()
        index_mod.update_after_commit(store, [rel])
        end = time.perf_counter()
        upd.append((end - mid) * 1000)
        res.setdefault("git_commit_ms", (mid - start) * 1000)
    res["update_p50"] = statistics.median(upd)
    store.close()
    return res


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 10000])
    parser.add_argument("--cli-runs", type=int, default=30)
    parser.add_argument("--inproc", type=int, default=200)
    parser.add_argument("--records", type=int, default=0)
    parser.add_argument("--embedder", choices=("auto", "off"), default="auto")
    args = parser.parse_args()
    rows = [bench_size(n, args.cli_runs, args.inproc, args.records, args.embedder)
            for n in args.sizes]
    print("| memories | records | embedder | index build (+ vectors) | index size | "
          "in-process p50 / p95 | CLI p50 / p95 | "
          "python -c pass p50 | prompt hook p50 / p95 | index update per commit p50 |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['memories']:,} | {r['records']:,} | {r['embedder']} | "
              f"{r['build_s']:.1f} s (+ {r['vectors_s']:.1f} s) | {r['index_mb']:.1f} MB | "
              f"{r['inproc_p50']:.1f} / {r['inproc_p95']:.1f} ms | "
              f"{r['cli_p50']:.0f} / {r['cli_p95']:.0f} ms | {r['python_p50']:.0f} ms | "
              f"{r['hook_p50']:.0f} / {r['hook_p95']:.0f} ms | {r['update_p50']:.1f} ms |")
    for r in rows:
        print(f"states at {r['memories']}: {r['states']}")


if __name__ == "__main__":
    main()
