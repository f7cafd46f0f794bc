"""`dualtrace sync` and `remote add` pointed at the wrong thing, or racing something.

A memory repository must never absorb an unrelated history: a code repository, or
another person's memory, pulled in by a wrong URL and pushed back. Real bare remotes
and clones in tmp_path, the real CLI as a process where the exit status is the point.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import pytest

from dualtrace.memfs.formats import Fact, Moment
from dualtrace.memfs.index import Index, index_path
from dualtrace.memfs.merge import has_conflict_markers
from dualtrace.memfs.store import MemoryStore
from dualtrace.memfs.sync import SyncError, add_remote, read_status, sync
from tests.memfs.test_sync_git import git

DECISION = "decisions/session-storage.md"


def dualtrace(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "dualtrace", *args], capture_output=True,
                          text=True, timeout=120, env=env)


def bare_repo(tmp_path: Path, name: str = "remote.git", branch: str = "main") -> Path:
    path = tmp_path / name
    subprocess.run(["git", "init", "-q", "--bare", "-b", branch, str(path)], check=True)
    return path


def memory(tmp_path: Path, name: str, *facts: tuple[str, str]) -> MemoryStore:
    """A memory of its own (its own root commit), holding ``facts`` (path, body)."""
    store = MemoryStore(tmp_path / name, project="team", author=(name, f"{name}@team"))
    for rel, body in facts:
        store.write(Fact(path=rel, type=rel.split("/")[0].rstrip("s"),
                         description=f"{Path(rel).stem} as {name} knows it", body=body,
                         stored="2026-11-20", sessions=(f"{name}-1",)))
    if facts:
        store.commit([rel for rel, _ in facts], f"mem: encode session {name}-1\n")
    with Index.open(store.root):
        pass   # the index exists, as it does after any use
    return store


def team(tmp_path: Path) -> tuple[Path, MemoryStore, MemoryStore]:
    """A bare remote, alice's memory pushed there, and bob's fresh memory joined to it."""
    bare = bare_repo(tmp_path)
    alice = memory(tmp_path, "alice", (DECISION, "Sessions live in Redis with a 24h TTL."))
    add_remote(alice, str(bare))
    sync(alice)
    bob = memory(tmp_path, "bob")
    add_remote(bob, str(bare))
    sync(bob)
    return bare, alice, bob


def state(store: MemoryStore) -> dict[str, object]:
    """Everything a refused sync must leave as it was: every ref, HEAD, git's index and
    config, the files of the work tree (state folder aside) and the search index."""
    root = store.root
    files = {}
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root).as_posix()
        if path.is_file() and not rel.startswith((".git/", ".dualtrace/")):
            files[rel] = hashlib.sha256(path.read_bytes()).hexdigest()
    return {
        "refs": git(root, "for-each-ref", "--format=%(objectname) %(refname)"),
        "head": git(root, "symbolic-ref", "HEAD") + git(root, "rev-parse", "HEAD"),
        "status": git(root, "status", "--porcelain", "--untracked-files=all"),
        "git-index": hashlib.sha256((root / ".git" / "index").read_bytes()).hexdigest(),
        "config": (root / ".git" / "config").read_text(),
        "files": files,
        "index-db": hashlib.sha256(index_path(root).read_bytes()).hexdigest(),
    }


def remote_refs(bare: Path) -> str:
    return git(bare, "for-each-ref", "--format=%(objectname) %(refname)")


def code_repository(tmp_path: Path, bare: Path, *, ignores_state: bool = False) -> None:
    """Someone's code, pushed to ``bare``: the wrong URL a person might give."""
    work = tmp_path / "shop-api"
    (work / "src").mkdir(parents=True)
    (work / "src" / "app.py").write_text("print('hi')\n")
    (work / "README.md").write_text("# shop-api\n")
    (work / ".gitignore").write_text(".venv/\n" + (".dualtrace/\n" if ignores_state else ""))
    git(tmp_path, "init", "-q", "-b", "main", str(work))
    git(work, "add", "-A")
    git(work, "commit", "-q", "-m", "initial code")
    git(work, "push", "-q", str(bare), "main")


# ------------------------------------------------------------------ remote add


