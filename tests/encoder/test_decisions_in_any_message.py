"""Every decision a user states becomes a candidate, whatever else the message asks or
reports (review 7 finding 25, issue 12 item 3): a failure report with "also, we decided X,
because Y" keeps both the incident and the decision; two decisions about two subjects in
one message are two memories; a sentence that only gives the reason of the decision
before it ("we decided that because ...") stays that decision's rationale. Sessions
written here, in wording of their own."""

from __future__ import annotations

from pathlib import Path

from dualtrace.memfs.store import MemoryStore
from tests.conftest import encode_chat


def _facts(mem: Path, kind: str):
    return [f for f in MemoryStore(mem).scan().facts() if f.type == kind]


def test_a_failure_report_that_also_states_a_decision_keeps_both(tmp_path, run_cli):
    mem = encode_chat(run_cli, tmp_path, "t",
                      ("user", "The checkout page throws a TypeError on Safari, please look. Also, we decided "
                               "to pin Node to 20 LTS, because the build image ships it."),
                      ("assistant", "Looking at the TypeError; Node is pinned."))
    (decision,) = _facts(mem, "decision")
    assert decision.description == "Also, we decided to pin Node to 20 LTS, because the build image ships it."
    (incident,) = _facts(mem, "incident")
    assert "TypeError" in incident.description and "Node" not in incident.description


def test_two_decisions_about_two_subjects_are_two_memories(tmp_path, run_cli):
    mem = encode_chat(run_cli, tmp_path, "t",
                      ("user", "We decided to use pnpm workspaces for the monorepo, because installs were slow. "
                               "We also decided to run Renovate weekly, because daily pull requests were noise."),
                      ("assistant", "Both noted."))
    described = sorted(f.description for f in _facts(mem, "decision"))
    assert len(described) == 2
    assert "pnpm" in described[1] and "Renovate" in described[0]


def test_a_sentence_giving_the_reason_stays_with_its_decision(tmp_path, run_cli):
    mem = encode_chat(run_cli, tmp_path, "t",
                      ("user", "We decided to use pnpm workspaces for the monorepo. We decided that because "
                               "npm's hoisting broke the builds twice."),
                      ("assistant", "Noted."))
    (decision,) = _facts(mem, "decision")
    assert "hoisting broke the builds" in decision.body
