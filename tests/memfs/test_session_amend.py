"""One commit per session, also when a session is encoded turn by turn (a resumed
``claude -p`` session fires SessionEnd after every turn): the new turns are amended
into the session's commit while it is HEAD and unpushed."""

from __future__ import annotations

import subprocess
from pathlib import Path

from dualtrace.pipeline import encode_session
from tests.conftest import git_out as git
from tests.hook_helpers import append_turn


def session_commits(repo: Path) -> list[str]:
    return [s for s in git(repo, "log", "--format=%s").splitlines()
            if not s.startswith("mem: init")]


def encode_turn(transcript: Path, session: str, cwd: Path, turn: int, memdir: Path):
    append_turn(transcript, session, str(cwd), turn)
    report = encode_session(transcript, memory_dir=memdir, backend="offline")
    assert report.commit, report.to_dict()
    return report


def test_turns_encoded_one_by_one_end_in_one_commit(tmp_path, memdir):
    transcript = tmp_path / "s1.jsonl"
    first = encode_turn(transcript, "s1", tmp_path, 0, memdir)
    second = encode_turn(transcript, "s1", tmp_path, 1, memdir)
    assert session_commits(memdir) == [git(memdir, "log", "-1", "--format=%s").strip()]
    body = git(memdir, "log", "-1", "--format=%B")
    assert body.count("Dualtrace-Session: s1") == 1
    assert body.count("Dualtrace-Backend: offline") == 1
    key_ranges = [line for line in body.splitlines() if line.startswith("Dualtrace-Range:")]
    assert [r.split()[-1] for r in key_ranges] == [f"0-{first.cursor[1]}",
                                                  f"{first.cursor[1]}-{second.cursor[1]}"]
    ops = [line for line in body.splitlines()[1:] if line.startswith("mem: ")]
    assert len(ops) == len(first.operations) + len(second.operations) >= 2
    # Both turns' files are in that one commit.
    files = git(memdir, "show", "--name-only", "--format=", "HEAD").split()
    assert any("structured" in f or "json" in f for f in files), files
    assert any("auth" in f or "race" in f or "401" in f for f in files), files


def test_another_session_or_a_push_in_between_means_a_new_commit(tmp_path, memdir):
    t1, t2 = tmp_path / "s1.jsonl", tmp_path / "s2.jsonl"
    encode_turn(t1, "s1", tmp_path, 0, memdir)
    encode_turn(t2, "s2", tmp_path, 1, memdir)
    encode_turn(t1, "s1", tmp_path, 2, memdir)  # s2's commit is HEAD: s1 cannot amend
    assert len(session_commits(memdir)) == 3

    remote = tmp_path / "remote.git"
    subprocess.run(["git", "init", "-q", "--bare", str(remote)], check=True)
    git(memdir, "remote", "add", "origin", str(remote))
    git(memdir, "push", "-q", "origin", "HEAD:refs/heads/main")
    git(memdir, "fetch", "-q", "origin")
    encode_turn(t1, "s1", tmp_path, 3, memdir)  # HEAD was pushed: never rewritten
    assert len(session_commits(memdir)) == 4
    assert git(memdir, "branch", "-r", "--contains", "HEAD~1").strip()
