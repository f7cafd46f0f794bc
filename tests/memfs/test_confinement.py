"""Confinement (issue 13 item 3): a symlink inside the memory directory is never followed
by any reader - the store, scans, the index, recall, the model's tools, the MCP tools -
and ``related`` paths, the number of model operations and file sizes are bounded."""

from __future__ import annotations

import os
import subprocess

import pytest

from dualtrace.agent_tools import AgentMemory
from dualtrace.config import Settings
from dualtrace.encoder.backends.anthropic import MemoryTools
from dualtrace.encoder.plan import Context, Grounding, PlanBuilder, Rejected, parse_store
from dualtrace.errors import DualtraceError, PathError
from dualtrace.memfs import formats
from dualtrace.memfs.formats import Fact
from dualtrace.memfs.index import Index
from dualtrace.memfs.recall import recall
from dualtrace.memfs.store import MemoryStore

TOKEN = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"
LEAK = "CANARY-9f3e1c leakedvalue"
SCORES = {"durability": 3, "scope": 3, "rationale": 2, "retrieval": 3}
DATE = "2026-06-01"


def _fact(anchor: str, text: str) -> Fact:
    return Fact(path=f"decisions/{anchor}.md", type="decision", description=text, body=text,
                confidence="HIGH", stored=DATE)


@pytest.fixture
def store(memdir, tmp_path):
    store = MemoryStore(memdir, project="demo")
    store.write(_fact("honest-decision", "Retries use exponential backoff capped at 30 seconds"))
    store.commit(["decisions/honest-decision.md"], "mem: store decisions/honest-decision\n")
    # .git/config with a credential, reachable through a link that stays *inside* the dir
    with open(memdir / ".git" / "config", "a", encoding="utf-8") as fh:
        fh.write(f'[remote "origin"]\n\turl = https://x:{TOKEN}@github.com/acme/mem.git\n'
                 f"\t# {LEAK} backoff retries\n")
    os.symlink("../.git/config", memdir / "decisions" / "leak.md")
    # a link to a file outside the memory dir, and a linked folder full of memories
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "stolen.md").write_text(formats.render_memory(_fact("stolen", f"{LEAK} backoff retries")))
    os.symlink(outside / "stolen.md", memdir / "decisions" / "outside.md")
    os.symlink(outside, memdir / "incidents")
    (memdir / "scenes").mkdir(exist_ok=True)
    os.symlink(outside, memdir / "scenes" / "decisions")
    # a link to another memory in the same dir is not followed either
    os.symlink("honest-decision.md", memdir / "decisions" / "alias.md")
    return store


def _no_leak(text: str) -> None:
    assert LEAK not in text and TOKEN not in text and "[remote" not in text


def test_store_lists_and_reads_no_symlink(store):
    assert store.iter_files() == ["decisions/honest-decision.md"]
    scan = store.scan()
    assert [m.path for m in scan.memories] == ["decisions/honest-decision.md"]
    for rel in ("decisions/leak.md", "decisions/outside.md", "decisions/alias.md",
                "incidents/stolen.md", "scenes/decisions/stolen.md"):
        with pytest.raises(PathError, match="symlink"):
            store.read_text(rel)
        assert not store.exists(rel)
    with pytest.raises(DualtraceError):
        store.lookup("leak")


def test_writes_never_go_through_a_symlink(store, memdir):
    before = (memdir / ".git" / "config").read_text()
    with pytest.raises(PathError, match="symlink"):
        store.write_text("decisions/leak.md", "overwritten\n")
    with pytest.raises(PathError, match="symlink"):
        store.write_text("incidents/new.md", "through a linked folder\n")
    assert (memdir / ".git" / "config").read_text() == before
    assert os.path.islink(memdir / "decisions" / "leak.md")


