from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import git
import pytest

from dualtrace.errors import DualtraceError, GitError, PathError
from dualtrace.memfs import formats
from dualtrace.memfs.anchors import check_anchor, confine, make_anchor
from dualtrace.memfs.formats import Fact
from dualtrace.memfs.gitrepo import OpLine, commit_message
from dualtrace.memfs.store import MemoryStore


def fact(anchor: str, body: str = "Body.", kind: str = "decision") -> Fact:
    return Fact(path=formats.fact_path(kind, anchor), type=kind, description=f"about {anchor}",
                body=body, stored="2026-11-29", evidence_score=6, tier="RECORD")


def msg(anchor: str, session: str = "s1") -> str:
    return commit_message(session, "test", [OpLine("store", f"decisions/{anchor}", "decision", 6)])


# ---------------------------------------------------------------- anchors and paths


@pytest.mark.parametrize("bad", ["../../x", "/etc/passwd", "a" * 10_000, "Émile", "", "a/b",
                                 "UPPER", "dots.md", "-lead", "trail-", "a--b", "sp ace", "a\x00b"])
def test_absurd_anchors_rejected(bad):
    with pytest.raises(PathError) as info:
        check_anchor(bad)
    assert len(str(info.value)) < 200  # one readable line, even for a 10 KB name


def test_make_anchor_rules():
    assert make_anchor("Decision: Structured Logging (JSON)") == "structured-logging-json"
    assert make_anchor("Auth timeout", date="2026-03-15") == "2026-03-15-auth-timeout"
    assert len(make_anchor("word " * 100)) <= 64
    assert make_anchor("Café crème") == "cafe-creme"
    with pytest.raises(PathError):
        make_anchor("!!!")


@pytest.mark.parametrize("bad", ["../x.md", "decisions/../../x.md", "/etc/passwd", "C:\\x.md",
                                 ".git/config", ".dualtrace/lock", ""])
def test_confine_rejects_escapes(tmp_path, bad):
    with pytest.raises(PathError):
        confine(tmp_path, bad)


def test_confine_rejects_symlink_leaving_root(tmp_path):
    root = tmp_path / "mem"
    (root / "decisions").mkdir(parents=True)
    outside = tmp_path / "outside"
    outside.mkdir()
    (root / "incidents").symlink_to(outside, target_is_directory=True)
    with pytest.raises(PathError, match="symlink"):
        confine(root, "incidents/x.md")
    assert confine(root, "decisions/x.md") == root.resolve() / "decisions" / "x.md"


def test_store_write_refuses_escape(memdir):
    store = MemoryStore(memdir)
    evil = fact("ok")
    with pytest.raises(PathError):
        store.write(Fact(**{**evil.__dict__, "path": "../evil.md"}))
    assert not (memdir.parent / "evil.md").exists()


# ---------------------------------------------------------------- git behaviour


def test_init_commit_and_log(memdir):
    store = MemoryStore(memdir)
    assert (memdir / ".git").is_dir()
    assert ".dualtrace/" in (memdir / ".gitignore").read_text()
    store.write(fact("alpha"))
    sha = store.commit(["decisions/alpha.md"], msg("alpha", "session-1234567890"))
    repo = git.Repo(memdir)
    head = repo.head.commit
    assert head.hexsha == sha
    assert head.author.name == "dualtrace" and head.author.email == "dualtrace@localhost"
    assert head.summary == "mem: store decisions/alpha (decision, evidence:6)"
    assert "Dualtrace-Session: session-1234567890" in head.message
    entries = store.git.session_log()
    assert [e.session for e in entries] == ["session-1234567890"]
    # committing again with no change is a no-op
    assert store.commit(["decisions/alpha.md"], msg("alpha")) is None
    assert len(list(repo.iter_commits())) == 2


