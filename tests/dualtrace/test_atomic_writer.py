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


# Files that may call os.replace themselves, and why (everything else writes through
# dualtrace.atomic): not a write of a file's bytes, or one the writer cannot stream.
OWN_REPLACE = {
    "dualtrace/atomic.py": "the writer",
    "dualtrace/logfile.py": "log rotation renames hook.log to hook.log.1",
    "hooks/letta.py": "adopts the agent-keyed transcript under the conversation's name",
    "memfs/archive.py": "moves memory files to archive/ and back",
    "memfs/index.py": "SQLite builds the index under a temp name; vectors are streamed",
}


def test_only_the_writer_replaces_files_everything_else_writes_through_it():
    from tests.conftest import package_files_spelling

    assert package_files_spelling("os.replace(") == sorted(OWN_REPLACE)


def test_job_files_and_start_texts_go_through_the_writer(tmp_path, monkeypatch):
    from dualtrace import queue, startctx

    calls: list[tuple[str, bool, bool | None]] = []
    real = atomic.write_bytes

    def spy(path, data, *, fsync=True, fsync_dir=None, keep_mode=False):
        calls.append((os.path.basename(path), fsync, fsync_dir))
        real(path, data, fsync=fsync, fsync_dir=fsync_dir, keep_mode=keep_mode)

    monkeypatch.setattr(atomic, "write_bytes", spy)
    queue.atomic_write_json(str(tmp_path / "job.json"), {"b": 1, "a": "é"})
    startctx.write(str(tmp_path), "k1", {"cwd": "/x", "text": "hi"})
    # Job files: flushed, the folder not (one fsync per hook); start texts: not flushed.
    assert calls == [("job.json", True, False), ("k1.json", False, None)]
    assert (tmp_path / "job.json").read_text("utf-8") == '{"a": "é", "b": 1}'
    assert json.loads(open(startctx.cache_path(str(tmp_path), "k1"), encoding="utf-8").read()) \
        == {"cwd": "/x", "text": "hi"}
    assert sorted(os.listdir(tmp_path)) == ["job.json", startctx.DIR]
