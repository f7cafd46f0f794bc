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


def test_encode_from_another_directory_uses_that_directorys_project(tmp_path):
    """The session ran in project B; `encode` runs in project A. Everything is A's:
    its dualtrace.toml (memory_dir), and the conventions file system/<A>/ (it used to
    be named after B while the memory dir and settings were A's)."""
    here = _project(tmp_path / "alpha-app", 'memory_dir = "team-memory"\n')
    there = _project(tmp_path / "beta-service")
    transcript = tmp_path / "session.jsonl"
    transcript.write_text("".join(json.dumps({"role": role, "content": text, "cwd": str(there)})
                                  + "\n" for role, text in [
        ("user", "From now on, our convention is that every API handler returns errors as "
                 "problem+json."),
        ("assistant", "Understood - problem+json for all handler errors from now on.")]))
    proc = subprocess.run([sys.executable, "-m", "dualtrace.cli", "encode", str(transcript),
                           "--backend", "offline", "--json"], cwd=here, capture_output=True,
                          text=True)
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    memdir = here / "team-memory"
    assert report["memory_dir"] == str(memdir.resolve()) and report["commit"]
    conventions = sorted(p.relative_to(memdir).as_posix()
                         for p in (memdir / "system").rglob("conventions.md"))
    assert conventions == ["system/alpha-app/conventions.md"]


def test_workspace_resolves_root_settings_memory_dir_and_name_together(tmp_path):
    root = _project(tmp_path / "My Repo", 'memory_dir = "../mem"\nmodel = "m-x"\n')
    (root / "src").mkdir()
    ws = config.workspace(root / "src")
    assert ws.root == root.resolve() and ws.project == "my-repo"
    assert ws.settings.model == "m-x" and ws.memory_dir == (tmp_path / "mem").resolve()
    explicit = config.workspace(root, memory_dir=tmp_path / "other")
    assert explicit.memory_dir == (tmp_path / "other").resolve()
