"""Questions about when: "in July", "on March 3", "last week", "when did we last touch X".

Issue 11 item 2 (review 7 F16, F17): a range of days lists that range's sessions by date;
"when did we last X" lists every session whose record is about X, newest first; the words
that say when are not the topic; never-discussed questions still abstain. The records here
are about things no question set of the project mentions, and ``today`` is fixed.
"""

from __future__ import annotations

import datetime as dt

import pytest

from dualtrace.memfs import embed
from dualtrace.memfs.recall import LABEL_B_RECORD, LABEL_C, recall
from dualtrace.memfs.store import MemoryStore
from dualtrace.memfs.when import order_of, sessions_asked, span_of
from tests.conftest import backfilled_corpus

sessions = pytest.importorskip("dualtrace.memfs.sessions")
TODAY = dt.date(2026, 12, 2)  # a Wednesday
SEMANTIC = embed.load_wordllama() is not None
EMBEDDERS = ["lexical", pytest.param("semantic", marks=pytest.mark.skipif(
    not SEMANTIC, reason="dualtrace[semantic] not installed"))]


def _record(store: MemoryStore, sid: str, started: str, description: str,
            turns: list[tuple[str, str]]) -> None:
    rel = sessions.record_path(sid, started)
    day, hhmm = started[:10], started[11:16]
    record = sessions.SessionRecord(
        path=rel, session=sid, host="codex", project="p", started=started, ended=started,
        description=description,
        turns=tuple(sessions.Turn(number=i + 1, date=day, time=hhmm, user=u, agent=a)
                    for i, (u, a) in enumerate(turns)))
    store.write_text(rel, sessions.render_record(record))
    store.commit([rel], f"mem: record {sid[:8]}\n")


@pytest.fixture
def store(memdir):
    store = MemoryStore(memdir, project="p")
    for sid, started, what, user, agent in (
        ("a1a1a1a1-0000-4000-8000-000000000001", "2026-03-03T09:10:00Z",
         "Port the flamegraph exporter to speedscope",
         "Port the flamegraph exporter so it writes speedscope JSON.",
         "The flamegraph exporter now writes speedscope JSON; the old SVG path is gone."),
        ("a2a2a2a2-0000-4000-8000-000000000002", "2026-03-03T15:40:00Z",
         "Retry the billing webhook on 5xx",
         "The billing webhook drops events when the ledger returns 503; add retries.",
         "Webhook deliveries now retry three times with jitter on any 5xx from the ledger."),
        ("a3a3a3a3-0000-4000-8000-000000000003", "2026-07-08T11:00:00Z",
         "Move the nightly sitemap job to the scheduler",
         "Move the nightly sitemap job from cron to the scheduler service.",
         "The sitemap job is a scheduler task now, at 02:00 UTC, with an alert on failure."),
        ("a4a4a4a4-0000-4000-8000-000000000004", "2026-07-21T16:20:00Z",
         "Speed up the flamegraph exporter",
         "The flamegraph exporter takes 40 s on big profiles; make it faster.",
         "Folding stacks in one pass brought the exporter down to 3 s on the 2 GB profile."),
        ("a5a5a5a5-0000-4000-8000-000000000005", "2026-11-24T10:05:00Z",
         "Log the billing webhook payload size",
         "Can you add the payload size to the billing webhook log line?",
         "The webhook log line now has payload_bytes next to the event id."),
        ("a6a6a6a6-0000-4000-8000-000000000006", "2026-12-01T13:30:00Z",
         "Rename the staging bucket",
         "Rename the staging bucket to acme-staging-artifacts everywhere.",
         "Renamed in the Terraform variables, the CI upload step and the README."),
    ):
        _record(store, sid, started, what, [(user, agent)])
    return store


def _sessions(result) -> list[str]:
    return [m.record.session[:2] for m in result.memories if m.record is not None]


# ------------------------------------------------------------------ the days a question names


