"""Preferences follow the person (issue 15.6): real processes in a temp HOME.

A preference learned in one project lands in the person's own memory directory and is
injected at SessionStart in every project; conventions stay with their project.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

from tests.conftest import EXAMPLES
from tests.hook_helpers import hook_cmd, run_hook

PREFERENCE = EXAMPLES / "pilot-1a-preference.jsonl"  # "I like to keep my functions under 30 lines."
BULLET = "I like to keep my functions under 30 lines."


def ran_here(tmp_path) -> Path:
    """The preference pilot as a session that ran on this machine (its folder exists):
    the person's own memory takes preferences only from such sessions."""
    project = tmp_path / "shop-api"
    project.mkdir(exist_ok=True)
    copy = tmp_path / "pilot-1a-here.jsonl"
    copy.write_text(PREFERENCE.read_text().replace('"/home/dev/shop-api"',
                                                   json.dumps(str(project))))
    return copy


def encode(memdir, *extra: str, env=None, transcript: Path | None = None) -> dict:
    transcript = transcript or ran_here(memdir.parent)
    proc = subprocess.run([*hook_cmd(), "encode", str(transcript), "--memory-dir", str(memdir),
                           "--backend", "offline", "--json", *extra], capture_output=True,
                          text=True, env=env or dict(os.environ), timeout=120)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def session_start(cwd, state_dir, env=None) -> str:
    payload = {"session_id": "s-new", "transcript_path": str(cwd / "t.jsonl"), "cwd": str(cwd),
               "hook_event_name": "SessionStart", "source": "startup"}
    proc = run_hook("session-start", payload, env=env)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.decode()


def test_a_preference_reaches_your_own_memory_and_every_project(tmp_path, state_dir):
    project_a = tmp_path / "memory-a"
    report = encode(project_a)
    own = state_dir / "user-memory"
    assert report["user_commit"]
    assert BULLET in (own / "system" / "human.md").read_text()
    log = subprocess.run(["git", "-C", str(own), "log", "--format=%s%n%b"], capture_output=True,
                         text=True, check=True).stdout
    assert "mem: store system/human" in log and "Dualtrace-Session: 1a000000" in log
    # Default "both": the project keeps its copy too (nothing changes for a team file).
    assert BULLET in (project_a / "system" / "human.md").read_text()

    # Another project with no memory at all: the person's preference is still injected.
    other = tmp_path / "other-project"
    other.mkdir()
    out = session_start(other, state_dir)
    context = json.loads(out)["hookSpecificOutput"]["additionalContext"]
    assert "Your preferences" in context and BULLET in context
    assert not (state_dir / "memory").exists() or not any((state_dir / "memory").iterdir())


def test_a_session_from_elsewhere_keeps_its_preferences_in_the_memory_it_goes_to(tmp_path,
                                                                                state_dir):
    """Someone else's transcript (its folder is not on this machine: the shipped pilot,
    a corpus session): what it calls a preference is not this person's, and must not
    be injected into every project they work on."""
    project = tmp_path / "memory"
    report = encode(project, transcript=PREFERENCE)
    assert report["commit"] and not report["user_commit"]
    assert BULLET in (project / "system" / "human.md").read_text()
    assert not (state_dir / "user-memory").exists()
    assert any("not on this machine" in note for note in report["notes"])


def test_preferences_user_keeps_them_out_of_the_shared_project_memory(tmp_path, state_dir):
    (state_dir / "config.toml").write_text('preferences = "user"\n')
    project = tmp_path / "memory"
    report = encode(project)
    assert report["user_commit"]
    assert not (project / "system" / "human.md").exists()
    # the project keeps only the session's record (session_records = "local" keeps even
    # that off the shared memory)
    files = subprocess.run(["git", "-C", str(project), "show", "--name-only", "--format=",
                            report["commit"]], capture_output=True, text=True,
                           check=True).stdout.split()
    assert files == [report["record"]] and files[0].startswith("sessions/")
    assert BULLET in (state_dir / "user-memory" / "system" / "human.md").read_text()


def test_preferences_project_is_the_old_behaviour(tmp_path, state_dir):
    (state_dir / "config.toml").write_text('preferences = "project"\n')
    report = encode(tmp_path / "memory")
    assert report["commit"] and not report["user_commit"]
    assert not (state_dir / "user-memory").exists()


def test_a_second_project_adds_to_your_file_and_injection_shows_it_once(tmp_path, state_dir):
    encode(tmp_path / "memory-a")
    again = encode(tmp_path / "memory-b")
    assert again["user_commit"] is None  # the same bullet: nothing new for your own memory
    human = (state_dir / "user-memory" / "system" / "human.md").read_text()
    assert human.count(BULLET) == 1
    # In a project that has the bullet itself, it is not injected twice.
    env = dict(os.environ, DUALTRACE_MEMORY_DIR=str(tmp_path / "memory-b"))
    context = json.loads(session_start(tmp_path, state_dir, env=env))
    text = context["hookSpecificOutput"]["additionalContext"]
    assert text.count(BULLET) == 1


def test_a_bad_preferences_setting_is_one_clear_error(tmp_path, state_dir):
    (state_dir / "config.toml").write_text('preferences = "everyone"\n')
    proc = subprocess.run([*hook_cmd(), "encode", str(PREFERENCE), "--memory-dir",
                           str(tmp_path / "m")], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 1
    assert proc.stderr.strip() == ("Error: setting preferences must be one of both, user, "
                                   "project, not 'everyone'")


def test_recall_also_answers_from_your_own_memory(tmp_path, state_dir):
    encode(tmp_path / "memory-a")
    # Another project whose memory knows nothing about the person's preferences.
    project_b = tmp_path / "memory-b"
    proc = subprocess.run([*hook_cmd(), "encode", str(EXAMPLES / "pilot-1b-structured-logging.jsonl"),
                           "--memory-dir", str(project_b), "--backend", "offline"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    human = project_b / "system" / "human.md"
    assert not human.exists() or BULLET not in human.read_text()

    def recall(memdir, *extra):
        out = subprocess.run([*hook_cmd(), "recall", "how", "long", "should", "my", "functions",
                              "be", "--memory-dir", str(memdir), *extra],
                             capture_output=True, text=True, timeout=120)
        assert out.returncode == 0, out.stderr
        return out.stdout

    text = recall(project_b)
    assert "Your own preferences (from your own memory, every project):" in text, text
    assert BULLET in text.split("Your own preferences", 1)[1]
    data = json.loads(recall(project_b, "--json"))
    assert [m["bullet"] for m in data["own_preferences"]] == [BULLET]
    # The project that holds the same bullet shows it once, not twice.
    text = recall(tmp_path / "memory-a")
    assert "1. system/human.md" in text and "Your own preferences" not in text, text
    # --type decision never searches preferences.
    assert "Your own preferences" not in recall(project_b, "--type", "decision")
