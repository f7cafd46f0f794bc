"""Injection text (session start, per prompt) and the hook processes that print it."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from dualtrace.config import Settings
from dualtrace.encoder.redact import INJECT_CLOSE, INJECT_OPEN, Redactor
from dualtrace.memfs import formats
from dualtrace.memfs.conflicts import open_conflicts, record_conflict
from dualtrace.memfs.index import index_path
from dualtrace.memfs.inject import prompt_context, session_start_context
from dualtrace.memfs.recall import LABEL_A
from dualtrace.memfs.store import MemoryStore
from tests.conftest import DATA

QUESTIONS = DATA / "recall_questions.py"


def _labelled():
    spec = importlib.util.spec_from_file_location("recall_questions", QUESTIONS)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def store(memdir):
    store = MemoryStore(memdir, project="project")
    _labelled().build(store)
    return store


def _hook(event: str, payload: dict, memdir: Path, cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "DUALTRACE_MEMORY_DIR": str(memdir)}
    return subprocess.run([sys.executable, "-c", "from dualtrace.hookcmd import entry; entry()",
                           "hook", event], input=json.dumps(payload), capture_output=True,
                          text=True, env=env, cwd=cwd, timeout=60)


def test_session_start_has_pinned_files_index_conflicts_and_how_to_ask(store):
    record_conflict(store, "decisions/old-way.md", "decisions/new-way.md", "s1", "2026-11-02")
    text = session_start_context(store, Settings())
    assert text.startswith(INJECT_OPEN + "\n") and text.endswith("\n" + INJECT_CLOSE)
    assert "- Keeps functions under 30 lines; breaks them up when they grow longer." in text
    assert "- Money amounts are stored as integer cents, never floats." in text
    assert "decisions/new-way.md supersedes decisions/old-way.md" in text
    assert "[decision] structured-logging-json: Switched to JSON structured logging" in text
    assert "[incident] celery-worker-oom:" in text and "resolved" in text
    # patterns and learning are recalled on demand, not listed
    assert "forgets-migration-files" not in text
    assert 'dualtrace recall "<question>"' in text
    assert len(text) <= 6000
    # Conflicts are shown once, then marked shown.
    assert open_conflicts(store) == []
    assert "supersedes decisions/old-way.md" not in session_start_context(store, Settings())


def test_session_start_index_orders_by_usefulness_and_respects_the_cap(memdir):
    store = MemoryStore(memdir, project="big")
    paths = []
    for i in range(300):
        paths.append(store.write(formats.Fact(
            path=f"decisions/decision-number-{i:03d}.md", type="decision",
            description=f"Decision number {i} about module {i} with a long description " * 2,
            body="x", stored="2026-11-01", evidence_score=i % 13 if i != 7 else 12,
            confidence="HIGH" if i == 7 else "MEDIUM")))
    store.commit(paths, "mem: many\n")
    for cap in (6000, 1000):
        text = session_start_context(store, Settings(session_start_chars=cap))
        assert len(text) <= cap
        assert text.endswith(INJECT_CLOSE)
        assert "dualtrace recall" in text  # the how-to survives truncation
    text = session_start_context(store, Settings())
    lines = [ln for ln in text.splitlines() if ln.startswith("- [decision]")]
    assert lines[0].startswith("- [decision] decision-number-007:")  # score 12, HIGH


def test_session_start_on_an_empty_store(memdir):
    store = MemoryStore(memdir, project="p")
    text = session_start_context(store, Settings())
    assert "No memories are stored for this project yet." in text


def test_prompt_context_injects_only_relevant_memories(store):
    text = prompt_context(store, "have we seen this token refresh race before?", Settings())
    assert text is not None
    assert text.startswith(INJECT_OPEN) and text.endswith(INJECT_CLOSE)
    assert "incidents/auth-middleware-401-race.md" in text and LABEL_A in text
    assert len(text) <= 2000
    assert prompt_context(store, "What's our test coverage threshold?", Settings()) is None
    assert prompt_context(store, "   ", Settings()) is None


def test_prompt_context_respects_a_small_budget(store):
    text = prompt_context(store, "why did we switch to JSON structured logging",
                          Settings(prompt_chars=400))
    assert text is not None and len(text) <= 400 and text.endswith(INJECT_CLOSE)


def test_injected_block_is_stripped_by_the_redactor(store):
    text = prompt_context(store, "why httpx instead of requests", Settings())
    transcript = f"user said hello\n{text}\nthen asked about logging"
    cleaned = Redactor().redact(transcript)
    assert "httpx" not in cleaned and "user said hello" in cleaned


def test_prompt_hook_process_prints_additional_context(store, tmp_path):
    payload = {"session_id": "s1", "transcript_path": str(tmp_path / "t.jsonl"),
               "cwd": str(tmp_path), "hook_event_name": "UserPromptSubmit",
               "prompt": "the celery workers exit with code 137 during the CSV export again"}
    out = _hook("prompt", payload, store.root, tmp_path)
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    spec = data["hookSpecificOutput"]
    assert spec["hookEventName"] == "UserPromptSubmit"
    assert "incidents/celery-worker-oom.md" in spec["additionalContext"]
    assert len(spec["additionalContext"]) <= 2000


def test_prompt_hook_prints_nothing_for_an_unrelated_prompt(store, tmp_path):
    payload = {"session_id": "s1", "transcript_path": str(tmp_path / "t.jsonl"),
               "cwd": str(tmp_path), "hook_event_name": "UserPromptSubmit",
               "prompt": "rename the variable foo to bar in utils"}
    out = _hook("prompt", payload, store.root, tmp_path)
    assert out.returncode == 0 and out.stdout == ""


def test_session_start_hook_process(store, tmp_path):
    payload = {"session_id": "s1", "transcript_path": str(tmp_path / "t.jsonl"),
               "cwd": str(tmp_path), "hook_event_name": "SessionStart", "source": "startup"}
    out = _hook("session-start", payload, store.root, tmp_path)
    assert out.returncode == 0, out.stderr
    spec = json.loads(out.stdout)["hookSpecificOutput"]
    assert spec["hookEventName"] == "SessionStart"
    context = spec["additionalContext"]
    assert context.startswith(INJECT_OPEN) and len(context) <= 10_000
    assert "structured-logging-json" in context


def test_hooks_exit_zero_when_the_index_is_broken_or_memory_missing(store, tmp_path):
    target = index_path(store.root)
    target.unlink()
    target.mkdir()  # unusable index: a rebuild cannot replace a directory
    (target / "x").write_text("x")
    payload = {"session_id": "s1", "transcript_path": str(tmp_path / "t.jsonl"),
               "cwd": str(tmp_path), "hook_event_name": "UserPromptSubmit",
               "prompt": "why httpx instead of requests"}
    out = _hook("prompt", payload, store.root, tmp_path)
    assert out.returncode == 0 and out.stdout == ""
    out = _hook("prompt", payload, tmp_path / "no-such-memory", tmp_path)
    assert out.returncode == 0 and out.stdout == ""
    assert not (tmp_path / "no-such-memory").exists()


@pytest.mark.parametrize("prompt", ["run the tests", "Run the tests again please",
                                    "fix the failing test", "continue", "commit and push",
                                    "Hey Claude, what do you think?",
                                    "I'd like your help with something",
                                    "Hello, please have a look", "fix these errors",
                                    "can you update these tests?"])
def test_a_prompt_that_only_says_what_to_do_injects_nothing(store, prompt):
    """Issue 11 item 4: never for generic prompts. They name no subject, and every
    incident mentions a test, so any memory would be a guess."""
    assert prompt_context(store, prompt, Settings()) is None
    # ...while a prompt about a subject still gets its memory.
    assert prompt_context(store, "fix the token refresh race again", Settings())
