"""A question with a word no session ever said is not answered from the words it shares
with a memory about something else (review 5, finding 1: "what was the root cause of the
memory leak?" answered STATE A, high confidence, with the auth-401 incident because both say
"root cause"). Real memory: the shipped examples encoded offline into a git memory dir, and
a small store written here (text that is in no benchmark), through the real index, with
the embedder off (the Quick start's install) and on (the [semantic] extra) where installed.
"""

from __future__ import annotations

import pytest

from dualtrace.memfs import formats
from dualtrace.memfs.recall import never_said_words, recall
from dualtrace.memfs.store import MemoryStore
from tests.conftest import EXAMPLES, encode_offline

try:
    from dualtrace.memfs.embed import get_embedder

    EMBEDDER = get_embedder()
except Exception:  # noqa: BLE001 - without the extra only the lexical half runs
    EMBEDDER = None

MODES = [pytest.param(None, id="lexical"),
         pytest.param(EMBEDDER, id="semantic",
                      marks=pytest.mark.skipif(EMBEDDER is None, reason="no [semantic] extra"))]
REVIEWED = ("pilot-1b-structured-logging", "pilot-4-auth-401-session1",
            "pilot-4-auth-401-session2", "pilot-5-session-storage")
INCIDENT = "incidents/auth-middleware-401-race.md"


@pytest.fixture(scope="module")
def reviewed(tmp_path_factory):
    """The four examples of the review's repro, encoded as `dualtrace encode` does it."""
    root = encode_offline(tmp_path_factory.mktemp("never-said"),
                          [EXAMPLES / f"{name}.jsonl" for name in REVIEWED])
    assert (root / INCIDENT).is_file()
    assert "root cause" in (root / INCIDENT).read_text().lower()
    return root


def curated(result):
    return [m.path for m in result.memories if m.record is None]


@pytest.mark.parametrize("embedder", MODES)
def test_the_reviews_memory_leak_question_is_not_answered_by_the_401_incident(reviewed, embedder):
    question = "what was the root cause of the memory leak?"
    result = recall(reviewed, question, embedder=embedder)
    # Nothing answers: not the incident, nor (with the embedder) the record of its session
    # saying the same "root cause" (the record of a memory held back is held back too).
    assert result.state == "C", result.render()
    # The incident still answers its own questions, with a word it never says too.
    for asked in ("what was the root cause of the 401 errors?",
                  "what was the root cause of the auth middleware 401s?"):
        found = recall(reviewed, asked, embedder=embedder)
        assert found.state == "A" and curated(found)[:1] == [INCIDENT], asked


@pytest.fixture
def small(tmp_path):
    """An incident that names its root cause, and a decision, in words of their own."""
    store = MemoryStore(tmp_path / "memory", project="p")
    incident = formats.Fact(
        path="incidents/orders-api-timeout.md", type="incident",
        description="Checkout requests to the orders API timed out under load",
        body="Checkout requests to the orders API timed out under load. The root cause was "
             "a full table scan: orders.created_at had no index. Adding the index fixed it.",
        stored="2026-05-04")
    decision = formats.Fact(
        path="decisions/cache-product-pages.md", type="decision",
        description="Product pages are cached for five minutes at the edge",
        body="We cache rendered product pages for five minutes; prices come from the API.",
        stored="2026-05-06")
    store.commit([store.write(incident), store.write(decision)], "mem: test\n")
    return store.root


@pytest.mark.parametrize("embedder", MODES)
def test_a_never_said_word_leaves_a_frame_match_unanswered(small, embedder):
    """"root cause" is all that "the deadlock" question shares with the incident: a word
    no memory holds (deadlock) makes those words the question's frame, not its subject."""
    from dualtrace.memfs.index import Index

    question = "what was the root cause of the deadlock?"
    with Index.open(small) as index:
        assert never_said_words(index, ["root", "cause", "deadlock"]) == ["deadlock"]
    assert recall(small, question, embedder=embedder).state == "C"
    # Named for a word of the question (its anchor), the memory still answers a question
    # with a word it never says ("slow"); with every word said, nothing changes.
    for asked in ("what was the root cause of the slow orders api?",
                  "what was the root cause of the orders api timeout?"):
        found = recall(small, asked, embedder=embedder)
        assert curated(found)[:1] == ["incidents/orders-api-timeout.md"], asked
    assert curated(recall(small, "how long are product pages cached?",
                          embedder=embedder))[:1] == ["decisions/cache-product-pages.md"]
