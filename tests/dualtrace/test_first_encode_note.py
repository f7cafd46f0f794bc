"""The first encode on a machine compiles the secret rules (~5 s CPU; review 8 F17): a
person at a terminal is told, once; a pipe (a hook's worker, a script) is told nothing."""

from __future__ import annotations

import os
import pty
import subprocess
from pathlib import Path

from tests.conftest import DUALTRACE, EXAMPLES

NOTE = "preparing the secret-detection rules"


def _encode_at_a_terminal(tmp_path: Path, name: str, cache: Path) -> tuple[int, str]:
    master, slave = pty.openpty()
    env = {**os.environ, "KF_RULE_CACHE_DIR": str(cache)}
    proc = subprocess.Popen([str(DUALTRACE), "encode", "--memory-dir", str(tmp_path / name),
                             "--backend", "offline", str(EXAMPLES / "pilot-5-session-storage.jsonl")],
                            stdout=subprocess.PIPE, stderr=slave, env=env)
    os.close(slave)
    out, _ = proc.communicate(timeout=300)
    said = b""
    while True:
        try:
            chunk = os.read(master, 4096)
        except OSError:  # the other side is closed: all read
            break
        if not chunk:
            break
        said += chunk
    os.close(master)
    assert b"commit" in out, out
    return proc.returncode, said.decode("utf-8", "replace")


def test_the_first_encode_says_it_compiles_the_rules_and_the_next_does_not(tmp_path: Path):
    cache = tmp_path / "rules"
    rc, said = _encode_at_a_terminal(tmp_path, "one", cache)
    assert rc == 0 and NOTE in said, said
    assert any(cache.iterdir())
    rc, said = _encode_at_a_terminal(tmp_path, "two", cache)
    assert rc == 0 and NOTE not in said, said


def test_a_pipe_is_told_nothing(tmp_path: Path):
    """stderr a pipe, no rules compiled: only the error of a file that is no transcript
    (it fails after the check, before any compile)."""
    bad = tmp_path / "bad.jsonl"
    bad.write_bytes(b"\xff\xfe not a transcript")
    env = {**os.environ, "KF_RULE_CACHE_DIR": str(tmp_path / "empty-rules")}
    proc = subprocess.run([str(DUALTRACE), "encode", "--memory-dir", str(tmp_path / "m"),
                           "--backend", "offline", str(bad)],
                          capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 1 and proc.stderr.startswith("Error: "), proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and NOTE not in proc.stderr + proc.stdout
