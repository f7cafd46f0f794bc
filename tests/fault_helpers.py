"""Shared pieces of the fault tests: a small real tmpfs, and filling it to the last byte."""

from __future__ import annotations

import shutil
import subprocess
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest


@contextmanager
def mounted_tmpfs(mnt: Path, size: str) -> Iterator[Path]:
    """A tmpfs of ``size`` (e.g. "2m") at ``mnt``; skips the test without mount rights
    (root, as on this project's CI machine). Lazily unmounted afterwards."""
    mnt.mkdir()
    if not shutil.which("mount") or subprocess.run(
            ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(mnt)],
            capture_output=True).returncode != 0:
        pytest.skip("cannot mount a tmpfs here (not root)")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], capture_output=True)


def fill(mnt: Path) -> Path:
    """Use every free byte of the filesystem; returns the filler to delete."""
    filler = mnt / f"filler-{uuid.uuid4().hex}"
    with open(filler, "wb", buffering=0) as fh:
        for chunk in (65536, 1):
            try:
                while True:
                    fh.write(b"\0" * chunk)
            except OSError:
                pass
    return filler
