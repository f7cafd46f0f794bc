"""sync = "after-encode": the worker pushes each commit, backs off when offline."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from dualtrace import queue
from dualtrace.memfs.store import MemoryStore
from dualtrace.memfs.sync import add_remote
from tests import hook_helpers
from tests.conftest import EXAMPLES
from tests.hook_helpers import PY, claude_payload, run_hook, wait_drained

hook_env = hook_helpers.hook_env


def _remote_subjects(bare: Path) -> list[str]:
    out = subprocess.run(["git", "--git-dir", str(bare), "log", "--format=%s", "main"],
                         capture_output=True, text=True)
    return out.stdout.splitlines() if out.returncode == 0 else []


def _end_session(env: dict, tmp_path: Path, example: str) -> None:
    lines = (EXAMPLES / example).read_text().splitlines()
    session = json.loads(lines[0]).get("sessionId") or Path(example).stem
    transcript = tmp_path / "claude" / f"{session}.jsonl"
    transcript.parent.mkdir(exist_ok=True)
    transcript.write_text("\n".join(lines) + "\n")
    project = tmp_path / "shop-api"
    project.mkdir(exist_ok=True)
    proc = run_hook("session-end", claude_payload("SessionEnd", session, transcript,
                                                  str(project), reason="other"), env=env)
    assert proc.returncode == 0 and proc.stdout == b""   # the hook never waits for a sync


def _status(env: dict) -> str:
    proc = subprocess.run([PY, "-m", "dualtrace", "status"], capture_output=True, text=True,
                          env=env)
    assert proc.returncode == 0, proc.stderr
    return next(line for line in proc.stdout.splitlines() if line.startswith("sync:"))


def test_worker_syncs_after_each_commit_and_backs_off_offline(hook_env, state_dir, tmp_path):
    bare = tmp_path / "team.git"
    subprocess.run(["git", "init", "-q", "--bare", "-b", "main", str(bare)], check=True)
    memdir = Path(hook_env["DUALTRACE_MEMORY_DIR"])
    add_remote(MemoryStore(memdir), str(bare))
    assert "by hand" in _status(hook_env)
    (state_dir / "config.toml").write_text('sync = "after-encode"\n')
    assert "never synced" in _status(hook_env)

    _end_session(hook_env, tmp_path, "pilot-1b-structured-logging.jsonl")
    wait_drained(state_dir)
    assert any(s.startswith("mem: store decisions/") for s in _remote_subjects(bare))
    line = _status(hook_env)
    assert line.startswith("sync:       after each encode with origin; last ok"), line

    # Offline: the encode still commits; the sync job backs off and stays queued.
    subprocess.run(["git", "-C", str(memdir), "remote", "set-url", "origin",
                    str(tmp_path / "unreachable.git")], check=True)
    before = _remote_subjects(bare)
    _end_session(hook_env, tmp_path, "pilot-4-auth-401-session1.jsonl")
    _wait_offline(state_dir)
    jobs = [j for j in queue.list_jobs(str(state_dir)) if j.get("kind") == "sync"]
    assert len(jobs) == 1 and jobs[0]["status"] == "pending" and jobs[0]["attempts"] >= 2
    assert "cannot fetch" in jobs[0]["last_error"]
    assert jobs[0]["not_before"] > jobs[0]["updated_at"]     # backing off, not parked
    line = _status(hook_env)
    assert "OFFLINE" in line and "next try" in line, line
    assert _remote_subjects(bare) == before

    # Back online: `dualtrace retry` runs the queued sync now; the commit reaches the team.
    subprocess.run(["git", "-C", str(memdir), "remote", "set-url", "origin", str(bare)],
                   check=True)
    proc = subprocess.run([PY, "-m", "dualtrace", "retry"], capture_output=True, text=True,
                          env=hook_env)
    assert proc.returncode == 0 and "re-queued" in proc.stdout, proc.stdout + proc.stderr
    wait_drained(state_dir)
    assert any("incidents/" in s for s in _remote_subjects(bare))
    assert "last ok" in _status(hook_env) and "OFFLINE" not in _status(hook_env)
    assert [j for j in queue.list_jobs(str(state_dir)) if j.get("kind") == "sync"] == []


def _wait_offline(state: Path) -> None:
    """The worker gave up for now: the sync job failed at least twice and no worker runs."""
    hook_helpers.wait_until(
        lambda: any(j.get("kind") == "sync" and int(j.get("attempts") or 0) >= 2
                    and j.get("status") == "pending" for j in queue.list_jobs(str(state)))
        and not hook_helpers.worker_running(state), 60, what="sync job backing off")


def _project_remote(tmp_path: Path) -> Path:
    """A bare repository holding a project's code: not a dualtrace memory."""
    work = tmp_path / "project-code"
    subprocess.run(["git", "init", "-q", "-b", "main", str(work)], check=True)
    (work / "app").mkdir()
    (work / "app" / "main.py").write_text("print('hi')\n")
    subprocess.run(["git", "-C", str(work), "add", "-A"], check=True)
    subprocess.run(["git", "-C", str(work), "-c", "user.name=t", "-c", "user.email=t@t",
                    "commit", "-qm", "code"], check=True)
    bare = tmp_path / "project.git"
    subprocess.run(["git", "clone", "-q", "--bare", str(work), str(bare)], check=True)
    return bare


def _log(state: Path) -> str:
    return (state / "logs" / "worker.log").read_text()


