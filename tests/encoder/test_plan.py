"""The validator: the rules of docs/PROTOCOL.md §6-8 enforced in code."""

from __future__ import annotations

import git
import pytest

from dualtrace.encoder.plan import (
    Context,
    Grounding,
    MomentDraft,
    PlanBuilder,
    Rejected,
    Skip,
    Store,
    Update,
    parse_operation,
)
from dualtrace.errors import PathError
from dualtrace.memfs.conflicts import open_conflicts
from dualtrace.memfs.formats import Scores
from dualtrace.memfs.store import MemoryStore
from dualtrace.memfs.transaction import commit

SESSION_TEXT = (
    "We switched the cache in src/app/cache.py to use cache_get() after TimeoutError at 14:02; "
    "commit 4e1f2ab; pytest -q passed; 401 errors; Postgres replaces Redis"
)


def builder(memdir, session="sess-0001", day="2026-05-01") -> PlanBuilder:
    return PlanBuilder(MemoryStore(memdir), Context(session, "test", day, Grounding(SESSION_TEXT, day)))


def moment(**kw) -> MomentDraft:
    base = dict(narrative="While editing src/app/cache.py the team saw TimeoutError and moved to cache_get().",
                what="switched cache", marker="commit 4e1f2ab")
    base.update(kw)
    return MomentDraft(**base)


def store_op(**kw) -> Store:
    base = dict(type="decision", anchor="cache-get-wrapper", description="Use cache_get() for cache reads",
                body="Because TimeoutError.", scores=Scores(3, 2, 3, 2), confidence="MEDIUM", moment=moment())
    base.update(kw)
    return Store(**base)


@pytest.mark.parametrize("scores,tier", [((1, 1, 1, 1), "SKIP"), ((2, 1, 1, 1), "RECORD"),
                                         ((2, 2, 1, 2), "RECORD"), ((2, 2, 2, 2), "FULL")])
def test_tier_is_computed_from_scores(memdir, scores, tier):
    b = builder(memdir)
    outcome = b.add(store_op(type="incident", anchor="cache-timeouts", scores=Scores(*scores)))
    assert outcome.tier == tier
    written = set(b.pending)
    if tier == "SKIP":
        assert written == set()
    elif tier == "RECORD":
        assert written == {"incidents/cache-timeouts.md"}
        assert b.pending["incidents/cache-timeouts.md"].linked_scene is None
    else:
        assert written == {"incidents/cache-timeouts.md", "scenes/incidents/cache-timeouts.md"}


def test_stakes_override_and_decision_rationale(memdir):
    b = builder(memdir)
    assert b.add(store_op(type="incident", anchor="outage", description="production outage of the API",
                          scores=Scores(2, 1, 1, 1))).tier == "FULL"
    assert b.add(store_op(anchor="db-choice", description="Postgres replaces Redis",
                          body="Database migration", scores=Scores(2, 1, 1, 1))).tier == "FULL"
    assert b.add(store_op(anchor="x-choice", description="minor choice", body="no why",
                          scores=Scores(2, 1, 0, 2), moment=None)).tier == "RECORD"


def test_a_tier_off_its_evidence_range_says_which_routing_rule_moved_it(memdir):
    """The encode/explain legend gives the ranges (8-12 FULL, 5-7 RECORD); a line whose
    tier a routing rule moved says which rule in its note, and one in range says nothing."""
    b = builder(memdir)
    outage = b.add(store_op(type="incident", anchor="outage", description="production outage of the API",
                            scores=Scores(2, 1, 1, 1)))
    assert (outage.tier, outage.note) == ("FULL", 'FULL at evidence 5: a high-stakes incident ("outage")')
    why = b.add(store_op(anchor="why-choice", description="Use cache_get() for reads", body="Because.",
                         scores=Scores(2, 1, 2, 1)))
    assert (why.tier, why.note) == ("FULL", "FULL at evidence 6: a decision with its why (rationale 2)")
    pattern = b.add(store_op(type="pattern", anchor="forgets-migrations", description="forgets migrations",
                             scores=Scores(3, 3, 2, 3)))
    assert (pattern.tier, pattern.note) == ("RECORD", "RECORD at evidence 11: a pattern's first sighting")
    plain = b.add(store_op(anchor="in-range", description="Use cache_get() for writes", scores=Scores(3, 2, 3, 2)))
    assert (plain.tier, plain.note) == ("FULL", "")
    # no grounded moment to keep: both reasons
    bare = b.add(store_op(anchor="bare-why", description="Use cache_get() for deletes", body="Because.",
                          scores=Scores(2, 1, 2, 1), moment=None))
    assert bare.tier == "RECORD"
    assert bare.note == ("FULL at evidence 6: a decision with its why (rationale 2); "
                         "no moment proposed: stored as fact only")


