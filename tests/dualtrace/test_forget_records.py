"""`dualtrace forget` and session records (issue 11): a retired memory's session record
still holds the session's own words, and recall can quote them. forget says so and how
to retire the record; a record (path or session id) can be forgotten, and ``--records``
retires a memory with its records in one commit. Real CLI processes, real git.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

from tests.conftest import EXAMPLES
from tests.conftest import git_out as git
from tests.conftest import run_dualtrace as run

PILOT = EXAMPLES / "pilot-1b-structured-logging.jsonl"
ANCHOR = "json-structured-logging"
QUESTION = "why did we switch to JSON structured logging"


def encoded(memdir: Path) -> str:
    run("encode", str(PILOT), "--memory-dir", str(memdir), "--backend", "offline")
    record = next((memdir / "sessions").rglob("*.md")).relative_to(memdir).as_posix()
    assert f"decisions/{ANCHOR}.md" in run("recall", QUESTION, "--memory-dir", str(memdir)).stdout
    quoted = run("recall", QUESTION, "--type", "session", "--memory-dir", str(memdir)).stdout
    assert f"Session record {record}" in quoted  # the episode, quotable on its own
    return record


def test_forgetting_a_memory_says_its_session_record_still_holds_the_words(tmp_path):
    memdir = tmp_path / "memory"
    record = encoded(memdir)
    out = run("forget", ANCHOR, "--yes", "--memory-dir", str(memdir)).stdout
    assert f"retired decisions/{ANCHOR}.md -> archive/decisions/{ANCHOR}.md" in out
    assert (f"note: the session record {record} still holds that session's own words, and "
            f"`dualtrace recall` can quote them; `dualtrace forget {record}` retires it too") in out
    assert (memdir / record).is_file()
    # What the note says is so: the record still answers; then forgetting it ends that.
    assert f"Session record {record}" in run("recall", QUESTION, "--type", "session",
                                             "--memory-dir", str(memdir)).stdout
    before = int(git(memdir, "rev-list", "--count", "HEAD"))
    gone = run("forget", record, "--yes", "--reason", "private", "--memory-dir", str(memdir)).stdout
    assert f"retired {record} -> archive/{record}" in gone and "note:" not in gone
    assert int(git(memdir, "rev-list", "--count", "HEAD")) == before + 1
    assert "Reason: private" in git(memdir, "log", "-1", "--format=%B")
    assert not (memdir / record).exists() and (memdir / "archive" / record).is_file()
    for args in (["--type", "session"], []):
        answer = run("recall", QUESTION, *args, "--memory-dir", str(memdir)).stdout
        assert record not in answer and "STATE C" in answer
    run("reindex", "--memory-dir", str(memdir))  # a full rebuild does not bring it back
    assert record not in run("recall", QUESTION, "--type", "session", "--memory-dir",
                             str(memdir)).stdout
    assert run("sessions", "--memory-dir", str(memdir)).stdout.startswith("No session records yet")


def test_forget_records_retires_the_memory_and_its_record_in_one_commit(tmp_path):
    memdir = tmp_path / "memory"
    record = encoded(memdir)
    before = int(git(memdir, "rev-list", "--count", "HEAD"))
    refused = run("forget", ANCHOR, "--records", "--memory-dir", str(memdir), ok=False)
    assert refused.returncode == 1 and record in refused.stdout  # the prompt names the record
    out = run("forget", ANCHOR, "--records", "--yes", "--memory-dir", str(memdir)).stdout
    assert f"retired {record} -> archive/{record}" in out and "note:" not in out
    assert int(git(memdir, "rev-list", "--count", "HEAD")) == before + 1
    moved = git(memdir, "show", "--name-status", "--format=", "HEAD")
    assert record in moved and f"decisions/{ANCHOR}.md" in moved
    answer = run("recall", QUESTION, "--memory-dir", str(memdir)).stdout
    assert "STATE C" in answer and record not in answer
    # Undone with one revert, like any forget.
    git(memdir, "-c", "user.name=a", "-c", "user.email=a@b", "revert", "--no-edit", "HEAD")
    assert f"Session record {record}" in run("recall", QUESTION, "--type", "session",
                                             "--memory-dir", str(memdir)).stdout


def test_a_record_can_be_forgotten_by_session_id_and_a_local_one_is_refused(tmp_path, state_dir):
    memdir = tmp_path / "memory"
    record = encoded(memdir)
    sid = next(line.split(": ", 1)[1] for line in (memdir / record).read_text().splitlines()
               if line.startswith("session: "))
    out = run("forget", sid[:8], "--yes", "--memory-dir", str(memdir)).stdout
    assert f"retired {record} -> archive/{record}" in out
    unknown = run("forget", "deadbeef", "--yes", "--memory-dir", str(memdir), ok=False)
    assert unknown.returncode == 1 and unknown.stderr.startswith("Error: no session record")

    local = tmp_path / "local"
    (state_dir / "config.toml").write_text('session_records = "local"\n')
    run("encode", str(PILOT), "--memory-dir", str(local), "--backend", "offline")
    kept = next((local / ".dualtrace" / "sessions").rglob("*.md"))
    refused = run("forget", sid[:8], "--yes", "--memory-dir", str(local), ok=False)
    assert refused.returncode == 1
    assert refused.stderr.startswith("Error: ") and "is a local record (never committed)" in refused.stderr
    assert kept.is_file()


def test_the_printed_undo_works_on_a_machine_with_no_git_identity(tmp_path):
    """The test HOME has no git identity (conftest), as on a fresh machine: the printed
    `git revert` must work as printed and bring the memory back."""
    import re
    import shlex

    memdir = tmp_path / "memory"
    encoded(memdir)
    out = run("forget", ANCHOR, "--yes", "--memory-dir", str(memdir)).stdout
    [hint] = re.findall(r"undo with `([^`]+)`", out)
    assert not (memdir / "decisions" / f"{ANCHOR}.md").exists()
    undo = subprocess.run(shlex.split(hint), capture_output=True, text=True)
    assert undo.returncode == 0, undo.stderr
    assert (memdir / "decisions" / f"{ANCHOR}.md").is_file()
    assert git(memdir, "status", "--porcelain") == ""


def test_answering_no_retires_nothing_and_no_answer_names_yes(tmp_path):
    """New-user review 5: "no" ended in click's bare "Aborted!" and exit 1, and a script
    (stdin closed) got the same, with no word about --yes."""
    from tests.conftest import DUALTRACE

    memdir = tmp_path / "memory"
    encoded(memdir)
    head = git(memdir, "rev-parse", "HEAD")
    args = [str(DUALTRACE), "forget", ANCHOR, "--memory-dir", str(memdir)]
    no = subprocess.run(args, input="n\n", capture_output=True, text=True, timeout=60)
    assert no.returncode == 0 and "nothing retired" in no.stdout, no.stdout + no.stderr
    assert "Aborted" not in no.stdout + no.stderr
    closed = subprocess.run(args, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                            timeout=60)
    assert closed.returncode == 1, closed.stdout + closed.stderr
    assert closed.stderr.strip().splitlines()[-1].startswith("Error: ") and "--yes" in closed.stderr
    assert git(memdir, "rev-parse", "HEAD") == head  # nothing retired either way
    assert (memdir / "decisions" / f"{ANCHOR}.md").exists()


HAND_WRITTEN = ("---\ndescription: Release builds are signed on the CI runner, never on laptops.\n"
                "type: decision\nconfidence: HIGH\nstored: 2026-11-01\n---\n\n"
                "Release builds are signed on the CI runner.\n")


def test_forgetting_a_hand_written_file_not_committed_yet_retires_it_and_revert_restores_it(
        tmp_path):
    """Review 7 F10: a valid memory file the user wrote by hand (listed and recalled) made
    forget fail with git's raw "pathspec ... did not match any files"."""
    memdir = tmp_path / "memory"
    encoded(memdir)
    hand = memdir / "decisions" / "release-signing.md"
    hand.write_text(HAND_WRITTEN)
    assert "release-signing" in run("list", "--memory-dir", str(memdir)).stdout
    # A committed memory edited by hand and not committed: its edit is kept the same way.
    edited = memdir / "decisions" / f"{ANCHOR}.md"
    edited.write_text(edited.read_text() + "\nEdited by hand: the log level is INFO.\n")
    out = run("forget", "release-signing", "--yes", "--memory-dir", str(memdir)).stdout
    assert ("committed decisions/release-signing.md as written by hand first (commit "
            in out), out
    assert "retired decisions/release-signing.md -> archive/decisions/release-signing.md" in out
    assert git(memdir, "status", "--porcelain", "--", "decisions", "archive").strip() == \
        f"M decisions/{ANCHOR}.md"
    assert not hand.exists()
    assert (memdir / "archive/decisions/release-signing.md").read_text() == HAND_WRITTEN
    assert "release-signing" not in run("list", "--memory-dir", str(memdir)).stdout
    # The undo forget prints works and brings back exactly what was retired.
    forget_sha = git(memdir, "rev-parse", "HEAD").strip()
    git(memdir, "-c", "user.name=t", "-c", "user.email=t@t", "revert", "--no-edit", forget_sha)
    assert hand.read_text() == HAND_WRITTEN
    out = run("forget", ANCHOR, "--yes", "--memory-dir", str(memdir)).stdout
    assert f"committed decisions/{ANCHOR}.md as written by hand first" in out
    assert "Edited by hand: the log level is INFO." in \
        (memdir / "archive" / "decisions" / f"{ANCHOR}.md").read_text()
    assert git(memdir, "status", "--porcelain", "--", "decisions", "archive").strip() == ""
