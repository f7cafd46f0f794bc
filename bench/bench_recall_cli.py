"""`dualtrace recall` as a new process: where its time goes, against baselines in the same run.

    python bench/bench_recall_cli.py [--store DIR] [--runs 30] [--memories 10000]
        [--records 1000] [--importtime] [--warm] [--baseline-exe OTHER_VENV/bin/dualtrace]
        [--phases] [--inproc Q]

The store (10,000 memories + 1,000 session records by default, built with
bench/bench_recall.py's generators, vectors computed as the worker does) is built once
in DIR and reused on later runs (``--store``; a temp dir otherwise). Then, round robin
so that every command sees the same machine noise, each of these runs ``--runs`` times:

- ``python -c pass``                                 the interpreter alone (the floor)
- ``python -c "import numpy"``                       what the semantic path imported up to session 6
- ``dualtrace --version``                            console script + click + the CLI module
- ``dualtrace recall Q`` with DUALTRACE_EMBEDDER=off the lexical read path
- ``dualtrace recall Q``                             the hybrid read path (WordLlama + FTS5)
- with ``--warm``: ``dualtrace recall Q`` answered by a running warm server's fork (a
  state dir of its own, where a warm server was started for the run)

Questions are drawn like bench_recall's (a different one each run; a third of them
never-stored). Reported: median and p90 in ms, and each median as a ratio to the
``python -c pass`` median of the same run (the machine is shared and noisy), plus the
child's CPU time (user + sys), which scheduling noise inflates far less than wall time. With
``--importtime`` one semantic recall runs under ``-X importtime`` and the heaviest
imports are listed. ``--phases`` instead splits a new process's recall into its phases
(``--runs`` new processes per build, builds alternating): the read path's imports, loading
the embedder (the vector module and the memory-mapped token table; numpy before session
7) and the query itself (vocabulary, FTS5, vectors, record lines), each as the median wall
and CPU time. ``--inproc Q`` times recall inside one process per build and round, with the
index opened per query and with one index kept open (refreshed before each query).
"""

from __future__ import annotations

import argparse
import os
import random
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_recall  # noqa: E402  (bench/ is not a package)


def build_store(root: Path, memories: int, records: int) -> list[str]:
    """Build (or reuse) the store; returns the memories' anchors for the questions."""
    from dualtrace.memfs import embed
    from dualtrace.memfs import index as index_mod

    marker = root / ".bench-anchors"
    if marker.is_file():
        return marker.read_text().split()
    root.mkdir(parents=True)
    if records:
        bench_recall.build_records(root, records)
    anchors = bench_recall.build(root, memories)
    index_mod.reindex(root)
    model = embed.get_embedder()
    if model is not None:
        with index_mod.Index.open(root) as index:
            index.ensure_vectors(model)
    marker.write_text("\n".join(anchors))
    return anchors


def main() -> None:
    tmp = Path(tempfile.mkdtemp(prefix="dt-bench-cli-"))
    try:
        run(tmp)
    finally:  # the state dirs (~33 MB each with the float32 table), the temp store
        import shutil

        shutil.rmtree(tmp, ignore_errors=True)


