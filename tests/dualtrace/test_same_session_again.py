"""The same session read again (a copy of its transcript, ``--force``) is not new evidence:
no "seen again" Timeline line, no commit, and its record keeps the memories it stored."""

from __future__ import annotations

import shutil

import git

from dualtrace.memfs.sessions import find_record, parse_record
from tests.conftest import EXAMPLES

PILOT = EXAMPLES / "pilot-1b-structured-logging.jsonl"
SID = "1b000000-0000-4000-8000-000000000002"


def _encode(run_cli, transcript, memdir, *extra):
    result = run_cli("encode", str(transcript), "--memory-dir", str(memdir), "--backend",
                     "offline", *extra)
    assert result.exit_code == 0, result.output
    return result.output


def _state(memdir):
    repo = git.Repo(memdir)
    files = {p.relative_to(memdir).as_posix(): p.read_text() for p in memdir.rglob("*.md")
             if ".git" not in p.parts}
    return repo.head.commit.hexsha, len(list(repo.iter_commits())), files


def test_a_copy_of_an_encoded_transcript_adds_nothing(run_cli, tmp_path, memdir):
    original = tmp_path / "a.jsonl"
    shutil.copy(PILOT, original)
    first = _encode(run_cli, original, memdir)
    assert "store" in first and "commit " in first
    before = _state(memdir)
    copy = tmp_path / "elsewhere" / "b.jsonl"
    copy.parent.mkdir()
    shutil.copy(PILOT, copy)
    again = _encode(run_cli, copy, memdir)
    assert "nothing new from this session" in again and "nothing to commit" in again
    assert "\ncommit " not in again
    assert _state(memdir) == before  # same HEAD, same number of commits, same files


def test_force_keeps_the_record_and_the_timeline(run_cli, tmp_path, memdir):
    _encode(run_cli, PILOT, memdir)
    rel = find_record(memdir, SID)
    assert rel is not None
    stored = parse_record((memdir / rel).read_text(), rel).memories
    assert stored and all(action == "stored" for _path, action in stored)
    before = _state(memdir)
    _encode(run_cli, PILOT, memdir, "--force")
    assert _state(memdir) == before
    assert parse_record((memdir / rel).read_text(), rel).memories == stored