@pytest.mark.parametrize("question, start, end", [
    ("what did we work on in July?", "2026-07-01", "2026-07-31"),
    ("what did we do on March 3?", "2026-03-03", "2026-03-03"),
    ("anything on the 3rd of March?", "2026-03-03", "2026-03-03"),
    ("what happened on 2025-07-16?", "2025-07-16", "2025-07-16"),
    ("what did we do in July 2025?", "2025-07-01", "2025-07-31"),
    ("what did we do last week?", "2026-11-23", "2026-11-29"),
    ("what did we do this week?", "2026-11-30", "2026-12-02"),
    ("what did we do yesterday?", "2026-12-01", "2026-12-01"),
    ("what did we do in the past 10 days?", "2026-11-23", "2026-12-02"),
    ("what did we fix three days ago?", "2026-11-29", "2026-11-29"),
    ("what did we do last month?", "2026-11-01", "2026-11-30"),
    ("what did we do on Monday?", "2026-11-30", "2026-11-30"),
    ("what did we do in 2025?", "2025-01-01", "2025-12-31"),
    ("what did we do in February?", "2026-02-01", "2026-02-28"),
    # review 8 F11: weeks of a month, and ranges of months
    ("what did we do in the first week of July?", "2026-07-01", "2026-07-07"),
    ("anything in the second week in March?", "2026-03-08", "2026-03-14"),
    ("what did we ship the last week of June 2025?", "2025-06-24", "2025-06-30"),
    ("what did we do between September and October?", "2026-09-01", "2026-10-31"),
    ("what did we do from March to May 2025?", "2025-03-01", "2025-05-31"),
    ("what changed between Nov 2025 and Feb?", "2025-11-01", "2026-02-28"),
    # review 10: ranges of days, the week of a day
    ("what did we do between 2025-07-10 and 2025-07-15?", "2025-07-10", "2025-07-15"),
    ("what did we do between July 8 and July 21?", "2026-07-08", "2026-07-21"),
    ("what did we do from July 8 to 21?", "2026-07-08", "2026-07-21"),
    ("what did we do in the week of July 21?", "2026-07-20", "2026-07-26"),
    ("from December 28 to January 3, 2025", "2024-12-28", "2025-01-03"),
])
def test_span_of_the_days_a_question_names(question, start, end):
    span = span_of(question, TODAY)
    assert span is not None, question
    assert (span.start.isoformat(), span.end.isoformat()) == (start, end)


def test_a_month_without_a_year_is_the_latest_one_with_sessions():
    # Today is in December 2026: "in July" is July 2026 unless only July 2025 has sessions.
    assert span_of("in July", TODAY, lambda: ["2025-07-19"]).start == dt.date(2025, 7, 1)
    assert span_of("in July", TODAY, lambda: ["2026-07-02", "2025-07-19"]).start == \
        dt.date(2026, 7, 1)
    # A month that has not begun this year is last year's.
    assert span_of("in December", dt.date(2026, 3, 1)).start == dt.date(2025, 12, 1)


@pytest.mark.parametrize("question", [
    "we may need a cache here", "the Monday standup notes", "how do we march the cursor?",
    "what is the retention period?", "what did we decide about the parser?",
])
def test_words_that_are_no_date(question):
    assert span_of(question, TODAY) is None


def test_first_and_last_and_how_many():
    assert order_of("when was the exporter last changed?") == "last"
    assert order_of("when did we last touch the TUI?") == "last"
    assert order_of("what did we do most recently?") == "last"
    assert order_of("when did we first add retries?") == "first"
    assert order_of("what did we do last week?") is None  # a range, not an order
    assert sessions_asked("what did we do in the last three sessions?") == 3
    assert order_of("what did we do in our first two sessions?") == "first"
    assert order_of("what did we do the time before last?") == "last"


# ------------------------------------------------------------------ recall by date


@pytest.mark.parametrize("mode", EMBEDDERS)
def test_a_range_of_days_lists_its_sessions_by_date(store, mode):
    embedder = None if mode == "lexical" else embed.get_embedder()
    july = recall(store, "what did we work on in July?", today=TODAY, embedder=embedder)
    assert july.label == LABEL_B_RECORD and _sessions(july) == ["a3", "a4"]
    assert july.note == "2 sessions from 2026-07-01 to 2026-07-31, oldest first:"
    assert july.render().splitlines()[1] == july.note
    march = recall(store, "What did we do on March 3?", today=TODAY, embedder=embedder)
    assert _sessions(march) == ["a1", "a2"]
    assert _sessions(recall(store, "what did we do last week?", today=TODAY,
                            embedder=embedder)) == ["a5"]
    assert _sessions(recall(store, "what did we do yesterday?", today=TODAY,
                            embedder=embedder)) == ["a6"]
    assert _sessions(recall(store, "what did we do in the last two sessions?", today=TODAY,
                            embedder=embedder)) == ["a6", "a5"]
    # review 8 F11: these abstained
    assert _sessions(recall(store, "what did we do the time before last?", today=TODAY,
                            embedder=embedder))[0] == "a5"
    assert _sessions(recall(store, "what did we do in the first week of July?", today=TODAY,
                            embedder=embedder)) == []  # a3 is July 8: the second week
    assert _sessions(recall(store, "what did we do in the second week of July?", today=TODAY,
                            embedder=embedder)) == ["a3"]
    assert _sessions(recall(store, "what did we work on between March and July?",
                            today=TODAY, embedder=embedder)) == ["a1", "a2", "a3", "a4"]
    assert _sessions(recall(store, "what did we do between July 8 and July 21?",
                            today=TODAY, embedder=embedder)) == ["a3", "a4"]
    assert _sessions(recall(store, "what did we do between 2026-07-09 and 2026-07-25?",
                            today=TODAY, embedder=embedder)) == ["a4"]