def run(tmp: Path) -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--store", type=Path, default=None)
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--memories", type=int, default=10000)
    parser.add_argument("--records", type=int, default=1000)
    parser.add_argument("--importtime", action="store_true")
    parser.add_argument("--phases", action="store_true",
                        help="Instead of whole commands: a new process's recall split into "
                             "imports, embedder and query, --runs times per build.")
    parser.add_argument("--inproc", type=int, default=0, metavar="Q",
                        help="Instead of new processes: in-process recall, Q queries per "
                             "round and build (after a 5-query warm-up), --runs rounds, "
                             "builds alternating round by round (interleaved A/B); each "
                             "build with the index opened per query and kept open.")
    parser.add_argument("--warm", action="store_true",
                        help="Also time `dualtrace recall` answered by a running warm server "
                             "(dualtrace/mcp_warm.py: what MCP host sessions are forked "
                             "from), started for this run in a state dir of its own.")
    parser.add_argument("--baseline-exe", type=Path, default=None,
                        help="Another build's dualtrace console script (e.g. a venv of an "
                             "older commit): its recall runs in the same round robin, on a "
                             "copy of the store (its index files may differ).")
    args = parser.parse_args()

    store = args.store or tmp / "store"
    start = time.perf_counter()
    anchors = build_store(store / "memory", args.memories, args.records)
    built = time.perf_counter() - start
    root = store / "memory"
    qs = bench_recall.questions(root, anchors, random.Random(5), args.runs)

    state = tmp / "state"
    state.mkdir()
    env = {**os.environ, "DUALTRACE_MEMORY_DIR": str(root), "DUALTRACE_HOME": str(state)}
    # Bytecode cached like an installed package (this dev environment may disable it).
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env["PYTHONPYCACHEPREFIX"] = str(store / "pycache")
    lexical = {**env, "DUALTRACE_EMBEDDER": "off"}
    exe = str(Path(sys.executable).with_name("dualtrace"))
    py = sys.executable
    base_env = None
    if args.baseline_exe is not None:
        import shutil

        copy = store / "baseline-memory"
        if not copy.is_dir():
            shutil.copytree(root, copy, symlinks=True)
        # A state dir of its own: the builds' BPE vocabulary caches may differ in format
        # under one file name, and sharing it made each rebuild it from the JSON on
        # every run (~50 ms each, session 10).
        base_state = tmp / "state-baseline"
        base_state.mkdir()
        base_env = {**env, "DUALTRACE_MEMORY_DIR": str(copy), "DUALTRACE_HOME": str(base_state),
                    "PYTHONPYCACHEPREFIX": str(store / "pycache-baseline")}
    if args.phases:
        phases(args, env, base_env, qs)
        return
    if args.inproc:
        inproc(args, env, base_env, qs_all=bench_recall.questions(
            root, anchors, random.Random(5), args.inproc + 5))
        return
    commands = {
        "python -c pass": lambda q: ([py, "-c", "pass"], env),
        'python -c "import numpy"': lambda q: ([py, "-c", "import numpy"], env),
        "dualtrace --version": lambda q: ([exe, "--version"], env),
        "dualtrace recall (lexical)": lambda q: ([exe, "recall", q], lexical),
        "dualtrace recall (semantic)": lambda q: ([exe, "recall", q], env),
    }
    server = None
    if args.warm:
        # The console script's own interpreter (its key names the interpreter).
        script_py = Path(exe).read_text().splitlines()[0].removeprefix("#!").strip()
        warm_env, server = start_warm_server(script_py, env, tmp / "state-warm")
        commands["dualtrace recall (semantic, warm server)"] = lambda q: (
            [exe, "recall", q], warm_env)
    if base_env is not None:
        bexe = str(args.baseline_exe)
        commands["baseline recall (lexical)"] = lambda q: (
            [bexe, "recall", q], {**base_env, "DUALTRACE_EMBEDDER": "off"})
        commands["baseline recall (semantic)"] = lambda q: ([bexe, "recall", q], base_env)
    # Warm the OS page cache and the bytecode cache once; not timed.
    for make in commands.values():
        cmd, e = make(qs[0])
        subprocess.run(cmd, capture_output=True, env=e, cwd=str(tmp), check=False)
    times: dict[str, list[float]] = {name: [] for name in commands}
    cpu: dict[str, list[float]] = {name: [] for name in commands}
    states: dict[str, dict[str, int]] = {}
    for i in range(args.runs):
        for name, make in commands.items():
            cmd, e = make(qs[i % len(qs)])
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            begin = time.perf_counter()
            done = subprocess.run(cmd, capture_output=True, text=True, env=e, cwd=str(tmp),
                                  check=False)
            times[name].append((time.perf_counter() - begin) * 1000)
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            cpu[name].append((after.ru_utime - before.ru_utime
                              + after.ru_stime - before.ru_stime) * 1000)
            if done.returncode != 0:
                raise SystemExit(f"{name} failed: {done.stderr.strip()}")
            if "recall" in name:
                found = re.search(r"^\(STATE ([ABC]) ", done.stdout, re.M)
                state_ = found.group(1) if found else "?"
                counts = states.setdefault(name, {})
                counts[state_] = counts.get(state_, 0) + 1
    fork_cpu = None
    if server is not None:
        fork_cpu = stop_warm_server(server) / (args.runs + 1)
    base = statistics.median(times["python -c pass"])
    base_cpu = statistics.median(cpu["python -c pass"])
    load = os.getloadavg()[0]
    print(f"store: {args.memories:,} memories + {args.records:,} records at {root} "
          f"({'reused' if built < 1 else f'built in {built:.0f} s'}); {args.runs} runs each, "
          f"round robin; load average {load:.1f}")
    print()
    print("| command | wall p50 | wall p90 | p50 / python -c pass | CPU p50 (user+sys) | "
          "CPU / python -c pass |")
    print("|---|---|---|---|---|---|")
    for name, values in times.items():
        med = statistics.median(values)
        med_cpu = statistics.median(cpu[name])
        print(f"| `{name}` | {med:.0f} ms | {bench_recall.pct(values, 90):.0f} ms | "
              f"{med / base:.2f} | {med_cpu:.0f} ms | {med_cpu / base_cpu:.2f} |")
    for name, counts in states.items():
        print(f"states {name}: {dict(sorted(counts.items()))}")
    if fork_cpu is not None:
        print(f"warm server: its forks' CPU (user+sys, not in the CPU column above) averaged "
              f"{fork_cpu:.0f} ms per recall (mean over all forks, clock-tick resolution)")
    if args.importtime:
        done = subprocess.run([exe, "recall", qs[0]], capture_output=True, text=True,
                              env={**env, "PYTHONPROFILEIMPORTTIME": "1"}, cwd=str(tmp),
                              check=False)
        rows = []
        for line in done.stderr.splitlines():
            if line.startswith("import time:") and "|" in line:
                parts = line[len("import time:"):].split("|")
                if parts[1].strip().isdigit():
                    rows.append((int(parts[1]), parts[2].rstrip()))
        print("\nheaviest imports (cumulative us, one semantic recall):")
        for us, name in sorted(rows, reverse=True)[:15]:
            print(f"  {us:>7} {name}")