@pytest.mark.parametrize("text,tier", [
    ("Replace Redux with Zustand for the store.", "FULL"),
    # claude-code-log 37f83ec9: a UI change, no framework or contract
    ("Replace them with a single link to the combined transcript instead.", "RECORD"),
])
def test_an_irreversible_replacement_names_what_it_replaces(memdir, text, tier):
    b = builder(memdir)
    assert b.add(store_op(anchor="replacement", description=text, body="", scores=Scores(2, 1, 0, 2))).tier == tier


def test_pattern_is_record_first_then_full_on_second_sighting(memdir):
    b = builder(memdir)
    first = b.add(store_op(type="pattern", anchor="forgets-migrations", description="forgets migrations",
                           scores=Scores(3, 3, 2, 3)))
    assert first.tier == "RECORD"
    commit(b.store, b.changeset())
    b2 = builder(memdir, session="sess-0002")
    second = b2.add(store_op(type="pattern", anchor="forgets-migrations", description="forgets migrations",
                             scores=Scores(3, 3, 2, 3)))
    assert second.action == "upgrade"
    commit(b2.store, b2.changeset())
    repo = git.Repo(memdir)
    assert repo.head.commit.summary == "mem: upgrade patterns/forgets-migrations (added scene, evidence:11)"
    assert (memdir / "scenes" / "patterns" / "forgets-migrations.md").exists()


@pytest.mark.parametrize("data,needle", [
    ({"op": "store", "type": "decision", "anchor": "a", "description": "d", "body": "b",
      "scores": {"durability": 4, "scope": 1, "rationale": 1, "retrieval": 1}}, "0-3"),
    ({"op": "store", "type": "decision", "anchor": "a", "description": "d", "body": "b",
      "scores": {"durability": "3", "scope": 1, "rationale": 1, "retrieval": 1}}, "integer"),
    ({"op": "store", "type": "wish", "anchor": "a", "description": "d", "body": "b",
      "scores": {"durability": 1, "scope": 1, "rationale": 1, "retrieval": 1}}, "unknown type"),
    ({"op": "delete", "target": "decisions/a.md"}, "nothing can be deleted"),
    ({"op": "store", "type": "decision", "anchor": "a", "description": "", "body": "b",
      "scores": {"durability": 1, "scope": 1, "rationale": 1, "retrieval": 1}}, "description"),
])
def test_parse_rejects_bad_input(data, needle):
    with pytest.raises(Rejected, match=needle):
        parse_operation(data)


@pytest.mark.parametrize("anchor", ["../../etc/passwd", "/etc/passwd", "a/b", "x" * 65, "Ünïcode", ""])
def test_bad_anchors_rejected_nothing_written(memdir, anchor):
    b = builder(memdir)
    with pytest.raises(PathError):
        b.add(store_op(anchor=anchor))
    assert b.pending == {}


def test_update_target_outside_is_rejected(memdir):
    b = builder(memdir)
    for target in ("../../etc/passwd", "/etc/passwd.md"):
        with pytest.raises((Rejected, PathError)):
            b.add(Update(target=target, reason="x", body="y"))


