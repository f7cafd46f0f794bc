"""The SessionStart text kept ready (dualtrace.startctx): the hook prints a stored text
when nothing it was built from changed, and builds it otherwise; the worker rebuilds
it after each commit. Real hook processes, a real worker, real memory repos."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from dualtrace import startctx
from dualtrace.memfs.conflicts import record_conflict
from dualtrace.memfs.store import MemoryStore
from tests import hook_helpers
from tests.conftest import EXAMPLES
from tests.hook_helpers import (
    PY,
    claude_payload,
    hook_cmd,
    run_hook,
    runs,
    wait_drained,
    wait_until,
)

hook_env = hook_helpers.hook_env


def _hook(env: dict, event: str, payload: dict) -> tuple[str, set[str]]:
    """One real hook process: the injected text and the modules it imported."""
    script = Path(sys.executable).parent / "dualtrace"
    proc = subprocess.run([PY, "-X", "importtime", str(script), "hook", event],
                          input=json.dumps(payload).encode(),
                          capture_output=True, env=env, timeout=60)
    assert proc.returncode == 0, proc.stderr[-2000:]
    modules = {line.split("|")[-1].strip() for line in proc.stderr.decode().splitlines()
               if line.startswith("import time:")}
    out = json.loads(proc.stdout)["hookSpecificOutput"]["additionalContext"] \
        if proc.stdout else ""
    return out, modules


def _start(env: dict, cwd: Path, session: str = "s-start") -> tuple[str, set[str]]:
    """One real SessionStart hook."""
    return _hook(env, "session-start", claude_payload(
        "SessionStart", session, cwd / f"{session}.jsonl", str(cwd), source="startup"))


def _settle(state_dir: Path) -> None:
    """Until no stored text waits for the worker's related memories and no worker runs
    (the hook may have started one that has not begun yet: wait for the text first)."""
    wait_until(lambda: not startctx.pending(str(state_dir)), 90,
               what="the worker's rebuild of the stored SessionStart text")
    wait_drained(state_dir)


def _encode(env: dict, transcript: Path) -> None:
    proc = subprocess.run([*hook_cmd(), "encode", "--backend", "offline", str(transcript)],
                          capture_output=True, env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr


def _project(tmp_path: Path) -> Path:
    project = tmp_path / "proj"
    project.mkdir(exist_ok=True)
    return project


SLOW = {"dualtrace.config", "dualtrace.memfs.inject", "dualtrace.memfs.store",
        "dualtrace.memfs.index"}


def test_a_stored_text_is_printed_without_building_it(hook_env, state_dir, tmp_path):
    project = _project(tmp_path)
    _encode(hook_env, EXAMPLES / "pilot-5-session-storage.jsonl")
    built, modules = _start(hook_env, project)
    assert "session" in built.lower() and SLOW <= modules  # first time: built
    again, modules = _start(hook_env, project)
    assert again == built and not SLOW & modules  # then: read, nothing heavy imported
    assert len(list((state_dir / startctx.DIR).glob("*.json"))) == 1


def test_any_change_to_what_it_was_built_from_rebuilds_it(hook_env, state_dir, tmp_path):
    project = _project(tmp_path)
    memory = Path(hook_env["DUALTRACE_MEMORY_DIR"])
    _encode(hook_env, EXAMPLES / "pilot-1a-preference.jsonl")
    first, _ = _start(hook_env, project)
    # The worker that hook starts rebuilds the stored text with related memories; let it
    # finish first, or its rebuild racing the edit below is what the next hook prints.
    _settle(state_dir)
    # A person edits a pinned file by hand, without a commit (saved as editors do:
    # a new file renamed over the old one).
    human = memory / "system" / "human.md"
    new = human.with_name("human.md.swp")
    new.write_text(human.read_text().rstrip("\n") + "\n- Prefers tabs over spaces in Makefiles.\n")
    new.replace(human)
    edited, modules = _start(hook_env, project)
    assert "tabs over spaces" in edited and SLOW <= modules
    _settle(state_dir)
    # The project gets a dualtrace.toml that turns dualtrace off: nothing injected.
    (project / "dualtrace.toml").write_text("enabled = false\n")
    off, _ = _start(hook_env, project)
    assert off == ""
    (project / "dualtrace.toml").unlink()
    # An open conflict: shown (and marked shown) by the full path, never stored.
    store = MemoryStore(memory, project="proj", create=False)
    record_conflict(store, "decisions/a.md", "decisions/b.md", "s9", "2026-11-02")
    shown, modules = _start(hook_env, project)
    assert "Open conflicts" in shown and SLOW <= modules
    after, _ = _start(hook_env, project)
    assert "Open conflicts" not in after and first != after


def test_the_worker_rebuilds_the_text_after_a_commit(hook_env, state_dir, tmp_path):
    project = _project(tmp_path)
    _encode(hook_env, EXAMPLES / "pilot-5-session-storage.jsonl")
    before, _ = _start(hook_env, project)
    assert "structlog" not in before
    # A session through the real hooks and worker stores a new decision...
    transcript = project / "s-new.jsonl"
    hook_helpers.append_turn(transcript, "s-new", str(project), 0)  # JSON logging, structlog
    end = claude_payload("SessionEnd", "s-new", transcript, str(project), reason="exit")
    assert run_hook("session-end", end, env=hook_env).returncode == 0
    wait_drained(state_dir)
    (record,) = [r for r in runs(state_dir) if r["session"] == "s-new"]
    assert record["commit"], record
    # ...and the next session's hook prints the worker's fresh text, without building.
    after, modules = _start(hook_env, project, session="s-next")
    assert after != before and "logging" in after.lower()
    assert not SLOW & modules, SLOW & modules


def test_signature_sees_renames_deletes_and_new_files(tmp_path):
    root = tmp_path / "m"
    (root / "decisions").mkdir(parents=True)
    (root / "decisions" / "a.md").write_text("a")
    cwd = str(tmp_path)
    first = startctx.signature(cwd, str(root), None, [])
    assert startctx.signature(cwd, str(root), None, []) == first
    (root / "decisions" / "a.md").rename(root / "decisions" / "b.md")
    renamed = startctx.signature(cwd, str(root), None, [])
    assert renamed != first
    (root / "decisions" / "c.md").write_text("c")
    added = startctx.signature(cwd, str(root), None, [])
    assert added != renamed
    (root / ".dualtrace").mkdir()  # the index and caches are not what the text is from
    (root / ".dualtrace" / "index.sqlite").write_text("x")
    assert startctx.signature(cwd, str(root), None, [])[1] == added[1]
    # The project's own git activity (git status rewrites .git/index) is not a change;
    # becoming a repository is (the project root may move).
    plain = startctx.signature(cwd, str(root), None, [])
    (tmp_path / ".git").mkdir()
    repo = startctx.signature(cwd, str(root), None, [])
    assert repo != plain
    (tmp_path / ".git" / "index").write_text("i")
    assert startctx.signature(cwd, str(root), None, []) == repo


def test_a_worker_rebuild_never_uses_up_a_conflicts_one_showing(hook_env, state_dir,
                                                                 tmp_path):
    project = _project(tmp_path)
    memory = Path(hook_env["DUALTRACE_MEMORY_DIR"])
    _encode(hook_env, EXAMPLES / "pilot-5-session-storage.jsonl")
    _start(hook_env, project)  # stores a text for this project
    wait_drained(state_dir)  # the worker a hook may start for it has finished
    store = MemoryStore(memory, project="proj", create=False)
    record_conflict(store, "decisions/a.md", "decisions/b.md", "s9", "2026-11-02")
    # The worker's rebuild of every stored text (what it runs after a commit), in a
    # process of its own like the worker: nobody reads what it builds.
    rebuild = subprocess.run(
        [PY, "-c", "import sys; from dualtrace import startctx; "
                   "startctx.refresh(sys.argv[1]); startctx.refresh(sys.argv[1], sys.argv[2])",
         str(state_dir), str(memory.resolve())],
        capture_output=True, text=True, env=hook_env, timeout=120)
    assert rebuild.returncode == 0, rebuild.stderr
    shown, _ = _start(hook_env, project)
    assert "Open conflicts" in shown  # the agent still gets to see it, once
    after, _ = _start(hook_env, project)
    assert "Open conflicts" not in after


def _prompt(env: dict, cwd: Path, prompt: str) -> tuple[str, set[str]]:
    """One real UserPromptSubmit hook."""
    return _hook(env, "prompt", claude_payload(
        "UserPromptSubmit", "s-start", cwd / "s-start.jsonl", str(cwd), prompt=prompt))


def test_the_prompt_hook_reuses_the_stored_settings(hook_env, state_dir, tmp_path):
    """After a SessionStart stored its entry, a prompt is answered from the memory dir and
    settings that entry resolved (no dualtrace.config import); a settings change sends it
    back through dualtrace.config, which sees the change."""
    project = _project(tmp_path)
    _encode(hook_env, EXAMPLES / "pilot-5-session-storage.jsonl")
    question = "Why did we move session storage from Redis to Postgres?"
    cold, modules = _prompt(hook_env, project, question)  # no entry yet: full path
    assert "Redis" in cold and "dualtrace.config" in modules
    _start(hook_env, project)
    warm, modules = _prompt(hook_env, project, question)
    assert warm == cold and "dualtrace.config" not in modules
    assert _prompt(hook_env, project, "How do I center a div with CSS grid?")[0] == ""
    # A project setting appears: resolved again, and obeyed.
    (project / "dualtrace.toml").write_text("prompt_chars = 300\n")
    short, modules = _prompt(hook_env, project, question)
    assert "dualtrace.config" in modules and 0 < len(short) <= 300 < len(warm)
    (project / "dualtrace.toml").write_text("enabled = false\n")
    assert _prompt(hook_env, project, question)[0] == ""
