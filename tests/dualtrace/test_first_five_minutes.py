"""The path a new user walks (issue 15), through the real console script in a temp HOME.

Each test names the defect it pins down; each failed on the code before the fix.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.conftest import DUALTRACE, EXAMPLES
from tests.conftest import git_out as git
from tests.conftest import run_dualtrace as run

PILOT = EXAMPLES / "pilot-1b-structured-logging.jsonl"


def commits(memdir: Path) -> int:
    return int(git(memdir, "rev-list", "--count", "HEAD").strip())


def test_quick_start_works_again_after_the_memory_dir_is_deleted(tmp_path):
    memdir = tmp_path / "demo"
    first = run("encode", str(PILOT), "--memory-dir", str(memdir), "--backend", "offline")
    assert "json-structured-logging" in first.stdout
    shutil.rmtree(memdir)
    # Before: the cursor outlived the directory and this said "nothing new".
    again = run("encode", str(PILOT), "--memory-dir", str(memdir), "--backend", "offline")
    assert "SKIP" not in again.stdout
    assert (memdir / "decisions" / "json-structured-logging.md").is_file()


def test_a_recreated_memory_dir_is_encoded_again(tmp_path):
    memdir = tmp_path / "demo"
    run("encode", str(PILOT), "--memory-dir", str(memdir), "--backend", "offline")
    shutil.rmtree(memdir)
    memdir.mkdir()
    subprocess.run(["git", "init", "-q", str(memdir)], check=True)
    subprocess.run(["git", "-C", str(memdir), "-c", "user.name=a", "-c", "user.email=a@b",
                    "commit", "-q", "--allow-empty", "-m", "a person's first commit"], check=True)
    again = run("encode", str(PILOT), "--memory-dir", str(memdir), "--backend", "offline")
    assert "store" in again.stdout
    assert (memdir / "decisions" / "json-structured-logging.md").is_file()


def test_an_unchanged_transcript_is_still_skipped_and_says_how_to_force(tmp_path):
    memdir = tmp_path / "demo"
    run("encode", str(PILOT), "--memory-dir", str(memdir), "--backend", "offline")
    before = commits(memdir)
    again = run("encode", str(PILOT), "--memory-dir", str(memdir), "--backend", "offline")
    assert "SKIP  nothing new" in again.stdout
    assert f"--force --memory-dir {memdir.resolve()}" in again.stdout
    assert commits(memdir) == before


def test_force_encodes_again_and_finds_nothing_new_never_a_duplicate(tmp_path):
    memdir = tmp_path / "demo"
    first = run("encode", str(PILOT), "--memory-dir", str(memdir), "--backend", "offline",
                "--json")
    forced = run("encode", str(PILOT), "--memory-dir", str(memdir), "--backend", "offline",
                 "--force", "--json")
    import json

    a, b = json.loads(first.stdout), json.loads(forced.stdout)
    # Encoded again, the same session is not new evidence of its own decision: no
    # "seen again" update, no second Timeline line, no commit.
    assert [o["action"] for o in b["operations"]] == ["skip"] and not b["commit"]
    assert commits(memdir) == 2  # init + the session
    assert a["session_id"] == b["session_id"]  # the same label on first and later encodes
    assert sorted(p.name for p in (memdir / "decisions").iterdir()) == ["json-structured-logging.md"]


def test_the_hint_after_encode_names_the_memory_dir_that_was_used(tmp_path):
    memdir = tmp_path / "demo"
    out = run("encode", str(PILOT), "--memory-dir", str(memdir), "--backend", "offline").stdout
    hint = f"dualtrace log --memory-dir {memdir.resolve()}"
    assert hint in out
    # ... and it is a command that works as printed.
    log = subprocess.run(hint.split(), capture_output=True, text=True, check=True,
                         env={**os.environ, "PATH": f"{DUALTRACE.parent}:{os.environ['PATH']}"})
    assert "json-structured-logging" in log.stdout


def test_status_on_a_missing_memory_dir_says_so_and_creates_nothing(tmp_path):
    memdir = tmp_path / "nowhere"
    proc = run("status", "--memory-dir", str(memdir))
    assert f"memory dir: {memdir} (does not exist yet: nothing stored)" in proc.stdout
    assert "queue:" in proc.stdout  # the hooks' queue is still shown
    assert not memdir.exists()


@pytest.mark.parametrize("command", [["log"], ["show", "json-structured-logging"],
                                     ["recall", "what", "logging"]])
def test_read_only_commands_on_a_missing_memory_dir_create_nothing(tmp_path, command):
    memdir = tmp_path / "nowhere"
    proc = run(*command, "--memory-dir", str(memdir), ok=False)
    assert proc.returncode == 1
    assert proc.stderr.startswith("Error: no memory directory at"), proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1
    assert "Traceback" not in proc.stderr
    assert not memdir.exists()


@pytest.mark.parametrize("command", [["status"], ["log"], ["show", "anything"]])
def test_read_only_commands_never_make_a_folder_into_a_repo(tmp_path, command):
    folder = tmp_path / "plain"
    folder.mkdir()
    (folder / "notes.md").write_text("a person's notes\n")
    proc = run(*command, "--memory-dir", str(folder), ok=False)
    assert proc.returncode == 1
    assert proc.stderr.startswith("Error: ")
    assert not (folder / ".git").exists()
    assert sorted(p.name for p in folder.iterdir()) == ["notes.md"]


def test_read_only_commands_never_commit(tmp_path):
    memdir = tmp_path / "demo"
    run("encode", str(PILOT), "--memory-dir", str(memdir), "--backend", "offline")
    # A team clone without our .gitignore: the old code wrote and committed one on `log`.
    (memdir / ".gitignore").unlink()
    git(memdir, "-c", "user.name=a", "-c", "user.email=a@b", "commit", "-q", "-am", "drop it")
    head = git(memdir, "rev-parse", "HEAD")
    for command in (["status"], ["log"], ["show", "json-structured-logging"]):
        run(*command, "--memory-dir", str(memdir))
    assert git(memdir, "rev-parse", "HEAD") == head
    assert not (memdir / ".gitignore").exists()


def _tree(root: Path) -> dict[str, bytes]:
    """Every file under root (the .git folder included) with its bytes."""
    return {p.relative_to(root).as_posix(): p.read_bytes()
            for p in sorted(root.rglob("*")) if p.is_file() or p.is_symlink()}


def test_read_only_commands_create_nothing_in_an_existing_memory_dir(tmp_path):
    origin = tmp_path / "origin"
    run("encode", str(PILOT), "--memory-dir", str(origin), "--backend", "offline")
    # A teammate's clone of the memory repo: no .dualtrace/ and no search index yet
    # (the old code created .dualtrace/index.sqlite on the first recall).
    team = tmp_path / "team"
    subprocess.run(["git", "clone", "-q", str(origin), str(team)], check=True)
    before = _tree(team)
    status_before = git(team, "--no-optional-locks", "status", "--porcelain", "--ignored")
    assert not (team / ".dualtrace").exists()

    answer = run("recall", "why", "JSON", "structured", "logging", "--memory-dir", str(team))
    assert "json-structured-logging" in answer.stdout, answer.stdout
    for command in (["status"], ["log"], ["show", "json-structured-logging"], ["sessions"],
                    ["list"], ["recall", "which", "logging", "format"]):
        run(*command, "--memory-dir", str(team))
    payload = {"session_id": "s1", "transcript_path": str(tmp_path / "t.jsonl"),
               "cwd": str(tmp_path), "hook_event_name": "UserPromptSubmit",
               "prompt": "why did we switch to JSON structured logging?"}
    hook = subprocess.run([str(DUALTRACE), "hook", "prompt"], input=json.dumps(payload),
                          capture_output=True, text=True, cwd=tmp_path, timeout=60,
                          env={**os.environ, "DUALTRACE_MEMORY_DIR": str(team)})
    assert hook.returncode == 0 and "json-structured-logging" in hook.stdout, hook

    assert _tree(team) == before
    assert git(team, "--no-optional-locks", "status", "--porcelain", "--ignored") == \
        status_before
    # A later commit (a writer) creates the memory dir's own index, and recall keeps
    # answering from it.
    run("encode", str(EXAMPLES / "pilot-1a-preference.jsonl"), "--memory-dir", str(team),
        "--backend", "offline")
    assert (team / ".dualtrace" / "index.sqlite").is_file()
    answer = run("recall", "why", "JSON", "structured", "logging", "--memory-dir", str(team))
    assert "json-structured-logging" in answer.stdout, answer.stdout


def test_status_check_exits_1_on_a_broken_file_and_says_it_checked(tmp_path):
    memdir = tmp_path / "demo"
    run("encode", str(PILOT), "--memory-dir", str(memdir), "--backend", "offline")
    good = run("status", "--check", "--memory-dir", str(memdir))
    assert "checked:    every file parses" in good.stdout
    (memdir / "decisions" / "broken.md").write_text("---\ntype: [decision\n---\nbody\n")
    bad = run("status", "--check", "--memory-dir", str(memdir), ok=False)
    assert bad.returncode == 1
    assert "broken.md" in bad.stdout
    assert bad.stderr.strip() == "Error: 1 memory file(s) do not parse (listed above)"


def test_status_shows_only_this_memory_dirs_runs(tmp_path, state_dir):
    import json

    mine, other = tmp_path / "mine", tmp_path / "other"
    run("encode", str(PILOT), "--memory-dir", str(mine), "--backend", "offline")
    with (state_dir / "runs.jsonl").open("a") as fh:
        for memdir, session in ((other, "theirs-1"), (mine, "mine-1"), (other, "theirs-2")):
            fh.write(json.dumps({"session": session, "memory_dir": str(memdir.resolve()),
                                 "finished_at": 1.0, "duration": 0.1}) + "\n")
    out = run("status", "--memory-dir", str(mine)).stdout
    assert "mine-1" in out
    assert "theirs" not in out


@pytest.mark.parametrize("n", ["0", "-3"])
def test_log_rejects_zero_and_negative_counts(tmp_path, n):
    memdir = tmp_path / "demo"
    run("encode", str(PILOT), "--memory-dir", str(memdir), "--backend", "offline")
    proc = run("log", "-n", n, "--memory-dir", str(memdir), ok=False)
    assert proc.returncode != 0
    assert "Invalid value for '-n'" in proc.stderr


def _encode_pilots(memdir: Path) -> None:
    for name in ("pilot-1a-preference", "pilot-1b-structured-logging",
                 "pilot-4-auth-401-session1", "pilot-5-session-storage"):
        run("encode", str(EXAMPLES / f"{name}.jsonl"), "--memory-dir", str(memdir),
            "--backend", "offline")


def test_list_shows_every_fact_with_filters_and_json(tmp_path):
    import json

    memdir = tmp_path / "demo"
    _encode_pilots(memdir)
    out = run("list", "--memory-dir", str(memdir)).stdout
    for anchor in ("json-structured-logging", "move-session-storage-redis-postgres"):
        assert anchor in out
    rows = json.loads(run("list", "--json", "--type", "incident", "--memory-dir",
                          str(memdir)).stdout)
    assert rows and {r["type"] for r in rows} == {"incident"}
    assert all(r["stored"] and r["confidence"] and r["description"] for r in rows)
    grep = json.loads(run("list", "--json", "--grep", "logging", "--memory-dir", str(memdir)).stdout)
    assert [r["anchor"] for r in grep] == ["json-structured-logging"]
    assert json.loads(run("list", "--json", "--since", "2099-01-01", "--memory-dir",
                          str(memdir)).stdout) == []


def test_forget_retires_fact_and_moment_in_one_commit_and_recall_stops_using_it(tmp_path):
    memdir = tmp_path / "demo"
    _encode_pilots(memdir)
    question = ["recall", "why did we switch to JSON structured logging", "--memory-dir",
                str(memdir)]
    assert "json-structured-logging" in run(*question).stdout
    before = commits(memdir)
    refused = run("forget", "json-structured-logging", "--memory-dir", str(memdir), ok=False)
    assert refused.returncode == 1  # never silent: without --yes it asks, and no stdin aborts
    assert (memdir / "decisions" / "json-structured-logging.md").exists()
    out = run("forget", "json-structured-logging", "--reason", "moved to OTLP", "--yes",
              "--memory-dir", str(memdir)).stdout
    assert "archive/decisions/json-structured-logging.md" in out
    assert commits(memdir) == before + 1
    assert not (memdir / "decisions" / "json-structured-logging.md").exists()
    assert (memdir / "archive" / "scenes" / "decisions" / "json-structured-logging.md").exists()
    assert "Reason: moved to OTLP" in git(memdir, "log", "-1", "--format=%B")
    assert "json-structured-logging" not in run(*question).stdout
    assert "json-structured-logging" not in run("list", "--memory-dir", str(memdir)).stdout
    # Recoverable with git.
    git(memdir, "-c", "user.name=a", "-c", "user.email=a@b", "revert", "--no-edit", "HEAD")
    assert "json-structured-logging" in run(*question).stdout


def test_explain_says_why_a_session_stored_something_or_nothing(tmp_path):
    memdir = tmp_path / "demo"
    _encode_pilots(memdir)
    stored = run("explain", "1b000000", "--memory-dir", str(memdir)).stdout
    assert "mem: store decisions/json-structured-logging" in stored  # what was committed
    assert "signal: decision phrase" in stored  # the gate verdict
    assert "d/s/r/l=3/3/3/3 (12)" in stored and "scores: d/s/r/l = durability" in stored
    assert "a routing rule can move it" in stored  # the whole legend where a person asks why
    noise = run("explain", str(EXAMPLES / "noise-only.jsonl"), "--memory-dir", str(memdir)).stdout
    assert "committed: nothing for this session" in noise
    assert "nothing stored: gates:" in noise and "routine activity only" in noise
    missing = run("explain", "no-such-session", "--memory-dir", str(memdir), ok=False)
    assert missing.returncode == 1 and missing.stderr.startswith("Error: no session")


def test_the_tier_column_never_says_skip_for_a_stored_bullet(tmp_path):
    memdir = tmp_path / "demo"
    out = run("encode", str(EXAMPLES / "pilot-1a-preference.jsonl"), "--memory-dir",
              str(memdir), "--backend", "offline").stdout
    row = next(line for line in out.splitlines() if "system/human.md" in line)
    assert row.startswith("BULLET") and "SKIP" not in row
    # One line of legend after an encode (review 10: ~600 characters); explain has it whole.
    [legend] = [line for line in out.splitlines() if line.startswith("scores: ")]
    assert legend.startswith("scores: d/s/r/l = durability/scope/rationale/retrieval")
    assert len(legend) <= 160 and "dualtrace explain" in legend, legend
    assert "routing rule" not in out


@pytest.mark.parametrize("flag", ["--help", "-h"])
def test_hook_help_prints_usage(flag):
    proc = run("hook", flag)
    assert proc.stdout.startswith("Usage: dualtrace hook EVENT")
    assert "session-start" in proc.stdout and "claude-code" in proc.stdout


def test_the_quick_start_command_works_twice_in_a_private_demo_dir(tmp_path):
    # The README's first command after its pip install, run twice in a real shell as a
    # new user would. Before: a fixed /tmp/dualtrace-demo that another user of the
    # machine may own (or have filled); now each run makes its own with mktemp -d.
    readme = (EXAMPLES.parent / "README.md").read_text()
    line = next(x for x in readme.splitlines() if x.startswith("pip install -e . && "))
    command = line.removeprefix("pip install -e . && ")
    assert "/tmp/" not in command
    env = {**os.environ, "TMPDIR": str(tmp_path),
           "PATH": f"{DUALTRACE.parent}{os.pathsep}{os.environ['PATH']}"}
    for _attempt in range(2):
        proc = subprocess.run(["sh", "-c", command], cwd=EXAMPLES.parent, env=env,
                              capture_output=True, text=True, timeout=120)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        assert "STATE A" in proc.stdout  # the recall at the end answers, the second time too
    demos = sorted(p for p in tmp_path.iterdir() if (p / ".git").is_dir())
    assert len(demos) == 2, list(tmp_path.iterdir())  # one private folder per run
    for demo in demos:
        assert oct(demo.stat().st_mode & 0o777) == "0o700"
        assert (demo / "decisions" / "json-structured-logging.md").is_file()


def _claude_settings(tmp_path):
    home = Path(os.environ["HOME"])
    settings = home / ".claude" / "settings.json"
    settings.parent.mkdir(parents=True, exist_ok=True)
    return settings


def test_install_allow_recall_then_uninstall_restores_the_original_bytes(tmp_path):
    settings = _claude_settings(tmp_path)
    original = '{\n    "model": "opus",\n    "permissions": {"allow": ["Bash(npm test:*)"]}\n}\n'
    settings.write_text(original)
    out = run("install", "--agent", "claude-code", "--allow-recall", "--no-mcp", cwd=tmp_path).stdout
    data = json.loads(settings.read_text())
    rule = f"Bash({DUALTRACE} recall:*)"
    assert data["permissions"]["allow"] == ["Bash(npm test:*)", rule]
    assert "Next: restart Claude Code" in out and "dualtrace backfill" in out
    assert "Memory for this project:" in out
    run("uninstall", "--agent", "claude-code", cwd=tmp_path)
    # Before: the file was re-serialized (its formatting lost) and the pre-install
    # backup was overwritten with the installed state.
    assert settings.read_text() == original
    assert settings.with_name("settings.json.dualtrace.bak").read_text() == original


def test_project_scope_writes_a_command_a_teammate_can_run(tmp_path):
    project = tmp_path / "proj"
    project.mkdir()
    subprocess.run(["git", "init", "-q", str(project)], check=True)
    out = run("install", "--scope", "project", "--no-mcp", cwd=project).stdout
    assert "note: project scope is shared" in out
    commands = [h["command"] for groups in json.loads(
        (project / ".claude" / "settings.json").read_text())["hooks"].values()
        for g in groups for h in g["hooks"]]
    # (Stop/SessionEnd run in the shell's background: "exec 3<&0; dualtrace hook stop ...")
    assert commands and all(c.removeprefix("exec 3<&0; ").startswith("dualtrace hook ")
                            for c in commands)


def test_install_warns_when_the_plugin_is_also_enabled(tmp_path):
    settings = _claude_settings(tmp_path)
    settings.write_text('{"enabledPlugins": {"dualtrace@dualtrace": true}}\n')
    out = run("install", "--agent", "claude-code", "--no-mcp", cwd=tmp_path).stdout
    assert "also enables the dualtrace plugin" in out and "both run" in out


def test_session_start_text_names_the_command_the_hooks_run(tmp_path):
    memdir = tmp_path / "demo"
    run("encode", str(PILOT), "--memory-dir", str(memdir), "--backend", "offline")
    payload = json.dumps({"session_id": "s", "cwd": str(tmp_path), "source": "startup",
                          "hook_event_name": "SessionStart",
                          "transcript_path": str(tmp_path / "t.jsonl")})
    proc = subprocess.run([str(DUALTRACE), "hook", "session-start"], input=payload,
                          capture_output=True, text=True, timeout=60,
                          env={**os.environ, "DUALTRACE_MEMORY_DIR": str(memdir)})
    text = json.loads(proc.stdout)["hookSpecificOutput"]["additionalContext"]
    assert f'`{DUALTRACE} recall "<question>"`' in text


def test_an_immutable_memory_dir_gives_the_usual_not_writable_error(tmp_path):
    memdir = tmp_path / "demo"
    run("encode", str(EXAMPLES / "pilot-1a-preference.jsonl"), "--memory-dir", str(memdir))
    if subprocess.run(["chattr", "+i", str(memdir)], capture_output=True).returncode != 0:
        pytest.skip("chattr +i is not supported here")
    try:
        proc = run("encode", str(PILOT), "--memory-dir", str(memdir), ok=False)
    finally:
        subprocess.run(["chattr", "-i", str(memdir)], check=True)
    assert proc.returncode == 1
    assert proc.stderr.startswith(f"Error: memory directory {memdir.resolve()} is not writable")
    assert "internal error" not in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
    assert not (memdir / "decisions").exists()


@pytest.mark.parametrize("args", [("encode", "--bogus"), ("encode",), ("bogus-cmd",),
                                  ("log", "-n", "abc"), ("install", "--agent", "bogus"),
                                  ("list", "--since", "last tuesday"), ("recall", ""),
                                  ("recall", "  ", " ")])
def test_a_wrong_flag_or_argument_is_one_error_line_and_exit_1(tmp_path, args):
    proc = run(*args, cwd=tmp_path, ok=False)
    assert proc.returncode == 1, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: "), proc.stderr
    assert "--help')" in lines[0] and not list(tmp_path.iterdir())  # nothing was created
