"""What a new user of main found (session 5 review), each pinned by a test that failed
before the fix: status and list count the same memories; explain says a candidate the
session stored was stored; a config key nobody knows is named (with the nearest known
one) when the config is loaded; a config that does not load is one ``Error:`` line for
every command and a log line for the hook, which still exits 0.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import EXAMPLES, run_dualtrace

PILOT = EXAMPLES / "pilot-1b-structured-logging.jsonl"


def _encode(memdir: Path) -> None:
    run_dualtrace("encode", str(PILOT), "--memory-dir", str(memdir), "--backend", "offline")


def test_status_counts_the_memories_list_shows_and_says_what_it_counts(memdir, run_cli):
    _encode(memdir)  # one decision, FULL: a fact and its moment
    human = memdir / "system" / "human.md"
    human.parent.mkdir(exist_ok=True)
    human.write_text("---\ndescription: The user's preferences.\n---\n\n- Prefers tabs\n"
                     "- Runs ruff before committing\n")
    listed = run_cli("list", "--memory-dir", str(memdir))
    assert listed.exit_code == 0, listed.output
    rows = [ln for ln in listed.output.splitlines() if ln.startswith("decision ")]
    assert len(rows) == 1
    assert "(1 memory, +1 moment, +2 preference bullets, as `dualtrace status` counts them;" \
        in listed.output
    status = run_cli("status", "--memory-dir", str(memdir))
    assert status.exit_code == 0, status.output
    # Before: "memories:   2" (the scene counted as a memory) beside list's 1.
    assert "memories:   1 (facts, the rows of `dualtrace list`)\n  decision    1\n" in status.output
    assert "moments:    1 (scenes: the episode a FULL fact was learned in)" in status.output
    assert "bullets:    2 (preference 2)" in status.output
    assert "scene" not in status.output.split("moments:")[0]
    checked = run_cli("status", "--check", "--memory-dir", str(memdir))
    assert "checked:    every file parses (1 facts, 1 moments)" in checked.output


@pytest.mark.parametrize("by", ["path", "id"])
def test_explain_says_a_stored_candidate_was_stored_by_the_session(memdir, run_cli, by):
    _encode(memdir)
    sha = subprocess.run(["git", "-C", str(memdir), "rev-parse", "--short=10", "HEAD"],
                         capture_output=True, text=True, check=True).stdout.strip()
    target = str(PILOT) if by == "path" else "1b000000"
    result = run_cli("explain", target, "--memory-dir", str(memdir))
    assert result.exit_code == 0, result.output
    # Before, by path: "committed: nothing for this session" (the path was matched
    # against session ids); by either: "skip ... nothing new from this session".
    assert f"  {sha}  offline" in result.output
    assert "committed: nothing" not in result.output
    line = next(ln for ln in result.output.splitlines() if "decisions/json-structured-logging.md" in ln)
    # Since session 6 the re-run reads the memory before the commit: the store itself.
    assert re.search(r"\(12\)\s+store\s+decisions/json-structured-logging\.md", line), line
    assert "skip" not in result.output and "nothing new" not in result.output
    as_json = json.loads(run_cli("explain", target, "--memory-dir", str(memdir), "--json").output)
    assert [op["action"] for op in as_json["report"]["operations"]] == ["store"]


def test_explain_still_says_skip_for_a_memory_the_session_did_not_store(memdir, run_cli):
    """Only what this session stored is relabelled: another session's skip stays a skip."""
    from dualtrace import config
    from dualtrace.explain import Explanation, _mark_already_stored

    _encode(memdir)
    got = Explanation("other-session", None, [], report={"operations": [
        {"action": "skip", "path": "decisions/json-structured-logging.md", "note": "nothing new"}]})
    _mark_already_stored(got, config.workspace(memory_dir=memdir))
    assert got.report["operations"][0]["action"] == "skip"


def _user_config(state_dir: Path, text: str) -> Path:
    path = state_dir / "config.toml"
    path.write_text(text)
    return path


