"""The derived FTS5 index: built, updated on commit, rebuilt when missing/corrupt/stale."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import time

import pytest

from dualtrace.memfs import formats
from dualtrace.memfs import index as index_mod
from dualtrace.memfs.index import Index, cache_index_path, index_path
from dualtrace.memfs.recall import recall
from dualtrace.memfs.store import MemoryStore


def _fact(anchor: str, description: str, body: str = "", kind: str = "decision",
          **extra) -> formats.Fact:
    return formats.Fact(path=formats.fact_path(kind, anchor), type=kind,
                        description=description, body=body or description,
                        stored="2026-11-01", **extra)


def _store(memdir) -> MemoryStore:
    store = MemoryStore(memdir, project="proj")
    path = store.write(_fact("structured-logging-json",
                             "Switched to JSON structured logging because Datadog could not "
                             "parse plain text"))
    store.commit([path], "mem: store decisions/structured-logging-json (decision, evidence:11)\n")
    return store


def _units(store: MemoryStore) -> set[str]:
    with Index.open(store.root, refresh=False) as index:
        return {u for (u,) in index.conn.execute("SELECT DISTINCT unit FROM docs")}


def test_index_lives_in_gitignored_state_folder(memdir):
    store = _store(memdir)
    assert index_path(store.root).is_file()
    assert index_path(store.root).parent.name == ".dualtrace"
    ignored = subprocess.run(["git", "-C", str(store.root), "check-ignore", "-q",
                              ".dualtrace/index.sqlite"])
    assert ignored.returncode == 0
    status = subprocess.run(["git", "-C", str(store.root), "status", "--porcelain"],
                            capture_output=True, text=True, check=True).stdout
    assert "index.sqlite" not in status


def test_commit_updates_index_without_a_refresh(memdir):
    store = _store(memdir)
    assert _units(store) == {"decisions/structured-logging-json.md"}
    new = store.write(_fact("http-client-httpx", "Use httpx instead of requests"))
    store.commit([new], "mem: store decisions/http-client-httpx (decision, evidence:9)\n")
    # refresh=False: only update_after_commit can have put it there.
    assert "decisions/http-client-httpx.md" in _units(store)


def test_fact_and_moment_share_one_unit_and_singular_folders_are_read(memdir):
    store = _store(memdir)
    moment = formats.Moment(path="scenes/decisions/structured-logging-json.md",
                            anchor="structured-logging-json", description="Scene cue",
                            linked_fact="decisions/structured-logging-json.md",
                            narrative="In app/log.py the dashboards dropped events.",
                            stored="2026-11-01")
    (store.root / "debug").mkdir()
    (store.root / "debug" / "db-timeout.md").write_text(formats.render_fact(
        _fact("db-timeout", "Database timeout under load", kind="incident")))
    store.commit([store.write(moment), "debug/db-timeout.md"], "mem: test\n")
    with Index.open(store.root) as index:
        docs = index.docs_of_units(["decisions/structured-logging-json.md"])
        assert sorted(d.kind for d in docs) == ["fact", "moment"]
        # decision/ and debug/ are the pilot's singular spellings of the plural folders.
        assert [d.unit for d in index.docs_of_units(["incidents/db-timeout.md"])] == \
            ["incidents/db-timeout.md"]


def test_missing_index_is_rebuilt_outside_the_memory_dir_until_a_commit(memdir):
    store = _store(memdir)
    index_path(store.root).unlink()
    result = recall(store, "why JSON structured logging")
    assert result.state == "B"
    # A reader never creates a file in the memory dir: it indexes into the state dir.
    assert not index_path(store.root).exists()
    assert cache_index_path(store.root).is_file()
    assert not cache_index_path(store.root).is_relative_to(store.root)
    # A writer's commit creates the memory dir's own index, which readers then use.
    new = store.write(_fact("http-client-httpx", "Use httpx instead of requests"))
    store.commit([new], "mem: store decisions/http-client-httpx (decision, evidence:9)\n")
    assert index_path(store.root).is_file()
    assert [m.path for m in recall(store, "why httpx instead of requests").memories][:1] == \
        ["decisions/http-client-httpx.md"]


@pytest.mark.parametrize("garbage", [b"not a database at all" * 100, b""])
def test_corrupt_index_is_rebuilt(memdir, garbage):
    store = _store(memdir)
    index_path(store.root).write_bytes(garbage)
    result = recall(store, "why JSON structured logging")
    assert [m.path for m in result.memories] == ["decisions/structured-logging-json.md"]
    sqlite3.connect(index_path(store.root)).execute("SELECT count(*) FROM docs").fetchone()


def test_old_schema_version_is_rebuilt(memdir):
    store = _store(memdir)
    conn = sqlite3.connect(index_path(store.root))
    conn.execute("UPDATE meta SET value = '0' WHERE key = 'schema'")
    conn.execute("DELETE FROM docs")
    conn.commit()
    conn.close()
    assert recall(store, "Datadog structured logging").state == "B"


def test_file_added_by_hand_is_found(memdir):
    store = _store(memdir)
    (store.root / "incidents").mkdir()
    (store.root / "incidents" / "redis-eviction.md").write_text(formats.render_fact(
        _fact("redis-eviction", "Redis evicted session keys under maxmemory", kind="incident")))
    result = recall(store, "redis evicted session keys")
    assert result.memories[0].path == "incidents/redis-eviction.md"


def test_file_deleted_by_hand_disappears(memdir):
    store = _store(memdir)
    os.unlink(store.root / "decisions" / "structured-logging-json.md")
    assert recall(store, "why JSON structured logging").state == "C"


def test_in_place_edit_of_a_returned_file_is_seen_before_showing_it(memdir):
    store = _store(memdir)
    assert recall(store, "Datadog structured logging").state == "B"
    path = store.root / "decisions" / "structured-logging-json.md"
    text = path.read_text().replace("Datadog", "Datadog and Grafana Loki")
    with open(path, "r+", encoding="utf-8") as fh:  # in place: the folder mtime stays
        fh.write(text)
    result = recall(store, "Datadog structured logging")
    assert "Grafana Loki" in result.memories[0].fact.description


def test_in_place_edit_is_found_by_the_periodic_full_check(memdir, monkeypatch):
    store = _store(memdir)
    with Index.open(store.root):
        pass
    path = store.root / "decisions" / "structured-logging-json.md"
    with open(path, "r+", encoding="utf-8") as fh:
        fh.write(path.read_text().replace("Datadog", "Zanzibar"))
    monkeypatch.setattr(index_mod, "FULL_CHECK_SECONDS", 0.0)
    assert recall(store, "Zanzibar structured logging").state == "B"


def test_pulled_commits_are_indexed(memdir, tmp_path):
    store = _store(memdir)
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", str(store.root), str(clone)], check=True)
    teammate = MemoryStore(clone, project="proj", author=("mate", "mate@example.com"))
    rel = teammate.write(_fact("feature-flags-unleash", "Feature flags served by Unleash"))
    teammate.commit([rel], "mem: store decisions/feature-flags-unleash (decision, evidence:7)\n")
    teammate.close()
    with Index.open(store.root):
        pass  # index is current before the pull
    subprocess.run(["git", "-C", str(store.root), "pull", "-q", str(clone), "main"], check=True,
                   env={**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@x",
                        "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@x"})
    result = recall(store, "feature flags Unleash")
    assert result.memories[0].path == "decisions/feature-flags-unleash.md"


def test_unparsable_file_is_skipped_not_fatal(memdir):
    store = _store(memdir)
    (store.root / "decisions" / "broken.md").write_text("no frontmatter here\n")
    (store.root / "decisions" / "bad-yaml.md").write_text("---\ntype: [unclosed\n---\nx\n")
    result = recall(store, "Datadog structured logging")
    assert result.state == "B"


def test_a_failing_index_never_fails_a_commit(memdir):
    store = _store(memdir)
    target = index_path(store.root)
    target.unlink()
    target.mkdir()  # sqlite cannot open a directory, and os.replace onto it fails
    (target / "keep").write_text("x")
    rel = store.write(_fact("http-client-httpx", "Use httpx instead of requests"))
    sha = store.commit([rel], "mem: store decisions/http-client-httpx (decision, evidence:9)\n")
    assert sha and len(sha) == 40


def test_reindex_counts_memories(memdir):
    store = _store(memdir)
    human = store.human_file().with_bullet("Prefers small functions").with_bullet("Uses pytest")
    store.commit([store.write(human)], "mem: update system/human (preference)\n")
    assert index_mod.reindex(store.root) == 3  # one fact + two bullets


@pytest.mark.parametrize("question", ['"JSON', "NOT OR AND", "json*", "NEAR(json logging)",
                                      "col:json", "(((", "日本語 logging", "-json ^x"])
def test_fts_syntax_in_questions_is_harmless(memdir, question):
    store = _store(memdir)
    result = recall(store, question)
    assert result.state in ("A", "B", "C")


def test_concurrent_refreshes_leave_a_usable_index(memdir):
    store = _store(memdir)
    index_path(store.root).unlink()
    code = ("import sys; from dualtrace.memfs.recall import recall; "
            "r = recall(sys.argv[1], 'Datadog structured logging'); print(r.state)")
    import sys

    procs = [subprocess.Popen([sys.executable, "-c", code, str(store.root)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for _ in range(4)]
    outs = [p.communicate(timeout=60) for p in procs]
    assert [o[0].strip() for o in outs] == ["B"] * 4, outs
    assert not index_path(store.root).exists()
    assert cache_index_path(store.root).is_file()
    assert not list(cache_index_path(store.root).parent.glob("*.tmp"))


def test_cheap_signature_moves_with_head_and_folders(memdir):
    store = _store(memdir)
    before = index_mod.cheap_signature(store.root)
    time.sleep(0.01)
    rel = store.write(_fact("x-y", "another decision"))
    store.commit([rel], "mem: store decisions/x-y (decision, evidence:5)\n")
    assert index_mod.cheap_signature(store.root) != before


def test_docs_matching_about_tells_subject_words_from_mentions(memdir):
    """``present``: the word is anywhere in the document; ``about``: in its anchor or
    description (the read path's "what a memory is about"), among the given ids only."""
    store = _store(memdir)
    rels = [store.write(_fact("ledger-sharding", "Shard the ledger by tenant")),
            store.write(_fact("nightly-backup", "Backups run nightly", "The ledger is copied too")),
            store.write(_fact("cache-policy", "Cache entries expire", "nothing relevant")),
            store.write(_fact("ledger-retention", "Keep seven years", "retention rules"))]
    store.commit(rels, "mem: four")
    with Index.open(memdir) as index:
        by_unit = {index.docs_of_units([u])[0].unit: index.docs_of_units([u])[0].id
                   for u in _units(store)}
        ids = [i for u, i in by_unit.items() if "retention" not in u]
        present, about = index.docs_matching_about("ledger", ids)
        names = {i: u for u, i in by_unit.items()}
        assert {names[i] for i in present} == {"decisions/ledger-sharding.md",
                                               "decisions/nightly-backup.md"}
        assert {names[i] for i in about} == {"decisions/ledger-sharding.md"}
        assert index.docs_matching_about("absentword", ids) == (set(), set())


def test_word_counts_follow_commits_from_this_and_other_connections(memdir):
    store = _store(memdir)
    with Index.open(store.root) as reader:
        assert reader.doc_frequency("datadog") == 1
        assert reader.doc_frequency("httpx") == 0
        # Another connection commits (the worker after a session): counted at once.
        new = store.write(_fact("http-client-httpx", "Use httpx, not requests; Datadog traces"))
        store.commit([new], "mem: store decisions/http-client-httpx (decision, evidence:9)\n")
        assert reader.doc_frequency("datadog") == 2
        assert reader.doc_frequency("httpx") == 1
        # This connection's own write (a refresh after a hand deletion).
        (store.root / new).unlink()
        assert reader.refresh()
        assert reader.doc_frequency("httpx") == 0
        assert reader.doc_frequency("datadog") == 1


def test_word_counts_are_shared_by_the_indexes_of_one_process_while_the_index_stands(memdir):
    """Two Index objects on the same index count each word once between them (the MCP
    tools open one per query); a commit, a rebuild, or a connection left open on the
    file a rebuild replaced never gets counts of other documents."""
    store = _store(memdir)
    counted: list[str] = []

    def traced(index: Index) -> Index:
        index.conn.set_trace_callback(
            lambda sql: counted.append(sql) if "count(*)" in sql and "MATCH" in sql else None)
        return index

    with traced(Index.open(store.root)) as first:
        assert first.doc_frequency("datadog") == 1
    assert len(counted) == 1
    with traced(Index.open(store.root)) as second:
        assert second.doc_frequency("datadog") == 1
        assert len(counted) == 1  # the first one's count
        assert second.doc_frequency("httpx") == 0
    assert len(counted) == 2
    stale = traced(Index.open(store.root))
    try:
        new = store.write(_fact("http-client-httpx", "Use httpx, not requests; Datadog traces"))
        store.commit([new], "mem: store decisions/http-client-httpx (decision, evidence:9)\n")
        with traced(Index.open(store.root)) as third:
            assert third.doc_frequency("datadog") == 2 and third.doc_frequency("httpx") == 1
        assert stale.doc_frequency("httpx") == 1  # the same index, committed to
        # A rebuild swaps in a new file; a connection still open on the old one keeps
        # its documents and never lends (or borrows) counts of the new file's.
        (store.root / new).unlink()
        Index.rebuild(store.root).close()
        with traced(Index.open(store.root)) as fourth:
            assert fourth.doc_frequency("httpx") == 0 and fourth.doc_frequency("datadog") == 1
        assert stale.doc_frequency("httpx") == 1  # what its file holds
        stale.conn.execute("BEGIN")
        stale.conn.execute("ROLLBACK")  # its own activity: no new sharing either
        assert stale.doc_frequency("httpx") == 1
        with traced(Index.open(store.root)) as fifth:
            assert fifth.doc_frequency("httpx") == 0
    finally:
        stale.close()
