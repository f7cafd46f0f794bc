"""The hook's state-dir rule without platformdirs agrees with platformdirs (Linux)."""

from __future__ import annotations

import os
import subprocess
import sys

import platformdirs
import pytest

from dualtrace import paths

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux XDG rule")


@pytest.mark.parametrize("xdg,home", [
    (None, "/home/u"), ("", "/home/u"), ("/data/xdg", "/home/u"), ("/data/xdg/", "/home/u"),
    ("relative/xdg", "/home/u"), (" /padded", "/home/u"), (None, "/home/u/"),
    ("/data/xdg", "relative-home"), (None, "relative-home"), (None, None), ("", ""),
])
def test_same_state_dir_as_platformdirs(monkeypatch, xdg, home):
    # A context of its own: the conftest's real-home check runs before the fixture undoes.
    with monkeypatch.context() as env:
        env.delenv("DUALTRACE_HOME", raising=False)
        for name, value in (("XDG_DATA_HOME", xdg), ("HOME", home)):
            if value is None:
                env.delenv(name, raising=False)
            else:
                env.setenv(name, value)
        try:
            expected = os.path.realpath(platformdirs.user_data_dir("dualtrace", appauthor=False))
        except RuntimeError:  # newer platformdirs: no usable home at all
            pytest.skip("platformdirs cannot resolve a home here either")
        assert paths.state_dir() == expected


def test_the_hook_path_does_not_import_platformdirs(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "DUALTRACE_HOME"}
    env.update(HOME=str(tmp_path), XDG_DATA_HOME=str(tmp_path / "xdg"))
    code = ("import sys; from dualtrace import paths; print(paths.state_dir()); "
            "print('platformdirs' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                         check=True).stdout.split()
    assert out == [os.path.realpath(tmp_path / "xdg" / "dualtrace"), "False"]