def test_duplicate_store_becomes_update(memdir):
    b = builder(memdir)
    b.add(store_op())
    commit(b.store, b.changeset())
    b2 = builder(memdir, session="sess-0002", day="2026-05-02")
    same_anchor = b2.add(store_op(body="Second session: still TimeoutError.", confidence="HIGH"))
    assert same_anchor.action == "update" and same_anchor.path == "decisions/cache-get-wrapper.md"
    other_anchor = b2.add(store_op(anchor="cache-get-reads", description="Use cache_get() for all cache reads"))
    assert other_anchor.path == "decisions/cache-get-wrapper.md"
    commit(b2.store, b2.changeset())
    assert sorted(p.name for p in (memdir / "decisions").iterdir()) == ["cache-get-wrapper.md"]


def test_update_rules_confidence_body_timeline(memdir):
    b = builder(memdir)
    b.add(store_op(confidence="HIGH"))
    commit(b.store, b.changeset())
    b2 = builder(memdir, session="sess-0002", day="2026-05-02")
    outcome = b2.add(Update(target="cache-get-wrapper", reason="revisited", body="New detail at 14:02.",
                            confidence="LOW", what="revisited the cache", marker="2026-05-02"))
    assert "kept confidence HIGH" in outcome.note
    commit(b2.store, b2.changeset())
    store = MemoryStore(memdir)
    fact = store.read_fact("decisions/cache-get-wrapper.md")
    assert fact.confidence == "HIGH"
    assert fact.body.startswith("Because TimeoutError.")
    assert "**Update 2026-05-02, session sess-0002:** New detail at 14:02." in fact.body
    assert fact.sessions == ("sess-0001", "sess-0002") and fact.updated == "2026-05-02"
    scene = store.read_moment("scenes/decisions/cache-get-wrapper.md")
    assert scene.timeline[-1] == "cache-get-wrapper -> revisited the cache [2026-05-02]"
    assert len(scene.timeline) == 2
    b3 = builder(memdir, session="sess-0003")
    b3.add(Update(target="cache-get-wrapper", reason="downgrade", confidence="LOW",
                  confidence_reason="the benchmark was wrong"))
    commit(b3.store, b3.changeset())
    assert MemoryStore(memdir).read_fact("decisions/cache-get-wrapper.md").confidence == "LOW"


def test_record_then_full_is_an_upgrade(memdir):
    b = builder(memdir)
    b.add(store_op(type="incident", anchor="cache-timeouts", scores=Scores(2, 1, 1, 2), moment=None))
    commit(b.store, b.changeset())
    assert not (memdir / "scenes").exists()
    b2 = builder(memdir, session="s2")
    outcome = b2.add(Update(target="incidents/cache-timeouts.md", reason="recurred", body="Again.",
                            moment=moment(), scores=Scores(2, 2, 2, 3)))
    assert outcome.action == "upgrade" and outcome.tier == "FULL"
    commit(b2.store, b2.changeset())
    fact = MemoryStore(memdir).read_fact("incidents/cache-timeouts.md")
    assert fact.linked_scene == "scenes/incidents/cache-timeouts.md"
    assert git.Repo(memdir).head.commit.summary.startswith("mem: upgrade incidents/cache-timeouts (added scene")


def test_contradicting_decision_supersedes_and_records_conflict(memdir):
    b = builder(memdir)
    b.add(store_op(anchor="redis-sessions", description="Keep sessions in Redis", moment=None))
    commit(b.store, b.changeset())
    b2 = builder(memdir, session="s2")
    outcome = b2.add(store_op(anchor="postgres-sessions", description="Postgres replaces Redis for sessions",
                              supersedes="decisions/redis-sessions.md", moment=None))
    assert "supersedes" in outcome.note
    commit(b2.store, b2.changeset())
    store = MemoryStore(memdir)
    old = store.read_fact("decisions/redis-sessions.md")
    new = store.read_fact("decisions/postgres-sessions.md")
    assert old.superseded_by == "decisions/postgres-sessions.md"
    assert new.supersedes == "decisions/redis-sessions.md"
    assert [(c["old"], c["new"]) for c in open_conflicts(store)] == [
        ("decisions/redis-sessions.md", "decisions/postgres-sessions.md")]


