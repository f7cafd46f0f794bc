"""A statement the user takes back later in the same session is not stored; what they
settled on instead is (review 7 finding 24, issue 12 item 3).

"scratch that", "never mind", "on second thought", "forget what I said about X", "I take
that back", "ignore my last message" point at what was said; "let's not X", "actually,
keep X" and "X after all" take back an earlier statement about the same subject. The
replacement keeps its reason and, in its body and moment, what it replaced. Sessions
written here, in wording of their own (not the review's repro, not the labelled set).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dualtrace.encoder.backends.offline import sentences
from dualtrace.encoder.cues import retraction
from dualtrace.memfs.store import MemoryStore
from tests.conftest import CORPUS, encode_chat


@pytest.mark.parametrize(("said", "rest", "deictic"), [
    ("Hmm, no, strike that: the invoices stay in the old S3 bucket.", "The invoices stay in the old S3 bucket.", True),
    ("Never mind.", "", True),
    ("Okay, never mind, we'll keep cron for the nightly jobs.", "We'll keep cron for the nightly jobs.", True),
    ("On second thought, let's not add GraphQL; REST covers our two clients.",
     "Let's not add GraphQL; REST covers our two clients.", True),
    ("I take that back: ship the mobile build on Thursday.", "Ship the mobile build on Thursday.", True),
    ("Disregard my previous message.", "", True),
    ("Actually, keep the XML export.", "Keep the XML export.", False),
    ("Let's not bother with a Helm chart.", "Let's not bother with a Helm chart.", False),
    ("We will stay on Python 3.11 after all.", "We will stay on Python 3.11 after all.", False),
])
def test_a_retraction_says_what_replaces_it(said, rest, deictic):
    back = retraction(said)
    assert back is not None and (back.rest, back.deictic) == (rest, deictic)


def test_forget_what_i_said_names_its_subject():
    back = retraction("Forget what I said about the Kubernetes operator, it is overkill.")
    assert back is not None and back.about == "the Kubernetes operator" and not back.deictic


@pytest.mark.parametrize("said", [
    "Never mind the lint warnings, fix the failing import first.",  # set aside, not taken back
    "Don't forget that the staging DB resets on Sundays.",  # a request to remember
    "Keep the functions small.",  # a plain instruction
    "After all, it is only a prototype.",
    "Close the epic after all 4 subtasks are done.",
    "Scratch that?",
])
def test_other_sentences_take_nothing_back(said):
    assert retraction(said) is None


def test_no_sentence_the_corpus_users_wrote_is_a_retraction():
    """3,200 user sentences of real Claude Code / agentlogs sessions and 4,800 of the
    sde-bench chats hold no retraction: the cue must not find one there."""
    if not CORPUS.is_dir():
        pytest.skip("shared corpus absent")
    said: list[str] = []
    for path in sorted((CORPUS / "claude-code").rglob("*.jsonl")):
        for line in path.read_text("utf-8", errors="replace").splitlines():
            try:
                record = json.loads(line)
            except ValueError:
                continue
            if record.get("type") != "user":
                continue
            content = (record.get("message") or {}).get("content")
            blocks = [content] if isinstance(content, str) else [
                b.get("text", "") for b in content or [] if isinstance(b, dict) and b.get("type") == "text"]
            said += [s for text in blocks for s in sentences(text)]
    chats = json.loads((CORPUS / "sde-bench" / "decoy_conversations.json").read_text("utf-8"))
    said += [s for chat in chats for turn in chat["turns"] for s in sentences(turn.get("text", ""))]
    assert len(said) > 5000
    assert [s for s in said if retraction(s) is not None] == []


def _decisions(mem: Path):
    return [f for f in MemoryStore(mem).scan().facts() if f.type == "decision"]


def test_a_decision_taken_back_leaves_only_the_final_one(tmp_path, run_cli):
    mem = encode_chat(run_cli, tmp_path, "t",
                      ("user", "We decided to host the docs on Read the Docs, because it builds every tag."),
                      ("assistant", "OK, I'll add a .readthedocs.yaml."),
                      ("user", "Hmm, no, scratch that. The docs stay on GitHub Pages. The Read the Docs "
                               "build would be too slow for our notebooks."),
                      ("assistant", "Understood, GitHub Pages it is."))
    (fact,) = _decisions(mem)
    assert fact.description == "The docs stay on GitHub Pages."
    assert "too slow" in fact.body  # its reason
    assert 'Taken back earlier in the same session: "We decided to host the docs on Read the Docs' in fact.body
    scene = (mem / fact.linked_scene).read_text() if fact.linked_scene else ""
    assert not scene or "then taken back" in scene


def test_never_mind_takes_back_what_was_just_said_and_nothing_older(tmp_path, run_cli):
    mem = encode_chat(run_cli, tmp_path, "t",
                      ("user", "We decided to use Sentry for error tracking, because it groups stack traces."),
                      ("assistant", "Noted."),
                      ("user", "Let's use Celery for the email queue."), ("assistant", "OK."),
                      ("user", "Never mind, we'll keep the cron job for emails."), ("assistant", "OK."))
    described = sorted(f.description for f in _decisions(mem))
    assert described == ["We decided to use Sentry for error tracking, because it groups stack traces.",
                         "We'll keep the cron job for emails."]


def test_a_retraction_naming_another_subject_keeps_the_last_statement(tmp_path, run_cli):
    """"Scratch that, release it on Monday" points at the release plan said first, which
    was no memory; the decision said in between stays."""
    mem = encode_chat(run_cli, tmp_path, "t",
                      ("user", "Release the beta on Friday."), ("assistant", "OK."),
                      ("user", "We decided to use Sentry for error tracking, because it groups stack traces."),
                      ("assistant", "Noted."),
                      ("user", "Scratch that, release the beta on Monday."), ("assistant", "OK."))
    assert [f.description for f in _decisions(mem)] == [
        "We decided to use Sentry for error tracking, because it groups stack traces."]


def test_forget_what_i_said_about_x_drops_x_only(tmp_path, run_cli):
    mem = encode_chat(run_cli, tmp_path, "t",
                      ("user", "We decided to add feature flags through LaunchDarkly, because product wants "
                               "gradual rollouts."), ("assistant", "OK."),
                      ("user", "We decided to run the end-to-end suite nightly, because it takes 40 minutes."),
                      ("assistant", "OK."),
                      ("user", "Forget what I said about LaunchDarkly, it's too expensive for us."),
                      ("assistant", "Understood."))
    assert [f.description for f in _decisions(mem)] == [
        "We decided to run the end-to-end suite nightly, because it takes 40 minutes."]


def test_actually_keep_x_replaces_the_statement_about_x(tmp_path, run_cli):
    mem = encode_chat(run_cli, tmp_path, "t",
                      ("user", "We decided to drop the SOAP endpoint, because no client has called it this year."),
                      ("assistant", "I'll remove it."),
                      ("user", "Actually, keep the SOAP endpoint, because the tax office still uses it."),
                      ("assistant", "Keeping it."))
    (fact,) = _decisions(mem)
    assert fact.description == "Keep the SOAP endpoint, because the tax office still uses it."


def test_a_convention_taken_back_is_not_a_rule(tmp_path, run_cli):
    mem = encode_chat(run_cli, tmp_path, "t",
                      ("user", "From now on, always rebase feature branches before merging."), ("assistant", "OK."),
                      ("user", "Never mind."), ("assistant", "OK."))
    rules = [ln for f in mem.glob("system/**/conventions.md") for ln in f.read_text().splitlines()
             if ln.startswith("- ")]
    assert rules == []


def test_a_later_session_s_retraction_supersedes_the_stored_decision(tmp_path, run_cli):
    """A replacement revises a decision an earlier session stored on the same subject."""
    encode_chat(run_cli, tmp_path, "s1",
                ("user", "We decided to move the search index to Elasticsearch, because Postgres full-text "
                         "search ranks badly."), ("assistant", "OK."))
    mem = encode_chat(run_cli, tmp_path, "s2",
                      ("user", "On second thought, we'll keep the search index in Postgres full-text search; "
                               "the Elasticsearch cluster is too costly."), ("assistant", "OK."))
    facts = {f.path: f for f in _decisions(mem)}
    (old,) = [f for f in facts.values() if "elasticsearch" in f.description.lower()
              and f.description.startswith("We decided")]
    assert old.superseded_by in facts and "keep" in facts[old.superseded_by].description.lower()
