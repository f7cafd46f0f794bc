"""Recall: three states with the exact docs/PROTOCOL.md §10 labels, ranking, aggregation, staleness."""

from __future__ import annotations

import datetime as dt
import importlib.util
import json
import os
import subprocess
import sys

import pytest

from dualtrace.memfs import formats
from dualtrace.memfs.recall import (
    ABSTAIN,
    LABEL_A,
    LABEL_B,
    LABEL_C,
    THRESHOLD,
    aggregation_types,
    recall,
)
from dualtrace.memfs.store import MemoryStore
from tests.conftest import DATA

QUESTIONS = DATA / "recall_questions.py"


def _labelled():
    spec = importlib.util.spec_from_file_location("recall_questions", QUESTIONS)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


RQ = _labelled()


@pytest.fixture(scope="module")
def labelled_store(tmp_path_factory):
    store = MemoryStore(tmp_path_factory.mktemp("labelled") / "memory", project="project")
    RQ.build(store)
    return store


def _fact(anchor, description, kind="decision", stored="2026-11-01", **extra):
    return formats.Fact(path=formats.fact_path(kind, anchor), type=kind, description=description,
                        body=extra.pop("body", description), stored=stored, **extra)


def _moment(fact, narrative, timeline=()):
    return formats.Moment(path=formats.scene_path(fact.type, fact.anchor), anchor=fact.anchor,
                          description=f"Scene cue for {fact.anchor}", linked_fact=fact.path,
                          narrative=narrative, timeline=tuple(timeline), stored=fact.stored)


def test_labels_are_exactly_the_protocol_text():
    assert LABEL_A == "(STATE A retrieval: fact + scene, high confidence)"
    assert LABEL_B == "(STATE B retrieval: fact only, medium confidence)"
    assert LABEL_C == "(STATE C retrieval: no fact found, abstaining)"
    assert ABSTAIN == "I don't have that stored in my memory."


def test_labelled_set_abstention_and_answer_rates(labelled_store):
    """The calibration targets: STATE C on >= 90% never-stored, A/B on >= 95% answerable."""
    answered = abstained = found = 0
    never = [q for q in RQ.QUESTIONS if q[1] == "never"]
    answerable = [q for q in RQ.QUESTIONS if q[1] == "answerable"]
    assert len(never) >= 15 and len(answerable) >= 15
    for question, _, path in answerable:
        result = recall(labelled_store, question, limit=3)
        if result.state in ("A", "B"):
            answered += 1
            found += path in [m.path for m in result.memories]
    for question, _, _ in never:
        abstained += recall(labelled_store, question).state == "C"
    assert answered / len(answerable) >= 0.95
    assert found / len(answerable) >= 0.95
    assert abstained / len(never) >= 0.90


def test_pilot_state_a_moment_first_then_fact(labelled_store):
    result = recall(labelled_store, "Why did we switch to JSON structured logging?")
    assert result.state == "A" and result.label == LABEL_A
    text = result.render()
    assert text.startswith(LABEL_A)
    assert text.index("Moment (scenes/decisions/structured-logging-json.md)") < text.index("Fact:")
    assert "Datadog" in text and "log shipper" in text


def test_pilot_state_c_guesses_no_number(labelled_store):
    result = recall(labelled_store, "What's our test coverage threshold?")
    assert result.state == "C" and result.memories == ()
    text = result.render()
    assert text.splitlines()[:2] == [ABSTAIN, LABEL_C]
    assert not any(ch.isdigit() for ch in text)


def test_state_b_for_a_fact_without_moment(labelled_store):
    result = recall(labelled_store, "cursor or offset pagination?")
    assert result.state == "B" and result.label == LABEL_B
    assert result.memories[0].moment is None
    assert "Moment (" not in result.render()


def test_system_bullet_is_a_state_b_answer(labelled_store):
    result = recall(labelled_store, "how do we store money amounts")
    assert result.state == "B"
    assert result.memories[0].bullet == "Money amounts are stored as integer cents, never floats."


def test_type_filter(labelled_store):
    result = recall(labelled_store, "workers exit code 137 export", type="decision")
    assert all(m.type == "decision" for m in result.memories)
    result = recall(labelled_store, "workers exit code 137 export", type="incident")
    assert result.memories[0].path == "incidents/celery-worker-oom.md"


def test_scores_are_relevance_between_threshold_and_one(labelled_store):
    result = recall(labelled_store, "why httpx instead of requests", limit=5)
    assert all(THRESHOLD <= m.score <= 1.0 for m in result.memories)
    assert result.memories[0].path == "decisions/http-client-httpx.md"