def test_multi_operation_message():
    ops = [OpLine("store", "decisions/a", "decision", 9), OpLine("update", "incidents/b", "recurred", 8),
           OpLine("upgrade", "patterns/c", "added scene", 8)]
    uuid = "01234567-89ab-cdef-0123-456789abcdef"
    text = commit_message(uuid, "offline", ops)
    lines = text.splitlines()
    assert lines[0] == "mem: encode session 01234567 (1 stored, 2 updated)"
    assert "mem: update incidents/b (recurred, evidence:8)" in lines
    assert lines[-2:] == [f"Dualtrace-Session: {uuid}", "Dualtrace-Backend: offline"]
    # an id of 16 characters or fewer is named whole (Cline's timestamps share 8 digits)
    assert commit_message("1772716500000", "offline", ops).startswith(
        "mem: encode session 1772716500000 (")


def test_only_touched_paths_are_staged(memdir):
    store = MemoryStore(memdir)
    store.write(fact("alpha"))
    store.commit(["decisions/alpha.md"], msg("alpha"))
    (memdir / "notes.txt").write_text("a person's scratch notes\n")
    alpha = memdir / "decisions" / "alpha.md"
    alpha.write_text(alpha.read_text() + "\nhand edit\n")
    store.write(fact("beta"))
    store.commit(["decisions/beta.md"], msg("beta"))
    repo = git.Repo(memdir)
    assert set(repo.head.commit.stats.files) == {"decisions/beta.md"}
    assert "notes.txt" in repo.untracked_files
    assert [d.a_path for d in repo.index.diff(None)] == ["decisions/alpha.md"]


def test_inherited_git_env_is_ignored(memdir, tmp_path, monkeypatch):
    other = tmp_path / "other"
    other_repo = git.Repo.init(other)
    monkeypatch.setenv("GIT_DIR", str(other / ".git"))
    monkeypatch.setenv("GIT_WORK_TREE", str(other))
    monkeypatch.setenv("GIT_INDEX_FILE", str(other / ".git" / "index"))
    store = MemoryStore(memdir)
    store.write(fact("alpha"))
    store.commit(["decisions/alpha.md"], msg("alpha"))
    assert "GIT_DIR" not in os.environ
    assert not other_repo.head.is_valid()
    assert git.Repo(memdir).head.commit.summary.startswith("mem: store")


def test_memory_dir_inside_another_repo_commits_to_its_own(tmp_path):
    outer = tmp_path / "project"
    outer_repo = git.Repo.init(outer)
    store = MemoryStore(outer / "mem")
    store.write(fact("alpha"))
    store.commit(["decisions/alpha.md"], msg("alpha"))
    assert (outer / "mem" / ".git").is_dir()
    assert not outer_repo.head.is_valid()


def test_stale_index_lock_is_a_clear_error(memdir):
    store = MemoryStore(memdir)
    (memdir / ".git" / "index.lock").write_text("")
    store.write(fact("alpha"))
    started = time.monotonic()
    with pytest.raises(GitError, match="index.lock exists"):
        store.commit(["decisions/alpha.md"], msg("alpha"))
    assert time.monotonic() - started < 5


def test_detached_head_is_a_clear_error(memdir):
    store = MemoryStore(memdir)
    store.write(fact("alpha"))
    store.commit(["decisions/alpha.md"], msg("alpha"))
    repo = git.Repo(memdir)
    repo.git.checkout("--detach")
    store.write(fact("beta"))
    with pytest.raises(GitError, match="detached HEAD"):
        store.commit(["decisions/beta.md"], msg("beta"))


def test_no_global_identity_needed(memdir, monkeypatch, tmp_path):
    monkeypatch.setenv("HOME", str(tmp_path / "empty-home"))
    store = MemoryStore(memdir)
    store.write(fact("alpha"))
    assert store.commit(["decisions/alpha.md"], msg("alpha"))


# ---------------------------------------------------------------- tolerant reading


def test_broken_files_reported_others_readable(memdir):
    store = MemoryStore(memdir)
    store.write(fact("good"))
    (memdir / "decisions" / "broken.md").write_text("---\ndescription: [oops\ntype: decision\n---\n")
    (memdir / "decision").mkdir()
    (memdir / "decision" / "singular.md").write_text(formats.render_fact(fact("singular")))
    scan = store.scan()
    assert sorted(f.path for f in scan.facts()) == ["decision/singular.md", "decisions/good.md"]
    assert len(scan.problems) == 1
    assert str(scan.problems[0]).startswith("decisions/broken.md:")
    assert store.find_fact("decision", "singular").path == "decision/singular.md"