def test_an_unknown_key_is_named_with_the_nearest_setting_when_the_config_loads(tmp_path, state_dir):
    from dualtrace import config

    path = _user_config(state_dir, 'backnd = "offline"\n[dualtrace]\ndigest_budgett = 3\n'
                                   "[extra]\napi_retrys = 2\nprompt_budget = 6000\n")
    project = tmp_path / "p"
    project.mkdir()
    (project / "dualtrace.toml").write_text("zzz_nothing_like_it = 1\n")
    settings = config.load_settings(project)
    assert settings.warnings == (
        f"{path}: unknown setting 'api_retrys' (did you mean 'api_retries'?); it is ignored",
        f"{path}: unknown setting 'backnd' (did you mean 'backend'?); it is ignored",
        f"{path}: unknown setting 'digest_budgett' (did you mean 'digest_budget'?); it is ignored",
        f"{project / 'dualtrace.toml'}: unknown setting 'zzz_nothing_like_it'; it is ignored",
    )
    assert settings.prompt_budget == 6000 and settings.backend == "auto"  # nothing applied
    assert settings.extra["backnd"] == "offline"  # kept, as before


def test_a_known_key_with_a_mistyped_mode_is_an_error_at_load(state_dir):
    from dualtrace import config
    from dualtrace.errors import DualtraceError

    _user_config(state_dir, 'sync = "after_encode"\n')  # before: silently "off"
    with pytest.raises(DualtraceError, match="sync must be one of off, after-encode"):
        config.load_settings(None)


def test_every_command_warns_about_an_unknown_key_once_and_still_runs(memdir, state_dir):
    _encode(memdir)
    path = _user_config(state_dir, 'backnd = "offline"\n')
    warning = (f"Warning: {path}: unknown setting 'backnd' (did you mean 'backend'?); "
               "it is ignored\n")
    for args in (["status"], ["list"], ["recall", "why JSON logging"], ["log"],
                 ["explain", "1b000000"]):
        proc = run_dualtrace(*args, "--memory-dir", str(memdir))
        assert proc.stderr == warning, (args, proc.stderr)  # recall: the click-free path too


def _session_start(project: Path) -> subprocess.CompletedProcess[str]:
    payload = {"session_id": "s1", "cwd": str(project), "hook_event_name": "SessionStart",
               "source": "startup", "transcript_path": str(project / "t.jsonl")}
    return subprocess.run([sys.executable, "-m", "dualtrace", "hook", "session-start",
                           "--host", "claude-code"], input=json.dumps(payload),
                          capture_output=True, text=True, timeout=60)


def _project_with_memory(tmp_path: Path) -> Path:
    project = tmp_path / "proj"
    project.mkdir()
    subprocess.run(["git", "init", "-q", str(project)], check=True)
    run_dualtrace("encode", str(PILOT), "--backend", "offline", cwd=project)
    return project


def test_the_session_start_hook_logs_an_unknown_key(tmp_path, state_dir):
    project = _project_with_memory(tmp_path)
    path = _user_config(state_dir, 'backnd = "offline"\n')
    proc = _session_start(project)
    assert proc.returncode == 0 and proc.stderr == ""
    assert "<dualtrace-memory>" in proc.stdout  # a typo does not silence the hook
    log = (state_dir / "logs" / "hook.log").read_text()
    assert (f"settings: {path}: unknown setting 'backnd' (did you mean 'backend'?); "
            "it is ignored") in log


BROKEN = 'backend = "offline\n'  # an unclosed string


def test_a_config_that_does_not_load_is_one_error_line_for_every_command(tmp_path, state_dir):
    project = _project_with_memory(tmp_path)
    path = _user_config(state_dir, BROKEN)
    error = re.compile(rf"Error: cannot read {re.escape(str(path))}: .*line 1.*\n")
    claude = Path(os.environ["HOME"]) / ".claude" / "settings.json"
    for args in (["status"], ["list"], ["recall", "why JSON logging"], ["log"], ["sessions"],
                 ["retry"], ["install", "--agent", "claude-code", "--no-mcp"],
                 ["digest", str(PILOT)], ["encode", str(PILOT)]):
        proc = run_dualtrace(*args, cwd=project, ok=False)
        assert proc.returncode == 1, (args, proc.stdout, proc.stderr)
        assert error.fullmatch(proc.stderr), (args, proc.stderr)
    # Before: install wrote the hooks and only then failed on the config.
    assert not claude.exists()


def test_a_config_that_does_not_load_never_fails_the_hook_and_is_logged(tmp_path, state_dir):
    project = _project_with_memory(tmp_path)
    assert "<dualtrace-memory>" in _session_start(project).stdout  # the stored text, built
    path = _user_config(state_dir, BROKEN)
    proc = _session_start(project)
    assert proc.returncode == 0 and proc.stdout == "" and proc.stderr == ""
    log = (state_dir / "logs" / "hook.log").read_text().splitlines()
    assert re.search(rf"session-start: DualtraceError: cannot read {re.escape(str(path))}: .*line 1",
                     log[-1]), log