def test_a_refused_sync_is_not_retried_and_status_says_what_to_run(hook_env, state_dir,
                                                                   tmp_path):
    """A remote that is not this memory is refused every time: the worker used to retry
    it forever (backing off up to an hour). It stops; status says why and what to run;
    after-encode syncs resume once a sync by hand works."""
    wrong = _project_remote(tmp_path)
    memdir = Path(hook_env["DUALTRACE_MEMORY_DIR"])
    add_remote(MemoryStore(memdir), str(wrong))
    (state_dir / "config.toml").write_text('sync = "after-encode"\n')
    _end_session(hook_env, tmp_path, "pilot-1b-structured-logging.jsonl")
    wait_drained(state_dir)
    assert [j for j in queue.list_jobs(str(state_dir)) if j.get("kind") == "sync"] == []
    assert "refused, not retried: origin/main is not a dualtrace memory repository" \
        in _log(state_dir)
    line = _status(hook_env)
    assert "REFUSED" in line and "not a dualtrace memory repository" in line, line
    assert line.endswith("not retried: fix that, then run `dualtrace sync`"), line
    assert _remote_subjects(wrong) == ["code"]  # nothing pushed
    # The next commit queues no sync that would be refused again.
    _end_session(hook_env, tmp_path, "pilot-4-auth-401-session1.jsonl")
    wait_drained(state_dir)
    assert "not queued, the last sync was refused" in _log(state_dir)
    assert _log(state_dir).count("refused, not retried") == 1
    # The person points the remote at the team's memory and syncs once by hand.
    team = tmp_path / "team.git"
    subprocess.run(["git", "init", "-q", "--bare", "-b", "main", str(team)], check=True)
    subprocess.run(["git", "-C", str(memdir), "remote", "set-url", "origin", str(team)],
                   check=True)
    proc = subprocess.run([PY, "-m", "dualtrace", "sync"], capture_output=True, text=True,
                          env=hook_env)
    assert proc.returncode == 0, proc.stderr
    assert "REFUSED" not in _status(hook_env) and "last ok" in _status(hook_env)
    before = len(_remote_subjects(team))
    _end_session(hook_env, tmp_path, "pilot-5-session-storage.jsonl")
    wait_drained(state_dir)
    assert len(_remote_subjects(team)) > before  # after-encode syncs again


def test_a_hand_encode_syncs_after_its_commit_too(hook_env, state_dir, tmp_path):
    """Review 7 F26: with sync = "after-encode", `dualtrace encode` by hand never synced
    ("never synced" in status); only the hooks' commits did."""
    team = tmp_path / "team.git"
    subprocess.run(["git", "init", "-q", "--bare", "-b", "main", str(team)], check=True)
    memdir = Path(hook_env["DUALTRACE_MEMORY_DIR"])
    add_remote(MemoryStore(memdir), str(team))
    (state_dir / "config.toml").write_text('sync = "after-encode"\n')
    proc = subprocess.run([PY, "-m", "dualtrace", "encode",
                           str(EXAMPLES / "pilot-1b-structured-logging.jsonl")],
                          capture_output=True, text=True, env=hook_env)
    assert proc.returncode == 0, proc.stderr
    assert "sync: queued (sync = \"after-encode\"); the background worker pushes" in proc.stdout
    wait_drained(state_dir)
    assert any(s.startswith("mem: store decisions/") for s in _remote_subjects(team))
    assert "last ok" in _status(hook_env)
    # sync = "off" (the default): a hand encode queues nothing.
    (state_dir / "config.toml").write_text('sync = "off"\n')
    proc = subprocess.run([PY, "-m", "dualtrace", "encode",
                           str(EXAMPLES / "pilot-4-auth-401-session1.jsonl")],
                          capture_output=True, text=True, env=hook_env)
    assert proc.returncode == 0 and "sync:" not in proc.stdout, proc.stdout


def test_remote_add_reads_the_remote_once(hook_env, state_dir, tmp_path):
    """Review 7 F26: a path that is no repository was added without a word. A local
    repository git cannot read is refused (nothing added); a URL that does not answer now
    is added with a warning (offline is allowed)."""
    memdir = Path(hook_env["DUALTRACE_MEMORY_DIR"])
    subprocess.run([PY, "-m", "dualtrace", "encode",
                    str(EXAMPLES / "pilot-1b-structured-logging.jsonl")],
                   capture_output=True, env=hook_env, check=True)
    broken = tmp_path / "broken.git"   # the shape of a bare repository, not a readable one
    for sub in ("objects", "refs"):
        (broken / sub).mkdir(parents=True)
    (broken / "HEAD").write_text("not a ref\n")
    proc = subprocess.run([PY, "-m", "dualtrace", "remote", "add", str(broken)],
                          capture_output=True, text=True, env=hook_env)
    assert proc.returncode == 1 and proc.stderr.startswith(
        f"Error: git cannot read the repository at {broken} ("), proc.stderr
    assert proc.stderr.strip().endswith("nothing was added") and proc.stderr.count("\n") == 1
    assert subprocess.run(["git", "-C", str(memdir), "remote"], capture_output=True,
                          text=True).stdout == ""
    # No network here: ssh fails at once (GIT_SSH_COMMAND=false) as it would offline.
    env = dict(hook_env, GIT_SSH_COMMAND="false")
    proc = subprocess.run([PY, "-m", "dualtrace", "remote", "add",
                           "ssh://git.example.com/team/memory.git"],
                          capture_output=True, text=True, env=env)
    assert proc.returncode == 0, proc.stderr
    assert "added remote origin ssh://git.example.com/team/memory.git" in proc.stdout
    assert "warning: git could not read ssh://git.example.com/team/memory.git just now (" \
        in proc.stdout
    good = tmp_path / "team.git"
    subprocess.run(["git", "init", "-q", "--bare", "-b", "main", str(good)], check=True)
    proc = subprocess.run([PY, "-m", "dualtrace", "remote", "add", str(good), "--name", "team"],
                          capture_output=True, text=True, env=hook_env)
    assert proc.returncode == 0 and "warning" not in proc.stdout + proc.stderr, proc.stdout