def test_lookup_by_anchor_and_path(memdir):
    store = MemoryStore(memdir)
    store.write(fact("alpha"))
    assert store.lookup("alpha")[0].path == "decisions/alpha.md"
    assert store.lookup("decisions/alpha")[0].path == "decisions/alpha.md"
    with pytest.raises(DualtraceError, match="no memory"):
        store.lookup("missing")


# ---------------------------------------------------------------- concurrency and crashes

WRITER = textwrap.dedent(
    """
    import sys
    from dualtrace.memfs import formats
    from dualtrace.memfs.formats import Fact
    from dualtrace.memfs.gitrepo import OpLine, commit_message
    from dualtrace.memfs.store import MemoryStore

    root, worker, count = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    # filelock is not fair: on a loaded CI machine one writer can lose the race for the
    # lock many times in a row, so the default 120 s wait is a flake, not a finding here.
    store = MemoryStore(root, lock_timeout=900.0)
    for i in range(count):
        anchor = f"w{worker}-m{i}"
        path = formats.fact_path("decision", anchor)
        with store.lock():
            store.write(Fact(path=path, type="decision", description=anchor,
                             body="x" * 5000, stored="2026-11-29"))
            store.commit([path], commit_message(f"{worker}-{i}", "test",
                         [OpLine("store", path[:-3], "decision", 6)]))
    """
)


def test_eight_processes_write_concurrently(memdir):
    MemoryStore(memdir)  # initialise once so all writers race on commits, not on init
    procs = [subprocess.Popen([sys.executable, "-c", WRITER, str(memdir), str(w), "25"])
             for w in range(8)]
    assert [p.wait(timeout=900) for p in procs] == [0] * 8
    store = MemoryStore(memdir)
    scan = store.scan()
    assert len(scan.facts()) == 200 and not scan.problems
    assert all(f.body == "x" * 5000 for f in scan.facts())
    repo = git.Repo(memdir)
    commits = list(repo.iter_commits())
    assert len(commits) == 201  # init + one per write
    assert all(len(c.stats.files) == 1 for c in commits[:-1])
    fsck = subprocess.run(["git", "fsck", "--strict"], cwd=memdir, capture_output=True, text=True)
    assert fsck.returncode == 0, fsck.stderr
    assert repo.is_dirty(untracked_files=True) is False


SLOW_WRITER = textwrap.dedent(
    """
    import os, sys, time
    from pathlib import Path
    from dualtrace import atomic

    real_replace = os.replace
    def slow_replace(src, dst):
        print("writing", flush=True)
        time.sleep(30)
        real_replace(src, dst)
    os.replace = slow_replace
    atomic.write_text(Path(sys.argv[1]), "---\\ndescription: NEW" + "y" * 100000)
    """
)


def test_sigkill_mid_write_keeps_previous_version(memdir):
    store = MemoryStore(memdir)
    store.write(fact("alpha", body="original body"))
    store.commit(["decisions/alpha.md"], msg("alpha"))
    target = memdir / "decisions" / "alpha.md"
    before = target.read_bytes()
    proc = subprocess.Popen([sys.executable, "-c", SLOW_WRITER, str(target)],
                            stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "writing"
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=10)
    assert target.read_bytes() == before
    scan = MemoryStore(memdir).scan()
    assert not scan.problems and scan.facts()[0].body == "original body"
    leftovers = [p.name for p in target.parent.iterdir() if p.name.endswith(".tmp")]
    assert leftovers  # the temp file is left behind, invisible to git and the scanner
    assert not git.Repo(memdir).is_dirty(untracked_files=True)


def test_never_deletes(memdir):
    store = MemoryStore(memdir)
    assert not any(hasattr(store, name) for name in ("delete", "remove", "unlink"))


def test_atomic_write_creates_parent(tmp_path):
    from dualtrace.atomic import write_text

    target = tmp_path / "a" / "b" / "c.md"
    write_text(target, "hello")
    assert target.read_text() == "hello"
    assert [p.name for p in target.parent.iterdir()] == ["c.md"]


