"""Recall defects a new user found (session 4's review), on real memory: the shipped example
sessions encoded by the offline encoder into a git memory dir in tmp_path, searched through
the real index. Lexical, as the Quick start installs it (no ``[semantic]`` extra): the
embedder is off for every query here."""

from __future__ import annotations

import datetime as dt

import pytest

from dualtrace.memfs import formats
from dualtrace.memfs.recall import LABEL_A, LABEL_B_RECORD, recall
from dualtrace.memfs.store import MemoryStore
from tests.conftest import EXAMPLES, encode_offline

PILOTS = sorted(EXAMPLES.glob("pilot-*.jsonl"))


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    """The five pilot sessions encoded offline, as `dualtrace encode` does it."""
    root = encode_offline(tmp_path_factory.mktemp("review"), PILOTS)
    assert len(PILOTS) == 5
    assert (root / "decisions" / "json-structured-logging.md").is_file()
    assert len(list((root / "sessions").rglob("*.md"))) == 5
    return root


def ask(root, question, **kw):
    return recall(root, question, embedder=None, **kw)


def paths(result):
    return [m.path for m in result.memories]


def test_the_encoders_template_words_are_not_evidence(demo):
    """Every offline memory says "The user stated (session 1b000000, ...)": the logging
    decision is not an answer to a question about user sessions."""
    body = (demo / "decisions" / "json-structured-logging.md").read_text()
    assert "The user stated (session 1b000000" in body  # the template is in the file
    result = ask(demo, "how do we store user sessions")
    assert result.state in ("A", "B")
    assert "decisions/json-structured-logging.md" not in paths(result)
    # ... and words found only in the template answer nothing.
    assert ask(demo, "what did the user state in that session?", records=False).state == "C"
    # The words said in the session still find it.
    assert paths(ask(demo, "why did we switch to JSON logging?"))[0] == \
        "decisions/json-structured-logging.md"


def test_a_word_naming_the_kind_of_answer_does_not_sink_the_subject(demo, tmp_path):
    """'which postgres version' is answered by the memory that says "Postgres 16", which
    never says "version"; the subject alone still finds it."""
    store = MemoryStore(tmp_path / "memory", project="p")
    fact = formats.Fact(path="decisions/postgres-16.md", type="decision",
                        description="We use Postgres 16 for session storage.",
                        body="We use Postgres 16 for session storage.", stored="2026-04-02")
    other = formats.Fact(path="decisions/json-logs.md", type="decision",
                         description="We log JSON lines; the version field is the app's.",
                         body="Structured JSON logs, one object per line.", stored="2026-03-12")
    store.commit([store.write(fact), store.write(other)], "mem: test\n")
    assert paths(ask(store.root, "postgres"))[:1] == ["decisions/postgres-16.md"]
    result = ask(store.root, "which postgres version do we use")
    assert result.state == "B" and paths(result)[:1] == ["decisions/postgres-16.md"]
    # On the pilots too (the word "version" is in no memory there).
    result = ask(demo, "which postgres version do we use?")
    assert paths(result)[:1] == ["decisions/move-session-storage-redis-postgres.md"]
    # Still not an answer to a question about something else.
    assert ask(store.root, "which kafka version do we use").state == "C"


