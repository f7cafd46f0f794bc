"""A move between two named things ("migrate the job queue from Celery to RQ") revises
the stored decision about the first: a new decision supersedes it, never "seen again"
on the old one (review 6, finding 13)."""

from __future__ import annotations

import pytest

from dualtrace.memfs.store import MemoryStore
from dualtrace.pipeline import encode_session
from tests.encoder.test_offline import chat

FIRST = "We decided to use Celery for the background job queue, because it retries failed jobs."


@pytest.mark.parametrize("revision", [
    "We decided to migrate the background job queue from Celery to RQ, because Celery's broker is too heavy for us.",
    "Change of plan: we are moving the job queue from Celery to RQ, because RQ needs only Redis.",
    "We decided to replace Celery with RQ for the background job queue, because RQ needs only Redis.",
    "We decided to switch the background jobs from Celery to RQ, because RQ needs only Redis.",
])
def test_a_move_from_one_tool_to_another_supersedes(tmp_path, revision: str) -> None:
    mem = tmp_path / "mem"
    first = encode_session(chat(tmp_path / "a.jsonl", [("user", FIRST)]),
                           memory_dir=mem, backend="offline")
    original = next(o["path"] for o in first.operations if o["type"] == "decision")
    second = encode_session(chat(tmp_path / "b.jsonl", [("user", revision)]),
                            memory_dir=mem, backend="offline")
    new = next(o for o in second.operations if o["type"] == "decision")
    assert new["action"] == "store" and new["path"] != original, new
    assert MemoryStore(mem).read_fact(original).superseded_by == new["path"]


def test_a_restatement_without_a_move_still_updates(tmp_path) -> None:
    mem = tmp_path / "mem"
    first = encode_session(chat(tmp_path / "a.jsonl", [("user", FIRST)]),
                           memory_dir=mem, backend="offline")
    original = next(o["path"] for o in first.operations if o["type"] == "decision")
    again = encode_session(chat(tmp_path / "b.jsonl", [
        ("user", "To repeat: we decided to use Celery for the background job queue, because it retries failed jobs.")]),
        memory_dir=mem, backend="offline")
    ops = [o for o in again.operations if o["type"] == "decision"]
    assert all(o["path"] == original for o in ops)
    assert MemoryStore(mem).read_fact(original).superseded_by is None
