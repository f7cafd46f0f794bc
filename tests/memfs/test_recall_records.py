"""Recall broadens to session records: chunks in the index, the record-only label,
memories first, date order for first/last questions, the prompt hook's stricter gate,
and the vectors kept in step with the index (semantic path, skipped without the extra)."""

from __future__ import annotations

import sqlite3
from array import array

import pytest

from dualtrace.config import Settings
from dualtrace.memfs import embed, formats
from dualtrace.memfs.index import Index, index_path
from dualtrace.memfs.inject import prompt_context
from dualtrace.memfs.recall import (
    LABEL_B,
    LABEL_B_RECORD,
    LABEL_C,
    content_terms,
    recall,
    unknown_names,
)
from dualtrace.memfs.store import MemoryStore

# The write side (memfs.sessions, issue 11) renders the records these tests search.
sessions = pytest.importorskip("dualtrace.memfs.sessions")
SEMANTIC = embed.load_wordllama() is not None
needs_semantic = pytest.mark.skipif(not SEMANTIC, reason="dualtrace[semantic] not installed")


def _record(store: MemoryStore, sid: str, started: str, description: str,
            turns: list[tuple[str, str]], *, local: bool = False, commit: bool = True) -> str:
    """Write a session record as the write side renders it (sessions.render_record)."""
    rel = sessions.record_path(sid, started, local=local)
    day, hhmm = started[:10], started[11:16]
    record = sessions.SessionRecord(
        path=rel, session=sid, host="claude-code", project="p", started=started,
        ended=started, description=description,
        turns=tuple(sessions.Turn(number=i + 1, date=day, time=hhmm, user=u, agent=a)
                    for i, (u, a) in enumerate(turns)))
    if local:  # gitignored state: written beside the index, never committed
        path = store.root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(sessions.render_record(record), encoding="utf-8")
        return rel
    store.write_text(rel, sessions.render_record(record))
    if commit:
        store.commit([rel], f"mem: record {sid[:8]}\n")
    return rel


def _fact(anchor, description, kind="decision", stored="2026-11-01", **extra):
    return formats.Fact(path=formats.fact_path(kind, anchor), type=kind, description=description,
                        body=extra.pop("body", description), stored=stored, **extra)


@pytest.fixture
def store(memdir):
    store = MemoryStore(memdir, project="p")
    _record(store, "0d3a8e6f-290f-4105-a327-a2496e5e2a83", "2025-07-05T19:39:53Z",
            "Refactor the timeline filtering to hide the group",
            [("Please hide the vis-group instead of every item when a timeline filter is off.",
              "Done: applyFilters() now sets the vis-timeline group's built-in `visible` "
              "property, and the sidechain group colour is #ffeee1 like its items.")])
    _record(store, "fe869ecb-c176-478f-9734-7e4b8ef12cff", "2025-06-14T23:45:12Z",
            "Add a GitHub Action to run tests and linting",
            [("Can you please add a GitHub Action to run tests and linting?",
              "The CI workflow at .github/workflows/ci.yml runs pytest, ruff and pyright on "
              "Python 3.12 and 3.13, on every push.")])
    _record(store, "4d5611e5-241a-462a-8d15-5122611a9569", "2026-02-12T16:02:00Z",
            "Work on the transcript renderer",
            [("Upgrade the TranscriptRenderer for 10-line expandable tool result groups.",
              "TranscriptRenderer now shows 10 lines of a tool result, then an expand control.")])
    _record(store, "8463c716-a2ea-4c14-9efa-87158ebd9f20", "2026-02-11T21:41:00Z",
            "Enrich the transcript renderer",
            [("Enrich the TranscriptRenderer with metadata and thread keys.",
              "TranscriptRenderer rows now carry kind, tool_use_id and thread_key.")])
    return store


