"""The storage transaction: one commit per changeset, and a failed commit leaves no trace."""

from __future__ import annotations

import git
import pytest

from dualtrace.errors import GitError
from dualtrace.memfs.store import MemoryStore
from dualtrace.memfs.transaction import ChangeSet, commit


def test_a_changeset_is_written_and_committed_once(memdir):
    store = MemoryStore(memdir, project="demo")
    sha = commit(store, ChangeSet((("decisions/a.md", None, "A\n"), ("incidents/b.md", None, "B\n")),
                                  "mem: two files\n"))
    repo = git.Repo(memdir)
    assert sha and repo.head.commit.hexsha == sha and repo.head.commit.message == "mem: two files\n"
    assert sorted(repo.head.commit.stats.files) == ["decisions/a.md", "incidents/b.md"]
    assert commit(store, ChangeSet((), "nothing")) is None
    assert repo.head.commit.hexsha == sha
    store.close()


def test_a_failed_commit_puts_the_directory_back(memdir):
    store = MemoryStore(memdir, project="demo")
    commit(store, ChangeSet((("decisions/a.md", None, "old\n"),), "mem: first\n"))
    head = git.Repo(memdir).head.commit.hexsha
    lock = memdir / ".git" / "index.lock"
    lock.write_text("")  # a git command running in the memory directory: commit refuses
    changes = (("decisions/a.md", "old\n", "new\n"), ("scenes/incidents/x.md", None, "X\n"))
    with pytest.raises(GitError, match="index.lock"):
        commit(store, ChangeSet(changes, "mem: second\n"))
    assert (memdir / "decisions" / "a.md").read_text() == "old\n"
    assert not (memdir / "scenes").exists()  # the folders it created are gone too
    assert git.Repo(memdir).head.commit.hexsha == head
    lock.unlink()
    assert commit(store, ChangeSet(changes, "mem: second\n"))
    assert (memdir / "scenes" / "incidents" / "x.md").read_text() == "X\n"
    store.close()