def test_current_decision_ranks_above_superseded_one(memdir):
    store = MemoryStore(memdir, project="p")
    old = _fact("session-store-redis", "Session storage uses Redis with a 24h TTL",
                body="Sessions live in Redis; Redis session storage chosen for speed.",
                superseded_by="decisions/session-store-postgres.md")
    new = _fact("session-store-postgres", "Session storage moved to Postgres",
                body="Sessions moved from Redis to Postgres.",
                supersedes="decisions/session-store-redis.md")
    store.commit([store.write(old), store.write(new)], "mem: test\n")
    result = recall(store, "where do we keep session storage, Redis?")
    paths = [m.path for m in result.memories]
    assert paths[:2] == ["decisions/session-store-postgres.md", "decisions/session-store-redis.md"]
    assert result.memories[1].superseded_by == "decisions/session-store-postgres.md"
    assert "superseded by decisions/session-store-postgres.md (history)" in result.render()


def test_aggregation_returns_every_incident_ordered_by_timeline(memdir):
    store = MemoryStore(memdir, project="p")
    paths = []
    for anchor, stored, when in [("b-incident", "2026-05-01", "2026-05-01"),
                                 ("a-incident", "2026-09-01", "2026-01-15"),
                                 ("c-incident", "2026-03-01", None)]:
        fact = _fact(anchor, f"{anchor} broke the build", kind="incident", stored=stored)
        paths.append(store.write(fact))
        if when:
            paths.append(store.write(_moment(fact, "CI failed in build.py.",
                                             [f"{anchor} -> broke [{when}]"])))
    paths.append(store.write(_fact("unrelated", "A decision", kind="decision")))
    store.commit(paths, "mem: test\n")
    result = recall(store, "what incidents have we had", limit=1)
    assert result.aggregation
    assert [m.path for m in result.memories] == [
        "incidents/a-incident.md", "incidents/c-incident.md", "incidents/b-incident.md"]


def test_aggregation_with_a_topic_keeps_only_matches(labelled_store):
    result = recall(labelled_store, "list our decisions about session storage")
    assert result.aggregation
    assert [m.path for m in result.memories] == ["decisions/session-storage-postgres.md"]


def test_staleness_by_age_and_by_changed_project_file(memdir, tmp_path):
    store = MemoryStore(memdir, project="p")
    today = dt.date.today()
    old = _fact("old-thing", "Old zebra decision", stored=(today - dt.timedelta(days=400))
                .isoformat())
    fresh = _fact("fresh-thing", "Fresh giraffe decision in src/app.py",
                  stored=(today - dt.timedelta(days=3)).isoformat())
    store.commit([store.write(old), store.write(fresh)], "mem: test\n")
    note = "but the referenced files may have changed since then."
    aged = recall(store, "zebra decision", stale_days=180).memories[0]
    assert aged.stale and aged.stale.startswith(f"I have this stored from {old.stored}")
    project = tmp_path / "project"
    (project / "src").mkdir(parents=True)
    (project / "src" / "app.py").write_text("x = 1\n")
    stamp = (dt.datetime.now() - dt.timedelta(days=10)).timestamp()
    os.utime(project / "src" / "app.py", (stamp, stamp))
    assert recall(store, "giraffe decision", stale_days=180,
                  project_root=project).memories[0].stale is None
    # The setting's value decides the age: three days is old for stale_days = 2.
    assert recall(store, "giraffe decision", stale_days=2).memories[0].stale
    os.utime(project / "src" / "app.py", None)  # modified now, after the stored day
    changed = recall(store, "giraffe decision", stale_days=180, project_root=project)
    assert changed.memories[0].stale and note in changed.memories[0].stale
    assert note in changed.render()


def test_cli_json_output(labelled_store, tmp_path):
    env = {**os.environ, "DUALTRACE_MEMORY_DIR": str(labelled_store.root)}
    out = subprocess.run(
        [sys.executable, "-m", "dualtrace.cli", "recall", "--json", "--limit", "2",
         "Why did we switch to JSON structured logging?"],
        capture_output=True, text=True, env=env, cwd=tmp_path, timeout=60)
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert data["state"] == "A" and data["label"] == LABEL_A
    first = data["memories"][0]
    assert first["path"] == "decisions/structured-logging-json.md"
    assert set(first) >= {"path", "type", "confidence", "stored", "score"}
    assert first["type"] == "decision" and first["confidence"] == "HIGH"
    assert first["stored"] == "2026-03-02" and 0 < first["score"] <= 1
    assert len(data["memories"]) <= 2


def test_cli_abstains_in_text_and_json(labelled_store, tmp_path):
    env = {**os.environ, "DUALTRACE_MEMORY_DIR": str(labelled_store.root)}
    text = subprocess.run([sys.executable, "-m", "dualtrace.cli", "recall",
                           "What's our test coverage threshold?"],
                          capture_output=True, text=True, env=env, cwd=tmp_path, timeout=60)
    assert text.returncode == 0
    assert text.stdout.splitlines()[:2] == [ABSTAIN, LABEL_C]
    data = json.loads(subprocess.run(
        [sys.executable, "-m", "dualtrace.cli", "recall", "--json", "--type", "incident",
         "Which database do we use for analytics?"],
        capture_output=True, text=True, env=env, cwd=tmp_path, timeout=60).stdout)
    assert data["state"] == "C" and data["memories"] == [] and data["message"] == ABSTAIN


