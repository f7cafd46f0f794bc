"""A word is not said by a name that merely contains its stem (review 8 F7).

After `dualtrace backfill` of the real claude-code-log sessions, "which logging library do
we use?" (never discussed there) answered STATE A with the timeline-filtering decision: the
index splits ``claude_code_log`` (in every path of that project) into words and stems
"logging" to "log", so "logging" looked said everywhere and weighed nothing, and "library"
alone ("the vis library") passed. A part of a compound name is the word it spells, not
another form of its stem; a question most of whose weight is in words no session said is
about something never discussed. Real index, real git memory dirs; the embedder off (the
Quick start's install) and on (the [semantic] extra) where installed.
"""

from __future__ import annotations

import pytest

from dualtrace.memfs import formats
from dualtrace.memfs.index import Index
from dualtrace.memfs.recall import never_said_words, recall
from dualtrace.memfs.store import MemoryStore
from tests.conftest import backfilled_corpus
from tests.memfs.test_recall_never_said import MODES


def _fact(path: str, description: str, body: str, stored: str) -> formats.Fact:
    return formats.Fact(path=path, type="decision", description=description, body=body,
                        stored=stored)


@pytest.fixture
def named(tmp_path):
    """A project whose name holds "log" (``harbour_log``) in every file it touches."""
    store = MemoryStore(tmp_path / "memory", project="harbour-log")
    facts = [
        _fact("decisions/chart-axis-ticks.md", "Chart axis ticks come from the d3 library",
              "We let the d3 library pick the axis ticks of the tide chart instead of our own "
              "rounding. Files changed: `harbour_log/static/chart.js`.", "2026-04-02"),
        _fact("decisions/berth-table-sorting.md", "The berth table sorts by arrival time",
              "The berth table sorts by arrival time, newest first. Files changed: "
              "`harbour_log/views/berths.py`, `tests/test_harbour_log_views.py`.",
              "2026-04-03"),
        _fact("decisions/tide-import-batches.md", "Tide readings are imported in batches",
              "Tide readings arrive as CSV and are imported in batches of 500 rows. Files "
              "changed: `harbour_log/importers/tides.py`.", "2026-04-05"),
    ]
    store.commit([store.write(f) for f in facts], "mem: test\n")
    return store.root


def test_a_name_part_is_the_word_it_spells(named):
    with Index.open(named) as index:
        assert index.doc_frequency("logging") == 3  # the stem, in every path
        assert not index.said_as_word("logging")
        assert index.said_as_word("log")  # the part itself, as spelt
        assert index.said_as_word("library") and index.said_as_word("imported")
        assert never_said_words(index, ["logging", "library", "tide"]) == ["logging"]


def test_a_word_said_in_a_sentence_or_as_its_own_name_part_is_said(tmp_path):
    store = MemoryStore(tmp_path / "memory", project="harbour-log")
    store.commit([store.write(_fact(
        "decisions/quiet-imports.md", "Imports log one line per batch",
        "The importer logs one line per batch. Files changed: `harbour_log/importers/x.py`.",
        "2026-04-06")), store.write(_fact(
        "decisions/json-config.md", "Structured config for the app",
        "Files changed: `app/logging/config.py`.", "2026-04-07"))], "mem: test\n")
    with Index.open(store.root) as index:
        assert index.said_as_word("logging")  # "logging" is a part of app/logging/config.py
        assert index.said_as_word("logged")  # "logs" in a sentence: the stem as a word


@pytest.mark.parametrize("embedder", MODES)
def test_the_project_names_stem_does_not_answer_a_question_never_discussed(named, embedder):
    result = recall(named, "which logging library do we use?", embedder=embedder)
    assert result.state == "C", result.render()
    # What was discussed still answers, the library's own question among them.
    found = recall(named, "which library draws the chart axis ticks?", embedder=embedder)
    assert found.state in ("A", "B") and found.memories[0].path == \
        "decisions/chart-axis-ticks.md", found.render()
    found = recall(named, "how are tide readings imported?", embedder=embedder)
    assert found.memories and found.memories[0].path == "decisions/tide-import-batches.md"


# ------------------------------------------------------------------ real sessions


@pytest.fixture(scope="module")
def ccl_memory(tmp_path_factory):
    """The real claude-code-log sessions (other people's), backfilled as a user would."""
    return backfilled_corpus(tmp_path_factory, "claude-code", "claude-code-log")


@pytest.mark.parametrize("embedder", MODES)
def test_real_sessions_which_logging_library(ccl_memory, embedder):
    """Review 8 F7's repro: STATE A from the timeline-filtering decision ("the vis
    library"); no claude-code-log session talks about logging."""
    result = recall(ccl_memory, "which logging library do we use?", embedder=embedder)
    assert result.state == "C", result.render()
    # The vis library's own question is still answered from its session.
    found = recall(ccl_memory, "which library hides the timeline groups when we filter?",
                   embedder=embedder)
    assert found.state in ("A", "B"), found.render()
    assert "visible" in found.render()


# ------------------------------------------------------------------ what the question asks about


sessions = pytest.importorskip("dualtrace.memfs.sessions")


