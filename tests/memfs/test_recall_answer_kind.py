"""The memory that gives the kind of answer asked for ranks first (review 7 F21).

"how long do we keep events on the bus?" answered STATE A with the broker decision (it names
the event bus) before the retention one ("keep Kafka topics for 30 days"): a question that
asks how long, how often or how many is answered by a memory holding a duration, a frequency
or a number. The memories here are worded by nobody on the team's question sets.
"""

from __future__ import annotations

import pytest

from dualtrace.memfs import embed, formats
from dualtrace.memfs.recall import answer_kind, recall
from dualtrace.memfs.store import MemoryStore

SEMANTIC = embed.load_wordllama() is not None
EMBEDDERS = ["lexical", pytest.param("semantic", marks=pytest.mark.skipif(
    not SEMANTIC, reason="dualtrace[semantic] not installed"))]


def _fact(anchor: str, description: str, kind: str = "decision") -> formats.Fact:
    return formats.Fact(path=formats.fact_path(kind, anchor), type=kind,
                        description=description, body=description, stored="2026-10-01")


@pytest.fixture
def store(memdir):
    store = MemoryStore(memdir, project="p")
    facts = [
        # Each pair: the first names more of the question's words, the second answers it.
        _fact("mobile-api-access-tokens-rs256", "Mobile API access tokens are signed with "
              "RS256 keys held in the KMS and are valid only for the mobile API audience."),
        _fact("mobile-api-token-lifetime", "Mobile API access tokens expire after 15 minutes; "
              "refresh tokens rotate on every use."),
        _fact("backup-job-bucket", "The database backup job writes encrypted dumps of the "
              "database to the backups-prod bucket."),
        _fact("backup-schedule", "The backup job runs nightly at 02:00 UTC."),
        _fact("checkout-api-blue-green", "The checkout API deployment uses a blue/green "
              "rollout for the checkout API pods."),
        _fact("checkout-api-replicas", "The checkout API runs 3 replicas behind the load "
              "balancer."),
    ]
    store.commit([store.write(f) for f in facts], "mem: six\n")
    return store


@pytest.mark.parametrize("mode", EMBEDDERS)
@pytest.mark.parametrize("question, answer", [
    ("how long are mobile API access tokens valid?", "decisions/mobile-api-token-lifetime.md"),
    ("how often does the database backup job run?", "decisions/backup-schedule.md"),
    ("how many checkout API pods do we run?", "decisions/checkout-api-replicas.md"),
])
def test_the_memory_with_the_answer_kind_ranks_first(store, mode, question, answer):
    embedder = None if mode == "lexical" else embed.get_embedder()
    result = recall(store, question, embedder=embedder)
    paths = [m.path for m in result.memories]
    assert answer in paths, result.render()
    assert paths[0] == answer, paths


def test_answer_kinds():
    duration = answer_kind("how long do we keep the logs?")
    assert duration is not None
    assert duration.search("kept for 30 days") and duration.search("a month of events")
    assert not duration.search("we keep logs in S3")
    often = answer_kind("How often do we rotate keys?")
    assert often is not None and often.search("rotated weekly")
    assert not often.search("keys live in the KMS")
    many = answer_kind("how many shards are there?")
    assert many is not None and many.search("12 shards") and not many.search("a shard map")
    assert answer_kind("why did we pick Kafka?") is None
