"""SessionStart's "related to the last session" memories: a hybrid recall computed by the
worker and stored with the text (dualtrace.startctx), never by the hook. Real hook
processes, a real worker process, real memory repos encoded by the real CLI."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from dualtrace import startctx
from tests import hook_helpers
from tests.conftest import EXAMPLES
from tests.dualtrace.test_session_start_cache import SLOW, _start
from tests.hook_helpers import hook_cmd, wait_drained, wait_until

hook_env = hook_helpers.hook_env

SECTION = "## Related to the last session's request"
# What a hybrid recall loads; the hook must never pay for it.
SEMANTIC = {"numpy", "dualtrace.memfs.embed"}


def _section(text: str) -> list[str]:
    if SECTION not in text:
        return []
    block = text.split(SECTION, 1)[1].split("\n\n", 1)[0]
    return [line for line in block.splitlines()[1:] if line.startswith("- ")]


def _encode(env: dict, transcript: Path, cwd: Path) -> None:
    """The real CLI, run in the project (a record's project is where encode runs)."""
    proc = subprocess.run([*hook_cmd(), "encode", "--backend", "offline", str(transcript)],
                          capture_output=True, env=env, cwd=cwd, timeout=120)
    assert proc.returncode == 0, proc.stderr


def _entries(state_dir: Path) -> list[dict]:
    return [json.loads(p.read_text()) for p in (state_dir / startctx.DIR).glob("*.json")]


def test_the_worker_adds_related_memories_the_hook_never_computes(hook_env, state_dir,
                                                                  tmp_path):
    project = tmp_path / "shop-api"  # the examples' project (their cwd's name)
    project.mkdir()
    _encode(hook_env, EXAMPLES / "pilot-4-auth-401-session1.jsonl", project)
    _encode(hook_env, EXAMPLES / "pilot-5-session-storage.jsonl", project)  # the newest
    # First session start in this cwd: the hook builds the text itself, without the
    # related memories and without importing numpy or the embedder.
    built, modules = _start(hook_env, project)
    assert SLOW <= modules and not SEMANTIC & modules, SEMANTIC & modules
    assert "Recent sessions in this project" in built and SECTION not in built
    (entry,) = _entries(state_dir)
    assert entry["related"] is False
    # That hook made sure a real worker runs (after storing the text); before it
    # exits, the worker rebuilds the stored text with the related memories.
    wait_until(lambda: _entries(state_dir)[0]["related"] is True, 90,
               what="the worker completed the stored SessionStart text")
    wait_drained(state_dir)
    (entry,) = _entries(state_dir)
    related = _section(entry["text"])
    assert related and any("session" in line.lower() and "postgres" in line.lower()
                           for line in related), entry["text"]
    assert all("STATE A" in line or "STATE B" in line or line.startswith("- [preference]")
               or line.startswith("- [convention]") for line in related)
    # The next session's hook prints that text as stored: nothing built, nothing heavy.
    again, modules = _start(hook_env, project, session="s-next")
    assert again == entry["text"] and not (SLOW | SEMANTIC) & modules
    # A memory listed as related is not listed again in the index of decisions.
    index = again.split("## Stored decisions and incidents", 1)[-1]
    for line in related:
        anchor = line.split("] ", 1)[1].split(":", 1)[0]
        assert f"] {anchor}:" not in index


def test_related_memories_use_meaning_when_the_extra_is_installed(tmp_path, monkeypatch):
    """The worker's recall is the hybrid one: with the embedder on, a request worded
    unlike the stored decision still finds it; words alone do not."""
    from dualtrace.memfs import embed
    from dualtrace.memfs.inject import _related_to_last_session
    from dualtrace.memfs.sessions import RecordInfo
    from dualtrace.memfs.store import MemoryStore
    from tests.memfs.test_index import _fact

    embed.reset()
    monkeypatch.delenv(embed.ENV, raising=False)
    if embed.get_embedder() is None:
        pytest.skip("the semantic extra is not installed")
    store = MemoryStore(tmp_path / "m", project="p")
    rels = [store.write(_fact("structured-logging-json", "Switched to JSON structured logging "
                              "because Datadog could not parse plain text")),
            store.write(_fact("postgres-sessions", "Session storage moved from Redis to "
                              "Postgres for durability"))]
    store.commit(rels, "mem: two decisions")
    info = RecordInfo(path="sessions/x.md", session="abcdef12", host="claude-code",
                      project="p", branch=None, started=None, ended=None,
                      description="make the app emit machine readable json events for datadog",
                      outcome="", memories=(), open_end=None, local=False)
    paths, lines = _related_to_last_session(store, info, None)
    assert paths == {"decisions/structured-logging-json.md"}, lines
    assert lines[0].startswith("- [decision] structured-logging-json: Switched to JSON")
    monkeypatch.setenv(embed.ENV, "off")
    embed.reset()
    try:
        assert _related_to_last_session(store, info, None) == (set(), [])
    finally:
        embed.reset()