def test_lock_timeout_is_clear(memdir):
    store = MemoryStore(memdir, lock_timeout=0.2)
    holder = subprocess.Popen(
        [sys.executable, "-c",
         "import sys,time; from filelock import FileLock; l=FileLock(sys.argv[1]); l.acquire();"
         "print('held', flush=True); time.sleep(20)", str(Path(memdir) / ".dualtrace" / "lock")],
        stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(DualtraceError, match="locked by another dualtrace process"):
            with store.lock():
                pass
    finally:
        holder.kill()
        holder.wait()


def test_a_persons_staged_changes_stay_out_of_our_commits(memdir):
    store = MemoryStore(memdir)
    store.write(fact("alpha"))
    store.commit(["decisions/alpha.md"], msg("alpha"))
    (memdir / "notes.txt").write_text("staged by a person\n")
    subprocess.run(["git", "add", "notes.txt"], cwd=memdir, check=True)
    for anchor in ("beta", "gamma"):  # the second commit must not take the fast path either
        store.write(fact(anchor))
        store.commit([f"decisions/{anchor}.md"], msg(anchor))
        assert set(git.Repo(memdir).head.commit.stats.files) == {f"decisions/{anchor}.md"}
    staged = subprocess.run(["git", "diff", "--cached", "--name-only"], cwd=memdir,
                            capture_output=True, text=True).stdout.split()
    assert staged == ["notes.txt"]
    subprocess.run(["git", "reset", "-q", "notes.txt"], cwd=memdir, check=True)
    for anchor in ("delta", "epsilon"):
        store.write(fact(anchor))
        store.commit([f"decisions/{anchor}.md"], msg(anchor))
        assert set(git.Repo(memdir).head.commit.stats.files) == {f"decisions/{anchor}.md"}
    assert "notes.txt" in git.Repo(memdir).untracked_files


# ---------------------------------------------------------------- someone else's folder

def _tree(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*"))
            if p.is_file()}


def test_a_code_repository_is_never_taken_over(tmp_path):
    code = tmp_path / "userrepo"
    code.mkdir()
    repo = git.Repo.init(code)
    (code / "main.py").write_text("print('mine')\n")
    repo.index.add(["main.py"])
    repo.index.commit("my work")
    (code / "main.py").write_text("print('uncommitted')\n")
    before = _tree(code)
    with pytest.raises(DualtraceError, match="is not a dualtrace memory directory .*main.py"):
        MemoryStore(code)
    assert _tree(code) == before  # no commit, no .gitignore, no state folder
    assert [c.message for c in repo.iter_commits()] == ["my work"]


def test_a_plain_folder_with_files_is_not_git_initialised(tmp_path):
    papers = tmp_path / "papers"
    papers.mkdir()
    (papers / "README.txt").write_text("notes\n")
    with pytest.raises(DualtraceError, match="README.txt"):
        MemoryStore(papers)
    assert sorted(p.name for p in papers.iterdir()) == ["README.txt"]


def test_new_empty_cloned_and_hand_made_memory_dirs_open(tmp_path):
    MemoryStore(tmp_path / "new")
    (tmp_path / "empty").mkdir()
    MemoryStore(tmp_path / "empty")
    made = tmp_path / "made"
    (made / "decisions").mkdir(parents=True)
    (made / "decisions" / "alpha.md").write_text("---\ndescription: alpha\n---\n")
    MemoryStore(made)
    source = MemoryStore(tmp_path / "source")
    source.write(fact("alpha"))
    source.commit(["decisions/alpha.md"], msg("alpha"))
    (source.root / "README.md").write_text("our team memory\n")  # a pushed repo grows files
    source_repo = git.Repo(source.root)
    source_repo.index.add(["README.md"])
    source_repo.index.commit("readme")
    clone = tmp_path / "clone"
    git.Repo.clone_from(source.root, clone)
    assert (clone / "README.md").exists() and not (clone / ".dualtrace").exists()
    assert MemoryStore(clone).scan().facts()[0].description == "about alpha"