@pytest.mark.parametrize("url, says", [
    ("", "the remote URL is empty"),
    ("   ", "the remote URL is empty"),
    ("-oProxyCommand=touch /tmp/x", "would be read as an option"),
    ("/tmp/a\nb", "control character"),
    ("{tmp}/no-such-remote.git", "is not a folder"),
    ("{tmp}/plain-folder", "is not a git repository"),
    ("{tmp}/mem", "is the memory directory itself"),
    ("https://", "needs a host and a repository path"),
    ("ssh://host", "needs a host and a repository path"),
    ("git@github.com:", "needs a host and a repository path"),
    ("foo://host/team/memory.git", "a transport git does not have"),
])
def test_remote_add_refuses_a_bad_url_and_changes_nothing(tmp_path, url, says):
    (tmp_path / "plain-folder").mkdir()
    memdir = tmp_path / "mem"
    MemoryStore(memdir)
    before = (memdir / ".git" / "config").read_text(), git(memdir, "rev-parse", "HEAD")
    proc = dualtrace("remote", "add", "--memory-dir", str(memdir), "--",
                     url.replace("{tmp}", str(tmp_path)))
    assert proc.returncode == 1, proc.stdout
    line, = proc.stderr.strip().splitlines()
    assert line.startswith("Error: ") and says in line, line
    assert ((memdir / ".git" / "config").read_text(), git(memdir, "rev-parse", "HEAD")) == before
    assert proc.stdout == ""


def test_remote_add_with_a_bad_url_creates_no_memory_directory(tmp_path):
    memdir = tmp_path / "not-yet"
    proc = dualtrace("remote", "add", "", "--memory-dir", str(memdir))
    assert proc.returncode == 1 and proc.stderr.startswith("Error: the remote URL is empty")
    assert not memdir.exists()


def test_remote_add_refuses_a_bad_name(tmp_path):
    bare = bare_repo(tmp_path)
    memdir = tmp_path / "mem"
    MemoryStore(memdir)
    proc = dualtrace("remote", "add", str(bare), "--name", "two words", "--memory-dir",
                     str(memdir))
    assert proc.returncode == 1
    assert proc.stderr.strip() == "Error: 'two words' is not a valid remote name (use " \
        "letters, digits, '-' or '_', e.g. --name team)"
    assert "remote" not in (memdir / ".git" / "config").read_text()


@pytest.mark.parametrize("form", ["path", "file-url", "scp", "https"])
def test_remote_add_accepts_what_git_accepts_without_the_network(tmp_path, form):
    bare = bare_repo(tmp_path)
    url = {"path": str(bare), "file-url": f"file://{bare}",
           "scp": "git@github.com:team/memory.git",
           "https": "https://git.example.com/team/memory.git"}[form]
    memdir = tmp_path / "mem"
    proc = dualtrace("remote", "add", url, "--memory-dir", str(memdir))
    assert proc.returncode == 0, proc.stderr
    assert git(memdir, "remote", "get-url", "origin").strip() == url


# ------------------------------------------------------------------ unrelated histories


@pytest.mark.parametrize("ignores_state", [False, True])
def test_sync_refuses_a_code_repository_even_with_allow_unrelated(tmp_path, ignores_state):
    bare = bare_repo(tmp_path)
    code_repository(tmp_path, bare, ignores_state=ignores_state)
    alice = memory(tmp_path, "alice", (DECISION, "Sessions live in Redis."))
    git(alice.root, "remote", "add", "origin", str(bare))   # by hand: no driver registered
    before, remote_before = state(alice), remote_refs(bare)
    for allow in (False, True):
        with pytest.raises(SyncError) as refused:
            sync(alice, allow_unrelated=allow)
        assert str(refused.value).startswith(
            "origin/main is not a dualtrace memory repository (it holds src) and shares no "
            "history with this memory; nothing was merged or pushed")
        assert state(alice) == before
        assert remote_refs(bare) == remote_before
    assert read_status(alice.root)["last_error"].startswith("origin/main is not a dualtrace")