def test_explain_says_a_bullet_the_session_stored_was_stored(memdir, run_cli):
    """Review 5, finding 6: a preference bullet the session added came back as
    "SKIP ... system/human.md / already stored" under a commit that says it was stored."""
    preference = EXAMPLES / "pilot-1a-preference.jsonl"
    run_dualtrace("encode", str(preference), "--memory-dir", str(memdir), "--backend", "offline")
    result = run_cli("explain", str(preference), "--memory-dir", str(memdir))
    assert result.exit_code == 0, result.output
    line = next(ln for ln in result.output.splitlines() if "system/human.md" in ln)
    assert re.match(r"BULLET .*\s+bullet\s+system/human\.md", line), line
    assert "before this session's commit" in result.output  # session 6: run on <commit>^
    assert "already stored" not in result.output and " skip " not in result.output


@pytest.mark.parametrize("text", ['enabled = "false"\n', "mcp_warm = 0\n"])
def test_a_switch_that_is_not_a_boolean_is_an_error_at_load(state_dir, text):
    """Review 5, finding 3: enabled = "false" (a string) left dualtrace on."""
    from dualtrace import config
    from dualtrace.errors import DualtraceError

    _user_config(state_dir, text)
    with pytest.raises(DualtraceError, match=r"must be true or false \(no quotes\)"):
        config.load_settings(None)


def test_status_says_whether_the_hooks_are_on_and_what_turned_them_off(tmp_path, state_dir,
                                                                       run_cli, monkeypatch):
    """Review 5, finding 3: a disabled dualtrace's status looked exactly like an enabled one."""
    project = tmp_path / "proj"
    project.mkdir()
    subprocess.run(["git", "init", "-q", str(project)], check=True)
    # A fresh HOME has no hooks anywhere: status says so and what to run first (it said
    # "hooks: enabled" with nothing installed).
    none = ("hooks:      none installed: no session is recorded by itself; start with "
            "`dualtrace install --agent claude-code` (or codex, letta), or encode one by "
            "hand: `dualtrace encode TRANSCRIPT`\n")
    assert none in run_cli("status", cwd=project).output
    assert run_cli("install", "--agent", "claude-code", "--no-mcp", cwd=project).exit_code == 0
    assert run_cli("install", "--agent", "codex", "--scope", "project", "--no-mcp",
                   cwd=project).exit_code == 0
    on = ("hooks:      enabled: claude-code at user scope (~/.claude/settings.json)\n"
          f"            codex at project scope ({project / '.codex' / 'hooks.json'})\n")
    assert on in run_cli("status", cwd=project).output
    listed = on.split("enabled: ", 1)[1]
    user = _user_config(state_dir, "enabled = false\n")
    assert f"hooks:      disabled (enabled = false in {user}); installed: {listed}" \
        in run_cli("status", cwd=project).output
    (project / "dualtrace.toml").write_text("enabled = true\n")  # the project's word wins
    assert on in run_cli("status", cwd=project).output
    (project / "dualtrace.toml").write_text("[dualtrace]\nenabled = false\n")
    out = run_cli("status", cwd=project).output
    assert f"hooks:      disabled (enabled = false in {project / 'dualtrace.toml'}); installed: " \
        in out
    monkeypatch.setenv("DUALTRACE_DISABLE", "1")
    assert "hooks:      disabled (DUALTRACE_DISABLE is set); installed: claude-code at user" \
        in run_cli("status", cwd=project).output
    # Uninstalled everywhere: back to the first step; a plugin enabled in the project's
    # Claude Code settings counts as installed.
    monkeypatch.delenv("DUALTRACE_DISABLE")
    (project / "dualtrace.toml").unlink()
    (state_dir / "config.toml").unlink()
    assert run_cli("uninstall", "--agent", "claude-code", cwd=project).exit_code == 0
    assert run_cli("uninstall", "--agent", "codex", "--scope", "project",
                   cwd=project).exit_code == 0
    assert none in run_cli("status", cwd=project).output
    (project / ".claude").mkdir()
    (project / ".claude" / "settings.json").write_text(
        json.dumps({"enabledPlugins": {"dualtrace@dualtrace": True}}))
    assert ("hooks:      enabled: claude-code plugin (enabled in "
            f"{project / '.claude' / 'settings.json'})\n") in run_cli("status", cwd=project).output
