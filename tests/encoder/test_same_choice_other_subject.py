"""The duplicate guard keeps a decision's subject: the same technology chosen for another
thing is a decision of its own, ``related`` to the first; the same subject with a new
reason updates the decision (review 7 finding 23, issue 12 item 3: "merges only memories
about the same subject"). Checked through the offline encoder and, for every backend,
through the validator. Wording of its own, not the review's repro."""

from __future__ import annotations

from pathlib import Path

import pytest

from dualtrace.encoder.matching import distinct_scopes, scope_of
from dualtrace.memfs.store import MemoryStore
from tests.conftest import encode_chat
from tests.encoder.test_plan import builder, store_op


@pytest.mark.parametrize(("a", "b"), [
    ("We decided to use Redis for the session cache, because logins spike at 9am.",
     "We decided to use Redis for rate limiting as well, because it is already deployed."),
    ("Use SQLite in the unit tests.", "Use SQLite in the desktop client, since it ships as one file."),
    ("We standardized on Terraform.", "Use Terraform for the DNS records too."),  # extends a choice
])
def test_one_choice_for_two_things_is_two_subjects(a, b):
    assert distinct_scopes(a, b) and distinct_scopes(b, a)


@pytest.mark.parametrize(("a", "b"), [
    ("We decided to use Redis for the session cache.", "We're sticking with Redis for sessions: eviction bounds memory."),
    ("Use Redis for caching.", "We will keep Redis for the cache layer."),  # one word's forms
    ("Use uv for now.", "Use uv, because it resolves in seconds."),  # an idiom and a reason: no scope
    ("Use black for consistency.", "Use black in CI."),  # a goal is no scope
    ("Use Kafka for the agent4 session bus.", "Use Kafka for the agent7 session bus."),  # names decide those
])
def test_the_same_scope_or_none_is_no_split(a, b):
    assert not distinct_scopes(a, b)


def test_a_scope_is_read_before_the_reason():
    assert scope_of("Use DuckDB, because it is fast for analytics.") == set()
    assert scope_of("Use DuckDB for the nightly reports, because it is fast.") == {"nightly", "report"}


def _decisions(mem: Path):
    return {f.path: f for f in MemoryStore(mem).scan().facts() if f.type == "decision"}


def test_another_subject_gets_its_own_file_and_the_same_subject_updates(tmp_path, run_cli):
    encode_chat(run_cli, tmp_path, "s1", ("user", "We decided to use Redis for the session cache, because "
                                                  "logins spike at 9am."), ("assistant", "OK."))
    (first,) = _decisions(tmp_path / "mem")
    mem = encode_chat(run_cli, tmp_path, "s2", ("user", "We decided to use Redis for rate limiting as well, "
                                                        "because it is already deployed."), ("assistant", "OK."))
    facts = _decisions(mem)
    (second,) = [p for p in facts if p != first]
    assert "rate limiting" in facts[second].description and facts[second].related == (first,)
    assert "session cache" in facts[first].description and "rate limiting" not in facts[first].body
    mem = encode_chat(run_cli, tmp_path, "s3", ("user", "We're sticking with Redis for the session cache: "
                                                        "its eviction policy keeps memory bounded."),
                      ("assistant", "OK."))
    facts = _decisions(mem)
    assert sorted(facts) == sorted([first, second])
    assert "eviction policy keeps memory bounded" in facts[first].body
    assert "eviction" not in facts[second].body


def test_the_validator_keeps_another_subject_apart_for_any_backend(memdir):
    b = builder(memdir)
    b.add(store_op(anchor="redis-session-cache", moment=None,
                   description="Use Redis for the session cache, because logins spike at 9am."))
    other = b.add(store_op(anchor="redis-cache-limits", moment=None,
                           description="Use Redis for rate limiting too, because it is already deployed."))
    assert other.action == "store" and other.path != "decisions/redis-session-cache.md"
    assert b.pending[other.path].related == ("decisions/redis-session-cache.md",)
    same = b.add(store_op(anchor="redis-sessions", moment=None, body="Eviction keeps memory bounded.",
                          description="Use Redis for the session cache: eviction keeps memory bounded."))
    assert same.action == "update" and same.path == "decisions/redis-session-cache.md"
