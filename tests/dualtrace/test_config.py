from __future__ import annotations

import subprocess
from pathlib import Path

from dualtrace import config


def git(*args, cwd):
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True)


def test_state_dir_follows_env(state_dir):
    assert config.state_dir() == state_dir.resolve()


def test_memory_dir_precedence(tmp_path, monkeypatch):
    project = tmp_path / "proj"
    project.mkdir()
    default = config.resolve_memory_dir(None, cwd=project)
    assert default.parent == config.state_dir() / "memory"
    assert default.name.startswith("proj-") and len(default.name) == len("proj-") + 8
    (project / "dualtrace.toml").write_text('memory_dir = "../shared-mem"\n')
    assert config.resolve_memory_dir(None, cwd=project) == (tmp_path / "shared-mem").resolve()
    monkeypatch.setenv("DUALTRACE_MEMORY_DIR", str(tmp_path / "env-mem"))
    assert config.resolve_memory_dir(None, cwd=project) == (tmp_path / "env-mem").resolve()
    assert config.resolve_memory_dir(tmp_path / "opt", cwd=project) == (tmp_path / "opt").resolve()


def test_same_basename_different_projects_get_different_keys(tmp_path):
    a, b = tmp_path / "one" / "app", tmp_path / "two" / "app"
    a.mkdir(parents=True)
    b.mkdir(parents=True)
    assert config.project_key(a) != config.project_key(b)


def test_worktrees_share_the_main_worktree_identity(tmp_path):
    main = tmp_path / "repo"
    main.mkdir()
    git("init", "-q", "-b", "main", cwd=main)
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "--allow-empty", "-m", "x", cwd=main)
    git("worktree", "add", "-q", str(tmp_path / "wt"), "-b", "feature", cwd=main)
    (main / "sub").mkdir()
    assert config.project_root(tmp_path / "wt") == main.resolve()
    assert config.project_root(main / "sub") == main.resolve()
    assert config.resolve_memory_dir(None, cwd=tmp_path / "wt") == config.resolve_memory_dir(None, cwd=main)


def test_settings_merge_user_then_project(tmp_path, state_dir):
    (state_dir / "config.toml").write_text('model = "m-user"\nbackend = "offline"\nunknown_key = 1\n')
    project = tmp_path / "p"
    project.mkdir()
    (project / "dualtrace.toml").write_text('[dualtrace]\nmodel = "m-project"\nenabled = false\n')
    settings = config.load_settings(Path(project))
    assert settings.model == "m-project" and settings.backend == "offline"
    assert settings.enabled is False and config.is_disabled(settings)
    assert settings.extra["unknown_key"] == 1


def test_bad_toml_is_a_clear_error(tmp_path):
    import pytest

    from dualtrace.errors import DualtraceError

    (tmp_path / "dualtrace.toml").write_text("memory_dir = [unclosed\n")
    with pytest.raises(DualtraceError, match="cannot read"):
        config.load_settings(tmp_path)


def test_backend_tunables_are_typed_settings_and_an_extra_table_applies(tmp_path, state_dir):
    """`[extra]` used to be nested under Settings.extra["extra"] and silently ignored."""
    (state_dir / "config.toml").write_text(
        "api_retries = 2\nrequest_timeout_seconds = 5\n[extra]\nprompt_budget = 6000\n"
        "retry_base_seconds = 0.01\napi_retries = 9\n")
    settings = config.load_settings(None)
    assert settings.api_retries == 2  # the top-level key wins over the [extra] table
    assert settings.prompt_budget == 6000 and settings.retry_base_seconds == 0.01
    assert settings.request_timeout_seconds == 5.0
    assert isinstance(settings.request_timeout_seconds, float)
    assert settings.retry_max_seconds == 30.0 and "extra" not in settings.extra
    from dualtrace.encoder.backends.anthropic import AnthropicBackend

    backend = AnthropicBackend(settings)
    assert (backend.retries, backend.retry_base, backend.request_timeout) == (2, 0.01, 5.0)


def test_a_tunable_of_the_wrong_type_is_a_clear_error(tmp_path, state_dir):
    import pytest

    from dualtrace.errors import DualtraceError

    (state_dir / "config.toml").write_text('api_retries = "many"\n')
    with pytest.raises(DualtraceError, match="api_retries must be an integer"):
        config.load_settings(None)


def test_no_config_file_means_no_toml_parser_import(tmp_path, state_dir):
    """Most commands find no config file; the TOML parser (its regexes, ~2-3 ms of every
    command) is imported only when a file is there to parse."""
    import os
    import sys

    project = tmp_path / "p"
    project.mkdir()
    code = ("import sys; from pathlib import Path; from dualtrace import config; "
            "config.load_settings(Path(sys.argv[1])); print('tomllib' in sys.modules)")
    env = {**os.environ, "DUALTRACE_HOME": str(state_dir)}
    run = lambda: subprocess.run([sys.executable, "-c", code, str(project)], env=env,  # noqa: E731
                                 capture_output=True, text=True, check=True).stdout.strip()
    assert run() == "False"
    (project / "dualtrace.toml").write_text('model = "m-project"\n')
    assert run() == "True"
    assert config.load_settings(project).model == "m-project"
