"""Recall, session 5: British and American spellings match each other; "when did we first /
last ..." orders every session the record gate passed by date (real index in tmp_path)."""

from __future__ import annotations

import pytest

from dualtrace.memfs import formats
from dualtrace.memfs.index import spelling_variants
from dualtrace.memfs.recall import recall
from dualtrace.memfs.store import MemoryStore
from tests.memfs.test_recall_records import _record


def _fact(anchor, description, body=None):
    return formats.Fact(path=formats.fact_path("decision", anchor), type="decision",
                        description=description, body=body or description, stored="2026-03-01")


@pytest.fixture
def store(memdir):
    s = MemoryStore(memdir, project="p")
    facts = [
        _fact("rich-terminal-output", "We color the terminal output with rich."),
        _fact("nightly-log-job", "A nightly job analyses the access logs."),
        _fact("json-logs", "Structured JSON logs, one object per line."),
        _fact("postgres-sessions", "Session storage lives in Postgres."),
    ]
    s.commit([s.write(f) for f in facts], "mem: test\n")
    return s


@pytest.mark.parametrize(("question", "path"), [
    ("how do we colour the output?", "decisions/rich-terminal-output.md"),
    ("what do we analyze?", "decisions/nightly-log-job.md"),
])
def test_a_british_or_american_spelling_finds_the_other(store, question, path):
    result = recall(store, question, embedder=None, records=False)
    assert result.state == "B" and [m.path for m in result.memories][:1] == [path]


def test_spelling_variants_are_only_other_spellings():
    assert spelling_variants("colour") == ["color"]
    assert spelling_variants("color") == ["colour"]
    assert spelling_variants("analyse") == ["analyze"]
    assert spelling_variants("initialize") == ["initialise"]
    assert spelling_variants("centre") == ["center"]
    assert spelling_variants("licence") == ["license"]
    for word in ("for", "your", "four", "hour", "user", "test", "size", "Kafka", "app.py"):
        assert spelling_variants(word) == []


def test_the_first_session_of_a_topic_answers_though_a_later_one_says_more(memdir):
    """The first session that ran the dev server said little about it; a later one was all
    about the dev server. "first" is the earliest the gate passed, not the earliest of
    those worded nearly as well as the best one."""
    s = MemoryStore(memdir, project="p")
    _record(s, "a1a1a1a1-0000-4000-8000-000000000001", "2026-01-05T10:00:00Z",
            "Create the todo app",
            [("create the todo app", "Created the todo app; the dev server serves it on port 3001.")])
    _record(s, "b2b2b2b2-0000-4000-8000-000000000002", "2026-02-01T10:00:00Z",
            "Move the web app's dev server port",
            [("the dev server port clashes with the web app's api, move the dev server",
              "The web app's dev server now runs on port 4000; the dev server port is in "
              ".env and the web app reads it at start.")])
    _record(s, "c3c3c3c3-0000-4000-8000-000000000003", "2026-02-03T10:00:00Z",
            "Unrelated: release notes", [("write the release notes", "Done.")])
    first = recall(s, "What port did the web app's dev server first run on?", embedder=None)
    dates = [m.record.date for m in first.memories if m.record]
    assert dates[:2] == ["2026-01-05", "2026-02-01"], first.render()
    assert "3001" in first.render()
    last = recall(s, "What port did the web app's dev server last run on?", embedder=None)
    assert [m.record.date for m in last.memories if m.record][:1] == ["2026-02-01"]


def test_a_passage_matches_the_parts_of_a_dotted_name(memdir):
    """"Next.js" is the words "next" and "js" (as the index splits it): the line that
    names "Next.js 14" answers "which Next.js version ..." and makes the passage."""
    s = MemoryStore(memdir, project="p")
    filler = [f"The TODO app's {part} is done and the TODO app builds cleanly with it."
              for part in ("list view", "filter bar", "add form", "item row", "footer",
                           "theme", "store", "router", "tests", "lint setup", "icons")]
    agent = "\n".join(["I created the TODO app using Next.js. Here is what it has:",
                       *filler[:5], "- **Next.js 14** with TypeScript and Tailwind CSS",
                       *filler[5:]])
    _record(s, "d4d4d4d4-0000-4000-8000-000000000004", "2025-09-03T00:52:00Z",
            "create TODO app by Next.js", [("create TODO app by Next.js", agent)])
    result = recall(s, "Which Next.js version did the TODO app start with?", embedder=None)
    assert result.memories and result.memories[0].record is not None
    assert "Next.js 14" in result.memories[0].record.passage, result.render()