@pytest.mark.parametrize("draft,needle", [
    (dict(narrative="Edited src/app/other.py after ValueError.", what="x", marker="2026-05-01"),
     "not in the session"),
    (dict(narrative="Cache reads were slow, 250 ms.", what="x", marker="2026-05-01"), "250"),
    (dict(narrative="The team talked about caching in general.", what="decided", marker="2026-05-01"),
     "no concrete artifact"),
    (dict(narrative="Edited src/app/cache.py.", what="x", marker=""), "temporal marker"),
    (dict(narrative="Edited src/app/cache.py.", what="x", marker="commit deadbee"), "deadbee"),
])
def test_moments_with_invented_specifics_are_rejected(memdir, draft, needle):
    b = builder(memdir)
    with pytest.raises(Rejected, match=needle):
        b.add(store_op(moment=MomentDraft(**draft)))
    assert b.pending == {}


def test_conventions_and_preferences_become_bullets(memdir):
    b = builder(memdir)
    low = b.add(store_op(type="preference", anchor="short-functions", description="keeps functions short",
                         scores=Scores(2, 1, 0, 1), moment=None))
    assert low.tier == "SKIP" and low.action == "bullet"
    full = b.add(store_op(type="convention", anchor="cache-get-only", description="Always use cache_get()",
                          scores=Scores(3, 3, 2, 2)))
    assert full.tier == "FULL"
    dup = b.add(store_op(type="convention", anchor="cache-get-only", description="always use cache_get().",
                         scores=Scores(3, 3, 2, 2), moment=None))
    assert dup.action == "skip"
    commit(b.store, b.changeset())
    store = MemoryStore(memdir)
    conventions = store.read("system/project/conventions.md")
    assert conventions.bullets == ("Always use cache_get()",)
    scene = store.read_moment("scenes/conventions/cache-get-only.md")
    assert scene.linked_fact == "system/project/conventions.md"


def test_skip_writes_nothing_and_apply_without_ops_makes_no_commit(memdir):
    b = builder(memdir)
    b.add(Skip("routine rename"))
    assert commit(b.store, b.changeset()) is None
    assert len(list(git.Repo(memdir).iter_commits())) == 1  # only the init commit


def test_two_different_failures_are_never_one_incident_however_alike_the_wording(memdir):
    """Issue 12 item 2: the duplicate guard knows what failed (test, error type, rule)."""
    b = builder(memdir)
    first = b.add(store_op(type="incident", anchor="pytest-cache-failed", moment=None,
                           description="`pytest -q` failed in src/app/cache.py: test_cache_get_expires",
                           body="pytest -q failed: test_cache_get_expires (AssertionError)."))
    other = b.add(store_op(type="incident", anchor="pytest-cache-failed-again", moment=None,
                           description="`pytest -q` failed in src/app/cache.py: test_cache_get_retries",
                           body="pytest -q failed: test_cache_get_retries (AssertionError)."))
    assert first.action == other.action == "store" and first.path != other.path
    # the same failing test seen again is the same incident, updated in place
    again = b.add(store_op(type="incident", anchor="cache-get-expiry-fails", moment=None,
                           description="`pytest -q` failed in src/app/cache.py: test_cache_get_expires again",
                           body="test_cache_get_expires failed again after the TTL change."))
    assert again.action == "update" and again.path == first.path
    # no test named: the error types tell the failures apart
    t = b.add(store_op(type="incident", anchor="cache-read-crash", moment=None,
                       description="Cache reads crash with TimeoutError in src/app/cache.py",
                       body="cache_get() raised TimeoutError under load."))
    k = b.add(store_op(type="incident", anchor="cache-read-crash-key", moment=None,
                       description="Cache reads crash with KeyError in src/app/cache.py",
                       body="cache_get() raised KeyError under load."))
    assert t.action == k.action == "store" and t.path != k.path


