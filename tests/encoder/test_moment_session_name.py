"""A moment may cite the name dualtrace gives its session (session 10's short ids, F14):
a long id that is not a uuid is named by a hash of it, "session 2034d616", and the
grounding check read "2034" as a number the session never said, so every such FULL
memory lost its moment (sde-bench: MRR 0.985 -> 0.874, amended 6/6 -> 4/6)."""

from __future__ import annotations

import json

import pytest

from dualtrace.encoder.grounding import Grounding, Rejected, check_moment
from dualtrace.encoder.operations import MomentDraft
from dualtrace.memfs.ids import short_id
from dualtrace.pipeline import encode_session
from tests.conftest import corpus_path

NARRATIVE = ("In session 2034d616 (2026-03-02), the user said: \"We decided to keep the "
             "ledger in PostgreSQL, not MySQL.\" Concretely, it mentions `ledger_entries`.")


def test_the_sessions_own_name_is_no_invented_specific():
    text = "We decided to keep the ledger in PostgreSQL, not MySQL. `ledger_entries`"
    draft = MomentDraft(NARRATIVE, "decided: ledger in PostgreSQL", "2026-03-02")
    with pytest.raises(Rejected, match="2034"):
        check_moment(draft, "ledger-postgresql", Grounding(text, "2026-03-02"))
    check_moment(draft, "ledger-postgresql",
                 Grounding(text, "2026-03-02", names=frozenset({"2034d616"})))


def test_a_plain_chat_with_a_long_id_keeps_its_moment(tmp_path):
    """sde-bench's boltons-redact-001 chat, written as eval_sdebench writes it."""
    task = corpus_path("sde-bench", "tasks", "boltons-redact.task.json")
    if not task.is_file():
        pytest.skip("corpus absent")
    turns = json.loads(task.read_text(encoding="utf-8"))["conversations"]
    path = tmp_path / "boltons-redact-001-0.jsonl"
    assert short_id(path.stem) == "7970beb2"  # digits first: the case
    path.write_text("\n".join(json.dumps({"role": t["role"], "content": t["text"]})
                              for t in turns) + "\n")
    report = encode_session(path, memory_dir=tmp_path / "mem", backend="offline")
    [op] = [o for o in report.operations if o["action"] == "store"]
    assert op["tier"] == "FULL", (op, report.usage.get("notes"))
    [scene] = list((tmp_path / "mem" / "scenes").rglob("*.md"))
    assert "In session 7970beb2 (" in scene.read_text(encoding="utf-8")