def test_record_only_answer_has_its_label_date_session_and_passage(store):
    result = recall(store, "how do we hide a vis-group in the timeline when filtering?")
    assert result.state == "B" and result.label == LABEL_B_RECORD
    first = result.memories[0]
    assert first.source == "record" and first.record.session.startswith("0d3a8e6f")
    text = result.render()
    assert text.startswith(LABEL_B_RECORD)
    assert "2025-07-05" in text and "0d3a8e6f" in text and "Turn 1" in text
    assert "> " in text and "`visible`" in text  # the quoted passage, verbatim
    data = result.to_dict()
    assert data["label"] == LABEL_B_RECORD
    assert data["memories"][0]["record"]["date"] == "2025-07-05"


def test_never_discussed_still_abstains_with_records_in_the_pool(store):
    for question in ("Which Postgres connection pool size did we configure?",
                     "How do we rotate the AWS access keys?",
                     "What Redis eviction policy did we choose?"):
        result = recall(store, question)
        assert result.state == "C", (question, result.render())
        assert result.render().splitlines()[1] == LABEL_C


def test_curated_memory_ranks_first_and_the_episode_follows(store):
    fact = _fact("ci-on-every-push", "CI runs on every push, on Python 3.12 and 3.13",
                 body="The GitHub Actions workflow runs tests and linting on every push.",
                 sessions=("fe869ecb-c176-478f-9734-7e4b8ef12cff",))
    store.commit([store.write(fact)], "mem: fact\n")
    result = recall(store, "which Python versions does the GitHub Actions CI workflow run?")
    assert result.memories[0].source == "memory"
    assert result.memories[0].path == "decisions/ci-on-every-push.md"
    assert result.label == LABEL_B  # the curated fact decides the state
    assert any(m.source == "record" and m.record.session.startswith("fe869ecb")
               for m in result.memories[1:])


def test_first_and_last_questions_order_records_by_date(store):
    first = recall(store, "When did we first work on the TranscriptRenderer?")
    last = recall(store, "When did we last work on the TranscriptRenderer?")
    firsts = [m.record.date for m in first.memories if m.record]
    lasts = [m.record.date for m in last.memories if m.record]
    assert firsts[:2] == ["2026-02-11", "2026-02-12"]
    assert lasts[:2] == ["2026-02-12", "2026-02-11"]


def test_lexical_only_still_finds_record_passages(store):
    result = recall(store, "which Python versions does the GitHub Actions CI workflow test?",
                    embedder=None)
    assert result.label == LABEL_B_RECORD
    assert "3.12" in result.render()


def test_records_can_be_turned_off_for_a_query(store):
    result = recall(store, "how do we hide a vis-group in the timeline?", records=False)
    assert result.state == "C"


def test_local_records_are_indexed(memdir):
    store = MemoryStore(memdir, project="p")
    rel = _record(store, "aaaabbbb-0000-1111-2222-333344445555", "2026-03-01T10:00:00Z",
                  "Local-only session", [("Wire the flamegraph exporter to speedscope.",
                                          "The flamegraph exporter writes speedscope JSON.")],
                  local=True)
    assert rel.startswith(".dualtrace/sessions/")
    result = recall(store, "how does the flamegraph exporter write speedscope output?")
    assert result.memories and result.memories[0].path == rel


def test_about_beats_a_passing_mention(memdir):
    """A decision about the payment service outranks an incident that names it in passing."""
    store = MemoryStore(memdir, project="p")
    decision = _fact("payment-service-retries", "Payment service retries with exponential backoff",
                     body="We retry failed charges three times with jittered backoff.")
    incident = _fact("checkout-latency-spike", "Checkout latency spike on Black Friday",
                     kind="incident",
                     body="Latency rose; the payment service retries and the search cache and "
                          "the CDN were all looked at; the cause was the CDN.")
    store.commit([store.write(decision), store.write(incident)], "mem: two\n")
    result = recall(store, "how does the payment service handle retries?")
    assert result.memories[0].path == "decisions/payment-service-retries.md"


def test_prompt_hook_injects_a_record_passage_only_above_the_stricter_gate(store):
    settings = Settings()
    specific = prompt_context(store, "hide the vis-group in the timeline filter, sidechain "
                                     "colour ffeee1", settings)
    assert specific is not None and "0d3a8e6f" in specific and LABEL_B_RECORD in specific
    for generic in ("run the tests", "please fix the lint errors", "continue"):
        assert prompt_context(store, generic, settings) is None, generic