def _record(store: MemoryStore, sid: str, started: str, description: str,
            turn: dict) -> None:
    """A session record as the write side renders it (sessions.render_record)."""
    rel = sessions.record_path(sid, started)
    record = sessions.SessionRecord(
        path=rel, session=sid, host="claude-code", project="harbour", started=started,
        ended=started, description=description,
        turns=(sessions.Turn(number=1, date=started[:10], time=started[11:16], **turn),))
    store.write_text(rel, sessions.render_record(record))
    store.commit([rel], f"mem: record {sid[:8]}\n")


@pytest.fixture
def harbour(tmp_path):
    """Two sessions about a tide gauge importer; one had a tool call the user refused,
    whose arguments the record prints (``{"timeout": 300000}``)."""
    store = MemoryStore(tmp_path / "memory", project="harbour")
    _record(store, "5a1e0c3d-0000-4000-8000-000000000001", "2026-04-02T09:10:00Z",
            "Import the tide gauge readings",
            {"user": "Import the tide gauge readings from the harbour office CSV files.",
             "agent": "The importer now reads one CSV file per day and skips rows whose "
                      "gauge id is unknown.",
             "failures": ('09:20 TaskOutput {"block": true, "task_id": "c81f2", '
                          '"timeout": 300000} rejected by the user',)})
    _record(store, "5a1e0c3d-0000-4000-8000-000000000002", "2026-04-03T10:00:00Z",
            "Chart the tide gauge readings",
            {"user": "Draw the tide gauge readings as a chart on the harbour page.",
             "agent": "The harbour page charts the last 48 hours of tide gauge readings."})
    return store.root


@pytest.mark.parametrize("embedder", MODES)
def test_a_tool_calls_arguments_are_not_what_the_session_said(harbour, embedder):
    """n32 of the main question set ("What timeout did we set for the Phoenix LiveView
    websocket heartbeat?") answered from a record whose only "timeout" was a parameter
    of a refused TaskOutput call. The tool's vocabulary is not the session's topic."""
    result = recall(harbour, "which timeout did we give the readings?",
                    embedder=embedder)
    assert result.state == "C", result.render()
    # The same record still answers what it said.
    found = recall(harbour, "which rows does the tide gauge importer skip?", embedder=embedder)
    assert found.state == "B" and found.memories[0].record is not None, found.render()
    assert "unknown" in found.render()


@pytest.fixture(scope="module")
def spotter_memory(tmp_path_factory):
    """The real spotter sessions (other people's), backfilled as a user would."""
    return backfilled_corpus(tmp_path_factory, "claude-code", "spotter")


@pytest.mark.parametrize("embedder", MODES)
def test_real_sessions_a_heartbeat_no_session_mentions(spotter_memory, embedder):
    """n32's repro: STATE B from spotter-4te's epic decision ("Project goal") and a
    session record that says "Phoenix" and "LiveView"; no session says heartbeat."""
    result = recall(spotter_memory,
                    "What timeout did we set for the Phoenix LiveView websocket heartbeat?",
                    embedder=embedder)
    assert result.state == "C", result.render()
    found = recall(spotter_memory, "which exporter sends the OpenTelemetry traces?",
                   embedder=embedder)
    assert found.state in ("A", "B"), found.render()


def test_with_a_never_said_word_words_and_meaning_need_a_margin_or_a_name():
    """The gate's rule behind n32's memory side: an epic decision about tracing that says
    "Phoenix LiveView" passed on words + meaning (coverage 0.22, cosine 0.39, sum 0.61 of
    0.60) a question whose "websocket heartbeat" no session said."""
    from dualtrace.memfs.recall import MEMORY_GATE, RECORD_GATE, _Unit

    epic = _Unit("decisions/epic.md", coverage=0.22, sem=0.39, cos=0.39, mass=3.2)
    assert MEMORY_GATE.passes(epic, True)  # without a never-said word: words + meaning
    assert not MEMORY_GATE.passes(epic, True, never_said=True)
    named = _Unit("decisions/liveview.md", coverage=0.22, sem=0.39, cos=0.39, mass=3.2,
                  named=True)
    assert MEMORY_GATE.passes(named, True, never_said=True)
    clear = _Unit("decisions/clear.md", coverage=0.41, sem=0.37, cos=0.37, mass=4.0)
    assert MEMORY_GATE.passes(clear, True, never_said=True)  # 0.78: past the margin
    alone = _Unit("decisions/near.md", coverage=0.22, sem=0.62, cos=0.62, mass=3.2)
    assert MEMORY_GATE.passes(alone, True, never_said=True)  # meaning alone
    worded = _Unit("decisions/words.md", coverage=0.8, sem=0.36, cos=0.36, mass=6.0)
    assert MEMORY_GATE.passes(worded, True, never_said=True)  # words alone, some meaning
    # A record chunk has no name: its gate keeps words + meaning.
    chunk = _Unit("sessions/x.md#0", coverage=0.45, sem=0.40, cos=0.30, mass=5.0)
    assert RECORD_GATE.passes(chunk, True, never_said=True)
