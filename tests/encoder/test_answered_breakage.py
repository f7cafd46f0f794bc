"""A question about something that breaks, answered by the agent and then fixed, is an
incident at MEDIUM, not a HIGH decision (review 10 MED, agentlogs codex/images.jsonl: "why
does the claude code label break here on the /team dashboard?", the agent's diagnosis, "lets
increase the width", a commit; it was stored as a HIGH decision led by the diagnosis)."""

from __future__ import annotations

import pytest

from dualtrace.memfs.store import MemoryStore
from dualtrace.pipeline import encode_session
from tests.conftest import corpus_path


def test_the_codex_chart_label_question_is_a_resolved_incident(tmp_path):
    rollout = corpus_path("agentlogs", "codex", "images.jsonl")
    if not rollout.is_file():
        pytest.skip("corpus absent")
    encode_session(rollout, memory_dir=tmp_path / "mem", backend="offline")
    facts = MemoryStore(tmp_path / "mem").scan().facts()
    [incident] = [f for f in facts if f.type == "incident"]
    assert not [f for f in facts if f.type == "decision"], [f.path for f in facts]
    assert incident.status == "resolved" and incident.confidence == "MEDIUM"
    assert "Y-axis width" in incident.description and "lets increase the width" in incident.body
    assert "4a25878" in incident.body  # the fix's commit

