"""`dualtrace sync` against real bare remotes, with two and three clones."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import pytest

from dualtrace.memfs.conflicts import open_conflicts
from dualtrace.memfs.formats import Fact, Moment, Scores, SystemFile
from dualtrace.memfs.index import Index
from dualtrace.memfs.merge import CONFLICT_TITLE, has_conflict_markers
from dualtrace.memfs.store import MemoryStore
from dualtrace.memfs.sync import add_remote, read_status, sync

INCIDENT = "incidents/auth-401-race.md"
SCENE = "scenes/incidents/auth-401-race.md"
DECISION = "decisions/session-storage.md"
CONVENTIONS = "system/team/conventions.md"


def git(cwd: Path, *args: str) -> str:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env.update(GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@x", GIT_COMMITTER_NAME="t",
               GIT_COMMITTER_EMAIL="t@x")
    proc = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, env=env,
                          timeout=60)
    assert proc.returncode == 0, (args, proc.stderr)
    return proc.stdout


@pytest.fixture
def bare(tmp_path: Path) -> Path:
    path = tmp_path / "remote.git"
    subprocess.run(["git", "init", "-q", "--bare", "-b", "main", str(path)], check=True)
    return path


def clone(tmp_path: Path, bare: Path, name: str) -> MemoryStore:
    store = MemoryStore(tmp_path / name, project="team", author=(name, f"{name}@team"))
    add_remote(store, str(bare))
    return store


# ------------------------------------------------------------------ memory edits like an encoder


def seed_memories(store: MemoryStore) -> None:
    store.write(Fact(path=INCIDENT, type="incident", linked_scene=SCENE,
                     description="Intermittent 401s from the auth middleware under load",
                     body="The token refresh raced with the retry in auth/middleware.py.",
                     confidence="MEDIUM", stored="2026-11-20", evidence_score=9,
                     scores=Scores(3, 2, 2, 2), tier="FULL", status="investigating",
                     sessions=("s0",)))
    store.write(Moment(path=SCENE, anchor="auth-401-race", linked_fact=INCIDENT,
                       description="Scene cue for auth-401-race",
                       narrative="pytest tests/test_auth.py failed with 401 on the retry.",
                       timeline=("auth-401-race -> first seen [2026-11-20]",),
                       stored="2026-11-20"))
    store.write(Fact(path=DECISION, type="decision", description="Sessions live in Redis",
                     body="We store sessions in Redis with a 24h TTL.", stored="2026-11-20",
                     sessions=("s0",)))
    store.write(SystemFile(path=CONVENTIONS, description="Conventions of the team project",
                           body="- Money is integer cents."))
    store.commit([INCIDENT, SCENE, DECISION, CONVENTIONS], "mem: encode session s0\n")


def update_all(store: MemoryStore, who: str, n: int, day: str) -> list[str]:
    """One 'session' of ``who``: updates the incident, its moment, the decision and the
    conventions, the way the encoder does (append-only paragraphs, union lists)."""
    sid = f"{who}-{n}"
    fact = store.read_fact(INCIDENT)
    store.write(replace(fact, sessions=fact.sessions + (sid,), updated=day,
                        body=fact.body + f"\n\n**Update {day}, session {sid}:** {who} saw it "
                        f"again in run {n}."))
    moment = store.read_moment(SCENE)
    store.write(replace(moment, timeline=moment.timeline + (
        f"auth-401-race -> {who} run {n} [{day}]",)))
    decision = store.read_fact(DECISION)
    store.write(replace(decision, sessions=decision.sessions + (sid,),
                        body=decision.body + f"\n\n{who} confirmed the TTL in run {n}."))
    conventions = store.read(CONVENTIONS)
    store.write(conventions.with_bullet(f"{who} rule number {n} for the team."))
    own = f"learning/{who}-note-{n}.md"
    store.write(Fact(path=own, type="learning", description=f"{who} learned thing {n}",
                     body=f"Body of {who} note {n}.", stored=day, sessions=(sid,)))
    store.commit([INCIDENT, SCENE, DECISION, CONVENTIONS, own], f"mem: encode session {sid}\n")
    return [own]


# ------------------------------------------------------------------ invariants


def content_lines(store: MemoryStore) -> dict[str, set[str]]:
    """Every meaningful unit of every file: body lines, list items, timeline entries."""
    out: dict[str, set[str]] = {}
    for rel in store.iter_files():
        memory = store.read(rel)
        units: set[str] = set()
        if isinstance(memory, Fact):
            units |= {line.strip() for line in memory.body.splitlines() if line.strip()}
            units |= {f"session:{s}" for s in memory.sessions}
            units |= {f"related:{r}" for r in memory.related}
        elif isinstance(memory, Moment):
            units |= {f"timeline:{t}" for t in memory.timeline}
            units |= {line.strip() for line in memory.narrative.splitlines() if line.strip()}
        else:
            units |= {f"bullet:{b}" for b in memory.bullets}
        out[rel] = units
    return out


def check_round(stores: list[MemoryStore], before: list[dict[str, set[str]]]) -> None:
    """After a full sync round every clone has every unit any clone had before it."""
    expected: dict[str, set[str]] = {}
    for snapshot in before:
        for rel, units in snapshot.items():
            expected.setdefault(rel, set()).update(units)
    for store in stores:
        now = content_lines(store)   # every file parses (read raises otherwise)
        for rel, units in expected.items():
            missing = units - now.get(rel, set())
            assert not missing, (store.root.name, rel, sorted(missing)[:5])
        for rel in store.iter_files():
            assert not has_conflict_markers(store.read_text(rel)), rel
        fsck = subprocess.run(["git", "fsck", "--no-progress"], cwd=store.root,
                              capture_output=True, text=True)
        assert fsck.returncode == 0, fsck.stderr
        status = git(store.root, "status", "--porcelain")
        assert status == "", status
        with Index.open(store.root) as index:
            anchors = {d.anchor for d in index.docs_of_type(("learning",))}
        wanted = {Path(rel).stem for rel in expected if rel.startswith("learning/")}
        assert wanted <= anchors, (store.root.name, sorted(wanted - anchors)[:5])


def full_round(stores: list[MemoryStore]) -> None:
    # Around once to collect everything at the last clone, then back to the others.
    for store in stores + stores[:-1]:
        sync(store)


# ------------------------------------------------------------------ tests


def test_two_clones_update_the_same_incident_decision_and_conventions(tmp_path, bare):
    alice = clone(tmp_path, bare, "alice")
    seed_memories(alice)
    report = sync(alice)
    assert report.pushed and report.incoming == 0
    bob = clone(tmp_path, bare, "bob")   # its own fresh history: unrelated to alice's
    report = sync(bob)
    assert report.incoming >= 2 and bob.read_fact(INCIDENT).sessions == ("s0",)
    before = [content_lines(alice), content_lines(bob)]

    update_all(alice, "alice", 1, "2026-11-25")
    update_all(bob, "bob", 1, "2026-11-24")
    before = [content_lines(alice), content_lines(bob)]
    sync(alice)
    report = sync(bob)
    assert INCIDENT in report.merged and CONVENTIONS in report.merged and not report.conflicts
    sync(alice)
    check_round([alice, bob], before)
    fact = alice.read_fact(INCIDENT)
    assert fact.sessions == ("s0", "bob-1", "alice-1")   # bob merged: his side first
    updates = [p for p in fact.body.split("\n\n") if p.startswith("**Update")]
    assert [u[9:19] for u in updates] == ["2026-11-24", "2026-11-25"]   # by date
    assert alice.read_text(INCIDENT) == bob.read_text(INCIDENT)
    timeline = alice.read_moment(SCENE).timeline
    assert timeline[-2:] == ("auth-401-race -> bob run 1 [2026-11-24]",
                             "auth-401-race -> alice run 1 [2026-11-25]")
    assert set(alice.read(CONVENTIONS).bullets) == {
        "Money is integer cents.", "alice rule number 1 for the team.",
        "bob rule number 1 for the team."}
    # The merge commit is a real two-parent commit; the log says what was merged.
    parents = git(bob.root, "log", "-1", "--format=%P", "HEAD~0").split()
    assert len(parents) in (1, 2)
    assert "mem: sync merge origin/main" in git(bob.root, "log", "--format=%s")


def test_three_clones_randomized_interleavings_never_lose_a_line(tmp_path, bare):
    rng = random.Random(16)
    stores = [clone(tmp_path, bare, name) for name in ("ann", "ben", "cat")]
    seed_memories(stores[0])
    sync(stores[0])
    for store in stores[1:]:
        sync(store)
    counters = {s.root.name: 0 for s in stores}
    for round_no in range(20):
        for _ in range(rng.randint(1, 4)):
            store = rng.choice(stores)
            if rng.random() < 0.6:
                counters[store.root.name] += 1
                day = f"2026-12-{rng.randint(1, 28):02d}"
                update_all(store, store.root.name, counters[store.root.name], day)
            else:
                sync(store)
        before = [content_lines(s) for s in stores]
        full_round(stores)
        check_round(stores, before)
        heads = {git(s.root, "rev-parse", "HEAD").strip() for s in stores}
        assert len(heads) == 1, f"round {round_no}: clones disagree"
    assert sum(counters.values()) > 20


def test_conflicting_superseded_by_is_kept_and_recorded_for_session_start(tmp_path, bare):
    from dualtrace.config import Settings
    from dualtrace.memfs.inject import session_start_context

    alice = clone(tmp_path, bare, "alice")
    seed_memories(alice)
    sync(alice)
    bob = clone(tmp_path, bare, "bob")
    sync(bob)
    for store, new in ((alice, "decisions/use-postgres.md"), (bob, "decisions/use-dynamo.md")):
        fact = store.read_fact(DECISION)
        store.write(replace(fact, superseded_by=new))
        store.commit([DECISION], f"mem: update {DECISION}\n")
    sync(alice)
    report = sync(bob)
    assert len(report.conflicts) == 1 and "superseded_by" in report.conflicts[0]
    text = bob.read_text(DECISION)
    assert f"## {CONFLICT_TITLE}" in text and "decisions/use-postgres.md" in text
    assert "decisions/use-dynamo.md" in text and not has_conflict_markers(text)
    assert [c["path"] for c in open_conflicts(bob)] == [DECISION]
    context = session_start_context(bob, Settings())
    assert f"{DECISION}: a sync merge kept both versions" in context
    sync(alice)
    assert alice.read_text(DECISION) == text


def test_plain_git_pull_uses_the_registered_driver(tmp_path, bare):
    alice = clone(tmp_path, bare, "alice")
    seed_memories(alice)
    sync(alice)
    bob = clone(tmp_path, bare, "bob")
    sync(bob)
    assert "*.md merge=dualtrace" in (bob.root / ".gitattributes").read_text()
    assert "merge-file %O %A %B %P" in git(bob.root, "config", "merge.dualtrace.driver")
    update_all(alice, "alice", 1, "2026-11-25")
    sync(alice)
    update_all(bob, "bob", 1, "2026-11-24")
    git(bob.root, "pull", "--no-rebase", "--no-edit", "-q", "origin", "main")
    for rel in (INCIDENT, SCENE, DECISION, CONVENTIONS):
        assert not has_conflict_markers(bob.read_text(rel))
    assert bob.read_fact(INCIDENT).sessions == ("s0", "bob-1", "alice-1")
    assert len(bob.read(CONVENTIONS).bullets) == 3


def test_offline_remote_fails_cleanly_and_records_status(tmp_path, bare):
    from dualtrace.memfs.sync import SyncError

    alice = clone(tmp_path, bare, "alice")
    seed_memories(alice)
    git(alice.root, "remote", "set-url", "origin", str(tmp_path / "gone.git"))
    with pytest.raises(SyncError) as info:
        sync(alice)
    assert info.value.offline
    status = read_status(alice.root)
    assert status["failures"] == 1 and "cannot fetch" in status["last_error"]
    git(alice.root, "remote", "set-url", "origin", str(bare))
    sync(alice)
    assert read_status(alice.root)["failures"] == 0


def test_push_race_is_integrated_again(tmp_path, bare, monkeypatch):
    """Someone pushes between our fetch and our push: the sync fetches and merges again."""
    from dualtrace.memfs import sync as sync_mod

    alice = clone(tmp_path, bare, "alice")
    seed_memories(alice)
    sync(alice)
    bob = clone(tmp_path, bare, "bob")
    sync(bob)
    update_all(alice, "alice", 1, "2026-11-25")
    update_all(bob, "bob", 1, "2026-11-24")
    fired = []

    def hold(phase: str) -> None:
        if phase == "integrated" and not fired:
            fired.append(phase)
            sync(bob)   # bob pushes while alice is between fetch and push

    monkeypatch.setattr(sync_mod, "_hold", hold)
    report = sync(alice)
    assert report.pushed and fired
    sync(bob)
    assert alice.read_text(INCIDENT) == bob.read_text(INCIDENT)
    assert set(alice.read_fact(INCIDENT).sessions) == {"s0", "alice-1", "bob-1"}


def _cli_sync(root: Path, hold: str | None) -> subprocess.Popen:
    env = dict(os.environ)
    if hold:
        env["DUALTRACE_SYNC_HOLD"] = hold
    return subprocess.Popen([sys.executable, "-m", "dualtrace", "sync", "--memory-dir",
                             str(root), "--json"], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


@pytest.mark.parametrize("phase", ["fetched", "merged", "checkout", "integrated"])
def test_sync_killed_mid_way_leaves_a_usable_repo_and_the_next_sync_completes(
        tmp_path, bare, phase):
    alice = clone(tmp_path, bare, "alice")
    seed_memories(alice)
    sync(alice)
    bob = clone(tmp_path, bare, "bob")
    sync(bob)
    update_all(alice, "alice", 1, "2026-11-25")
    sync(alice)
    update_all(bob, "bob", 1, "2026-11-24")
    before = [content_lines(alice), content_lines(bob)]
    proc = _cli_sync(bob.root, f"{phase}:60")
    line = proc.stderr.readline()
    assert f"holding at {phase}" in line, line + proc.stderr.read()
    if phase == "checkout":
        assert (bob.state_path / "sync-journal.json").exists()
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
    if phase == "checkout":
        # What a git checkout killed half-way leaves: some files of the merged state
        # written, the index and the branch still old, and git's own index.lock.
        journal = json.loads((bob.state_path / "sync-journal.json").read_text())
        changed = git(bob.root, "diff", "--name-only", journal["from"], journal["to"]).split()
        assert changed
        for rel in changed[::2]:
            (bob.root / rel).write_text(git(bob.root, "show", f"{journal['to']}:{rel}"))
        lock = bob.root / ".git" / "index.lock"
        lock.write_text("")
        os.utime(lock, (time.time() - 60, time.time() - 60))
        assert git(bob.root, "status", "--porcelain") != ""
        done = _cli_sync(bob.root, None)
        out, err = done.communicate(timeout=120)
        assert done.returncode == 0, err
        assert "partial checkout" in json.loads(out)["recovered"]
    # Usable right away: files parse, an encoder can commit.
    for rel in bob.iter_files():
        bob.read(rel)
    update_all(bob, "bob", 2, "2026-11-26")
    before.append(content_lines(bob))
    done = _cli_sync(bob.root, None)
    out, err = done.communicate(timeout=120)
    assert done.returncode == 0, err
    assert json.loads(out)["pushed"]
    sync(alice)
    check_round([alice, bob], before)


def test_hand_edit_in_the_way_is_a_clear_error_and_loses_nothing(tmp_path, bare):
    from dualtrace.memfs.sync import SyncError

    alice = clone(tmp_path, bare, "alice")
    seed_memories(alice)
    sync(alice)
    bob = clone(tmp_path, bare, "bob")
    sync(bob)
    update_all(alice, "alice", 1, "2026-11-25")
    sync(alice)
    edited = bob.read_text(INCIDENT) + "\nBob's uncommitted note.\n"
    (bob.root / INCIDENT).write_text(edited)
    head = git(bob.root, "rev-parse", "HEAD")
    with pytest.raises(SyncError, match="hand edits"):
        sync(bob)
    assert (bob.root / INCIDENT).read_text() == edited       # untouched
    assert git(bob.root, "rev-parse", "HEAD") == head
    git(bob.root, "commit", "-qam", "bob's note")
    report = sync(bob)
    assert report.pushed and "Bob's uncommitted note." in bob.read_text(INCIDENT)
    assert "alice saw it again in run 1" in bob.read_text(INCIDENT)
