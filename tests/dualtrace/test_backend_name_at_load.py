"""A misspelt backend name (``backend = "ofline"``) is an error when the config loads.

Before, only an encode found it ("unknown backend"); `status`, `list`, `recall`, the
hooks and the rest ran as if nothing were wrong, and a worker failed each session
later. Now every command prints one ``Error:`` line naming the file, the nearest
name and the valid ones, exit 1; the hook still exits 0, prints nothing and logs it.
Real processes, real files.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import EXAMPLES, run_dualtrace

PILOT = EXAMPLES / "pilot-1b-structured-logging.jsonl"


def _error(value: str, path: Path, near: str | None) -> str:
    hint = f" (did you mean {near!r}?)" if near else ""
    return (f"Error: unknown backend {value!r} in {path}{hint}; choose one of auto, anthropic, "
            "claude, offline\n")


def test_every_command_names_a_misspelt_backend_in_the_user_config(tmp_path, state_dir):
    project = tmp_path / "proj"
    project.mkdir()
    subprocess.run(["git", "init", "-q", str(project)], check=True)
    run_dualtrace("encode", str(PILOT), "--backend", "offline", cwd=project)
    path = state_dir / "config.toml"
    path.write_text('backend = "ofline"\n')
    for args in (["status"], ["list"], ["recall", "why JSON logging"], ["log"], ["sessions"],
                 ["reindex"], ["explain", "1b000000"], ["encode", str(PILOT)]):
        proc = run_dualtrace(*args, cwd=project, ok=False)
        assert proc.returncode == 1, (args, proc.stdout, proc.stderr)
        assert proc.stderr == _error("ofline", path, "offline"), (args, proc.stderr)


def test_a_misspelt_backend_in_the_project_file_is_named_with_that_file(tmp_path):
    project = tmp_path / "proj"
    project.mkdir()
    (project / "dualtrace.toml").write_text('backend = "antropic"\n')
    proc = run_dualtrace("status", cwd=project, ok=False)
    assert (proc.returncode, proc.stdout) == (1, "")
    assert proc.stderr == _error("antropic", project / "dualtrace.toml", "anthropic")


@pytest.mark.parametrize("value", ['"auto"', '"offline"', '"anthropic"', '"claude"'])
def test_every_registered_backend_name_loads(state_dir, value):
    from dualtrace import config
    from dualtrace.encoder.backends import BACKENDS

    assert BACKENDS is config.BACKENDS  # one table: the encoder's registry is config's
    (state_dir / "config.toml").write_text(f"backend = {value}\n")
    assert config.load_settings(None).backend == value.strip('"')


def test_a_backend_that_is_not_a_name_is_an_error(state_dir):
    from dualtrace import config
    from dualtrace.errors import DualtraceError

    (state_dir / "config.toml").write_text("backend = 1\n")
    with pytest.raises(DualtraceError, match=r"unknown backend 1 in .*; choose one of auto,"):
        config.load_settings(None)


def test_the_hooks_exit_0_and_log_a_misspelt_backend(tmp_path, state_dir):
    project = tmp_path / "proj"
    project.mkdir()
    subprocess.run(["git", "init", "-q", str(project)], check=True)
    path = state_dir / "config.toml"
    path.write_text('backend = "ofline"\n')
    payload = {"session_id": "s1", "cwd": str(project), "hook_event_name": "SessionStart",
               "source": "startup", "transcript_path": str(project / "t.jsonl")}
    proc = subprocess.run([sys.executable, "-m", "dualtrace", "hook", "session-start",
                           "--host", "claude-code"], input=json.dumps(payload),
                          capture_output=True, text=True, timeout=60)
    assert (proc.returncode, proc.stdout, proc.stderr) == (0, "", "")
    log = (state_dir / "logs" / "hook.log").read_text().splitlines()
    assert log[-1].endswith("session-start: DualtraceError: " + _error("ofline", path, "offline")
                            .removeprefix("Error: ").rstrip("\n")), log
