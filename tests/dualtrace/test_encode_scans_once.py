"""An encode reads the stored facts from the search index, not by parsing every memory
file: the backend's memory index and the plan's duplicate guard share that one read."""

from __future__ import annotations

from dualtrace.memfs.formats import Fact, render_fact
from dualtrace.memfs.store import MemoryStore
from dualtrace.pipeline import encode_session
from tests.conftest import EXAMPLES

FIELDS = ("path", "type", "description", "body", "confidence", "stored", "updated", "tier",
          "status", "superseded_by", "supersedes", "sessions", "related", "linked_scene",
          "evidence_score")


def _fields(facts: list[Fact]) -> list[tuple]:
    return sorted(tuple(getattr(f, name) for name in FIELDS) for f in facts)


def test_an_encode_reads_the_index_and_still_finds_the_incident_to_update(memdir, monkeypatch):
    first = encode_session(EXAMPLES / "pilot-4-auth-401-session1.jsonl", memory_dir=memdir,
                           backend="offline")
    assert first.commit
    scans = []
    real = MemoryStore.scan

    def counted(self):
        scans.append(self.root)
        return real(self)

    monkeypatch.setattr(MemoryStore, "scan", counted)
    second = encode_session(EXAMPLES / "pilot-4-auth-401-session2.jsonl", memory_dir=memdir,
                            backend="offline")
    assert second.commit and any(op["action"] == "update" for op in second.operations)
    assert scans == []


def test_the_index_gives_every_field_a_scan_gives_and_sees_an_edit_in_place(memdir):
    for name in ("pilot-4-auth-401-session1.jsonl", "pilot-4-auth-401-session2.jsonl",
                 "pilot-5-session-storage.jsonl", "pilot-1b-structured-logging.jsonl"):
        assert encode_session(EXAMPLES / name, memory_dir=memdir, backend="offline").commit
    store = MemoryStore(memdir)
    scanned = store.scan().facts()
    assert len(scanned) >= 3
    assert _fields(store.facts()) == _fields(scanned)
    # A hand edit that rewrites the file in place leaves the folder's mtime alone (the
    # index's cheap check); the facts still show it.
    fact = scanned[0]
    edited = Fact(**{**{k: getattr(fact, k) for k in FIELDS}, "description": "Edited by hand."})
    with open(memdir / fact.path, "r+", encoding="utf-8") as fh:
        fh.write(render_fact(edited))
        fh.truncate()
    assert {f.path: f.description for f in store.facts()}[fact.path] == "Edited by hand."
    assert _fields(store.facts()) == _fields(store.scan().facts())


def test_an_empty_memory_dir_has_no_facts_and_gets_no_index_inside(tmp_path):
    store = MemoryStore(tmp_path / "empty")
    assert store.facts() == []
    assert not (tmp_path / "empty" / ".dualtrace" / "index.sqlite").exists()