def test_two_failures_under_one_anchor_are_two_files_and_one_failure_is_one_incident(memdir):
    """Issue 12 item 2 for every backend: an anchor never holds two different failures, and
    one failure proposed under two anchors in a session is one incident."""
    b = builder(memdir)
    first = b.add(store_op(type="incident", anchor="cache-get-fails", moment=None,
                           description="`pytest -q` failed: test_cache_get_expires",
                           body="test_cache_get_expires failed (AssertionError)."))
    other = b.add(store_op(type="incident", anchor="cache-get-fails", moment=None,
                           description="`pytest -q` failed: test_cache_get_retries",
                           body="test_cache_get_retries failed (AssertionError)."))
    assert first.action == other.action == "store"
    assert first.path == "incidents/cache-get-fails.md"
    assert other.path == "incidents/test-cache-get-retries-cache-get-fails.md"
    # the same anchor with the same failure: updated in place
    again = b.add(store_op(type="incident", anchor="cache-get-fails", moment=None,
                           description="`pytest -q` failed again: test_cache_get_retries",
                           body="test_cache_get_retries failed again after the TTL change."))
    assert again.action == "update" and again.path == other.path
    # one failure under a wholly different anchor and wording in the same session
    twin = b.add(store_op(type="incident", anchor="ttl-expiry-flake", moment=None,
                          description="Expiry flakes in the nightly run",
                          body="Seen in test_cache_get_expires only."))
    assert twin.action == "update" and twin.path == first.path
    put = b.add(store_op(type="incident", anchor="cache-put-fails", moment=None,
                         description="The cache put path leaks memory",
                         body="Failure signature: cache put leaks memory"))
    commit(b.store, b.changeset())
    paths = {f.path for f in MemoryStore(memdir).scan().facts()}
    assert paths == {first.path, other.path, put.path}
    # a later session: another failure under that anchor with no test or error names to
    # tell it by (only the offline encoder's recorded signatures differ): a number
    b2 = builder(memdir, session="sess-0002", day="2026-05-02")
    evicts = b2.add(store_op(type="incident", anchor="cache-put-fails", moment=None,
                             description="The cache put path evicts live keys",
                             body="Failure signature: cache put evicts live keys"))
    assert evicts.action == "store" and evicts.path == "incidents/cache-put-fails-2.md"


def test_failure_keys_of_real_checker_output():
    from dualtrace.encoder.matching import distinct_failures, failure_keys

    ty = 'error[invalid-assignment]: Object of type `MagicMock` is not assignable to attribute `app`'
    pyright = 'converter.py:184:17 - error: Type of "text_value" is unknown (reportUnknownVariableType)'
    assert failure_keys(ty)[2] == {"invalid-assignment"}
    assert failure_keys(pyright)[2] == {"reportunknownvariabletype"}
    assert distinct_failures(ty, pyright)
    assert not distinct_failures(pyright, pyright + " seen again")
    assert not distinct_failures("the build is broken", "the build is broken again")  # nothing named
    # the offline encoder's recorded signatures decide first
    a = "Failure signature: sync session file 2 idempotent assertion"
    assert distinct_failures(a, "Failure signature: transcript tail worker restarts failed")
    assert not distinct_failures(a, a)


