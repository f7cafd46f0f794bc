"""Faults between a session's writes and its commit lose nothing (issue 13 item 4).

Real processes (``dualtrace encode``) are killed or stopped at the named windows by
the test-only fault points (dualtrace/faults.py); a real tmpfs fills up for the disk
full case. Every run is compared with the same sessions encoded without a fault: the
memory files and the commits must come out the same.
"""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path

import pytest

from tests.conftest import EXAMPLES
from tests.conftest import git_out as git
from tests.fault_helpers import fill, mounted_tmpfs
from tests.hook_helpers import PY, wait_until

SESSION_A = EXAMPLES / "pilot-4-auth-401-session1.jsonl"  # stores an incident
SESSION_B = EXAMPLES / "pilot-4-auth-401-session2.jsonl"  # the same incident recurs
INCIDENT = "incidents/auth-middleware-401-race.md"


def encode(transcript: Path, memdir: Path, fault: str | None = None,
           wait: bool = True) -> subprocess.CompletedProcess | subprocess.Popen:
    env = dict(os.environ)
    env.pop("DUALTRACE_FAULT", None)
    if fault:
        env["DUALTRACE_FAULT"] = fault
    cmd = [PY, "-m", "dualtrace.cli", "encode", str(transcript), "--memory-dir", str(memdir)]
    if not wait:
        return subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True)
    return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120)


def history(repo: Path) -> list[tuple[str, str, tuple[str, ...]]]:
    """(subject, session trailer, files) per commit, oldest first."""
    out = []
    for sha in git(repo, "rev-list", "--reverse", "HEAD").split():
        subject = git(repo, "log", "-1", "--format=%s", sha).strip()
        session = git(repo, "log", "-1", "--format=%(trailers:key=Dualtrace-Session,valueonly)",
                      sha).strip()
        files = git(repo, "show", "--name-only", "--format=", sha).split()
        out.append((subject, session, tuple(sorted(files))))
    return out


def memory_files(repo: Path) -> dict[str, str]:
    return {str(p.relative_to(repo)): p.read_text() for p in sorted(repo.rglob("*.md"))
            if ".git" not in p.parts and ".dualtrace" not in p.parts}


def assert_clean(repo: Path) -> None:
    assert git(repo, "status", "--porcelain", "-uall") == ""
    assert not (repo / ".dualtrace" / "txn.json").exists()
    assert subprocess.run(["git", "-C", str(repo), "fsck", "--no-progress"],
                          capture_output=True).returncode == 0


@pytest.fixture
def control(tmp_path) -> Path:
    """A and B encoded with no fault: what every faulty run must end up as."""
    repo = tmp_path / "control"
    for transcript in (SESSION_A, SESSION_B):
        assert encode(transcript, repo).returncode == 0
    return repo


@pytest.mark.parametrize("window", ["txn-written", "txn-committed"])
def test_sigkill_between_write_and_commit_is_finished_under_its_own_session(
        tmp_path, control, window):
    memdir = tmp_path / "memory"
    killed = encode(SESSION_A, memdir, fault=f"{window}:kill")
    assert killed.returncode == -signal.SIGKILL
    if window == "txn-written":  # A's files are on disk, uncommitted
        assert INCIDENT in git(memdir, "status", "--porcelain", "-uall")
    # Another session encodes before A is retried: it must neither plan against A's
    # uncommitted text as an old memory nor carry it in its own commit.
    second = encode(SESSION_B, memdir)
    assert second.returncode == 0, second.stderr
    retry = encode(SESSION_A, memdir)
    assert retry.returncode == 0, retry.stderr
    assert "already committed" in retry.stdout  # A's range was committed for it
    assert history(memdir) == history(control)
    assert memory_files(memdir) == memory_files(control)
    subjects = [h[0] for h in history(memdir)]
    assert "mem: store incidents/auth-middleware-401-race" in subjects[1]  # not "update"
    assert_clean(memdir)


def test_sigkill_then_retry_of_the_same_session_stores_not_updates(tmp_path):
    control = tmp_path / "control"
    assert encode(SESSION_A, control).returncode == 0
    memdir = tmp_path / "memory"
    assert encode(SESSION_A, memdir, fault="txn-written:kill").returncode == -signal.SIGKILL
    retry = encode(SESSION_A, memdir)
    assert retry.returncode == 0, retry.stderr
    assert history(memdir) == history(control)
    assert memory_files(memdir) == memory_files(control)
    assert_clean(memdir)


# ------------------------------------------------------------------ a full disk (tmpfs)

@pytest.fixture
def small_disk(tmp_path):
    """A 2 MiB tmpfs (needs the right to mount: root, as on this project's CI machine)."""
    with mounted_tmpfs(tmp_path / "small", "2m") as mnt:
        yield mnt


@pytest.fixture
def updates_only(state_dir):
    """No session records: B then only rewrites files A made, so putting them back
    needs free space (deleting a new file would free some)."""
    (state_dir / "config.toml").write_text('session_records = "off"\n')


def test_disk_full_between_write_and_commit_loses_nothing(tmp_path, updates_only, small_disk,
                                                          control):
    memdir = small_disk / "memory"
    assert encode(SESSION_A, memdir).returncode == 0
    # B writes its files, stops; the disk fills up; git cannot commit and the files
    # cannot be put back (that needs space too).
    proc = encode(SESSION_B, memdir, fault="txn-written:stop", wait=False)
    wait_until(lambda: _stopped(proc.pid), 60, what="encode stopped after its writes")
    filler = fill(small_disk)
    os.kill(proc.pid, signal.SIGCONT)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 1, (out, err)
    assert err.startswith("Error: ") and len(err.strip().splitlines()) == 1, err
    # Still full (the failed run freed its temporary files: fill those too): a retry
    # fails the same clean way.
    more = fill(small_disk)
    again = encode(SESSION_B, memdir)
    assert again.returncode == 1 and again.stderr.startswith("Error: "), again.stderr
    filler.unlink()
    more.unlink()
    retry = encode(SESSION_B, memdir)
    assert retry.returncode == 0, retry.stderr
    assert history(memdir) == history(control)
    assert memory_files(memdir) == memory_files(control)
    assert_clean(memdir)


def test_disk_full_before_any_write_touches_nothing(tmp_path, small_disk, control):
    memdir = small_disk / "memory"
    assert encode(SESSION_A, memdir).returncode == 0
    before = memory_files(memdir)
    filler = fill(small_disk)
    full = encode(SESSION_B, memdir)
    assert full.returncode == 1 and full.stderr.startswith("Error: "), full.stderr
    assert memory_files(memdir) == before
    filler.unlink()
    assert encode(SESSION_B, memdir).returncode == 0
    assert history(memdir) == history(control)
    assert memory_files(memdir) == memory_files(control)
    assert_clean(memdir)


def _stopped(pid: int) -> bool:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return False
    return fields[0] == "T"
