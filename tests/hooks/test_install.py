"""`dualtrace install` / `uninstall` as a real process on real settings files."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from dualtrace.hooks import install as inst
from tests.conftest import REPO_ROOT

PY = sys.executable


def cli(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([PY, "-m", "dualtrace.cli", *args], capture_output=True, text=True,
                          cwd=cwd, env=dict(os.environ))


OTHERS = {
    "model": "opus",
    "permissions": {"allow": ["Bash(npm test)"]},
    "hooks": {
        "Stop": [{"hooks": [{"type": "command", "command": "notify-send done", "timeout": 3}]}],
        "PreToolUse": [{"matcher": "Bash",
                        "hooks": [{"type": "command", "command": "/opt/guard.sh"}]}],
    },
}


@pytest.fixture
def project(tmp_path):
    root = tmp_path / "proj"
    (root / ".git").mkdir(parents=True)
    return root


def test_install_merges_next_to_other_hooks_and_uninstall_restores(project):
    settings = project / ".claude" / "settings.json"
    settings.parent.mkdir()
    original = json.dumps(OTHERS, indent=4) + "\n"
    settings.write_text(original)
    proc = cli("install", "--scope", "project", cwd=project)
    assert proc.returncode == 0, proc.stderr
    assert "added Stop" in proc.stdout and "backup" in proc.stdout
    data = json.loads(settings.read_text())
    assert data["model"] == "opus" and data["permissions"] == OTHERS["permissions"]
    assert data["hooks"]["PreToolUse"] == OTHERS["hooks"]["PreToolUse"]
    stop = data["hooks"]["Stop"]
    assert stop[0] == OTHERS["hooks"]["Stop"][0]  # theirs first, untouched
    ours = stop[1]["hooks"][0]
    # Project scope is shared with teammates: the bare command on their PATH (issue 15).
    assert ours["command"] == inst.in_background("dualtrace hook stop") and ours["timeout"] == 10
    assert "note: project scope is shared" in proc.stdout
    assert data["hooks"]["SessionStart"][0]["matcher"] == "startup|resume|clear|compact"
    assert settings.read_text().splitlines()[1].startswith("    \"")  # indent kept
    assert inst.backup_path(settings).read_text() == original
    # Idempotent: a second install writes nothing.
    before = settings.read_text()
    mtime = settings.stat().st_mtime_ns
    proc = cli("install", "--scope", "project", cwd=project)
    assert proc.returncode == 0 and "nothing changed" in proc.stdout
    assert settings.read_text() == before and settings.stat().st_mtime_ns == mtime
    # Uninstall: byte-for-byte the previous content.
    proc = cli("uninstall", "--scope", "project", cwd=project)
    assert proc.returncode == 0 and "removed Stop" in proc.stdout
    assert settings.read_text() == original


def test_install_into_missing_file_and_uninstall_deletes_it(project):
    settings = project / ".claude" / "settings.local.json"
    proc = cli("install", "--scope", "local", cwd=project)
    assert proc.returncode == 0, proc.stderr
    data = json.loads(settings.read_text())
    assert set(data["hooks"]) == {"Stop", "StopFailure", "SessionEnd", "SessionStart",
                                  "UserPromptSubmit", "PreCompact"}
    proc = cli("uninstall", "--scope", "local", cwd=project)
    assert proc.returncode == 0
    assert not settings.exists()


def test_dry_run_writes_nothing(project):
    proc = cli("install", "--scope", "project", "--dry-run", cwd=project)
    assert proc.returncode == 0 and "dry run" in proc.stdout and "added Stop" in proc.stdout
    assert not (project / ".claude").exists()


def test_user_scope_uses_home_and_keeps_other_tool_json(tmp_path):
    settings = Path(os.environ["HOME"]) / ".claude" / "settings.json"
    settings.parent.mkdir(parents=True)
    other = {"theme": "dark", "env": {"FOO": "1"}, "statusLine": {"type": "command",
                                                                  "command": "x"}}
    settings.write_text(json.dumps(other, indent=2))  # no trailing newline
    assert cli("install").returncode == 0
    data = json.loads(settings.read_text())
    assert {k: data[k] for k in other} == other and "hooks" in data
    assert not settings.read_text().endswith("\n")
    assert cli("uninstall").returncode == 0
    assert settings.read_text() == json.dumps(other, indent=2)


def test_letta_timeouts_are_milliseconds_and_codex_session_end_within_its_cap(project):
    assert cli("install", "--agent", "letta", "--scope", "project", cwd=project).returncode == 0
    letta = json.loads((project / ".letta" / "settings.json").read_text())
    handler = letta["hooks"]["Stop"][0]["hooks"][0]
    assert handler["timeout"] == 10_000 and handler["command"].endswith("hook stop --host letta")
    assert "PostToolUse" in letta["hooks"]
    assert cli("install", "--agent", "codex", "--scope", "project", cwd=project).returncode == 0
    codex = json.loads((project / ".codex" / "hooks.json").read_text())
    # Codex caps SessionEnd hooks at 3 s (docs/HOSTS.md): ours asks for no more.
    assert codex["hooks"]["SessionEnd"][0]["hooks"][0]["timeout"] == 3
    assert codex["hooks"]["SessionEnd"][0]["hooks"][0]["command"] == inst.in_background(
        "dualtrace hook session-end --host codex")
    assert codex["hooks"]["Stop"][0]["hooks"][0]["timeout"] == 10
    proc = cli("install", "--agent", "codex", "--scope", "local", cwd=project)
    assert proc.returncode == 1 and "Error:" in proc.stderr


def test_broken_settings_file_is_refused_untouched(project):
    settings = project / ".claude" / "settings.json"
    settings.parent.mkdir()
    settings.write_text("{not json")
    proc = cli("install", "--scope", "project", cwd=project)
    assert proc.returncode == 1 and "not valid JSON" in proc.stderr
    assert settings.read_text() == "{not json"


def test_moved_install_updates_our_entry_in_place():
    data, _ = inst.merge({}, inst.wanted_entries("claude-code", "/old/venv/bin/dualtrace"))
    again, changes = inst.merge(data, inst.wanted_entries("claude-code", "/new/bin/dualtrace"))
    assert changes and all(c.startswith("updated") for c in changes)
    assert len(again["hooks"]["Stop"]) == 1
    assert again["hooks"]["Stop"][0]["hooks"][0]["command"] == inst.in_background(
        "/new/bin/dualtrace hook stop")
    assert inst.remove(again)[0] == {}


@pytest.mark.parametrize("command,ours", [
    ("dualtrace hook stop", True),
    ("/home/u/.local/bin/dualtrace hook session-end", True),
    ('"C:/Program Files/dualtrace.exe" hook stop', True),
    ("/usr/bin/python3 -m dualtrace.cli hook stop", True),
    ("my-dualtrace-wrapper hook stop", False),
    ("echo dualtrace", False),
])
def test_recognises_only_our_handlers(command, ours):
    assert inst.is_ours({"type": "command", "command": command}) is ours


def test_plugin_files_point_at_the_hook_command():
    root = REPO_ROOT
    plugin = json.loads((root / ".claude-plugin" / "plugin.json").read_text())
    hooks = json.loads((root / "hooks" / "hooks.json").read_text())
    assert plugin["name"] == "dualtrace"
    commands = [h["command"] for groups in hooks["hooks"].values() for g in groups
                for h in g["hooks"]]
    assert all(inst.is_ours({"command": c}) for c in commands)
    assert {c.split()[-1] for c in commands} == {"stop", "session-end", "session-start",
                                                 "prompt", "pre-compact"}
    # Claude Code runs "async" hooks without waiting (portable, unlike install's shell
    # background); SessionEnd must finish before `claude -p` exits, and the two that
    # print context must be waited for.
    background = {event for event, groups in hooks["hooks"].items() for g in groups
                  for h in g["hooks"] if h.get("async") is True}
    assert background == {"Stop", "StopFailure", "PreCompact"}


def test_install_and_uninstall_keep_the_settings_files_permissions(tmp_path):
    """A private settings file stays private (install used to rewrite it with the umask's
    mode, e.g. 0644)."""
    settings = Path(os.environ["HOME"]) / ".claude" / "settings.json"
    settings.parent.mkdir(parents=True)
    settings.write_text(json.dumps({"theme": "dark"}))
    os.chmod(settings, 0o600)
    assert cli("install").returncode == 0
    assert "hooks" in json.loads(settings.read_text())
    assert settings.stat().st_mode & 0o777 == 0o600
    assert cli("uninstall").returncode == 0
    assert settings.stat().st_mode & 0o777 == 0o600


def test_installing_at_a_second_scope_warns_that_the_hooks_would_run_twice(project):
    """Claude Code runs every scope's hooks, and project scope's command (`dualtrace`)
    differs from the others' (this install's path), so the host cannot merge them."""
    first = cli("install", "--agent", "claude-code", "--scope", "project", "--no-mcp",
                cwd=project)
    assert first.returncode == 0, first.stderr
    assert "also installed" not in first.stdout
    second = cli("install", "--agent", "claude-code", "--scope", "local", "--no-mcp",
                 cwd=project)
    assert second.returncode == 0, second.stderr
    [warning] = [line for line in second.stdout.splitlines() if "also installed" in line]
    assert "at project scope" in warning and str(project / ".claude" / "settings.json") in warning
    assert "dualtrace uninstall --agent claude-code --scope project" in warning
    # Both files hold the hooks: the warning says so, it does not undo the user's choice.
    for name in ("settings.json", "settings.local.json"):
        assert inst.remove(json.loads((project / ".claude" / name).read_text()))[1]


def _files(root: Path) -> list[str]:
    return sorted(p.relative_to(root).as_posix() for p in root.rglob("*")
                  if p.is_file() and ".git" not in p.relative_to(root).parts)


def test_project_scope_backups_stay_out_of_the_repository(project, state_dir):
    """Review 7 F15: install + uninstall --scope project left settings.json.dualtrace.bak
    and settings.json.dualtrace-uninstall.bak in .claude/, untracked, for `git add -A`."""
    settings = project / ".claude" / "settings.json"
    settings.parent.mkdir()
    original = json.dumps(OTHERS, indent=4) + "\n"
    settings.write_text(original)
    (project / ".codex").mkdir()
    (project / ".codex" / "hooks.json").write_text('{"hooks": {}}\n')
    for agent in ("claude-code", "codex"):
        proc = cli("install", "--agent", agent, "--scope", "project", cwd=project)
        assert proc.returncode == 0, proc.stderr
    assert _files(project) == [".claude/settings.json", ".codex/config.toml",
                               ".codex/hooks.json", ".mcp.json"]
    backups = state_dir / "backups"
    kept = inst.backup_path(settings)
    assert kept.read_text() == original and backups in kept.parents
    undo = inst.backup_path(settings, inst.UNINSTALL_BACKUP_SUFFIX)
    assert f"backup: {undo}" in cli("uninstall", "--scope", "project", cwd=project).stdout
    assert cli("uninstall", "--agent", "codex", "--scope", "project",
               cwd=project).returncode == 0
    assert _files(project) == [".claude/settings.json", ".codex/hooks.json"]
    assert settings.read_text() == original
    assert undo.is_file() and kept.read_text() == original
    # A file outside any repository (user scope) keeps its backup beside it.
    mine = state_dir.parent / "home" / ".claude" / "settings.json"
    assert inst.backup_path(mine) == mine.with_name("settings.json" + inst.BACKUP_SUFFIX)


def test_uninstall_restores_from_a_backup_an_older_install_left_beside_the_file(project):
    settings = project / ".claude" / "settings.json"
    settings.parent.mkdir()
    original = json.dumps(OTHERS, indent=4) + "\n"
    settings.write_text(original)
    assert cli("install", "--scope", "project", "--no-mcp", cwd=project).returncode == 0
    legacy = settings.with_name("settings.json" + inst.BACKUP_SUFFIX)
    inst.backup_path(settings).rename(legacy)  # where versions before this one kept it
    assert cli("uninstall", "--scope", "project", cwd=project).returncode == 0
    assert settings.read_text() == original  # byte for byte, from the old backup
