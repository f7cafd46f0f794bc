"""The CLI resolves its Workspace once per command, at one place (cli.workspace_for)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from dualtrace import config
from tests.conftest import EXAMPLES


def _git(*args: str, cwd: Path) -> None:
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True)


@pytest.fixture
def linked_worktree(tmp_path, run_cli):
    """A project whose dualtrace.toml names its memory dir, one encoded session in it,
    and a subdirectory of a linked worktree of that project to run commands from."""
    main = tmp_path / "shop"
    main.mkdir()
    _git("init", "-q", "-b", "main", cwd=main)
    (main / "dualtrace.toml").write_text('memory_dir = "../shop-memory"\n')
    _git("add", ".", cwd=main)
    _git("-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-qm", "init", cwd=main)
    _git("worktree", "add", "-q", str(tmp_path / "shop-feature"), cwd=main)
    sub = tmp_path / "shop-feature" / "src"
    sub.mkdir()
    transcript = EXAMPLES / "pilot-5-session-storage.jsonl"
    result = run_cli("encode", str(transcript), "--backend", "offline", cwd=sub)
    assert result.exit_code == 0, result.output
    return sub, (tmp_path / "shop-memory").resolve()


@pytest.mark.parametrize("args", [
    ["status"], ["list"], ["log"], ["sessions"], ["recall", "why", "retry"], ["reindex"],
    ["digest", str(EXAMPLES / "pilot-5-session-storage.jsonl")],
])
def test_each_command_resolves_the_project_and_settings_once(linked_worktree, run_cli,
                                                              monkeypatch, args):
    sub, memdir = linked_worktree
    calls = {"project_root": 0, "load_settings": 0}
    for name in calls:
        real = getattr(config, name)

        def counted(*a, _real=real, _name=name, **kw):
            calls[_name] += 1
            return _real(*a, **kw)

        monkeypatch.setattr(config, name, counted)
    result = run_cli(*args, cwd=sub)
    assert result.exit_code == 0, result.output
    assert calls == {"project_root": 1, "load_settings": 1}
    if args[0] in ("status", "reindex"):
        # The main worktree's dualtrace.toml named the memory dir (one rule for the
        # project: a linked worktree's subdirectory is the main worktree's project).
        assert str(memdir) in result.output


def test_show_and_status_agree_on_the_project(linked_worktree, run_cli):
    sub, memdir = linked_worktree
    status = run_cli("status", cwd=sub)
    assert f"memory dir: {memdir}" in status.output
    assert "project:    shop\n" in status.output
    listed = run_cli("list", "--json", cwd=sub)
    import json

    rows = json.loads(listed.output)
    assert rows, "the encoded example stored nothing"
    shown = run_cli("show", rows[0]["anchor"], cwd=sub)
    assert shown.exit_code == 0 and f"==> {rows[0]['path']}" in shown.output
