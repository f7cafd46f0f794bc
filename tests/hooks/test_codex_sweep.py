"""The Codex session-start sweep: which rollouts are a project's, and whose they are."""

from __future__ import annotations

import json
from pathlib import Path

import zstandard

from dualtrace.hooks import codex

SID = "01a2309a-cbb2-7dc0-a77e-500efd9ce0a0"


def rollout(home: Path, name: str, cwd: Path, compress: bool = False) -> Path:
    path = home / "sessions" / "2026" / "12" / "01" / name
    path.parent.mkdir(parents=True, exist_ok=True)
    line = json.dumps({"type": "session_meta", "payload": {"id": SID, "cwd": str(cwd)}}) + "\n"
    if compress:
        path = path.with_name(path.name + ".zst")
        path.write_bytes(zstandard.ZstdCompressor().compress(line.encode()))
    else:
        path.write_text(line)
    return path


def test_session_of_reads_the_thread_id_from_plain_and_compressed_names():
    assert codex.session_of(f"/x/rollout-2026-12-01T07-55-06-{SID}.jsonl") == SID
    assert codex.session_of(f"/x/rollout-2026-12-01T07-55-06-{SID}.jsonl.zst") == SID


def test_siblings_are_this_projects_rollouts_compressed_ones_included(tmp_path, monkeypatch):
    home = tmp_path / "codex"
    monkeypatch.setenv("CODEX_HOME", str(home))
    project, other = tmp_path / "project", tmp_path / "other"
    project.mkdir()
    other.mkdir()
    current = rollout(home, f"rollout-2026-12-01T09-00-00-{SID}.jsonl", project)
    old = rollout(home, "rollout-2026-11-01T09-00-00-11111111-2222-3333-4444-555555555555.jsonl",
                  project, compress=True)
    rollout(home, "rollout-2026-11-02T09-00-00-66666666-2222-3333-4444-555555555555.jsonl", other)
    assert sorted(codex.sibling_transcripts(str(current))) == sorted([str(current), str(old)])
