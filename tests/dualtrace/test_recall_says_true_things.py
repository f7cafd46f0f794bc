"""What recall says about itself is true (review 5, finding 11): a preference bullet shows the
date it was stored, not "stored unknown"; the abstention of `dualtrace recall` at a terminal
does not promise to store what the person types next (only an agent session is encoded),
while the agent's tools keep their offer. Real memory: the shipped examples encoded offline
by the real console script into a git memory dir; the CLI runs as a real process."""

from __future__ import annotations

import json

import pytest

from dualtrace.agent_tools import AgentMemory
from dualtrace.memfs.recall import OFFER, OFFER_PERSON, recall
from tests.conftest import EXAMPLES, run_dualtrace


@pytest.fixture
def memdir(tmp_path, monkeypatch):
    monkeypatch.setenv("DUALTRACE_EMBEDDER", "off")
    root = tmp_path / "memory"
    for name in ("pilot-1a-preference", "pilot-1b-structured-logging"):
        run_dualtrace("encode", str(EXAMPLES / f"{name}.jsonl"), "--memory-dir", str(root),
                      "--backend", "offline")
    assert "functions under 30 lines" in (root / "system" / "human.md").read_text()
    return root


def test_a_preference_bullet_shows_the_date_its_session_stored_it(memdir):
    result = recall(memdir, "how long should functions be?", embedder=None)
    first = result.memories[0]
    assert first.path == "system/human.md" and first.bullet is not None
    assert first.stored == "2026-03-10"  # pilot-1a's session, the one that said it
    text = result.render()
    assert "stored 2026-03-10" in text and "stored unknown" not in text
    shown = json.loads(run_dualtrace("recall", "how long should functions be?", "--json",
                                     "--memory-dir", str(memdir)).stdout)
    assert shown["memories"][0]["stored"] == "2026-03-10"


def test_the_terminal_abstention_promises_nothing_the_agents_keeps_its_offer(memdir):
    question = "who is the on-call engineer?"
    out = run_dualtrace("recall", question, "--memory-dir", str(memdir)).stdout
    assert "abstaining" in out
    assert OFFER_PERSON in out and OFFER not in out
    assert "will store it from this session" not in out
    agent = AgentMemory.resolve(memdir).recall(question)
    assert "abstaining" in agent and OFFER in agent
