"""What a user asks to be remembered is stored, as the right type, and recalled; a decision
stated in chat needs no tool activity (issue 12 item 3).

"Remember that X", "note for the future: X", "from now on X" is the strongest signal a user
gives: the noise gate lets it through and the offline encoder stores X as a convention
(a rule: an imperative, "we use/always/never", must/should), a preference (about the user),
a decision (a choice), or else a learning (a fact about the project). "Remember to X" is a
standing instruction. A question ("do you remember ...?") asks, it does not tell.

"We are replacing X with Y" or "we're moving from X to Y because Z", said with no tool call
at all, is a decision too: a session of talk can still hold one.

No real transcript in ../shared/corpus asks to remember anything; these chats are written
here, outside the labelled set."""

from __future__ import annotations

from pathlib import Path

import pytest

from dualtrace.encoder.backends.offline import remembered
from dualtrace.encoder.gates import evaluate
from dualtrace.hooks.transcripts import read_transcript
from dualtrace.memfs.store import MemoryStore
from tests.conftest import encode_chat, write_chat


def _bullets(mem: Path, name: str) -> list[str]:
    found = list(mem.glob(f"system/**/{name}.md"))
    return [ln[2:] for f in found for ln in f.read_text().splitlines() if ln.startswith("- ")]


@pytest.mark.parametrize(("said", "kind", "statement"), [
    ("Remember that the staging database is reset every Sunday night.", "learning",
     "The staging database is reset every Sunday night."),
    ("Note for the future: the billing service reads its key from BILLING_KEY, not config.yaml.",
     "learning", "The billing service reads its key from BILLING_KEY, not config.yaml."),
    ("Please remember to run the migrations with --fake-initial on the old tenants.", "convention",
     "Run the migrations with --fake-initial on the old tenants."),
    ("Keep in mind that every public endpoint must log its request id.", "convention",
     "Every public endpoint must log its request id."),
    ("Remember: we never squash-merge release branches.", "convention",
     "We never squash-merge release branches."),
    ("Remember that I'm on an M2 Mac, so images are built for arm64.", "preference",
     "I'm on an M2 Mac, so images are built for arm64."),
    ("Don't forget that we decided to keep Python 3.10 support until June.", "decision",
     "We decided to keep Python 3.10 support until June."),
    ("For future reference, I prefer small commits with a why in the body.", "preference",
     "I prefer small commits with a why in the body."),
])
def test_a_request_to_remember_names_its_type(said, kind, statement):
    assert remembered(said) == (kind, statement)


@pytest.mark.parametrize("said", [
    "Do you remember how we fixed the flaky login test?",
    "I remember we had this before.",
    "I don't remember the flag.",
    "Remember?",
    "Please note the tests are slow.",
])
def test_questions_and_the_users_own_memory_are_no_request(said):
    assert remembered(said) is None


def test_a_remembered_fact_in_a_chat_with_no_tools_is_stored_and_recalled(tmp_path, run_cli):
    turns = (("user", "Remember that the staging database is reset every Sunday night at 02:00 UTC."),
             ("assistant", "Noted."))
    gate = evaluate(read_transcript(write_chat(tmp_path / "g.jsonl", *turns)))
    assert not gate.activity and not gate.skip_backend
    mem = encode_chat(run_cli, tmp_path, "staging", *turns)
    (fact,) = MemoryStore(mem).scan().facts()
    assert fact.type == "learning" and fact.confidence == "HIGH"
    assert fact.description == "The staging database is reset every Sunday night at 02:00 UTC."
    assert fact.body.startswith("The user asked to remember (session ")
    answer = run_cli("recall", "--memory-dir", str(mem), "when is the staging database reset?")
    assert answer.exit_code == 0 and "STATE C" not in answer.output, answer.output
    assert "reset every Sunday night" in answer.output


def test_remember_to_and_from_now_on_are_conventions_recalled(tmp_path, run_cli):
    mem = encode_chat(run_cli, tmp_path, "rules",
                  ("user", "Please remember to run the migrations with --fake-initial on the old tenants."),
                  ("assistant", "Will do."),
                  ("user", "From now on, tag every release with the date."),
                  ("assistant", "OK."))
    bullets = _bullets(mem, "conventions")
    assert any(b.startswith("Run the migrations with --fake-initial") for b in bullets), bullets
    assert any("tag every release with the date" in b for b in bullets), bullets
    answer = run_cli("recall", "--memory-dir", str(mem), "how do we run the migrations on old tenants?")
    assert "--fake-initial" in answer.output, answer.output


def test_a_remembered_preference_is_a_bullet_about_the_user(tmp_path, run_cli):
    mem = encode_chat(run_cli, tmp_path, "me",
                  ("user", "For future reference, I prefer small commits with a why in the body."),
                  ("assistant", "Got it."))
    assert _bullets(mem, "human") == ["I prefer small commits with a why in the body."]


def test_a_question_about_the_past_stores_no_request(tmp_path, run_cli):
    mem = encode_chat(run_cli, tmp_path, "q", ("user", "Do you remember what the staging reset time was?"),
                  ("assistant", "I don't have that."))
    assert not [f for f in MemoryStore(mem).scan().facts() if f.type != "session"]
    assert not _bullets(mem, "conventions") and not _bullets(mem, "human")


@pytest.mark.parametrize(("said", "words"), [
    ("We are replacing Jenkins with GitHub Actions for all CI.", ("GitHub Actions", "Jenkins")),
    ("We're moving from REST to gRPC for the internal services because the payloads got too large.",
     ("gRPC", "payloads")),
    ("We're switching the job queue from Celery to RQ, Celery's broker setup is too heavy for us.",
     ("RQ", "Celery")),
])
def test_a_decision_said_in_chat_with_no_tool_activity_is_stored(tmp_path, run_cli, said, words):
    turns = (("user", said), ("assistant", "Understood."))
    gate = evaluate(read_transcript(write_chat(tmp_path / "g.jsonl", *turns)))
    assert not gate.activity and not gate.skip_backend, gate.reasons
    mem = encode_chat(run_cli, tmp_path, "talk", *turns)
    (fact,) = [f for f in MemoryStore(mem).scan().facts() if f.type == "decision"]
    assert all(w in fact.description for w in words), fact.description
