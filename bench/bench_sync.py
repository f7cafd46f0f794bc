"""Team sync benchmarks (issue 16).

1. `dualtrace sync` of a clone holding 1,000 memories (1,000 facts, 250 moments, a
   conventions file) when 50 commits arrive from a teammate, in two shapes:
   - ``ff``:     the clone has no local commits (fetch + fast-forward + index + no push);
   - ``merge``:  the clone has 5 local commits of its own, 5 of the files both sides
                 changed (fetch + structural merge + fast-forward + index + push).
   Baseline in the same run, on identical copies: plain git doing the same job the way
   a person would (`git pull --no-edit` with the dualtrace merge driver registered, then
   `git push`). Runs are interleaved (ours, baseline, ours, ...); medians and ratios.
2. The merge driver's cost per file: ``memfs.merge.merge_text`` in process (what sync
   uses) for a fact, a moment and a conventions file, and the `dualtrace merge-file`
   process git runs per file, against `git merge-file` (git's line merge) per file.

3. ``--baseline-ref REF``: the same syncs with ``memfs/sync.py`` as it is at git REF
   (e.g. ``main``), loaded beside this one and alternated with it in the same run, so a
   change to sync is measured paired against what it replaces; adds a ``noop`` shape (a
   clone already up to date: the fixed cost every after-encode sync pays).

Usage: python bench/bench_sync.py [--memories 1000] [--incoming 50] [--runs 5]
                                  [--baseline-ref main]
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

from dualtrace.memfs import formats
from dualtrace.memfs.formats import Fact, Moment, Scores, SystemFile
from dualtrace.memfs.index import Index
from dualtrace.memfs.merge import merge_text
from dualtrace.memfs.store import MemoryStore
from dualtrace.memfs.sync import add_remote, ensure_merge_driver, sync

GIT_ENV = {**{k: v for k, v in os.environ.items() if not k.startswith("GIT_")},
           "GIT_AUTHOR_NAME": "b", "GIT_AUTHOR_EMAIL": "b@b", "GIT_COMMITTER_NAME": "b",
           "GIT_COMMITTER_EMAIL": "b@b"}


def git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, env=GIT_ENV,
                          capture_output=True, text=True).stdout


def fact(i: int) -> Fact:
    kind = ("decision", "incident", "pattern", "learning")[i % 4]
    anchor = f"{kind}-number-{i}"
    return Fact(path=formats.fact_path(kind, anchor), type=kind,
                description=f"{kind} number {i} about module m{i % 37}",
                body=f"Rationale {i}. " * 20, confidence="MEDIUM", stored="2026-11-01",
                evidence_score=9, scores=Scores(3, 2, 2, 2), tier="FULL" if i % 4 == 0
                else "RECORD", sessions=(f"s{i}",),
                linked_scene=formats.scene_path(kind, anchor) if i % 4 == 0 else None)


def moment(f: Fact) -> Moment:
    return Moment(path=f.linked_scene or "", anchor=f.anchor, linked_fact=f.path,
                  description=f"Scene cue for {f.anchor}",
                  narrative=f"In src/m{f.anchor}.py the test failed.",
                  timeline=(f"{f.anchor} -> first seen [2026-11-01]",), stored="2026-11-01")


def update(store: MemoryStore, rel: str, who: str, n: int) -> None:
    memory = store.read(rel)
    if isinstance(memory, Fact):
        store.write(replace(memory, sessions=memory.sessions + (f"{who}-{n}",),
                            updated=f"2026-11-{10 + n % 18:02d}",
                            body=memory.body + f"\n\n**Update 2026-11-{10 + n % 18:02d}, "
                            f"session {who}-{n}:** seen again by {who}."))
    elif isinstance(memory, SystemFile):
        store.write(memory.with_bullet(f"{who} rule {n}."))
    store.commit([rel], f"mem: update {rel} ({who} {n})\n")


def build(base: Path, memories: int, incoming: int) -> dict[str, Path]:
    """Templates: the remote after the teammate's pushes, and our clone before the sync."""
    bare = base / "remote.git"
    subprocess.run(["git", "init", "-q", "--bare", "-b", "main", str(bare)], check=True)
    alice = MemoryStore(base / "alice", project="team", author=("alice", "a@team"))
    add_remote(alice, str(bare))
    paths = []
    for i in range(memories):
        f = fact(i)
        alice.write(f)
        paths.append(f.path)
        if f.linked_scene:
            alice.write(moment(f))
            paths.append(f.linked_scene)
    conventions = SystemFile(path=formats.conventions_path("team"), description="Conventions",
                             body="- Money is integer cents.")
    alice.write(conventions)
    paths.append(conventions.path)
    alice.commit(paths, "mem: seed 1000 memories\n")
    sync(alice)
    ff = base / "tpl-ff"
    subprocess.run(["git", "clone", "-q", str(bare), str(ff)], check=True, env=GIT_ENV)
    bob = MemoryStore(ff, project="team", author=("bob", "b@team"))
    ensure_merge_driver(bob)
    with Index.open(ff):
        pass  # the clone's search index exists, as it would after use
    bob.close()
    touched = [fact(i).path for i in range(0, memories, max(1, memories // incoming))][:incoming]
    for n, rel in enumerate(touched):
        update(alice, rel, "alice", n)
    update(alice, formats.conventions_path("team"), "alice", 99)
    sync(alice)
    noop = base / "tpl-noop"
    subprocess.run(["git", "clone", "-q", str(bare), str(noop)], check=True, env=GIT_ENV)
    bob = MemoryStore(noop, project="team", author=("bob", "b@team"))
    ensure_merge_driver(bob)
    with Index.open(noop):
        pass
    bob.close()
    merge = base / "tpl-merge"
    shutil.copytree(ff, merge, symlinks=True)
    bob = MemoryStore(merge, project="team", author=("bob", "b@team"))
    for n, rel in enumerate(touched[:4] + [formats.conventions_path("team")]):
        update(bob, rel, "bob", n)
    bob.close()
    return {"ff": ff, "merge": merge, "noop": noop}


def fresh_copy(template: Path, work: Path) -> None:
    """A copy whose git index is as fresh as the clone's was (a copy changes every
    file's inode and ctime; git would re-hash all 1,250 files on its first look)."""
    shutil.copytree(template, work, symlinks=True)
    subprocess.run(["git", "update-index", "-q", "--refresh"], cwd=work, env=GIT_ENV)


def timed_with(sync_fn, template: Path, work: Path) -> float:
    fresh_copy(template, work)
    store = MemoryStore(work, project="team", author=("bob", "b@team"), create=False)
    t0 = time.perf_counter()
    report = sync_fn(store)
    took = (time.perf_counter() - t0) * 1000
    assert report.incoming >= 1 or template.name == "tpl-noop", report
    store.close()
    return took


def timed_ours(template: Path, work: Path) -> float:
    return timed_with(sync, template, work)


def sync_at(ref: str):
    """``memfs/sync.py`` as it is at git ``ref``, imported as its own module."""
    root = Path(__file__).resolve().parent.parent
    text = subprocess.run(["git", "show", f"{ref}:memfs/sync.py"], cwd=root, check=True,
                          capture_output=True, text=True).stdout
    path = Path(tempfile.mkdtemp(prefix="bench-sync-ref-")) / "sync_at_ref.py"
    path.write_text(text)
    spec = importlib.util.spec_from_file_location("dualtrace.memfs._sync_at_ref", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module   # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module.sync


def timed_plain(template: Path, work: Path) -> float:
    fresh_copy(template, work)
    t0 = time.perf_counter()
    git(work, "pull", "-q", "--no-rebase", "--no-edit", "origin", "main")
    git(work, "push", "-q", "origin", "HEAD:refs/heads/main")
    took = (time.perf_counter() - t0) * 1000
    return took


def bench_sync(memories: int, incoming: int, runs: int, baseline_ref: str | None,
               shapes: set[str] | None = None) -> None:
    old_sync = sync_at(baseline_ref) if baseline_ref else None
    with tempfile.TemporaryDirectory(prefix="bench-sync-") as tmp:
        base = Path(tmp)
        templates = build(base, memories, incoming)
        if old_sync is None:
            templates.pop("noop")
        templates = {k: v for k, v in templates.items() if not shapes or k in shapes}
        remote = base / "remote.git"
        pristine = base / "remote-pristine.git"
        shutil.copytree(remote, pristine)
        for shape, template in templates.items():
            samples: dict[str, list[float]] = {"ours": [], "plain": [], "ref": []}
            fns = [("ours", timed_ours), ("plain", timed_plain)]
            if old_sync is not None:
                fns.append(("ref", lambda t, w: timed_with(old_sync, t, w)))
            for r in range(runs):
                for label, fn in (fns if r % 2 == 0 else fns[::-1]):
                    shutil.rmtree(remote)
                    shutil.copytree(pristine, remote)   # the push of the last run undone
                    work = base / f"run-{shape}-{label}-{r}"
                    samples[label].append(fn(template, work))
                    shutil.rmtree(work)
            o, p = statistics.median(samples["ours"]), statistics.median(samples["plain"])
            line = (f"sync {shape:<5}  {memories} memories, {incoming} incoming commits: "
                    f"dualtrace sync median {o:7.1f} ms   plain git pull+push median {p:7.1f} "
                    f"ms   ratio {o / p:.2f}x")
            if old_sync is not None:
                ref = statistics.median(samples["ref"])
                paired = statistics.median(a / b for a, b in zip(samples["ours"], samples["ref"],
                                                                 strict=True))
                line += (f"   sync at {baseline_ref} median {ref:7.1f} ms   ratio {o / ref:.3f}x"
                         f" (median of paired ratios {paired:.3f}x)")
            print(line + f"   (runs: {', '.join(f'{x:.0f}' for x in samples['ours'])})")


def bench_driver(runs: int) -> None:
    base_fact = fact(1)
    fa = replace(base_fact, sessions=base_fact.sessions + ("a",),
                 body=base_fact.body + "\n\n**Update 2026-11-20, session a:** again.")
    fb = replace(base_fact, sessions=base_fact.sessions + ("b",), confidence="HIGH",
                 body=base_fact.body + "\n\n**Update 2026-11-19, session b:** staging.")
    base_moment = moment(fact(0))
    ma = replace(base_moment, timeline=base_moment.timeline + ("x -> a [2026-11-20]",))
    mb = replace(base_moment, timeline=base_moment.timeline + ("x -> b [2026-11-19]",))
    base_sys = SystemFile(path=formats.conventions_path("team"), description="Conventions",
                          body="\n".join(f"- Rule {i}." for i in range(40)))
    sa, sb = base_sys.with_bullet("Alice's rule."), base_sys.with_bullet("Bob's rule.")
    cases = {"fact": (base_fact, fa, fb), "moment": (base_moment, ma, mb),
             "conventions": (base_sys, sa, sb)}
    for name, (o, a, b) in cases.items():
        texts = [formats.render_memory(m) for m in (o, a, b)]
        n = 200
        samples = []
        for _ in range(runs):
            t0 = time.perf_counter()
            for _ in range(n):
                merge_text(texts[0], texts[1], texts[2], o.path, date="2026-12-01")
            samples.append((time.perf_counter() - t0) / n * 1e6)
        print(f"merge_text in process   {name:<12} median {statistics.median(samples):7.0f} us/file")
    # The driver process git runs per file, against git's own line merge per file.
    with tempfile.TemporaryDirectory(prefix="bench-driver-") as tmp:
        files = [Path(tmp) / n for n in ("O", "A", "B")]
        texts = [formats.render_memory(m) for m in cases["fact"]]
        ours_ms, plain_ms = [], []
        for _ in range(max(runs, 5)):
            for f, t in zip(files, texts, strict=True):
                f.write_text(t)
            t0 = time.perf_counter()
            subprocess.run([sys.executable, "-m", "dualtrace", "merge-file", str(files[0]),
                            str(files[1]), str(files[2]), base_fact.path], cwd=tmp, check=True)
            ours_ms.append((time.perf_counter() - t0) * 1000)
            for f, t in zip(files, texts, strict=True):
                f.write_text(t)
            t0 = time.perf_counter()
            subprocess.run(["git", "merge-file", "-q", str(files[1]), str(files[0]),
                            str(files[2])], cwd=tmp)
            plain_ms.append((time.perf_counter() - t0) * 1000)
        o, p = statistics.median(ours_ms), statistics.median(plain_ms)
        print(f"driver process (dualtrace merge-file) median {o:6.1f} ms/file   "
              f"git merge-file median {p:5.1f} ms/file   ratio {o / p:.1f}x")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--memories", type=int, default=1000)
    parser.add_argument("--incoming", type=int, default=50)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--baseline-ref", default=None,
                        help="also time memfs/sync.py as it is at this git ref, paired")
    parser.add_argument("--no-driver", action="store_true", help="skip the merge-driver part")
    parser.add_argument("--shapes", default="", help="comma-separated: ff,merge,noop (default all)")
    args = parser.parse_args()
    bench_sync(args.memories, args.incoming, args.runs, args.baseline_ref,
               {x for x in args.shapes.split(",") if x} or None)
    if not args.no_driver:
        bench_driver(args.runs)


if __name__ == "__main__":
    main()