def test_a_fresh_memory_does_not_adopt_a_code_repository_either(tmp_path):
    bare = bare_repo(tmp_path)
    code_repository(tmp_path, bare)
    fresh = memory(tmp_path, "fresh")
    add_remote(fresh, str(bare))
    before = state(fresh)
    proc = dualtrace("sync", "--memory-dir", str(fresh.root))
    assert proc.returncode == 1
    line, = proc.stderr.strip().splitlines()
    assert line.startswith("Error: origin/main is not a dualtrace memory repository")
    assert state(fresh) == before and not (fresh.root / "src").exists()


def test_sync_refuses_another_memory_then_joins_it_when_asked(tmp_path):
    bare = bare_repo(tmp_path)
    alice = memory(tmp_path, "alice", (DECISION, "Sessions live in Redis with a 24h TTL."),
                   ("incidents/auth-401.md", "401s under load."))
    add_remote(alice, str(bare))
    sync(alice)
    carol = memory(tmp_path, "carol", (DECISION, "Sessions moved to Postgres in March."),
                   ("learning/pytest-xdist.md", "Run the suite with -n 4."))
    add_remote(carol, str(bare))
    before, remote_before = state(carol), remote_refs(bare)
    proc = dualtrace("sync", "--memory-dir", str(carol.root))
    assert proc.returncode == 1
    line, = proc.stderr.strip().splitlines()
    assert line.startswith("Error: origin/main is another memory (2 memory files) with no "
                           "commit in common with this one (2); nothing was merged or pushed; "
                           "to join the two, `dualtrace sync --allow-unrelated`"), line
    assert state(carol) == before and remote_refs(bare) == remote_before

    proc = dualtrace("sync", "--memory-dir", str(carol.root), "--allow-unrelated", "--json")
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert report["pushed"] and DECISION in report["merged"]
    sync(alice)   # related now: no flag needed on either side
    for store in (alice, carol):
        assert set(store.iter_files()) == {DECISION, "incidents/auth-401.md",
                                           "learning/pytest-xdist.md"}
        text = store.read_text(DECISION)
        assert "24h TTL" in text and "Postgres in March" in text   # neither side lost
        assert not has_conflict_markers(text)
        assert git(store.root, "status", "--porcelain") == ""
        with Index.open(store.root) as index:
            assert {d.anchor for d in index.docs_of_type(("learning",))} == {"pytest-xdist"}
    assert alice.read_text(DECISION) == carol.read_text(DECISION)


def test_an_empty_memory_joins_and_is_joined_without_a_flag(tmp_path):
    """A second machine's fresh memory joining the team's (the normal set-up), and a
    memory with content pushed to a remote someone started empty."""
    bare = bare_repo(tmp_path)
    empty = memory(tmp_path, "empty")
    add_remote(empty, str(bare))
    sync(empty)                                   # the remote now holds an empty memory
    alice = memory(tmp_path, "alice", (DECISION, "Sessions live in Redis."))
    add_remote(alice, str(bare))
    assert sync(alice).pushed
    fresh = memory(tmp_path, "fresh")
    add_remote(fresh, str(bare))
    assert sync(fresh).incoming >= 1 and fresh.iter_files() == [DECISION]


# ------------------------------------------------------------------ branch names


def test_a_remote_whose_branch_has_another_name_is_used_not_forked(tmp_path):
    bare = bare_repo(tmp_path, branch="master")
    alice = memory(tmp_path, "alice", (DECISION, "Sessions live in Redis."))
    git(alice.root, "branch", "-m", "main", "master")
    add_remote(alice, str(bare))
    assert sync(alice).pushed
    bob = memory(tmp_path, "bob")                 # dualtrace's own default: main
    add_remote(bob, str(bare))
    report = sync(bob)
    assert (report.branch, report.remote_branch) == ("main", "master")
    assert bob.iter_files() == [DECISION]
    bob.write(Fact(path="learning/bob-note.md", type="learning", description="bob's note",
                   body="Bob learned it.", stored="2026-11-21"))
    bob.commit(["learning/bob-note.md"], "mem: encode session bob-1\n")
    assert sync(bob).pushed
    assert git(bare, "for-each-ref", "--format=%(refname)").split() == ["refs/heads/master"]
    assert git(bob.root, "rev-parse", "--abbrev-ref", "main@{upstream}").strip() == "origin/master"
    sync(alice)
    assert "learning/bob-note.md" in alice.iter_files()
    proc = dualtrace("sync", "--memory-dir", str(bob.root))
    assert proc.returncode == 0 and "synced with origin/master: 0 commits in" in proc.stdout