def test_a_weak_word_does_not_carry_the_answer(demo, tmp_path):
    """'set' (and, stemmed, the 'settings.py' a decision touched) is not what "when did
    we first set up CI?" asks about: the decision that touched settings.py must not
    answer it (in STATE A, with its moment), a memory that names CI may."""
    moment = demo / "scenes" / "decisions" / "move-session-storage-redis-postgres.md"
    assert "src/shop/settings.py" in moment.read_text()  # what the offline encoder writes
    store = MemoryStore(tmp_path / "memory", project="p")
    pg = formats.Fact(path="decisions/session-storage-postgres.md", type="decision",
                      description="Move session storage from Redis to Postgres.",
                      body="Move session storage from Redis to Postgres.\n\nFiles changed: "
                           "`src/shop/settings.py`", stored="2026-04-02",
                      linked_scene="scenes/decisions/session-storage-postgres.md")
    scene = formats.Moment(path="scenes/decisions/session-storage-postgres.md",
                           anchor="session-storage-postgres", description="The move",
                           linked_fact=pg.path, stored="2026-04-02",
                           narrative="In session 50000000 (2026-04-02), the user said: \"Move "
                                     "session storage to Postgres.\" Concretely, the work "
                                     "touched `src/shop/settings.py`.")
    ci = formats.Fact(path="conventions/lint-before-push.md", type="convention",
                      description="Run the linters locally before pushing.",
                      body="Run ruff and mypy locally before pushing; CI runs the same checks.",
                      stored="2026-04-03")
    cache = formats.Fact(path="decisions/cache-pip-downloads.md", type="decision",
                         description="Cache the pip downloads between runs.",
                         body="The CI pipeline caches pip downloads.", stored="2026-04-05")
    logs = formats.Fact(path="decisions/json-logs.md", type="decision",
                        description="Structured JSON logs.", body="Structured JSON logs.",
                        stored="2026-03-12")
    store.commit([store.write(m) for m in (pg, scene, ci, cache, logs)], "mem: test\n")
    result = ask(store.root, "when did we first set up CI?")
    assert pg.path not in paths(result), result.render()
    assert paths(result)[0] in (ci.path, cache.path) and result.state == "B"
    # The subject's own words still find the decision, moment and all.
    result = ask(store.root, "where did we move session storage?")
    assert paths(result)[:1] == [pg.path] and result.state == "A"


def test_what_did_we_do_last_time_answers_with_the_latest_session_records(demo):
    result = ask(demo, "what did we do last time?")
    assert result.state == "B" and result.label == LABEL_B_RECORD
    sessions = [m.record.session[:8] for m in result.memories]
    assert sessions[0] == "50000000"  # pilot-5, the newest (2026-04-02)
    dates = [m.record.date for m in result.memories]
    assert dates == sorted(dates, reverse=True) and len(dates) >= 2
    text = result.render()
    assert text.startswith(LABEL_B_RECORD)
    assert "session 50000000, 2026-04-02" in text
    assert "move session storage from Redis to Postgres" in text
    first = ask(demo, "what did we do in the first session?")
    assert first.memories[0].record.session.startswith("1a000000")  # 2026-03-10


def test_the_prompt_hook_does_not_list_sessions_for_a_time_alone(demo):
    """The prompt hook speaks unasked: "continue from last time" names nothing."""
    from dualtrace.config import Settings
    from dualtrace.memfs.inject import prompt_context

    for prompt in ("what did we do last time?", "continue from where we left off last time"):
        assert prompt_context(MemoryStore(demo, project="p"), prompt, Settings()) is None


def test_a_session_record_item_carries_the_record_label(demo):
    """A by-date answer puts the records first: the answer's label is theirs, and a
    curated memory shown after them carries its own."""
    result = ask(demo, "when did we last work on the logging?")
    assert result.memories and result.memories[0].record is not None
    assert result.state == "B" and result.label == LABEL_B_RECORD
    text = result.render()
    assert text.startswith(LABEL_B_RECORD) and "fact + scene" not in text.splitlines()[0]
    curated = [m for m in result.memories if m.record is None and m.state == "A"]
    assert curated, "the logging decision (with its moment) follows the records"
    block = text.split(curated[0].path, 1)[1].split("\n\n", 1)[0]
    assert LABEL_A in block
    d = result.to_dict()
    assert d["state"] == "B" and d["label"] == LABEL_B_RECORD


