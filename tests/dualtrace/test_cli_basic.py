from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from dualtrace import __version__
from dualtrace.cli import cli
from dualtrace.memfs.formats import Fact, Moment
from dualtrace.memfs.gitrepo import OpLine, commit_message
from dualtrace.memfs.store import MemoryStore
from tests.conftest import EXAMPLES

EXAMPLE = EXAMPLES / "pilot-1a-preference.jsonl"


def seed(memdir):
    store = MemoryStore(memdir)
    f = Fact(path="decisions/structured-logging-json.md", type="decision",
             description="JSON structured logging", body="Because Datadog.", stored="2026-11-29",
             evidence_score=11, tier="FULL",
             linked_scene="scenes/decisions/structured-logging-json.md")
    m = Moment(path="scenes/decisions/structured-logging-json.md", anchor="structured-logging-json",
               description="Scene cue", linked_fact=f.path, narrative="In src/log.py ...",
               timeline=("structured-logging-json -> switched [2026-11-29]",), stored="2026-11-29")
    store.write(f)
    store.write(m)
    store.commit([f.path, m.path], commit_message("sess-abcdef123", "offline",
                 [OpLine("store", "decisions/structured-logging-json", "decision", 11)]))
    return store


def test_version(run_cli):
    result = run_cli("--version")
    assert result.exit_code == 0 and __version__ in result.output


def test_status_log_show(memdir, run_cli):
    seed(memdir)
    status = run_cli("status", "--memory-dir", str(memdir))
    assert status.exit_code == 0, status.output
    assert "decision" in status.output and "FULL 1" in status.output
    assert "mem: store decisions/structured-logging-json" in status.output
    log = run_cli("log", "--memory-dir", str(memdir))
    assert "sess-abcdef123" in log.output
    assert "mem: store decisions/structured-logging-json (decision, evidence:11)" in log.output
    show = run_cli("show", "structured-logging-json", "--memory-dir", str(memdir))
    assert show.exit_code == 0
    assert show.output.index("==> decisions/") < show.output.index("==> scenes/decisions/")
    assert "[MOMENT:structured-logging-json]" in show.output


def test_status_counts_only_this_memory_dirs_jobs(memdir, run_cli, state_dir, tmp_path):
    """One worker and one queue serve every project; `status` of one memory dir lists
    its own jobs and only counts the others'."""
    from dualtrace import queue

    seed(memdir)
    elsewhere = tmp_path / "other-project"
    elsewhere.mkdir()
    s = str(state_dir)
    queue.touch(s, host="claude-code", session_id="mine", event="stop", immediate=False,
                memory_dir=str(memdir))
    for n in range(2):
        queue.touch(s, host="claude-code", session_id=f"theirs-{n}", event="stop",
                    immediate=False, cwd=str(elsewhere))
    path = queue.job_path(s, queue.job_id("claude-code", "theirs-0"))
    job = queue.read_json(path)
    job.update(status="parked", last_error="BackendError: their model is down")
    queue.atomic_write_json(path, job)
    result = run_cli("status", "--memory-dir", str(memdir))
    assert result.exit_code == 0, result.output
    assert "queue:      1 queued, 0 running, 0 failed (and 2 for other projects)" in result.output
    assert "their model is down" not in result.output


def test_status_on_a_missing_dir_says_so_and_creates_nothing(memdir, run_cli):
    # Issue 15: read-only commands never create a directory or a repository.
    result = run_cli("status", "--memory-dir", str(memdir))
    assert result.exit_code == 0
    assert "(does not exist yet: nothing stored)" in result.output
    assert not memdir.exists()


def test_errors_are_one_line_exit_1(memdir, state_dir):
    seed(memdir)
    proc = subprocess.run([sys.executable, "-m", "dualtrace.cli", "show", "nope", "--memory-dir",
                           str(memdir)], capture_output=True, text=True)
    assert proc.returncode == 1
    assert proc.stderr.strip().splitlines() == ["Error: no memory with anchor or path 'nope'"]
    # A user's mistake is one line on stderr; errors.log keeps internal errors only.
    assert not (state_dir / "logs" / "errors.log").exists()
    proc = subprocess.run([sys.executable, "-m", "dualtrace.cli", "show", "../../etc/passwd",
                           "--memory-dir", str(memdir)], capture_output=True, text=True)
    assert proc.returncode == 1 and proc.stderr.startswith("Error: memory path")


@pytest.mark.parametrize("command", [["status"], ["log"], ["show", "x"], ["recall", "why json"],
                                     ["reindex"], ["encode", str(EXAMPLE)]])
