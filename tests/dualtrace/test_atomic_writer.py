"""dualtrace.atomic: the one crash-safe writer (SIGKILL mid-write: tests/memfs/test_store.py)."""

from __future__ import annotations

import json
import os
import stat

import pytest

from dualtrace import atomic


def _mode(path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


def test_a_new_file_is_private_and_its_folder_is_made(tmp_path):
    target = tmp_path / "a" / "b" / "job.json"
    atomic.write_json(target, {"k": "é"}, sort_keys=True)
    assert json.loads(target.read_text(encoding="utf-8")) == {"k": "é"}
    assert "é" in target.read_text(encoding="utf-8")  # ensure_ascii=False unless asked
    assert _mode(target) == 0o600
    assert os.listdir(target.parent) == ["job.json"]


def test_keep_mode_keeps_an_existing_files_permissions(tmp_path):
    target = tmp_path / "settings.json"
    target.write_text("{}")
    os.chmod(target, 0o640)
    atomic.write_text(target, '{"a": 1}', fsync=False, keep_mode=True)
    assert target.read_text() == '{"a": 1}' and _mode(target) == 0o640
    atomic.write_text(target, "{}")  # without keep_mode: private
    assert _mode(target) == 0o600


def test_keep_mode_gives_a_new_file_the_umask_mode(tmp_path):
    old = os.umask(0o022)
    try:
        atomic.write_text(tmp_path / "new.toml", "x = 1\n", keep_mode=True)
    finally:
        os.umask(old)
    assert _mode(tmp_path / "new.toml") == 0o644


def test_a_failed_replace_leaves_the_old_file_and_no_temp(tmp_path, monkeypatch):
    target = tmp_path / "memory.md"
    target.write_text("old")

    def refuse(src, dst):
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", refuse)
    with pytest.raises(OSError, match="disk full"):
        atomic.write_text(target, "new")
    assert target.read_text() == "old"
    assert os.listdir(tmp_path) == ["memory.md"]