def test_a_remote_with_several_other_branches_is_a_question_not_a_guess(tmp_path):
    bare = bare_repo(tmp_path, branch="master")
    alice = memory(tmp_path, "alice", (DECISION, "Sessions live in Redis."))
    add_remote(alice, str(bare))
    sync(alice)
    git(bare, "branch", "master", "main")
    git(bare, "branch", "trunk", "main")
    git(bare, "branch", "-D", "main")
    bob = memory(tmp_path, "bob")
    add_remote(bob, str(bare))
    before = state(bob)
    with pytest.raises(SyncError) as refused:
        sync(bob)
    assert str(refused.value) == (
        f"origin has no branch 'main' (it has master, trunk); nothing was merged or pushed: "
        f"pick the branch that holds this memory with `git -C {bob.root} branch "
        f"--set-upstream-to origin/BRANCH`, then sync again")
    assert state(bob) == before
    git(bob.root, "fetch", "-q", "origin")
    git(bob.root, "branch", "-q", "--set-upstream-to", "origin/trunk")
    report = sync(bob)
    assert report.remote_branch == "trunk" and report.pushed
    assert DECISION in bob.iter_files()


# ------------------------------------------------------------------ network and races


def test_an_unreachable_remote_is_one_line_and_keeps_the_local_commit(tmp_path):
    bare = bare_repo(tmp_path)
    alice = memory(tmp_path, "alice", (DECISION, "Sessions live in Redis."))
    add_remote(alice, str(bare))
    sync(alice)
    bare.rename(tmp_path / "gone.git")
    alice.write(Fact(path="learning/new.md", type="learning", description="a new one",
                     body="Learned offline.", stored="2026-11-21"))
    head = alice.commit(["learning/new.md"], "mem: encode session alice-2\n")
    proc = dualtrace("sync", "--memory-dir", str(alice.root))
    assert proc.returncode == 1
    line, = proc.stderr.strip().splitlines()
    assert line.startswith("Error: cannot fetch from origin: ")
    assert git(alice.root, "rev-parse", "HEAD").strip() == head
    assert "Learned offline." in alice.read_text("learning/new.md")
    assert git(alice.root, "status", "--porcelain") == ""
    assert read_status(alice.root)["offline"] is True
    (tmp_path / "gone.git").rename(bare)          # back online: the commit goes out
    assert sync(alice).outgoing == 1


