"""The hooks a turn waits for, started without site (dualtrace/fasthook.py, hookcmd's
fast path): the command `install` writes, run through a shell as the host runs it,
prints what the full hook prints, imports nothing beyond the standard library and
dualtrace's floor when it answers, and hands everything else to the full hook. Real
hook processes, a real encode, real memory repos."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from dualtrace import queue, startctx
from dualtrace.hooks import install as inst
from tests import hook_helpers
from tests.conftest import EXAMPLES
from tests.hook_helpers import claude_payload, hook_cmd, run_hook, wait_drained, wait_until

hook_env = hook_helpers.hook_env

pytestmark = pytest.mark.skipif(os.name == "nt", reason="the fast launcher is POSIX only")

# What the fast path may import: the standard library and these of dualtrace.
FLOOR = {"dualtrace", "dualtrace.hookcmd", "dualtrace.queue", "dualtrace.startctx",
         "dualtrace.atomic", "dualtrace.logfile", "dualtrace.paths", "dualtrace.words",
         "dualtrace.sweepmark"}
QUESTION = "Why did we move session storage from Redis to Postgres?"
GENERIC = ("run the tests", "continue", "commit and push", "Thanks!")


def fast_command(event: str) -> str:
    entries = inst.wanted_entries("claude-code", inst.dualtrace_command())
    return entries[event]["hooks"][0]["command"]


def shell(command: str, payload: dict | str, env: dict) -> tuple[subprocess.CompletedProcess, set[str]]:
    """``command`` as Claude Code runs a hook (``sh -c``, the payload on stdin), and the
    modules its Python imported (-X importtime through the environment)."""
    data = payload if isinstance(payload, str) else json.dumps(payload)
    proc = subprocess.run(["/bin/sh", "-c", command], input=data.encode(), capture_output=True,
                          env=dict(env, PYTHONPROFILEIMPORTTIME="1"), timeout=60)
    assert proc.returncode == 0, proc.stderr[-2000:]
    modules = {line.split("|")[-1].strip() for line in proc.stderr.decode().splitlines()
               if line.startswith("import time:")}
    return proc, modules


def full(event: str, payload: dict, env: dict) -> bytes:
    proc = run_hook(event, payload, env=env)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def outside_the_floor(modules: set[str]) -> set[str]:
    return {m for m in modules if m.startswith("dualtrace") and m not in FLOOR} | (
        {"site"} & modules)


@pytest.fixture
def project(hook_env, tmp_path) -> Path:
    """A project whose memory holds the session-storage decision and a preference
    (offline encodes)."""
    for example in ("pilot-5-session-storage.jsonl", "pilot-1a-preference.jsonl"):
        proc = subprocess.run([*hook_cmd(), "encode", "--backend", "offline",
                               str(EXAMPLES / example)], capture_output=True, env=hook_env,
                              timeout=120)
        assert proc.returncode == 0, proc.stderr
    folder = tmp_path / "proj"
    folder.mkdir()
    return folder


def settle(state_dir: Path) -> None:
    """Until the worker a SessionStart started has stored the complete text and exited."""
    wait_until(lambda: not startctx.pending(str(state_dir)), 90, what="the stored text")
    wait_drained(state_dir)


def start_payload(project: Path, session: str = "s-fast") -> dict:
    return claude_payload("SessionStart", session, project / "transcripts" / f"{session}.jsonl",
                          str(project), source="startup")


def prompt_payload(project: Path, prompt: str, **extra) -> dict:
    return claude_payload("UserPromptSubmit", "s-fast", project / "transcripts" / "s-fast.jsonl",
                          str(project), prompt=prompt, **extra)


def test_install_starts_the_waited_for_hooks_without_site():
    script = inst.dualtrace_command()
    for event in ("SessionStart", "UserPromptSubmit"):
        line = fast_command(event)
        python, flag, launcher, rest = line.split(" ", 3)
        assert flag == "-S" and Path(launcher).name == "fasthook.py" and Path(launcher).is_file()
        assert Path(python).is_file() and rest.startswith(f"{script} hook ")
        assert rest.endswith(" --host claude-code") and inst.is_ours({"command": line})
    # A shared (project scope) or foreign command and other hosts keep the plain form.
    assert inst.wanted_entries("claude-code", "dualtrace")["SessionStart"]["hooks"][0][
        "command"] == "dualtrace hook session-start"
    codex = inst.wanted_entries("codex", script)["SessionStart"]["hooks"][0]["command"]
    assert "fasthook" not in codex


def test_a_stored_session_start_text_is_printed_without_site(hook_env, state_dir, project):
    payload = start_payload(project)
    assert b"additionalContext" in full("session-start", payload, hook_env)  # builds, stores
    settle(state_dir)
    # The transcripts folder as the worker's sweep left it: a sweep could find nothing,
    # so none is asked for (dualtrace/sweepmark.py) ...
    assert shell(fast_command("SessionStart"), payload, hook_env)[0].stdout
    assert not queue.list_jobs(str(state_dir))
    # ... until another session's transcript is there (one killed before SessionEnd).
    (project / "transcripts").mkdir(exist_ok=True)
    (project / "transcripts" / "s-killed.jsonl").write_text("{}\n")
    # The worker lock held (as by a running worker): the sweep request stays queued.
    lock = queue.FileLock(str(state_dir / "worker.lock"))
    assert lock.acquire(blocking=False)
    try:
        proc, modules = shell(fast_command("SessionStart"), payload, hook_env)
        sweeps = [j for j in queue.list_jobs(str(state_dir)) if j.get("kind") == "sweep"]
    finally:
        lock.release()
    assert proc.stdout and proc.stdout == full("session-start", payload, hook_env)
    assert not outside_the_floor(modules), outside_the_floor(modules)
    # Its queue work is the full hook's: the sweep request for the transcripts folder.
    assert [j["session_id"] for j in sweeps] == [str(project / "transcripts")]
    wait_drained(state_dir)

    # A memory edited by hand (saved as editors do, a new file renamed over the old):
    # the stored text is stale, the full hook builds it again.
    human = Path(hook_env["DUALTRACE_MEMORY_DIR"]) / "system" / "human.md"
    edited = human.with_name("human.md.swp")
    edited.write_text(human.read_text().rstrip("\n") + "\n- Prefers tabs over spaces in Makefiles.\n")
    edited.replace(human)
    proc, modules = shell(fast_command("SessionStart"), payload, hook_env)
    assert b"tabs over spaces" in proc.stdout and "site" in modules
    settle(state_dir)
    assert shell(fast_command("SessionStart"), payload, hook_env)[0].stdout == proc.stdout


def test_prompts_get_what_the_full_hook_gives(hook_env, state_dir, project):
    full("session-start", start_payload(project), hook_env)
    settle(state_dir)
    command = fast_command("UserPromptSubmit")
    for prompt in GENERIC:  # generic: answered (nothing) before recall is imported
        payload = prompt_payload(project, prompt)
        proc, modules = shell(command, payload, hook_env)
        assert proc.stdout == b"" == full("prompt", payload, hook_env), prompt
        assert not outside_the_floor(modules), (prompt, outside_the_floor(modules))
    for prompt in (QUESTION, "How do I center a div with CSS grid?"):
        payload = prompt_payload(project, prompt)
        proc, modules = shell(command, payload, hook_env)
        assert proc.stdout == full("prompt", payload, hook_env), prompt
        assert "dualtrace.memfs.recall" in modules  # the full hook, after site
    assert b"Redis" in shell(command, prompt_payload(project, QUESTION), hook_env)[0].stdout


def test_other_payloads_go_to_the_full_hook(hook_env, state_dir, project):
    full("session-start", start_payload(project), hook_env)
    settle(state_dir)
    # A subagent's hook (ignored by hooks/claude_code.normalize): nothing, as in full.
    sub = dict(start_payload(project), agent_id="a-1", agent_type="Explore")
    proc, modules = shell(fast_command("SessionStart"), sub, hook_env)
    assert proc.stdout == full("session-start", sub, hook_env) == b"" and "site" in modules
    generic_sub = prompt_payload(project, QUESTION, agent_id="a-1")
    assert shell(fast_command("UserPromptSubmit"), generic_sub, hook_env)[0].stdout == b""
    # Not JSON: exit 0, nothing printed, one line in the hook log.
    proc, _ = shell(fast_command("SessionStart"), "{not json", hook_env)
    assert proc.stdout == b""
    log = state_dir / "logs" / "hook.log"
    wait_until(lambda: log.is_file() and "not JSON" in log.read_text(), 10, what="hook.log")
    # Opted out: nothing at all.
    proc, _ = shell(fast_command("SessionStart"), start_payload(project),
                    dict(hook_env, DUALTRACE_DISABLE="1"))
    assert proc.stdout == b""


def installed_layout(root: Path) -> Path:
    """dualtrace laid out as a wheel installs it (memfs, hooks, encoder, prompts inside
    the package folder, the way pyproject's package-dir maps them), built of symlinks to
    this checkout: the fasthook.py an installed dualtrace's entry runs."""
    package = root / "site-packages" / "dualtrace"
    package.mkdir(parents=True)
    repo = Path(inst.__file__).resolve().parent.parent
    for source in (repo / "dualtrace").glob("*.py"):
        (package / source.name).symlink_to(source)
    for sub in ("memfs", "hooks", "encoder", "prompts"):
        (package / sub).symlink_to(repo / sub, target_is_directory=True)
    return package / "fasthook.py"


def test_an_installed_dualtrace_recalls_for_a_prompt_without_site(hook_env, state_dir, project,
                                                                  tmp_path):
    launcher = installed_layout(tmp_path / "wheel")
    python, flag, _, rest = fast_command("UserPromptSubmit").split(" ", 3)
    command = " ".join([python, flag, str(launcher), rest])
    full("session-start", start_payload(project), hook_env)
    settle(state_dir)
    # A subject prompt, the memory dir and settings as the stored SessionStart entry has
    # them: recalled without site (nothing but the standard library and dualtrace).
    for prompt in (QUESTION, "How do I center a div with CSS grid?"):
        payload = prompt_payload(project, prompt)
        proc, modules = shell(command, payload, hook_env)
        assert proc.stdout == full("prompt", payload, hook_env), prompt
        assert "site" not in modules and "dualtrace.memfs.recall" in modules, prompt
        # Nor logging or typing (~11 ms of imports on an idle machine): the recall
        # stack logs through logfile.LazyLogger and names types for mypy only.
        assert not {"logging", "typing"} & modules, prompt
    proc, _ = shell(command, prompt_payload(project, QUESTION), hook_env)
    assert b"Redis" in proc.stdout and b"UserPromptSubmit" in proc.stdout
    # Settings that changed since the entry was stored (here: turned off for this
    # project) are the full hook's to read: site, config, and nothing recalled.
    (project / "dualtrace.toml").write_text("enabled = false\n")
    proc, modules = shell(command, prompt_payload(project, QUESTION), hook_env)
    assert proc.stdout == b"" and "site" in modules
