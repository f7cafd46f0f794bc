"""Backend choice is explicit (issue 15, item 4).

A key in the environment is not consent: ``auto`` is offline, a model backend runs
only when dualtrace's own config (or ``install --backend`` / ``encode --backend``)
names it. With a model backend in hooks, a failure falls back to offline. Real
processes, the real anthropic SDK against the local fake Messages API.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from dualtrace import config
from tests.conftest import EXAMPLES
from tests.fake_anthropic import FakeAnthropic, error
from tests.hook_helpers import append_turn, claude_payload, hook_env, run_hook, runs, wait_drained

__all__ = ["hook_env"]  # the fixture, shared with the other hook tests

TRANSCRIPT = EXAMPLES / "pilot-1b-structured-logging.jsonl"


@pytest.fixture
def api():
    with FakeAnthropic() as server:
        yield server


def key_env(api: FakeAnthropic) -> dict[str, str]:
    """What Claude Code hands every hook: its own key and base URL."""
    return dict(os.environ, ANTHROPIC_API_KEY="sk-ant-person-key-for-claude-code",
                ANTHROPIC_BASE_URL=api.url)


def dualtrace(*args: str, env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "dualtrace.cli", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=120)


def backend_trailers(memdir: Path) -> list[str]:
    log = subprocess.run(["git", "log", "--format=%B"], cwd=memdir, capture_output=True,
                         text=True).stdout
    return [line for line in log.splitlines() if line.startswith("Dualtrace-Backend:")]


def test_a_key_in_the_environment_sends_nothing_to_a_model(api, tmp_path):
    mem = tmp_path / "mem"
    proc = dualtrace("encode", "--memory-dir", str(mem), str(TRANSCRIPT), env=key_env(api),
                     cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert api.requests == []
    assert backend_trailers(mem) == ["Dualtrace-Backend: offline"]


def test_hooks_with_a_failing_model_backend_fall_back_to_offline(api, hook_env, state_dir,
                                                                  tmp_path):
    api.default = error(401, "invalid x-api-key")
    (state_dir / "config.toml").write_text(f'backend = "anthropic"\nbase_url = "{api.url}"\n')
    project = tmp_path / "project"
    project.mkdir()
    transcript = tmp_path / "t" / "s-fallback.jsonl"
    transcript.parent.mkdir()
    append_turn(transcript, "s-fallback", str(project), 0)
    env = {**hook_env, "ANTHROPIC_API_KEY": "sk-ant-chosen-key"}
    end = claude_payload("SessionEnd", "s-fallback", transcript, str(project), reason="other")
    assert run_hook("session-end", end, env=env).returncode == 0
    wait_drained(state_dir)
    [record] = runs(state_dir)
    assert api.message_requests(), "the chosen model was not tried"
    assert record["error"] is None and record["commit"], record
    assert record["backend"] == "offline"
    assert backend_trailers(Path(hook_env["DUALTRACE_MEMORY_DIR"])) == ["Dualtrace-Backend: offline"]


def test_hooks_retry_instead_when_the_config_says_fallback_none(api, hook_env, state_dir,
                                                                 tmp_path):
    api.default = error(401, "invalid x-api-key")
    (state_dir / "config.toml").write_text(
        f'backend = "anthropic"\nbase_url = "{api.url}"\nfallback = "none"\n')
    transcript = tmp_path / "s-none.jsonl"
    append_turn(transcript, "s-none", str(tmp_path), 0)
    env = {**hook_env, "ANTHROPIC_API_KEY": "sk-ant-chosen-key", "DUALTRACE_WORKER_MAX_WAIT": "0"}
    end = claude_payload("SessionEnd", "s-none", transcript, str(tmp_path), reason="other")
    assert run_hook("session-end", end, env=env).returncode == 0
    from tests.hook_helpers import wait_until

    wait_until(lambda: runs(state_dir), what="a run record")
    record = runs(state_dir)[0]
    assert record["commit"] is None and "401" in record["error"]
    assert "dualtrace encode --backend offline" in record["error"]


def test_a_model_failure_by_hand_says_how_to_run_offline(api, tmp_path):
    api.default = error(401, "invalid x-api-key")
    (config.state_dir() / "config.toml").write_text(
        f'backend = "anthropic"\nbase_url = "{api.url}"\n')
    mem = tmp_path / "mem"
    proc = dualtrace("encode", "--memory-dir", str(mem), str(TRANSCRIPT), env=key_env(api),
                     cwd=tmp_path)
    assert proc.returncode == 1
    [line] = proc.stderr.splitlines()
    assert line.startswith("Error: ") and "401" in line
    # The exact command to run instead: the same transcript into the same memory dir.
    assert f"dualtrace encode --backend offline {TRANSCRIPT} --memory-dir {mem.resolve()}" in line
    assert not (mem / "decisions").exists()


def test_install_backend_saves_the_choice_and_says_what_leaves(tmp_path):
    env = dict(os.environ)
    proc = dualtrace("install", "--agent", "claude-code", env=env, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "backend offline: nothing leaves this machine" in proc.stdout
    cfg = config.state_dir() / "config.toml"
    assert not cfg.exists()  # no --backend: the config is not touched

    cfg.write_text('# mine\ndebounce_minutes = 3\n\n[extra]\nnote = "kept"\n')
    proc = dualtrace("install", "--agent", "claude-code", "--backend", "anthropic", env=env,
                     cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    [line] = [x for x in proc.stdout.splitlines() if x.startswith("backend anthropic:")]
    assert "Anthropic API (https://api.anthropic.com)" in line and "ANTHROPIC_API_KEY" in line
    assert config.load_settings().backend == "anthropic"
    assert cfg.read_text().startswith("# mine\ndebounce_minutes = 3\n")
    assert 'note = "kept"' in cfg.read_text()

    proc = dualtrace("install", "--agent", "claude-code", "--backend", "offline", env=env,
                     cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert config.load_settings().backend == "offline"
    assert cfg.read_text().count("backend =") == 1


def test_set_user_setting_edits_the_dualtrace_table_in_place():
    cfg = config.state_dir() / "config.toml"
    cfg.parent.mkdir(parents=True, exist_ok=True)
    cfg.write_text('[dualtrace]\nbackend = "claude"  # was\nmodel = "m"\n')
    config.set_user_setting("backend", "offline")
    assert cfg.read_text() == '[dualtrace]\nbackend = "offline"\nmodel = "m"\n'
    assert config.load_settings().backend == "offline"