def test_index_and_recall_never_see_linked_files(store, memdir):
    with Index.open(memdir) as index:
        paths = {d.path for d in index.docs_of_type(("decision", "incident"))}
    assert paths == {"decisions/honest-decision.md"}
    result = recall(store, "backoff retries leakedvalue", limit=5, embedder=None)
    text = result.text if hasattr(result, "text") else str(result)
    _no_leak(text)
    assert all(m.path == "decisions/honest-decision.md" for m in result.memories)


def test_mcp_agent_tools_refuse_linked_files(store, memdir):
    memory = AgentMemory.resolve(memdir)
    for target in ("decisions/leak.md", "decisions/leak", "leak", "decisions/outside.md",
                   "incidents/stolen.md", "scenes/decisions/stolen.md"):
        with pytest.raises(DualtraceError) as err:  # the MCP server's error channel
            memory.show(target)
        _no_leak(str(err.value))
    assert "Retries use exponential backoff" in memory.show("honest-decision")
    _no_leak(memory.search("leakedvalue backoff"))
    _no_leak(memory.recall("what about leakedvalue backoff retries?"))


def test_model_tools_refuse_linked_files(store):
    builder = PlanBuilder(store, Context("s-1", "anthropic", DATE, Grounding("", DATE), "demo"))
    tools = MemoryTools(builder)
    for rel in ("decisions/leak.md", "decisions/leak", "decisions/outside.md",
                "incidents/stolen.md", "decisions/alias.md"):
        text, is_error = tools.run("read_memory", {"path": rel})
        assert is_error, (rel, text)
        _no_leak(text)
    text, _ = tools.run("search_memory", {"query": "leakedvalue backoff retries"})
    _no_leak(text)
    text, is_error = tools.run("update_memory", {"target": "decisions/leak", "reason": "x",
                                                 "body": "y"})
    assert is_error


def test_related_paths_are_validated(store):
    builder = PlanBuilder(store, Context("s-1", "anthropic", DATE, Grounding("", DATE), "demo"))
    for bad in ("../../etc/passwd", "/etc/passwd", ".git/config", "decisions/leak.md",
                "decisions/x\nDualtrace-Range: k 0-9", "decisions/" + "a" * 300,
                "decisions/missing-memory.md"):
        with pytest.raises(Rejected, match="related"):
            builder.add(parse_store({"type": "decision", "anchor": "uses-backoff",
                                     "description": "Retries use backoff", "body": "b",
                                     "scores": SCORES, "related": [bad]}))
    ok = builder.add(parse_store({"type": "decision", "anchor": "uses-backoff",
                                  "description": "Retries use backoff", "body": "b",
                                  "scores": SCORES, "related": ["decisions/honest-decision",
                                                                "decisions/honest-decision.md"]}))
    assert ok.action == "store"
    assert builder.pending[ok.path].related == ("decisions/honest-decision.md",)


def test_commit_refuses_a_symlink_path(store, memdir):
    with pytest.raises(PathError, match="symlink"):
        store.commit(["decisions/leak.md"], "mem: x\n")
    log = subprocess.run(["git", "log", "--format=%s"], cwd=memdir, capture_output=True,
                         text=True, check=True).stdout
    assert "mem: x" not in log


def test_session_records_through_links_are_never_read(store, memdir, tmp_path):
    from dualtrace.memfs.inject import session_start_context
    from dualtrace.memfs.sessions import list_records, read_record

    month = memdir / "sessions" / "2026-06"
    month.mkdir(parents=True)
    os.symlink("../../.git/config", month / "2026-06-01-deadbeef.md")
    outside = tmp_path / "records-outside"
    outside.mkdir()
    (outside / "2026-06-02-cafecafe.md").write_text(f"---\ntype: session\nsession: x\n---\n{LEAK}\n")
    os.symlink(outside, memdir / "sessions" / "2026-07")
    assert list_records(memdir) == []
    for ref in ("sessions/2026-06/2026-06-01-deadbeef.md", "sessions/2026-07/2026-06-02-cafecafe.md"):
        with pytest.raises(DualtraceError) as err:
            read_record(memdir, ref)
        _no_leak(str(err.value))
    _no_leak(session_start_context(store, Settings()))
