"""One Workspace per command: project root, settings, memory dir and project name by one rule."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from dualtrace import config


def _project(path: Path, toml: str = "") -> Path:
    path.mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(path)], check=True)
    if toml:
        (path / "dualtrace.toml").write_text(toml)
    return path


def _session(path: Path, cwd: str) -> Path:
    path.write_text("".join(json.dumps({"role": role, "content": text, "cwd": cwd}) + "\n"
                            for role, text in [
        ("user", "From now on, our convention is that every API handler returns errors as "
                 "problem+json."),
        ("assistant", "Understood - problem+json for all handler errors from now on.")]))
    return path


def _encode(transcript: Path, cwd: Path) -> dict:
    proc = subprocess.run([sys.executable, "-m", "dualtrace.cli", "encode", str(transcript),
                           "--backend", "offline", "--json"], cwd=cwd, capture_output=True,
                          text=True)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def _conventions(memdir: Path) -> list[str]:
    return sorted(p.relative_to(memdir).as_posix()
                  for p in (memdir / "system").rglob("conventions.md"))


def test_encode_by_hand_files_the_session_under_the_project_it_ran_in(tmp_path):
    """The session ran in project B; `encode` runs in project A. Everything is B's, as
    when B's own hook had started the job: B's dualtrace.toml (memory_dir) and the
    conventions file system/<B>/. Before, A's memory got B's decisions, and earlier
    still the memory dir and settings were A's while the conventions file was B's."""
    here = _project(tmp_path / "alpha-app", 'memory_dir = "alpha-memory"\n')
    there = _project(tmp_path / "beta-service", 'memory_dir = "beta-memory"\n')
    report = _encode(_session(tmp_path / "session.jsonl", str(there)), here)
    memdir = there / "beta-memory"
    assert report["memory_dir"] == str(memdir.resolve()) and report["commit"]
    assert _conventions(memdir) == ["system/beta-service/conventions.md"]
    assert not (here / "alpha-memory").exists()


def test_encode_by_hand_of_a_session_from_elsewhere_uses_this_directorys_project(tmp_path):
    """A transcript whose directory does not exist here (copied from another machine,
    the shipped examples): the current directory's project, settings and name."""
    here = _project(tmp_path / "alpha-app", 'memory_dir = "team-memory"\n')
    report = _encode(_session(tmp_path / "session.jsonl", "/nonexistent/beta-service"), here)
    memdir = here / "team-memory"
    assert report["memory_dir"] == str(memdir.resolve()) and report["commit"]
    assert _conventions(memdir) == ["system/alpha-app/conventions.md"]


def test_workspace_resolves_root_settings_memory_dir_and_name_together(tmp_path):
    root = _project(tmp_path / "My Repo", 'memory_dir = "../mem"\nmodel = "m-x"\n')
    (root / "src").mkdir()
    ws = config.workspace(root / "src")
    assert ws.root == root.resolve() and ws.project == "my-repo"
    assert ws.settings.model == "m-x" and ws.memory_dir == (tmp_path / "mem").resolve()
    explicit = config.workspace(root, memory_dir=tmp_path / "other")
    assert explicit.memory_dir == (tmp_path / "other").resolve()