def test_cli_missing_memory_dir_is_a_one_line_error(tmp_path):
    env = {**os.environ, "DUALTRACE_MEMORY_DIR": str(tmp_path / "nope")}
    out = subprocess.run([sys.executable, "-m", "dualtrace.cli", "recall", "anything"],
                         capture_output=True, text=True, env=env, cwd=tmp_path, timeout=60)
    assert out.returncode == 1
    assert out.stderr.startswith("Error: no memory directory at")


def test_cli_reindex(labelled_store, tmp_path):
    env = {**os.environ, "DUALTRACE_MEMORY_DIR": str(labelled_store.root)}
    out = subprocess.run([sys.executable, "-m", "dualtrace.cli", "reindex"],
                         capture_output=True, text=True, env=env, cwd=tmp_path, timeout=60)
    assert out.returncode == 0, out.stderr
    # 9 facts (their moments join them) + 2 preference + 3 convention bullets, said the
    # way status and list say them (before: "indexed 14 memories", each bullet one)
    assert out.stdout.startswith(
        "indexed 9 memories, +5 moments, +3 convention bullets, +2 preference bullets in ")


def _wordllama():
    from dualtrace.memfs import embed

    return embed.load_wordllama()


@pytest.mark.parametrize("semantic", [False, True], ids=["lexical", "semantic"])
def test_an_incident_naming_a_service_in_passing_does_not_win_state_a(memdir, semantic):
    """Rank what a memory is about above words it merely mentions (issue 11, item 2).

    The incident is FULL (fact + moment, so it would answer in STATE A) and names the
    payment service and its retries several times in passing; the decision is about the
    payment service's retries and has no moment. The question asks about the service:
    the decision must come first and the answer is its STATE B, not the incident's A.
    """
    embedder = _wordllama() if semantic else None
    if semantic and embedder is None:
        pytest.skip("dualtrace[semantic] not installed")
    store = MemoryStore(memdir, project="p")
    decision = _fact("payment-service-retries", "Payment service retries failed charges",
                     body="Failed charges are retried three times with jittered exponential "
                          "backoff, then parked for a person.")
    incident = _fact("checkout-latency-spike", "Checkout latency spike on Black Friday",
                     kind="incident",
                     body="Checkout latency rose to 9 s. We looked at the payment service, its "
                          "retries, the payment service dashboard and the search cache; the "
                          "cause was a cold CDN edge.")
    scene = _moment(incident, "During the spike the payment service retries looked busy and the "
                              "payment service was suspected first, but its retries were normal; "
                              "the CDN edge was cold.",
                    timeline=("payment service retries checked", "CDN edge warmed"))
    paths = [store.write(decision), store.write(incident), store.write(scene)]
    store.commit(paths, "mem: decision + incident\n")
    for question in ("How does the payment service handle retries?",
                     "What did we decide about payment service retries?"):
        result = recall(store, question, limit=3, embedder=embedder)
        assert [m.path for m in result.memories][:1] == ["decisions/payment-service-retries.md"]
        assert result.state == "B", question  # the decision's state, not the incident's A
    # The incident still answers a question about itself, in STATE A.
    result = recall(store, "What caused the checkout latency spike?", limit=3, embedder=embedder)
    assert result.state == "A" and result.memories[0].path == "incidents/checkout-latency-spike.md"


@pytest.mark.parametrize("question,kinds", [
    ("what incidents have we had", ("incident",)),
    ("list our decisions about session storage", ("decision",)),
    ("Show me all decisions", ("decision",)),
    ("all our conventions", ("convention",)),
    ("What decisions have we made so far?", ("decision",)),
    ("list all the auth test failures", ()),
    # A word naming a list or a quantity asks about one thing, not for a listing.
    ("What did we put instead of the list of links to the other conversations?", None),
    ("Does the CI workflow run only on main or on every push?", None),
    ("How do we collapse a whole row instead of each entry?", None),
    ("Does it rebuild the page every time?", None),
])
def test_only_a_request_to_enumerate_is_an_aggregation(question, kinds):
    assert aggregation_types(question) == kinds


def test_a_question_about_a_list_is_answered_not_listed(memdir):
    store = MemoryStore(memdir, project="p")
    fact = _fact("single-link-combined-transcript",
                 "A single link to the combined transcript replaces the session links",
                 body="On a session's page the list of links to the other sessions is "
                      "replaced by one link to the combined transcript.")
    store.commit([store.write(fact)], "mem: fact\n")
    result = recall(store, "What replaced the list of links to the other sessions?",
                    embedder=None)
    assert not result.aggregation
    assert result.state == "B" and result.memories[0].path == fact.path