def start_warm_server(py: str, env: dict[str, str], state: Path,
                      ) -> tuple[dict[str, str], subprocess.Popen[bytes]]:
    """A warm server for ``state`` (as `dualtrace mcp` starts one), once it has preloaded."""
    state.mkdir()
    warm_env = {**env, "DUALTRACE_HOME": str(state), "DUALTRACE_MCP_WARM": "1",
                "DUALTRACE_MCP_IDLE": "3600"}
    sock = subprocess.run([py, "-c", "from dualtrace.mcp_warm import socket_path; import sys; "
                           "print(socket_path(sys.argv[1]))", str(state)], env=warm_env,
                          capture_output=True, text=True, check=True, cwd=str(state)
                          ).stdout.strip()
    os.makedirs(os.path.dirname(sock), mode=0o700, exist_ok=True)
    server = subprocess.Popen([py, "-c", "import sys; from dualtrace.mcp_warm import "
                               "serve_forever; serve_forever(sys.argv[1], sys.argv[2])",
                               sock, str(state)], env=warm_env, start_new_session=True,
                              cwd=str(state),  # ("-c" puts the cwd first on sys.path)
                              stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
    logfile = state / "logs" / "mcp.log"
    deadline = time.monotonic() + 120
    while "warm server preloaded" not in (logfile.read_text() if logfile.exists() else ""):
        if server.poll() is not None or time.monotonic() > deadline:
            raise SystemExit(f"the warm server did not start: {logfile}")
        time.sleep(0.1)
    return warm_env, server


def stop_warm_server(server: subprocess.Popen[bytes]) -> float:
    """Stop it; the CPU time (ms) of the forks it reaped (cutime + cstime)."""
    time.sleep(1.5)  # it reaps its forks at least once a second
    fields = Path(f"/proc/{server.pid}/stat").read_text().rsplit(")", 1)[1].split()
    ticks = os.sysconf("SC_CLK_TCK")
    used = (int(fields[13]) + int(fields[14])) * 1000 / ticks  # cutime, cstime
    server.terminate()
    server.wait(timeout=60)
    return used


# Run by each build's interpreter: times in-process recalls (wall and thread CPU, per query).
# "new": recall(root, q) opens (and refreshes) the index per query, as the MCP tools and
# the worker call it; "open": one Index kept open, refreshed before each query (what a
# long-lived process must do to see new commits), passed as recall(..., index=).
_INPROC = """
import hashlib, json, sys, time
from dualtrace.memfs.index import Index
from dualtrace.memfs.recall import recall
root, qs, mode = sys.argv[1], json.loads(sys.argv[2]), sys.argv[3]
index = Index.open(root) if mode == "open" else None

def ask(q):
    if index is not None:
        index.refresh()
    return recall(root, q, index=index)

for q in qs[:5]:
    ask(q)
out = []
for q in qs[5:]:
    w, c = time.perf_counter(), time.thread_time()
    r = ask(q)
    out.append([(time.perf_counter() - w) * 1000, (time.thread_time() - c) * 1000,
                r.state + hashlib.sha1(r.render().encode()).hexdigest()[:12]])
print(json.dumps(out))
"""


_PHASES = """
import json, sys, time
clock = (time.perf_counter, time.process_time)
marks = [[c() for c in clock]]
from dualtrace import config  # noqa: F401  (what recallcmd imports before the query)
from dualtrace.memfs.recall import recall
marks.append([c() for c in clock])
from dualtrace.memfs.embed import get_embedder
embedder = get_embedder()
marks.append([c() for c in clock])
state = recall(sys.argv[1], sys.argv[2], embedder=embedder).state
marks.append([c() for c in clock])
print(json.dumps([state, "numpy" in sys.modules,
                  [[(b[k] - a[k]) * 1000 for k in (0, 1)] for a, b in zip(marks, marks[1:])]]))
"""
PHASE_NAMES = ("read-path imports", "embedder (vectors + table)", "query")


def phases(args: argparse.Namespace, env: dict[str, str], base_env: dict[str, str] | None,
           qs: list[str]) -> None:
    """A new process's semantic recall, phase by phase, this build against the baseline."""
    import json

    builds = {"this build": (sys.executable, env)}
    if base_env is not None:
        builds["baseline"] = (str(Path(args.baseline_exe).with_name("python")), base_env)
    took: dict[str, list[list[list[float]]]] = {b: [] for b in builds}
    loads = []
    for i in range(args.runs + 1):  # the first round warms the caches, not counted
        for name, (py, e) in builds.items():
            loads.append(os.getloadavg()[0])
            done = subprocess.run([py, "-c", _PHASES, e["DUALTRACE_MEMORY_DIR"],
                                   qs[i % len(qs)]], capture_output=True, text=True, env=e,
                                  check=False, cwd=e["DUALTRACE_HOME"])
            if done.returncode != 0:
                raise SystemExit(f"{name} failed: {done.stderr.strip()[-2000:]}")
            _state, _numpy, spans = json.loads(done.stdout)
            if i:
                took[name].append(spans)
    print(f"semantic recall in a new process, by phase: {args.runs} runs per build, builds "
          f"alternating; load average {min(loads):.1f}-{max(loads):.1f}")
    print()
    print("| build | phase | wall p50 | CPU p50 |")
    print("|---|---|---|---|")
    for name, runs in took.items():
        for k, phase in enumerate(PHASE_NAMES):
            print(f"| {name} | {phase} | {statistics.median(r[k][0] for r in runs):.1f} ms | "
                  f"{statistics.median(r[k][1] for r in runs):.1f} ms |")


def inproc(args: argparse.Namespace, env: dict[str, str], base_env: dict[str, str] | None,
           qs_all: list[str]) -> None:
    """In-process recall of this build against --baseline-exe's, round by round."""
    import json

    builds = {}
    for mode in ("new", "open"):
        builds[f"this build, index {mode}"] = (sys.executable, env, mode)
        if base_env is not None:
            builds[f"baseline, index {mode}"] = (
                str(Path(args.baseline_exe).with_name("python")), base_env, mode)
    wall: dict[str, list[float]] = {b: [] for b in builds}
    cpu: dict[str, list[float]] = {b: [] for b in builds}
    states: dict[str, list[str]] = {b: [] for b in builds}
    loads = []
    for _ in range(args.runs):
        for name, (py, e, mode) in builds.items():
            loads.append(os.getloadavg()[0])
            # cwd outside any checkout: "-c" puts the cwd first on sys.path, and a
            # checkout there would shadow the build's own package.
            done = subprocess.run([py, "-c", _INPROC, e["DUALTRACE_MEMORY_DIR"],
                                   json.dumps(qs_all), mode], capture_output=True, text=True,
                                  env=e, check=False, cwd=e["DUALTRACE_HOME"])
            if done.returncode != 0:
                raise SystemExit(f"{name} failed: {done.stderr.strip()[-2000:]}")
            rows = json.loads(done.stdout)
            wall[name] += [r[0] for r in rows]
            cpu[name] += [r[1] for r in rows]
            states[name] = [r[2] for r in rows]
    print(f"in-process recall: {len(qs_all) - 5} queries x {args.runs} rounds per build, "
          f"builds alternating; load average {min(loads):.1f}-{max(loads):.1f}")
    print()
    print("| build | wall p50 | wall p90 | CPU p50 | CPU p90 |")
    print("|---|---|---|---|---|")
    for name in builds:
        print(f"| {name} | {statistics.median(wall[name]):.1f} ms | "
              f"{bench_recall.pct(wall[name], 90):.1f} ms | {statistics.median(cpu[name]):.1f} ms"
              f" | {bench_recall.pct(cpu[name], 90):.1f} ms |")
    ours = states["this build, index new"]
    for name in builds:
        theirs = states[name]
        same = sum(a == b for a, b in zip(ours, theirs, strict=True))
        print(f"rendered answers of {name} identical to this build's (index new) for "
              f"{same}/{len(ours)} queries; states "
              f"{ {s: [o[0] for o in theirs].count(s) for s in 'ABC'} }")


if __name__ == "__main__":
    main()
