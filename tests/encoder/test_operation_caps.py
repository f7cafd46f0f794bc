"""Per-session caps on model operations and per-file size caps (issue 13 item 3), through
the real anthropic SDK over HTTP to the local fake API, and on real files."""

from __future__ import annotations

import subprocess
import sys

import pytest

from dualtrace.encoder.backends import EncodeRequest
from dualtrace.encoder.backends.anthropic import MemoryTools
from dualtrace.encoder.plan import (
    MAX_MEMORY_BYTES,
    MAX_WRITES,
    Context,
    Grounding,
    PlanBuilder,
    Rejected,
    parse_store,
    parse_update,
)
from dualtrace.errors import PathError
from dualtrace.memfs import formats
from dualtrace.memfs.anchors import MAX_FILE_BYTES
from dualtrace.memfs.formats import Fact
from dualtrace.memfs.index import Index
from dualtrace.memfs.store import MemoryStore
from dualtrace.memfs.transaction import commit
from tests.encoder.test_backend_anthropic import api, settings_for, tool_results  # noqa: F401
from tests.fake_anthropic import message, tool_use

DATE = "2026-06-02"
SCORES = {"durability": 3, "scope": 3, "rationale": 2, "retrieval": 3}
WORDS = ("amber basalt cobalt delta ember fjord garnet harbor indigo jasper kelp lumen "
         "meadow nickel onyx prism quartz raven sierra tundra umber velvet willow xenon "
         "yarrow zephyr").split()


def _word(i: int) -> str:
    out = []
    while True:
        out.append(WORDS[i % len(WORDS)])
        i //= len(WORDS)
        if not i:
            return "-".join(out)


def _store_call(i: int) -> dict:
    w = _word(i)
    return tool_use("store_memory", {
        "type": "decision", "anchor": f"choice-{w}-{i}",
        "description": f"Module {w} {i} reads its settings from {w}.toml",
        "body": f"The {w} service keeps configuration number {i} in {w}.toml. " * 40,
        "scores": SCORES, "confidence": "HIGH"})


def test_300_stores_in_one_turn_are_capped_with_a_clear_rejection(api, tmp_path):  # noqa: F811
    store = MemoryStore(tmp_path / "memory", project="demo")
    api.enqueue(message(*[_store_call(i) for i in range(300)]),
                message(tool_use("finish", {})))
    builder = PlanBuilder(store, Context("s-caps", "anthropic", DATE, Grounding("", DATE), "demo"))
    settings = settings_for(api, daily_budget_usd=1000.0, daily_budget_tokens=10**9)
    request = EncodeRequest(session=None, digest="user: configure things", gates=None,
                            memories=(), settings=settings, ctx=builder.ctx)
    from dualtrace.encoder.backends.anthropic import AnthropicBackend

    AnthropicBackend(settings).encode(request, builder)
    results = tool_results(api.message_requests()[1])
    assert len(results) == 300
    ok = [r for r in results if not r.get("is_error")]
    refused = [r for r in results if r.get("is_error")]
    assert len(ok) <= MAX_WRITES
    assert len(refused) >= 300 - MAX_WRITES
    assert all("cap reached" in r["content"] for r in refused[-200:])
    assert sum(1 for r in refused if "memories stored or updated" in r["content"]) > 50
    assert "tool-call cap reached" in refused[-1]["content"]
    sha = commit(store, builder.changeset())
    assert sha
    changed = subprocess.run(["git", "show", "--name-only", "--format=", sha], cwd=store.root,
                             capture_output=True, text=True, check=True).stdout.split()
    assert 0 < len(changed) <= 2 * MAX_WRITES  # a fact and at most its moment per write
    assert max((store.root / p).stat().st_size for p in changed) <= MAX_MEMORY_BYTES


def test_tool_calls_are_capped_reads_included(tmp_path):
    store = MemoryStore(tmp_path / "memory", project="demo")
    tools = MemoryTools(PlanBuilder(store, Context("s", "anthropic", DATE, Grounding("", DATE))))
    answers = [tools.run("search_memory", {"query": "anything"}) for _ in range(400)]
    assert answers[0] == ("no matching memories", False)
    assert answers[-1][1] and "cap reached" in answers[-1][0]
    assert sum(1 for _t, err in answers if not err) < 400