def test_prompt_hook_never_loads_the_model(store, monkeypatch):
    def boom():
        raise AssertionError("the prompt hook must stay lexical")

    monkeypatch.setattr(embed, "get_embedder", boom)
    prompt_context(store, "hide the vis-group in the timeline filter", Settings())


def test_deleted_record_leaves_nothing_in_the_index(store):
    rel = sessions.record_path("0d3a8e6f-290f-4105-a327-a2496e5e2a83", "2025-07-05T19:39:53Z")
    store.path(rel).unlink()
    store.commit([rel], "mem: drop record\n")
    result = recall(store, "how do we hide a vis-group in the timeline when filtering?")
    assert all(m.path != rel for m in result.memories)
    conn = sqlite3.connect(index_path(store.root))
    orphans = conn.execute("SELECT count(*) FROM vectors WHERE doc_id NOT IN "
                           "(SELECT id FROM docs)").fetchone()[0]
    assert orphans == 0


@needs_semantic
def test_vectors_kept_in_step_with_the_index(store):
    embedder = embed.get_embedder()
    if embedder is None:
        pytest.skip("semantic recall switched off (DUALTRACE_EMBEDDER=off)")
    with Index.open(store.root) as index:
        index.ensure_vectors(embedder)
        assert index.ensure_vectors(embedder) == 0  # nothing new to embed
        count = index.conn.execute("SELECT count(*) FROM vectors").fetchone()[0]
        docs = index.conn.execute("SELECT count(*) FROM docs").fetchone()[0]
        assert count == docs > 0
    _record(store, "bbbbcccc-0000-1111-2222-333344445555", "2026-03-02T10:00:00Z",
            "Another session", [("Add a CSV export to the report page.",
                                 "The report page exports CSV through a streaming response.")])
    with Index.open(store.root) as index:
        # The commit hook computed the new record's vectors (the worker's job).
        assert index.ensure_vectors(embedder) == 0
        count = index.conn.execute("SELECT count(*) FROM vectors").fetchone()[0]
        docs = index.conn.execute("SELECT count(*) FROM docs").fetchone()[0]
        assert count == docs

    def in_step(index: Index) -> bool:
        return index.conn.execute(
            "SELECT (SELECT count(*) FROM vectors) = (SELECT count(*) FROM docs) AND NOT "
            "EXISTS (SELECT 1 FROM docs WHERE id NOT IN (SELECT doc_id FROM vectors))"
        ).fetchone()[0] == 1

    with Index.open(store.root) as index:
        # The oldest file edited by hand (its documents get new ids), the file holding
        # the newest document deleted, then a file added: still one vector per document.
        oldest = index.conn.execute("SELECT path FROM docs ORDER BY id LIMIT 1").fetchone()[0]
        newest = index.conn.execute("SELECT path FROM docs ORDER BY id DESC LIMIT 1").fetchone()[0]
        assert oldest != newest
        path = store.root / oldest
        path.write_text(path.read_text().replace("vis-group", "vis-group (all of it)"))
        (store.root / newest).unlink()
        index.update_paths([oldest, newest])
        assert index.ensure_vectors(embedder) > 0 and in_step(index)
    _record(store, "ccccdddd-0000-1111-2222-333344445555", "2026-03-03T10:00:00Z",
            "A third session", [("Rotate the API keys monthly.", "Rotation is a cron job.")])
    with Index.open(store.root) as index:
        index.ensure_vectors(embedder)
        assert in_step(index)


