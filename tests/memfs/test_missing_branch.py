"""A deleted branch ref is an error that names the reflog, never a new root history
(issue 13 item 4). Real repositories; the ref is removed with git itself."""

from __future__ import annotations

import re
import shlex
import subprocess
from pathlib import Path

import pytest

from dualtrace.errors import GitError
from dualtrace.memfs.store import MemoryStore
from dualtrace.memfs.transaction import ChangeSet, commit
from dualtrace.pipeline import encode_session
from tests.conftest import EXAMPLES
from tests.conftest import git_out as git


def all_commits(repo: Path) -> set[str]:
    """Every commit object in the repository, reachable or not."""
    out = git(repo, "cat-file", "--batch-all-objects", "--batch-check")
    return {line.split()[0] for line in out.splitlines() if line.split()[1] == "commit"}


@pytest.mark.parametrize("packed", [False, True])
def test_encode_into_a_repo_whose_branch_was_deleted_refuses_and_says_how(memdir, packed):
    first = encode_session(EXAMPLES / "pilot-4-auth-401-session1.jsonl", memory_dir=memdir,
                           backend="offline")
    assert first.commit
    if packed:
        git(memdir, "pack-refs", "--all")
    git(memdir, "update-ref", "-d", "refs/heads/main")
    before = all_commits(memdir)
    with pytest.raises(GitError) as err:
        encode_session(EXAMPLES / "pilot-4-auth-401-session2.jsonl", memory_dir=memdir,
                       backend="offline")
    message = str(err.value)
    assert "lost its branch 'main'" in message and "reflog" in message
    assert first.commit[:12] in message
    assert all_commits(memdir) == before  # no new root (nor any other) commit was made
    assert git(memdir, "for-each-ref") == ""
    # The command the message gives brings the history back; the retry then commits on it.
    restore = re.search(r"`(git -C \S+ branch main [0-9a-f]+)`", message)
    assert restore
    subprocess.run(shlex.split(restore.group(1)), check=True, capture_output=True)
    second = encode_session(EXAMPLES / "pilot-4-auth-401-session2.jsonl", memory_dir=memdir,
                            backend="offline")
    assert second.commit
    assert git(memdir, "rev-parse", f"{second.commit}^").strip() == first.commit
    assert len(git(memdir, "rev-list", "--max-parents=0", "HEAD").split()) == 1


def test_an_open_store_notices_the_branch_going_away(memdir):
    store = MemoryStore(memdir, project="demo")
    assert commit(store, ChangeSet((("decisions/a.md", None, "A\n"),), "mem: first\n"))
    git(memdir, "update-ref", "-d", "refs/heads/main")
    with pytest.raises(GitError, match="reflog"):
        commit(store, ChangeSet((("decisions/b.md", None, "B\n"),), "mem: second\n"))
    assert not (memdir / "decisions" / "b.md").exists()  # put back
    store.close()


def test_a_new_memory_directory_is_still_created(memdir, tmp_path):
    # An empty git repository someone made (no reflog, no objects) is not "lost history".
    memdir.mkdir()
    git(memdir, "init", "-q", "-b", "main")
    store = MemoryStore(memdir, project="demo")
    assert commit(store, ChangeSet((("decisions/a.md", None, "A\n"),), "mem: first\n"))
    store.close()