def test_an_empty_range_abstains_and_says_what_it_looked_for(store):
    result = recall(store, "what did we do in May?", today=TODAY)
    assert result.state == "C"
    text = result.render()
    assert text.splitlines()[1] == LABEL_C
    assert "No session is recorded from 2026-05-01 to 2026-05-31" in text
    assert "2026-12-01" in text  # the latest session there is


@pytest.mark.parametrize("mode", EMBEDDERS)
def test_when_did_we_last_lists_every_session_about_it_newest_first(store, mode):
    embedder = None if mode == "lexical" else embed.get_embedder()
    for question in ("when did we last touch the flamegraph exporter?",
                     "when was the flamegraph exporter last changed?"):
        result = recall(store, question, embedder=embedder)
        assert _sessions(result)[:2] == ["a4", "a1"], (question, result.render())
    webhook = recall(store, "when did we first work on the billing webhook?",
                     embedder=embedder)
    assert _sessions(webhook)[:2] == ["a2", "a5"]


@pytest.mark.parametrize("mode", EMBEDDERS)
def test_a_topic_inside_a_range(store, mode):
    embedder = None if mode == "lexical" else embed.get_embedder()
    result = recall(store, "what did we change in the flamegraph exporter in July?",
                    today=TODAY, embedder=embedder)
    assert _sessions(result) == ["a4"]  # not the March session about it
    listed = recall(store, "which sessions in March touched the billing webhook?",
                    today=TODAY, embedder=embedder)
    assert listed.aggregation and _sessions(listed) == ["a2"]


@pytest.mark.parametrize("mode", EMBEDDERS)
@pytest.mark.parametrize("question", [
    "what did we decide about Kubernetes autoscaling in July?",
    "how did we rotate the signing keys last week?",
    "when did we last upgrade the Elasticsearch cluster?",
    "what did we change in the payroll export on March 3?",
])
def test_never_discussed_still_abstains(store, mode, question):
    embedder = None if mode == "lexical" else embed.get_embedder()
    result = recall(store, question, embedder=embedder)
    assert result.state == "C", result.render()


def test_the_prompt_hook_lists_no_sessions_for_a_date(store):
    from dualtrace.config import Settings
    from dualtrace.memfs.inject import prompt_context

    assert prompt_context(store, "fix what we broke yesterday", Settings()) is None
    assert prompt_context(store, "continue what we did in July", Settings()) is None


# ------------------------------------------------------------------ real sessions


@pytest.fixture(scope="module")
def ccl_memory(tmp_path_factory):
    """The real claude-code-log sessions (other people's), backfilled as a user would."""
    return backfilled_corpus(tmp_path_factory, "claude-code", "claude-code-log")


def test_real_sessions_when_did_we_last_touch_the_tui(ccl_memory):
    """Review 7 F16: only the 2025-07-16 session was listed; 07-17 ("All TUI expansion
    tests now pass") is the latest whose record is about the TUI."""
    result = recall(ccl_memory, "when did we last touch the TUI?")
    days = [m.record.date for m in result.memories if m.record is not None]
    assert "2025-07-17" in days and "2025-07-16" in days, result.render()
    assert days == sorted(days, reverse=True)


def test_real_sessions_what_did_we_work_on_in_july(ccl_memory):
    """Review 7 F17: it abstained over 8 recorded July sessions."""
    july = sorted(p.name for p in (ccl_memory / "sessions" / "2025-07").glob("*.md"))
    result = recall(ccl_memory, "what did we work on in July?")  # July 2025: before today
    assert result.state == "B" and result.note and result.note.startswith(f"{len(july)} sessions")
    listed = [m.path.rsplit("/", 1)[1] for m in result.memories]
    assert sorted(listed) == july
    assert [m.record.date for m in result.memories] == sorted(m.record.date
                                                              for m in result.memories)


def test_a_pasted_report_that_names_a_day_is_not_a_question_about_that_day(store):
    """sde-bench: "the rollout for yesterday's release ..." in a pasted bug report asks about
    the bug (a long text, LONG_QUERY), not for yesterday's sessions."""
    report = ("Since yesterday's release the flamegraph exporter takes forty seconds again on "
              "big profiles, the speedscope JSON it writes is truncated, customers complain "
              "that folding stacks never finishes and the dashboard times out last week too")
    result = recall(store, report, today=TODAY)
    assert result.note is None
    assert {"a1", "a4"} & set(_sessions(result)), result.render()