def test_a_superseded_memory_shows_when_it_was_stored_and_when_updated(tmp_path):
    today = dt.date.today()
    stored, updated = str(today - dt.timedelta(days=400)), str(today - dt.timedelta(days=100))
    store = MemoryStore(tmp_path / "memory", project="p")
    old = formats.Fact(path="decisions/sessions-in-redis.md", type="decision",
                       description="Session storage lives in Redis.",
                       body="Session storage lives in Redis.", stored=stored,
                       updated=updated, superseded_by="decisions/sessions-in-postgres.md")
    new = formats.Fact(path="decisions/sessions-in-postgres.md", type="decision",
                       description="Session storage moves to Postgres.",
                       body="Session storage moves from Redis to Postgres.", stored=updated,
                       supersedes="decisions/sessions-in-redis.md")
    store.commit([store.write(old), store.write(new)], "mem: test\n")
    result = ask(store.root, "where does session storage live, redis?", stale_days=180)
    shown = {m.path: m for m in result.memories}
    assert set(shown) == {"decisions/sessions-in-redis.md", "decisions/sessions-in-postgres.md"}
    old_m = shown["decisions/sessions-in-redis.md"]
    assert (old_m.stored, old_m.updated) == (stored, updated)
    assert shown["decisions/sessions-in-postgres.md"].updated is None
    text = result.render()
    assert f"stored {stored}, updated {updated}, superseded by" in text
    assert (old_m.to_dict()["stored"], old_m.to_dict()["updated"]) == (stored, updated)
    # Staleness counts from the last change (100 days ago, under stale_days).
    assert old_m.stale is None


def test_what_did_we_decide_last_time_answers_with_the_latest_decisions(demo):
    """Session 12's named limit: a kind of memory and a time, no subject ("what did we
    decide last time?") showed the newest session record, decided or not. Now: the newest
    decisions, newest first, each a decision; "the first incident" the oldest incident."""
    decided = {p.relative_to(demo).as_posix(): formats.parse_fact(p.read_text(), p.relative_to(demo).as_posix())
               for p in (demo / "decisions").glob("*.md")}
    assert len(decided) >= 2
    result = ask(demo, "what did we decide last time?")
    assert result.state in ("A", "B") and result.memories
    assert all(m.type == "decision" for m in result.memories), paths(result)
    days = [m.updated or m.stored for m in result.memories]
    assert days == sorted(days, reverse=True)
    newest = max((f.updated or f.stored) for f in decided.values())
    assert days[0] == newest
    # "last time": the decisions of the latest day one was made, not older days' too
    assert all(d[:10] == newest[:10] for d in days), days
    assert f"stored on {newest[:10]}, the latest day with one" in result.render().splitlines()[1]
    first = ask(demo, "what was the first incident?")
    assert first.memories and all(m.type == "incident" for m in first.memories)
    stored = [m.stored for m in first.memories]
    assert stored == sorted(stored)
    # A subject still decides: not a listing of the kind.
    about = ask(demo, "what did we decide about session storage last time?")
    assert paths(about)[:1] == ["decisions/move-session-storage-redis-postgres.md"], paths(about)


@pytest.fixture(scope="module")
def dated(tmp_path_factory):
    """Five sessions on five days of 2026: decisions in March, May and July, incidents in
    April and June (review 13's F12 set)."""
    from tests.conftest import bench_transcript

    Transcript = bench_transcript()
    base = tmp_path_factory.mktemp("dated")
    commit = ("git commit -am x", "[main a1b2c3d] x\n 1 file changed")
    sessions = {
        "2026-03-02": Transcript(101).user("We decided to use PostgreSQL for the billing service "
                                           "instead of MySQL. Set up the config and commit.")
        .edit("config/db.py", "mysql", "postgresql").bash(*commit).say("Configured PostgreSQL."),
        "2026-04-10": Transcript(102).user("The login endpoint returns 500 when the email has a "
                                           "plus sign. Fix it.")
        .bash("pytest tests/test_login.py", "FAILED tests/test_login.py::test_plus - "
              "AssertionError: 500 != 200", error=True)
        .edit("api/login.py", "email.split('+')", "email")
        .bash("pytest tests/test_login.py", "3 passed").bash(*commit).say("Fixed it."),
        "2026-05-20": Transcript(103).user("Let's go with Redis for the session cache. Add it "
                                           "and commit.")
        .edit("config/cache.py", "memory", "redis").bash(*commit).say("Switched to Redis."),
        "2026-06-15": Transcript(104).user("The nightly export crashes with KeyError: 'region'. "
                                           "Please fix.")
        .bash("python -m export", "KeyError: 'region'", error=True)
        .edit("export.py", "row['region']", "row.get('region')")
        .bash("python -m export", "ok").bash(*commit).say("Fixed the KeyError."),
        "2026-07-01": Transcript(105).user("Add a todo list to the README and commit. We decided "
                                           "to keep the docs in markdown, not rst.")
        .edit("README.md", "", "## TODO\n- docs\n").bash(*commit).say("Added the list."),
    }
    paths = []
    for day, t in sessions.items():
        for record in t.records:
            record["timestamp"] = day + record["timestamp"][10:]
        paths.append(t.write(base / f"{day}.jsonl"))
    return encode_offline(base, paths)