def test_update_that_would_grow_a_file_past_the_limit_is_rejected(tmp_path):
    store = MemoryStore(tmp_path / "memory", project="demo")
    big = " ".join(f"Observation {_word(i)} number {i} held." for i in range(1400))
    fact = Fact(path="decisions/big.md", type="decision", description="A big decision",
                body=big, confidence="HIGH", stored=DATE)
    store.write(fact)
    store.commit([fact.path], "mem: store decisions/big\n")
    before = store.read_text(fact.path)
    assert MAX_MEMORY_BYTES - 3000 < len(before.encode()) < MAX_MEMORY_BYTES
    builder = PlanBuilder(store, Context("s-big", "anthropic", DATE, Grounding("", DATE), "demo"))
    with pytest.raises(Rejected, match="KB limit"):
        for i in range(5):
            builder.add(parse_update({"target": "decisions/big", "reason": "revisited",
                                      "body": " ".join(f"New finding {_word(i * 100 + k)} {k}."
                                                       for k in range(150))}))
    assert len(formats.render_memory(builder.pending.get(fact.path, fact)).encode()) <= MAX_MEMORY_BYTES
    commit(store, builder.changeset())
    assert len(store.read_text(fact.path).encode()) <= MAX_MEMORY_BYTES


def test_a_rejected_operation_leaves_nothing_half_done(tmp_path):
    store = MemoryStore(tmp_path / "memory", project="demo")
    builder = PlanBuilder(store, Context("s", "anthropic", DATE, Grounding("", DATE), "demo"))
    with pytest.raises(Rejected):
        # a FULL store whose moment is not grounded: neither the fact nor the moment stays
        builder.add(parse_store({"type": "decision", "anchor": "x-choice", "description": "d",
                                 "body": "b", "scores": SCORES,
                                 "moment": {"narrative": "ran src/never_seen.py", "what": "x",
                                            "marker": "commit deadbeef"}}))
    assert builder.pending == {} and builder.oplines == []


def test_a_57_mb_memory_file_is_refused_by_every_reader(tmp_path):
    memdir = tmp_path / "memory"
    store = MemoryStore(memdir, project="demo")
    small = Fact(path="decisions/small.md", type="decision", description="Small one about sizes",
                 body="sizes", confidence="HIGH", stored=DATE)
    store.write(small)
    huge = Fact(path="decisions/huge.md", type="decision", description="Huge one about sizes",
                body="sizes " * 1_000_000, confidence="HIGH", stored=DATE)
    (memdir / "decisions" / "huge.md").write_text(formats.render_memory(huge))
    assert (memdir / "decisions" / "huge.md").stat().st_size > 5_700_000
    with pytest.raises(PathError, match="limit"):
        store.read_text("decisions/huge.md")
    scan = store.scan()
    assert [m.path for m in scan.memories] == ["decisions/small.md"]
    assert any("limit" in str(p) for p in scan.problems)
    with Index.open(memdir) as index:
        assert {d.path for d in index.docs_of_type(("decision",))} == {"decisions/small.md"}
    tools = MemoryTools(PlanBuilder(store, Context("s", "anthropic", DATE, Grounding("", DATE))))
    text, is_error = tools.run("read_memory", {"path": "decisions/huge.md"})
    assert is_error and "limit" in text and len(text) < 500
    with pytest.raises(PathError, match="limit"):
        store.write_text("decisions/other.md", "x" * (MAX_FILE_BYTES + 1))
    assert not (memdir / "decisions" / "other.md").exists()


def test_cli_show_of_an_oversized_file_is_one_clear_line(tmp_path):
    memdir = tmp_path / "memory"
    MemoryStore(memdir, project="demo")
    huge = Fact(path="decisions/huge.md", type="decision", description="Huge",
                body="sizes " * 1_000_000, confidence="HIGH", stored=DATE)
    (memdir / "decisions").mkdir(exist_ok=True)
    (memdir / "decisions" / "huge.md").write_text(formats.render_memory(huge))
    result = subprocess.run([sys.executable, "-m", "dualtrace", "show", "decisions/huge.md",
                             "--memory-dir", str(memdir)], capture_output=True, text=True,
                            timeout=60)
    assert result.returncode == 1, result
    assert result.stderr.startswith("Error: ") and "limit" in result.stderr
    assert len(result.stderr) < 400 and "sizes sizes" not in result.stdout