@needs_semantic
def test_record_lines_are_tokenized_once_with_their_vectors_and_answers_stay_the_same(
        store, monkeypatch):
    """ensure_vectors keeps each chunk's line token ids (what recall embeds of a record);
    recall then embeds those lines from the ids, tokenizing only the question, and
    answers exactly as when it tokenizes every line itself."""
    from dualtrace.memfs import index as index_mod
    from dualtrace.memfs import recall as recall_mod

    embedder = embed.get_embedder()
    if embedder is None:
        pytest.skip("semantic recall switched off (DUALTRACE_EMBEDDER=off)")
    with Index.open(store.root) as index:
        index.ensure_vectors(embedder)
        chunks = index.conn.execute("SELECT id FROM docs WHERE kind = 'chunk'").fetchall()
        rows = dict(index.conn.execute("SELECT doc_id, ids FROM line_tokens").fetchall())
        assert chunks and sorted(rows) == sorted(r[0] for r in chunks)
        docs = index.docs(rows)
        for doc_id, blob in rows.items():
            lines = index_mod.record_lines(docs[doc_id].data["text"])
            assert index_mod.unpack_lines(blob) == embedder.token_ids(lines)
        known = index.line_tokens(docs.values(), embedder.name)
        assert known and index.line_tokens(docs.values(), "another-model") == {}
    questions = ["how do we hide a vis-group in the timeline when filtering?",
                 "what did we change about the timeline filter?",
                 "why does the CSV export stream?"]
    asked: list[list[str]] = []
    real = type(embedder).token_ids

    def counting(self, texts):
        asked.append(list(texts))
        return real(self, texts)

    monkeypatch.setattr(type(embedder), "token_ids", counting)
    recall_mod._LINE_CACHE.clear()
    stored = [recall(store, q).render() for q in questions]
    assert all(len(t) == 1 for t in asked), asked  # the question alone, each time
    monkeypatch.setattr(Index, "line_tokens", lambda self, docs, model: {})
    recall_mod._LINE_CACHE.clear()
    asked.clear()
    tokenized = [recall(store, q).render() for q in questions]
    assert any(len(t) > 1 for t in asked)  # the lines, tokenized here
    assert stored == tokenized
    assert any("vis-group" in r for r in stored)


def test_line_token_blobs_round_trip():
    from dualtrace.memfs.index import pack_lines, unpack_lines

    for ids in ([], [[]], [[1, 2, 3], [], [31999]], [[70000, 5]], [[1] * 70000]):
        assert unpack_lines(pack_lines(ids)) == ids
    assert pack_lines([[1, 2]])[:1] == b"2" and pack_lines([[70000]])[:1] == b"4"
    for bad in (b"", b"2", b"2\x01", b"9\x01\x00\x00\x00", pack_lines([[1, 2]])[:-2],
                pack_lines([[1, 2]]) + b"\x00\x00"):
        assert unpack_lines(bad) is None


@needs_semantic
def test_meaning_finds_paraphrases_words_miss_and_never_stored_still_abstain(tmp_path):
    """On the labelled store: the semantic path answers more of the paraphrased questions
    than words alone, and still abstains on >= 90% of the never-stored ones."""
    import importlib.util

    from tests.conftest import DATA

    spec = importlib.util.spec_from_file_location("rq", DATA / "recall_questions.py")
    rq = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(rq)
    store = MemoryStore(tmp_path / "labelled", project="project")
    rq.build(store)

    def found(**kw):
        return sum(path in [m.path for m in recall(store, q, limit=3, **kw).memories]
                   for q, path in rq.PARAPHRASES)

    model = embed.load_wordllama()
    lexical, semantic = found(embedder=None), found(embedder=model)
    assert semantic > lexical, (lexical, semantic)
    never = [q for q, g, _ in rq.QUESTIONS if g == "never"]
    abstained = sum(recall(store, q, embedder=model).state == "C" for q in never)
    assert abstained / len(never) >= 0.90
    store.close()


def test_embedder_off_switch(monkeypatch):
    monkeypatch.setenv(embed.ENV, "off")
    embed.reset()
    try:
        assert embed.get_embedder() is None
    finally:
        monkeypatch.delenv(embed.ENV)
        embed.reset()