def _start_sync(store: MemoryStore, hold: str) -> subprocess.Popen[str]:
    env = {**os.environ, "DUALTRACE_SYNC_HOLD": hold}
    proc = subprocess.Popen([sys.executable, "-m", "dualtrace", "sync", "--json",
                             "--memory-dir", str(store.root)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env)
    assert proc.stderr is not None
    line = proc.stderr.readline()             # "dualtrace sync: holding at <phase>"
    assert "holding at" in line, line
    return proc


def _edit(store: MemoryStore, who: str) -> str:
    fact = store.read_fact(DECISION)
    store.write(replace(fact, sessions=fact.sessions + (f"{who}-2",),
                        body=fact.body + f"\n\n{who} confirmed the TTL again."))
    return store.commit([DECISION], f"mem: update {DECISION} ({who})\n") or ""


def test_a_push_rejected_because_the_remote_moved_merges_again_never_forces(tmp_path):
    bare, alice, bob = team(tmp_path)
    _edit(alice, "alice")
    bob_commit = _edit(bob, "bob")
    slow = _start_sync(alice, "fetched:1.5")  # alice has fetched; bob pushes meanwhile
    assert sync(bob).pushed
    out, err = slow.communicate(timeout=60)
    assert slow.returncode == 0, err
    report = json.loads(out)
    assert report["pushed"] and DECISION in report["merged"]
    # bob's push is in the remote's history: alice merged it, she did not overwrite it.
    git(bare, "merge-base", "--is-ancestor", bob_commit, "main")
    sync(bob)
    for store in (alice, bob):
        text = store.read_text(DECISION)
        assert "alice confirmed" in text and "bob confirmed" in text
        assert not has_conflict_markers(text)


def test_two_machines_syncing_the_same_fact_at_once_both_land(tmp_path):
    bare, alice, bob = team(tmp_path)
    _edit(alice, "alice")
    _edit(bob, "bob")
    procs = [subprocess.Popen([sys.executable, "-m", "dualtrace", "sync", "--memory-dir",
                               str(s.root)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True) for s in (alice, bob)]
    for proc in procs:
        _, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
    sync(alice)
    sync(bob)
    assert alice.read_text(DECISION) == bob.read_text(DECISION)
    text = alice.read_text(DECISION)
    assert "alice confirmed" in text and "bob confirmed" in text
    assert not has_conflict_markers(text)
    assert set(alice.read_fact(DECISION).sessions) == {"alice-1", "alice-2", "bob-2"}


WRITER = """
import sys, time
from dualtrace.memfs.formats import Fact
from dualtrace.memfs.store import MemoryStore
store = MemoryStore(sys.argv[1], create=False, lock_timeout=float(sys.argv[3]))
with store.lock():
    print("locked", flush=True)
    store.write(Fact(path="learning/mid-sync.md", type="learning", description="written while "
                     "a sync waited", body="The worker's commit.", stored="2026-11-22"))
    time.sleep(float(sys.argv[2]))
    store.commit(["learning/mid-sync.md"], "mem: encode session worker-1\\n")
"""


def test_a_sync_waits_for_the_worker_commit_and_pushes_it(tmp_path):
    bare = bare_repo(tmp_path)
    alice = memory(tmp_path, "alice", (DECISION, "Sessions live in Redis."))
    add_remote(alice, str(bare))
    sync(alice)
    writer = subprocess.Popen([sys.executable, "-c", WRITER, str(alice.root), "1.0", "120"],
                              stdout=subprocess.PIPE, text=True)
    assert writer.stdout is not None and writer.stdout.readline().strip() == "locked"
    started = time.monotonic()
    report = sync(alice)                      # waits for the writer's lock, then pushes
    assert writer.wait(timeout=30) == 0
    assert time.monotonic() - started >= 0.5
    assert report.pushed and report.outgoing == 1
    assert "mem: encode session worker-1" in git(bare, "log", "--format=%s", "main")
    assert git(alice.root, "status", "--porcelain") == ""


def test_a_worker_commit_during_a_sync_merge_waits_and_is_not_lost(tmp_path):
    _bare, alice, bob = team(tmp_path)
    _edit(bob, "bob")
    sync(bob)
    slow = _start_sync(alice, "merged:1.0")   # merging: the sync holds the store lock
    writer = subprocess.Popen([sys.executable, "-c", WRITER, str(alice.root), "0", "120"],
                              stdout=subprocess.PIPE, text=True)
    out, err = slow.communicate(timeout=60)
    assert slow.returncode == 0, err
    assert json.loads(out)["incoming"] >= 1
    assert writer.wait(timeout=60) == 0
    subjects = git(alice.root, "log", "--format=%s")
    assert subjects.splitlines()[0] == "mem: encode session worker-1"
    assert "bob confirmed" in alice.read_text(DECISION)
    assert git(alice.root, "status", "--porcelain") == ""
    assert sync(alice).outgoing == 1


def test_a_slow_fetch_never_makes_the_worker_commit_wait(tmp_path):
    """The network part of a sync runs outside the store lock: a commit made while a
    fetch is under way (here held for 20 s) goes through at once, and the sync merges
    and pushes it. On main the commit waited for the whole fetch and, past the lock
    timeout, failed."""
    bare, alice, bob = team(tmp_path)
    _edit(bob, "bob")
    sync(bob)
    slow = _start_sync(alice, "fetched:20")
    started = time.monotonic()
    writer = subprocess.run([sys.executable, "-c", WRITER, str(alice.root), "0", "2"],
                            capture_output=True, text=True, timeout=60)
    assert writer.returncode == 0, writer.stderr
    assert time.monotonic() - started < 15
    slow.kill()                                # a fetch that never returns, killed
    slow.wait(timeout=30)
    assert git(alice.root, "log", "-1", "--format=%s").strip() == "mem: encode session worker-1"
    report = sync(alice)
    assert report.pushed and report.incoming >= 1
    assert "mem: encode session worker-1" in git(bare, "log", "--format=%s", "main")
    assert "bob confirmed" in alice.read_text(DECISION)


def test_a_session_commit_made_while_its_commit_is_being_pushed_is_not_amended(tmp_path):
    """A resumed session amends its own unpushed commit; once a push of that commit has
    started (outside the store lock) the next turn gets a commit of its own, so what
    left and what is local stay one history (the next sync is a plain push)."""
    bare, alice, _bob = team(tmp_path)
    sync(alice)                                # bob's join merged: the next sync only pushes
    rel = "learning/resumed.md"
    message = "mem: encode session s-resumed\n\nDualtrace-Session: s-resumed\n"
    alice.write(Fact(path=rel, type="learning", description="turn one", body="Turn one.",
                     stored="2026-11-22", sessions=("s-resumed",)))
    leaving = alice.commit([rel], message, session_id="s-resumed")
    slow = _start_sync(alice, "pushing:1.5")
    alice.write(Fact(path=rel, type="learning", description="turn two", body="Turn two.",
                     stored="2026-11-22", sessions=("s-resumed",)))
    turn_two = alice.commit([rel], message, session_id="s-resumed")
    out, err = slow.communicate(timeout=60)
    assert slow.returncode == 0 and json.loads(out)["pushed"], err
    assert turn_two != leaving
    assert git(alice.root, "rev-parse", "HEAD~1").strip() == leaving
    assert git(bare, "rev-parse", "main").strip() == leaving
    report = sync(alice)
    assert (report.incoming, report.outgoing, report.merged) == (0, 1, [])


def test_two_syncs_of_one_memory_take_turns(tmp_path):
    bare, alice, bob = team(tmp_path)
    _edit(alice, "alice")
    slow = _start_sync(alice, "fetched:1.0")
    second = dualtrace("sync", "--memory-dir", str(alice.root), "--json")
    out, err = slow.communicate(timeout=60)
    assert slow.returncode == 0 and second.returncode == 0, (err, second.stderr)
    assert [json.loads(out)["pushed"], json.loads(second.stdout)["pushed"]] == [True, False]
    assert git(alice.root, "rev-parse", "HEAD") == git(bare, "rev-parse", "main")


@pytest.mark.parametrize("packed", [False, True])
def test_a_remote_replaced_by_another_memory_is_refused_and_tracking_refs_put_back(
        tmp_path, packed):
    """The team's remote re-created from someone else's memory (same URL, new history):
    the clone that synced with the old one refuses, and its remote-tracking refs (loose
    or packed) are exactly what they were, stale branches the fetch pruned included."""
    bare = bare_repo(tmp_path)
    alice = memory(tmp_path, "alice", (DECISION, "Sessions live in Redis."))
    add_remote(alice, str(bare))
    sync(alice)
    git(alice.root, "push", "-q", "origin", "main:refs/heads/old-topic")
    sync(alice)                                   # tracking refs: origin/main, origin/old-topic
    if packed:
        git(alice.root, "pack-refs", "--all")
    shutil.rmtree(bare)
    bare_repo(tmp_path)
    dave = memory(tmp_path, "dave", ("learning/dave.md", "Dave's own memory."))
    add_remote(dave, str(bare))
    sync(dave)
    before = state(alice)
    assert "refs/remotes/origin/old-topic" in before["refs"]
    with pytest.raises(SyncError, match=r"^origin/main is another memory \(1 memory files\)"):
        sync(alice)
    assert state(alice) == before


def _indexed(root: Path) -> tuple[list[str], dict[str, str]]:
    with Index.open(root) as index:
        paths = sorted(r[0] for r in index.conn.execute("SELECT DISTINCT path FROM docs"))
        return paths, index.unreadable()


def test_a_memory_forgotten_on_one_machine_leaves_the_other_ones_index_after_sync(tmp_path):
    """Review 7 F6: alice forgets a decision (moved to archive/ with its moment); bob's
    sync fast-forwards the move, and his index kept serving archive/decisions/... as a
    current fact and warned that archive/scenes/... does not parse, until a reindex."""
    bare, alice, bob = team(tmp_path)
    scene = "scenes/decisions/session-storage.md"
    alice.write(replace(alice.read_fact(DECISION), linked_scene=scene))
    alice.write(Moment(path=scene, anchor="session-storage", linked_fact=DECISION,
                       description="Scene cue for session-storage", narrative="We chose Redis.",
                       timeline=("session-storage -> chosen [2026-11-20]",),
                       stored="2026-11-20"))
    alice.commit([DECISION, scene], "mem: store scenes/decisions/session-storage\n")
    sync(alice)
    sync(bob)
    assert DECISION in _indexed(bob.root)[0]
    proc = dualtrace("forget", "session-storage", "--yes", "--memory-dir", str(alice.root))
    assert proc.returncode == 0, proc.stderr
    assert (alice.root / "archive" / DECISION).exists()
    sync(alice)
    assert sync(bob).incoming >= 1 and (bob.root / "archive" / DECISION).exists()
    after_sync = _indexed(bob.root)
    assert not any(p.startswith("archive/") for p in after_sync[0]), after_sync
    assert after_sync[1] == {}
    reindex = dualtrace("reindex", "--memory-dir", str(bob.root))
    assert reindex.returncode == 0, reindex.stderr
    assert _indexed(bob.root) == after_sync     # the same as a fresh reindex
    listed = dualtrace("list", "--memory-dir", str(bob.root))
    assert listed.returncode == 0 and "warning" not in listed.stderr, listed.stderr


def test_the_first_push_to_a_local_bare_remote_points_its_head_so_git_clone_works(tmp_path):
    """Review 7 F14: `git init --bare` (HEAD -> master) then the first sync pushed main
    only, and a teammate's `git clone` checked out nothing ("remote HEAD refers to
    nonexistent ref")."""
    bare = bare_repo(tmp_path, branch="master")
    alice = memory(tmp_path, "alice", (DECISION, "Sessions live in Redis."))
    add_remote(alice, f"file://{bare}")
    assert sync(alice).pushed
    assert git(bare, "symbolic-ref", "HEAD").strip() == "refs/heads/main"
    proc = subprocess.run(["git", "clone", str(bare), str(tmp_path / "bob")],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0 and "warning" not in proc.stderr, proc.stderr
    assert (tmp_path / "bob" / DECISION).read_text() == alice.read_text(DECISION)
    # A remote whose HEAD names a branch it has is never repointed.
    other = bare_repo(tmp_path, "other.git", branch="master")
    git(alice.root, "push", "-q", str(other), "main:master", "main:main")
    git(other, "symbolic-ref", "HEAD", "refs/heads/master")
    carol = memory(tmp_path, "carol")
    add_remote(carol, str(other))
    sync(carol)
    assert git(other, "symbolic-ref", "HEAD").strip() == "refs/heads/master"


def test_two_memories_started_in_the_same_second_by_one_person_are_two_histories(tmp_path):
    # Same author, same second: without a name of its own, each memory's root commit was
    # the same commit (same tree, author and time), so sync took two people's (or two
    # machines') separate memories for one history and merged them without asking.
    for attempt in range(10):
        start = int(time.time())
        stores = [MemoryStore(tmp_path / f"{attempt}-{n}", project="team",
                              author=("Sam", "sam@team")) for n in ("laptop", "desktop")]
        for store in stores:
            _ = store.git   # the root commit is made on first use
        if int(time.time()) == start:
            break
    roots = [git(s.root, "rev-list", "--max-parents=0", "HEAD").strip() for s in stores]
    assert roots[0] != roots[1]
    laptop, desktop = stores
    for store, name in ((laptop, "laptop"), (desktop, "desktop")):
        store.write(Fact(path=f"learning/{name}.md", type="learning", description=f"{name} setup",
                         body="Run make.", stored="2026-11-20", sessions=(f"{name}-1",)))
        store.commit([f"learning/{name}.md"], f"mem: encode session {name}-1\n")
    bare = bare_repo(tmp_path)
    add_remote(laptop, str(bare))
    sync(laptop)
    add_remote(desktop, str(bare))
    proc = dualtrace("sync", "--memory-dir", str(desktop.root))
    assert proc.returncode == 1 and "another memory" in proc.stderr, proc.stderr
