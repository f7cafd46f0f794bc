"""Fixtures for the host end-to-end tests: real host CLIs, temp HOMEs, fake model servers.

Their modules carry the ``e2e`` marker (``-m "not e2e"`` leaves them out).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.e2e.e2e_hosts import CLAUDE_CODE, CODEX, Sandbox, npm_host


@pytest.fixture(scope="session")
def claude_bin() -> Path:
    return npm_host(*CLAUDE_CODE)


@pytest.fixture(scope="session")
def codex_bin() -> Path:
    return npm_host(*CODEX)


@pytest.fixture
def sandbox(tmp_path, monkeypatch) -> Sandbox:
    box = Sandbox.create(tmp_path / "box")
    # This process reads the sandbox's state as the hooks see it (no DUALTRACE_HOME).
    monkeypatch.setenv("HOME", str(box.home))
    for key in ("DUALTRACE_HOME", "XDG_DATA_HOME", "XDG_CONFIG_HOME"):
        monkeypatch.delenv(key, raising=False)
    yield box
    try:
        box.wait_idle(timeout=30)
    except AssertionError:
        pass
