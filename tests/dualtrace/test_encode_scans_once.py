"""An encode parses the memory store once: the backend's memory index and the plan's
duplicate guard share one scan."""

from __future__ import annotations

from dualtrace.memfs.store import MemoryStore
from dualtrace.pipeline import encode_session
from tests.conftest import EXAMPLES


def test_an_encode_scans_the_store_once(memdir, monkeypatch):
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
    assert len(scans) == 1