def test_the_duplicate_guard_merges_only_memories_about_the_same_subject(memdir):
    """Issue 12 item 3 for every backend: words that every memory of a project shares (its
    name, "work on", "epic") or a work item's own id never make two subjects one."""
    b = builder(memdir)

    def decision(anchor: str, description: str):
        return b.add(store_op(type="decision", anchor=anchor, moment=None, description=description,
                              body=description))

    stored = [
        decision("spotter-epic-transcript-terminal-annotations",
                 "Implement the spotter epic for transcript and terminal annotations with message references."),
        decision("spotter-epic-unified-transcript-visualization",
                 "Work on the spotter epic that unifies transcript visualization for subagents."),
        decision("spotter-epic-session-transcript-readability",
                 "Work on the spotter epic improving session transcript readability and structure."),
    ]
    assert [op.action for op in stored] == ["store"] * 3 and len({op.path for op in stored}) == 3
    # all it shares with each of them (work, spotter, epic, transcript) another one has
    # too: nothing says which one it would be (it was merged into the visualization one)
    otel = decision("spotter-epic-transcript-tracing", "Work on the spotter epic: transcript tracing.")
    assert otel.action == "store" and otel.path not in {op.path for op in stored}
    # the same subject restated is still one memory
    again = decision("spotter-epic-transcript-readability-continued",
                     "Continue the spotter epic on session transcript readability.")
    assert again.action == "update" and again.path == stored[2].path
    # two work items with their own ids are two subjects, however alike the rest
    fum = decision("bead-spotter-fum-sessionlive-readability",
                   "Work on bead `spotter-fum`: improve the readability of SessionLive.")
    four = decision("bead-spotter-4te-sessionlive-readability",
                    "Work on bead spotter-4te: improve the readability of SessionLive.")
    assert fum.action == four.action == "store" and fum.path != four.path


def test_names_of_work_items_and_tracker_keys():
    from dualtrace.encoder.matching import distinct_subjects, names

    assert names("Work on bead `spotter-fum` (epic: Improve ...)") == {"spotter-fum"}
    assert names("Work on bead spotter-4te - an epic") == {"spotter-4te", "4te"}
    assert names("fix issue #12 before PROJ-123; the pre-commit end-to-end task list") == {"#12", "proj-123"}
    assert distinct_subjects("Work on bead spotter-4te: OpenTelemetry", "Work on bead `spotter-fum` (epic)")
    assert not distinct_subjects("Continue bead spotter-fum", "Work on bead `spotter-fum` (epic)")


def test_one_anchor_never_holds_two_named_subjects(memdir):
    """sde-bench's task chats each end with "unrelated heads-up: the X test is flaky on CI"
    for another X; the offline encoder proposes one anchor for all of them. A memory about
    another named subject never takes the proposal in: it gets its own file."""
    b = builder(memdir)

    def flaky(name: str, where: str, more: str = ""):
        said = (f"Unrelated heads-up: if you run the {where} suite, the {name} test has been flaky on CI "
                "all week - infra says timeouts, not correctness - so rerun before you blame your change.")
        return b.add(store_op(type="incident", anchor="unrelated-heads-up-run-timeout", moment=None,
                              description=said, body=f"The user stated: {said}{more}"))

    first = flaky("proxy-handshake", "egressgate")
    other = flaky("usage-exporter", "metering")
    assert first.action == other.action == "store"
    assert first.path == "incidents/unrelated-heads-up-run-timeout.md"
    assert other.path == "incidents/usage-exporter-unrelated-heads-up-run-timeout.md"
    # the same test again is the same incident, updated in place
    again = flaky("proxy-handshake", "egressgate", " It timed out again on Friday's run.")
    assert again.action == "update" and again.path == first.path
    # the same holds for decisions about two work items under one proposed anchor
    fum = b.add(store_op(type="decision", anchor="work-on-bead-epic", moment=None,
                         description="Work on bead `spotter-fum`: transcript readability.", body="Readability."))
    four = b.add(store_op(type="decision", anchor="work-on-bead-epic", moment=None,
                          description="Work on bead spotter-4te: OpenTelemetry tracing.", body="Tracing."))
    assert fum.action == four.action == "store" and fum.path != four.path


def test_compound_names_of_things_are_names_hyphenated_modifiers_are_not():
    from dualtrace.encoder.matching import names

    assert names("the purge-webhook test in the edgecache suite is flaky") == {"purge-webhook"}
    assert names("the usage_exporter job and the billing-sync service") == {"usage_exporter", "billing-sync"}
    assert names("run the end-to-end tests and the pre-commit hooks on the read-only table") == set()