def test_what_did_we_decide_in_a_month_keeps_to_that_month(dated):
    """Review 13 F12 (a regression of session 13): "what did we decide in April?" listed
    the three newest decisions; no decision was made in April, so it abstains."""
    today = dt.date(2026, 12, 3)
    april = ask(dated, "what did we decide in April?", today=today)
    assert april.state == "C" and not april.memories
    assert "No decisions stored from 2026-04-01 to 2026-04-30." in april.render()
    assert ask(dated, "what did we decide last week?", today=today).state == "C"
    march = ask(dated, "what did we decide in March?", today=today)
    assert [m.stored for m in march.memories] == ["2026-03-02"]
    assert march.memories[0].type == "decision"
    june = ask(dated, "what broke in June?", today=today)
    assert [(m.type, m.stored) for m in june.memories] == [("incident", "2026-06-15")]


def test_the_last_incident_is_the_newest_one(dated):
    """Review 13 F15: "what was the last incident?" abstained ("last" counted only as
    "last time"). One, singular: the newest of the kind; "decisions" plural: a few."""
    last = ask(dated, "what was the last incident?")
    assert [(m.type, m.stored) for m in last.memories] == [("incident", "2026-06-15")]
    assert "The latest incident stored (of 2):" in last.render()
    one = ask(dated, "last decision?")
    assert [(m.type, m.stored) for m in one.memories] == [("decision", "2026-07-01")]
    last_time = ask(dated, "what did we decide last time?")
    assert [m.stored for m in last_time.memories] == ["2026-07-01"]
    few = ask(dated, "what were the last decisions?")
    assert [m.stored for m in few.memories] == ["2026-07-01", "2026-05-20", "2026-03-02"]
    # "last week" is still a range, not "the last (memory)".
    assert ask(dated, "what broke last week?", today=dt.date(2026, 12, 3)).state == "C"


def test_since_before_and_after_a_month_are_open_ended(dated):
    """Review 14 G1: "since May", "before April", "after April" were read as that month."""
    today = dt.date(2026, 12, 3)
    since = ask(dated, "what broke since May?", today=today)
    assert [m.stored for m in since.memories] == ["2026-06-15"], since.render()
    before = ask(dated, "what did we decide before April?", today=today)
    assert [m.stored for m in before.memories] == ["2026-03-02"]
    after = ask(dated, "what did we decide after April?", today=today)
    assert sorted(m.stored for m in after.memories) == ["2026-05-20", "2026-07-01"]
    assert ask(dated, "what did we decide before March?", today=today).state == "C"


def test_the_last_fix_and_the_last_big_decision(dated):
    """Review 14 G18: "the last fix" answered with session records; "our last big
    decision" and "the last thing we decided" abstained."""
    fix = ask(dated, "what was the last fix?")
    assert [(m.type, m.stored) for m in fix.memories] == [("incident", "2026-06-15")]
    for q in ("what was our last big decision?", "what was the last thing we decided?"):
        got = ask(dated, q)
        assert [(m.type, m.stored) for m in got.memories] == [("decision", "2026-07-01")], q