@needs_semantic
def test_vector_snapshot_follows_the_generation_and_survives_corruption(store):
    from dualtrace.memfs import index as index_mod

    embedder = embed.get_embedder()
    if embedder is None:
        pytest.skip("semantic recall switched off (DUALTRACE_EMBEDDER=off)")
    state = index_path(store.root).parent
    recall(store, "how do we hide a vis-group in the timeline?")
    first = sorted(p.name for p in state.glob("vectors.*.vec"))
    assert len(first) == 2  # chunks and memories
    _record(store, "ccccdddd-0000-1111-2222-333344445555", "2026-03-03T10:00:00Z",
            "Third session", [("Move the nightly export to a cron job.", "Cron runs it at 2am.")])
    index_mod._VECTOR_CACHE.clear()  # a new process
    result = recall(store, "when does the nightly export cron job run?")
    assert result.memories and result.memories[0].record.session.startswith("ccccdddd")
    second = sorted(p.name for p in state.glob("vectors.*.vec"))
    assert len(second) == 2 and second != first  # the old generation's files are gone
    for path in state.glob("vectors.*.vec"):
        path.write_bytes(b"not a vector snapshot")
    index_mod._VECTOR_CACHE.clear()
    again = recall(store, "when does the nightly export cron job run?")
    assert again.memories[0].record.session.startswith("ccccdddd")


def test_a_rebuilt_index_of_the_same_generation_never_reads_the_old_snapshot(store):
    """Two fresh builds of as many files reach the same generation; a file edited by hand
    before the second (a schema change rebuilds every index) must get its new vector,
    not the replaced index's snapshot row."""
    from dualtrace.memfs import index as index_mod

    pytest.importorskip("dualtrace.memfs.vectors")  # simsimd: the semantic extra

    class Fake:
        name = "fake-4"
        dim = 4

        def embed(self, texts):
            from dualtrace.memfs.vectors import unit

            out = []
            for t in texts:
                v = array("f", [float(len(t) % 7 + 1), float(t.count("e") + 1),
                                float(t.count("zebra") * 5 + 1), 1.0])
                out.append(unit(v))
            return out

    fake = Fake()
    index_mod.reindex(store.root)
    with Index.open(store.root) as index:
        index.ensure_vectors(fake)
        ids, before = index.vector_matrix(chunks=True)
        gen = index_mod._meta(index.conn, "vectors_gen")
        rel = index.conn.execute("SELECT path FROM docs WHERE kind = 'chunk' ORDER BY id "
                                 "LIMIT 1").fetchone()[0]
    path = store.root / rel
    text = path.read_text()
    path.write_text(text.replace(" runs ", " zebra runs zebra "))
    assert path.read_text() != text
    index_mod._VECTOR_CACHE.clear()  # a new process
    index_mod.reindex(store.root)
    with Index.open(store.root, refresh=False) as index:
        index.ensure_vectors(fake)
        assert index_mod._meta(index.conn, "vectors_gen") == gen  # the same generation
        new_ids, after = index.vector_matrix(chunks=True)
        doc = next(d for d in index.docs(new_ids).values()
                   if d.path == rel and "zebra" in d.data["text"])
        want = fake.embed([index_mod.embed_text(doc)])[0]
        assert after.row(new_ids.index(doc.id)).tobytes() == want.tobytes()
        assert before.row(ids.index(doc.id)).tobytes() != want.tobytes()


def test_passage_quotes_the_detail_asked_for_not_the_sessions_topic(memdir):
    """Lines that share only the session's topic words ("the TODO app") give way to the
    one line with the word that is asked about ("persist")."""
    store = MemoryStore(memdir, project="p")
    topic = [f"- The TODO app's {part} is done and the TODO app builds cleanly with npm run "
             f"build; the TODO app layout keeps the header, the list and the footer aligned."
             for part in ("header", "list", "footer", "filter", "form", "styles", "types",
                          "tests", "readme", "icons", "routes", "hooks")]
    detail = ("- localStorage persistence across sessions: the todos are saved on every "
              "change and read back when the page loads, so a reload keeps the list, the "
              "filters and the completed state exactly as they were before")
    _record(store, "fe5e1c67-9f0e-4c2b-8a77-2d1f0c9b3a10", "2025-09-03T00:52:00Z",
            "/orchestrator create TODO app by Next.js",
            [("/orchestrator create TODO app by Next.js",
              "\n".join(topic[:6] + [detail] + topic[6:]))])
    for embedder in (None, embed.get_embedder()):
        result = recall(store, "How does the TODO app persist todos?", embedder=embedder)
        assert result.label == LABEL_B_RECORD
        passage = result.memories[0].record.passage
        assert "localStorage persistence" in passage, embedder
        assert len(passage) <= 900


