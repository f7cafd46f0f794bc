"""A user's correction, a changed mind and a by-the-way preference are memories (review 7
findings 2 and 19, issue 12 item 3: "what the user corrected").

- "No, we use X here, not Y", "Use X, not Y, in ...", "Don't X; use Y": a rule (convention);
- "wait, the base path is /v2 now, not /v1": a corrected fact (learning);
- "Stop doing X, I hate that", "By the way, I prefer X": the user's taste (preference);
- "I changed my mind about X: <new choice>": a decision that supersedes the stored one, and
  its anchor names the new choice, each word once.
The gate hears them even in a session whose only activity is one routine command.
Sessions written here (wording outside the labelled set)."""

from __future__ import annotations

from pathlib import Path

import pytest

from dualtrace.encoder.cues import correction_kind
from dualtrace.memfs.store import MemoryStore
from tests.conftest import encode_chat


@pytest.mark.parametrize(("said", "kind"), [
    ("No, we deploy with Helm in this cluster, not kubectl apply.", "convention"),
    ("Use httpx, not requests, in the new services.", "convention"),
    ("Don't call the payments API directly; use the gateway client.", "convention"),
    ("Please avoid mocks in the repository tests, instead of mocks use the sqlite fixture.", "convention"),
    ("Actually, the worker queue is Redis now, not RabbitMQ.", "learning"),
    ("wait, the config file lives in ~/.config/shop now, not in the repo", "learning"),
    ("Stop renaming the variables, I hate that.", "preference"),
    ("Hmm, no. Stop printing the whole payload, I don't like it.", "preference"),
])
def test_a_correction_names_its_type(said, kind):
    assert correction_kind(said) == kind


@pytest.mark.parametrize("said", [
    "Use the sidebar for that.",  # a one-off instruction: no alternative rejected
    "The tests are not green yet, can you look?",
    "No, thanks.",
    "Is it Redis now, not RabbitMQ?",
    "We shipped it yesterday, not today.",  # a statement of what happened, no correction opener
])
def test_other_sentences_are_no_correction(said):
    assert correction_kind(said) is None



def _bullets(mem: Path, name: str) -> list[str]:
    return [ln[2:] for f in mem.glob(f"system/**/{name}.md") for ln in f.read_text().splitlines()
            if ln.startswith("- ")]


def test_corrections_in_chat_are_stored_as_rules_facts_and_taste(tmp_path, run_cli):
    mem = encode_chat(run_cli, tmp_path, "c",
                  ("user", "No, we deploy with Helm in this cluster, not kubectl apply."), ("assistant", "Got it."),
                  ("user", "Actually, the worker queue is Redis now, not RabbitMQ."), ("assistant", "Noted."),
                  ("user", "Stop renaming the variables, I hate that."), ("assistant", "Sorry."))
    assert _bullets(mem, "conventions") == ["We deploy with Helm in this cluster, not kubectl apply."]
    assert _bullets(mem, "human") == ["Stop renaming the variables, I hate that."]
    (fact,) = [f for f in MemoryStore(mem).scan().facts() if f.type == "learning"]
    assert fact.description == "The worker queue is Redis now, not RabbitMQ."


def test_a_changed_mind_supersedes_and_a_by_the_way_preference_is_kept(tmp_path, run_cli):
    encode_chat(run_cli, tmp_path, "s1", ("user", "We decided to keep the audit log in Postgres, because "
                                              "the auditors query it with SQL."), ("assistant", "OK."))
    mem = encode_chat(run_cli, tmp_path, "s2",
                  ("user", "I changed my mind about the audit log: write it to S3 as Parquet, the auditors "
                           "moved to Athena."), ("assistant", "Moving the audit log to S3."),
                  ("user", "By the way, I prefer one commit per logical change, in every project."),
                  ("assistant", "Noted."))
    facts = {f.path: f for f in MemoryStore(mem).scan().facts() if f.type == "decision"}
    (old,) = [f for f in facts.values() if "postgres" in f.path]
    (new,) = [f for f in facts.values() if f is not old]
    assert old.superseded_by == new.path
    assert "parquet" in new.path and "changed" not in new.path and "mind" not in new.path
    assert _bullets(mem, "human") == ["By the way, I prefer one commit per logical change, in every project."]


def test_a_word_said_twice_in_a_row_is_in_the_anchor_once(tmp_path, run_cli):
    mem = encode_chat(run_cli, tmp_path, "d", ("user", "Let's use decimal.Decimal for money instead of floats, "
                                                   "because rounding broke the totals."), ("assistant", "OK."))
    (fact,) = [f for f in MemoryStore(mem).scan().facts() if f.type == "decision"]
    assert "decimal-decimal" not in fact.path, fact.path
