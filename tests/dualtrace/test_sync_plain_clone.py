"""`dualtrace sync` right after a plain `git clone` of a shared memory (issue 11 leftovers).

A team's bare repository made with `git init --bare` has HEAD -> master; dualtrace
pushes `main`. `git clone` of it checks nothing out ("remote HEAD refers to nonexistent
ref") and leaves HEAD naming an unborn `master`, so every write said the memory "has lost
its branch 'master'". Real bare remotes and git in tmp_path, the CLI as a process.
"""

from __future__ import annotations

import subprocess
import sys

from tests.conftest import EXAMPLES


def dualtrace(*args: str, cwd=None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "dualtrace", *args], capture_output=True,
                          text=True, timeout=120, cwd=cwd)


def git(*args: str) -> str:
    return subprocess.run(["git", *args], capture_output=True, text=True, check=True).stdout


def _shared(tmp_path):
    """alice's memory, pushed by `dualtrace sync` to a bare repository whose HEAD is master."""
    bare = tmp_path / "team.git"
    git("init", "-q", "--bare", "-b", "master", str(bare))
    alice = tmp_path / "alice"
    for args in (("encode", "--memory-dir", str(alice), "--backend", "offline",
                  str(EXAMPLES / "pilot-5-session-storage.jsonl")),
                 ("remote", "add", str(bare), "--memory-dir", str(alice)),
                 ("sync", "--memory-dir", str(alice))):
        proc = dualtrace(*args)
        assert proc.returncode == 0, proc.stderr
    assert git("-C", str(bare), "for-each-ref", "--format=%(refname)").split() == ["refs/heads/main"]
    # dualtrace points a local bare repository's HEAD at main on the first push; a
    # server that does not (or a person who set it back) leaves HEAD at master:
    assert git("-C", str(bare), "symbolic-ref", "HEAD").strip() == "refs/heads/main"
    git("-C", str(bare), "symbolic-ref", "HEAD", "refs/heads/master")
    return bare, alice


def test_sync_after_a_plain_clone_takes_the_remotes_branch(tmp_path):
    bare, alice = _shared(tmp_path)
    bob = tmp_path / "bob"
    clone = subprocess.run(["git", "clone", str(bare), str(bob)], capture_output=True, text=True)
    assert clone.returncode == 0 and "remote HEAD refers to nonexistent ref" in clone.stderr
    synced = dualtrace("sync", "--memory-dir", str(bob))
    assert synced.returncode == 0, synced.stderr
    assert synced.stdout.startswith("synced with origin/main: 0 commits in, 0 out")
    assert git("-C", str(bob), "rev-parse", "--abbrev-ref", "main@{upstream}").strip() == "origin/main"
    assert git("-C", str(bob), "status", "--porcelain") == ""
    assert sorted(p.name for p in (bob / "decisions").iterdir()) == \
        sorted(p.name for p in (alice / "decisions").iterdir())
    # bob's own session goes to alice through the same branch.
    proc = dualtrace("encode", "--memory-dir", str(bob), "--backend", "offline",
                     str(EXAMPLES / "pilot-1b-structured-logging.jsonl"))
    assert proc.returncode == 0, proc.stderr
    assert dualtrace("sync", "--memory-dir", str(bob)).returncode == 0
    back = dualtrace("sync", "--memory-dir", str(alice))
    assert back.returncode == 0 and "0 commits in" not in back.stdout, back.stdout
    assert git("-C", str(alice), "log", "-1", "--format=%s").strip() == \
        git("-C", str(bob), "log", "-1", "--format=%s").strip()
    assert any("structured" in p.name for p in (alice / "decisions").iterdir())


def test_a_plain_clone_of_several_branches_is_told_to_pick_one_and_nothing_is_written(tmp_path):
    bare, alice = _shared(tmp_path)
    git("-C", str(alice), "push", "-q", str(bare), "main:refs/heads/experiment")
    bob = tmp_path / "bob"
    subprocess.run(["git", "clone", "-q", str(bare), str(bob)], capture_output=True, check=True)
    synced = dualtrace("sync", "--memory-dir", str(bob))
    assert synced.returncode == 1
    assert synced.stderr.strip() == (
        f"Error: the memory repository {bob} has no branch checked out (HEAD names 'master', "
        "which its remote does not have); the remote has experiment, main: "
        f"`git -C {bob} switch BRANCH` picks one, then retry. Nothing was written.")
    # No memory file written (.dualtrace/ is the gitignored state: the lock, sync status).
    assert sorted(p.name for p in bob.iterdir()) == [".dualtrace", ".git"]
    # The person picks one: sync goes on from it.
    git("-C", str(bob), "switch", "-q", "main")
    assert dualtrace("sync", "--memory-dir", str(bob)).returncode == 0