def test_a_plural_is_the_same_word_as_its_singular():
    """"the TODO app ... todos" asks about one thing: counted twice it would outweigh
    "persist", the word the question is about."""
    assert content_terms("How does the TODO app persist todos?") == ["todo", "app", "persist"]
    assert content_terms("Which tests test the class?") == ["tests", "class"]


def test_a_hyphenated_word_of_stop_words_is_kept_joined():
    """"to-do" is two stop words: split, the question lost the one word the memory writes
    ("TODO app"). A hyphenated word with a content part stays as it was."""
    assert content_terms("Where does the to-do app keep items?") == ["todo", "app", "keep", "items"]
    assert content_terms("re-run the e-mail set-up") == ["re", "run", "mail", "set"]


@needs_semantic
def test_words_alone_do_not_pass_when_the_text_means_something_else(memdir):
    """'How do we shard the users table?' against a memory about transcript annotations
    that names users and a table in passing: words pass the gate, meaning does not."""
    store = MemoryStore(memdir, project="p")
    fact = _fact("transcript-annotations", "Transcript annotations with message references",
                 body="Annotations reference transcript messages through a join resource; "
                      "the LiveView renders them beside the terminal output. Users see a "
                      "badge per annotation and the review table lists them by session. "
                      "Tests cover the hook controller, the Ash resources and the renderer.")
    store.commit([store.write(fact)], "mem: fact\n")
    question = "How do we shard the users table?"
    # Words alone would pass; since session 6 a never-said word ("shard") stops them too.
    assert recall(store, "How do we review the users table?", embedder=None,
                  records=False).state == "B"
    assert recall(store, question, embedder=None, records=False).state == "C"
    assert recall(store, question, embedder=embed.load_wordllama()).state == "C"


def test_a_listing_of_sessions_counts_past_the_first_400_matching_turns(tmp_path):
    """'Which sessions were about X' with X in more turns than the old 400-candidate cap:
    every session is listed (the cap counted 400 of 450)."""
    from dualtrace.memfs import sessions
    from dualtrace.memfs.index import reindex

    root = tmp_path / "m"
    root.mkdir()
    for i in range(450):
        day = f"2026-{1 + i % 12:02d}-{1 + i % 28:02d}"
        sid = f"{i:08x}-0000-4000-8000-000000000000"
        turns = (sessions.Turn(number=1, date=day, time="10:00",
                               user=f"look at the quokkaparser warning number {i}",
                               agent="the quokkaparser warning is gone now"),
                 sessions.Turn(number=2, date=day, time="10:30", user="thanks, commit it",
                               agent="committed"))
        rel = sessions.record_path(sid, f"{day}T10:00:00Z")
        record = sessions.SessionRecord(path=rel, session=sid, host="claude-code",
                                        project="p", started=f"{day}T10:00:00Z",
                                        description=f"quokkaparser warning {i}", turns=turns)
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(sessions.render_record(record), encoding="utf-8")
    reindex(root)
    result = recall(root, "which sessions were about the quokkaparser warning", embedder=None)
    assert result.state == "B" and result.aggregation
    assert len({m.record.session for m in result.memories}) == 450
    dates = [m.record.date for m in result.memories]
    assert dates == sorted(dates)


@needs_semantic
def test_a_chunks_meaning_is_its_best_run_of_lines_not_only_one_line():
    """An answer told over a five-line list: no line or pair alone means what the
    question means, the run of five does (recall.WINDOWS)."""
    from array import array

    from dualtrace.memfs import recall as recall_mod

    # Five lines, each about one part of the answer.
    lines = [array("f", [float(i == j) for j in range(5)]) for i in range(5)]
    question = array("f", [5 ** -0.5] * 5)
    assert recall_mod._best_window(lines, question) == pytest.approx(1.0)
    assert recall_mod._best_window(lines[:1], question) == pytest.approx(5 ** -0.5)
    assert max(2 / (5 ** 0.5 * 2 ** 0.5), 5 ** -0.5) < 0.7  # a pair: 2/sqrt(5)/sqrt(2)