def test_memory_dir_that_is_a_file(tmp_path, command):
    bad = tmp_path / "file"
    bad.write_text("x")
    proc = subprocess.run([sys.executable, "-m", "dualtrace.cli", *command, "--memory-dir", str(bad)],
                          capture_output=True, text=True)
    assert proc.returncode == 1
    assert proc.stderr.splitlines() == [f"Error: memory directory {bad} is not a directory"]
    assert bad.read_text() == "x"


@pytest.mark.parametrize("command", ["encode", "digest"])
def test_transcript_that_is_a_directory(tmp_path, memdir, command):
    folder = tmp_path / "transcript dir"
    folder.mkdir()
    proc = subprocess.run([sys.executable, "-m", "dualtrace.cli", command, str(folder),
                           *(["--memory-dir", str(memdir)] if command == "encode" else [])],
                          capture_output=True, text=True)
    assert proc.returncode == 1
    assert proc.stderr.splitlines() == [f"Error: transcript is a directory: {folder}"]


def test_status_reports_broken_files_quick_and_full(memdir):
    seed(memdir)
    (memdir / "decisions" / "no-front.md").write_text("just text\n")
    (memdir / "decisions" / "bad-yaml.md").write_text("---\ndescription: [oops\ntype: decision\n---\n")
    runner = CliRunner()
    quick = runner.invoke(cli, ["status", "--memory-dir", str(memdir)])
    assert "unreadable: 1" in quick.output and "decisions/no-front.md:1: missing frontmatter" in quick.output
    assert "  decision    2" in quick.output  # the YAML error is only found by a full parse
    full = runner.invoke(cli, ["status", "--check", "--memory-dir", str(memdir)])
    assert "unreadable: 2" in full.output and "decisions/bad-yaml.md:3: invalid YAML" in full.output
    assert "  decision    1" in full.output


@pytest.fixture
def read_only():
    """Make a tree read-only for this process: chmod for a normal user; root ignores
    modes, so there `chattr +i` (skipped where the filesystem has no such flag)."""
    done: list[Path] = []

    def apply(root: Path) -> None:
        paths = [root, *root.rglob("*")]
        if os.geteuid() != 0:
            for p in paths:
                p.chmod(p.stat().st_mode & ~0o222)
        elif subprocess.run(["chattr", "+i", *map(str, paths)], capture_output=True).returncode:
            pytest.skip("cannot make a directory read-only for root here (no chattr +i)")
        done.extend(paths)

    yield apply
    if os.geteuid() == 0:
        subprocess.run(["chattr", "-i", *map(str, done)], capture_output=True)
    else:
        for p in done:
            p.chmod(p.stat().st_mode | 0o200)


def test_read_only_memory_dir_can_be_read_not_written(memdir, read_only):
    def run(*args):
        return subprocess.run([sys.executable, "-m", "dualtrace.cli", *args, "--memory-dir",
                               str(memdir)], capture_output=True, text=True)

    seed(memdir)
    assert run("recall", "structured logging json").returncode == 0  # builds the index
    read_only(memdir)
    status = run("status")
    assert status.returncode == 0 and "FULL 1" in status.stdout, status.stderr
    log = run("log")
    assert log.returncode == 0 and "sess-abcdef123" in log.stdout, log.stderr
    show = run("show", "structured-logging-json")
    assert show.returncode == 0 and "[MOMENT:structured-logging-json]" in show.stdout, show.stderr
    recalled = run("recall", "structured logging json")
    assert recalled.returncode == 0 and "decisions/structured-logging-json.md" in recalled.stdout
    assert recalled.stderr == ""
    encoded = run("encode", str(EXAMPLE), "--backend", "offline")
    assert encoded.returncode == 1
    assert encoded.stderr.splitlines() == [f"Error: memory directory {memdir} is not writable"]
    reindexed = run("reindex")
    assert reindexed.returncode == 1 and reindexed.stderr.startswith("Error: cannot write the search index")



def test_list_since_takes_a_date_today_yesterday_or_days_ago(memdir, run_cli):
    from datetime import date

    from dualtrace.cli import since_date

    day = date(2026, 12, 1)
    assert [since_date(v, today=day) for v in ("today", "Yesterday", "7d", "2026-11-29")] == [
        "2026-12-01", "2026-11-30", "2026-11-24", "2026-11-29"]
    seed(memdir)  # stored 2026-11-29
    shown = {since: "structured-logging-json" in run_cli(
        "list", "--memory-dir", str(memdir), "--since", since).output
        for since in ("2026-11-29", "2026-11-30")}
    assert shown == {"2026-11-29": True, "2026-11-30": False}