def test_a_question_naming_what_no_session_ever_named_abstains(store):
    """"iOS", "Kafka" are in no memory and no record: nothing stored can answer, however
    much the rest of the question matches ("push", "tests", "timeline filter")."""
    store.commit([store.write(_fact(
        "push-notifications-tested", "Push notifications are tested with a fake gateway",
        body="The test suite sends push notifications through a fake gateway on every push."))],
        "mem: fact\n")
    for question in ("How do we test iOS push notifications?",
                     "Which Kafka topic carries the timeline filter events?"):
        for embedder in (None, embed.get_embedder()):
            result = recall(store, question, embedder=embedder)
            assert result.state == "C", (question, result.render())
    # The same questions without the unknown name still answer: only the name decides.
    assert recall(store, "How do we test push notifications?", embedder=None).state == "B"
    # A known name, or an unknown name offered as the alternative to a known one, still
    # answers; a name is known by its prefix too ("Git" in "GitHub").
    with Index.open(store.root) as index:
        assert unknown_names(index, "Which Python versions does the Git workflow test on?") == []
        assert unknown_names(index, "Which Python or Jython versions?") == []
        assert unknown_names(index, "Which Jython versions?") == ["Jython"]
    for question in ("Which Python versions does the GitHub Action run tests on?",
                     "Does the CI workflow test on Python or Jython?",
                     "What does the TranscriptRenderer show of a tool result?"):
        result = recall(store, question, embedder=None)
        assert result.state != "C", question
    # A pasted text (a bug report, a prompt) names many things: not judged by its names.
    long_text = ("Traceback from the Kafka consumer while the timeline filter group hides "
                 "the vis-group items; applyFilters sets visible property sidechain colour "
                 "ffeee1 items group built-in timeline refactor filtering hide")
    assert recall(store, long_text, embedder=None).state != "C"


def test_the_record_gate_takes_a_lower_sum_when_the_words_matched_are_rare():
    """Words and meaning together pass a record chunk at coverage + cosine 0.62 only when
    the matched words weigh more than one word found in a single chunk (Unit.rare)."""
    from dualtrace.memfs import recall as recall_mod

    def unit(rare: float):
        return recall_mod._Unit("sessions/x.md#0", coverage=0.3, sem=0.32, mass=1.0, rare=rare)

    gate = recall_mod.RECORD_GATE
    assert gate.passes(unit(2.0), semantic=True)
    assert not gate.passes(unit(1.0), semantic=True)  # a common match: the full sum is needed
    assert not gate.passes(unit(2.0), semantic=False)  # words alone: coverage decides
    strong = recall_mod._Unit("sessions/x.md#0", coverage=0.4, sem=0.42, mass=1.0, rare=0.5)
    assert gate.passes(strong, semantic=True)  # the usual sum (0.80) needs no rare words


@needs_semantic
def test_once_a_record_answers_a_near_one_is_shown_beside_it_but_never_alone(store):
    """The gate decides whether the memory answers at all; once a record passes it, the
    other places go to records that mean nearly the same (recall.COMPANION_GATE). A
    record that only comes near never answers on its own: the question abstains."""
    question = "when a filter is off, does the whole row of the chart collapse?"
    assert recall(store, question).state == "C"  # the vis-group record is only near
    _record(store, "aaaabbbb-290f-4105-a327-a2496e5e2a83", "2025-07-06T19:39:53Z",
            "Chart rows", [("When a toggle is switched off, how should the chart look?",
                            "The whole row of the chart collapses, rather than each of its "
                            "entries disappearing one by one.")])
    result = recall(store, question)
    assert result.state == "B"
    assert [m.record.session[:8] for m in result.memories] == ["aaaabbbb", "0d3a8e6f"]
