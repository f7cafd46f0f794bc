"""The offline encoder on real sessions of other people (issue 12): what the agent found
and did is remembered, with the session's own words and files."""

from __future__ import annotations

from pathlib import Path

import pytest

from dualtrace.encoder.digest import build_digest
from dualtrace.hooks.transcripts import read_transcript
from dualtrace.memfs.store import MemoryStore
from tests.conftest import corpus_path

CCL = ("claude-code", "claude-code-log", "-Users-dain-workspace-claude-code-log-sample")
SP = ("claude-code", "spotter")


@pytest.fixture
def encode(tmp_path, monkeypatch):
    from dualtrace.pipeline import encode_session

    monkeypatch.setenv("DUALTRACE_HOME", str(tmp_path / "state"))
    memdir = tmp_path / "mem"

    def run(*parts):
        return encode_session(corpus_path(*parts), memory_dir=memdir, backend="offline")

    run.memdir = memdir
    return run


def facts(memdir: Path, kind: str):
    store = MemoryStore(memdir)
    return [f for f in store.scan().facts() if f.type == kind]


def test_fix_arc_incident_names_the_failure_its_cause_and_fix_and_is_resolved(encode):
    report = encode(*CCL, "fe869ecb-c176-478f-9734-7e4b8ef12cff.jsonl")
    incidents = facts(encode.memdir, "incident")
    # pyright failed under `act` and under `uv run pyright`: one failure, one incident
    assert len(incidents) == 1, [op["path"] for op in report.operations]
    inc = incidents[0]
    assert inc.status == "resolved"
    assert "converter" in inc.path and "uv-run" not in inc.path and "pyright" not in inc.path.split("/")[1][:7]
    fix = next(ln for ln in inc.body.splitlines() if ln.startswith("Fix: edited"))
    assert "`claude_code_log/converter.py`" in fix
    assert "`uv run pyright` passed afterwards" in inc.body
    assert len(inc.description) <= 200 and "\n" not in inc.description
    # the work the user asked for, with the correction they made
    (decision,) = facts(encode.memdir, "decision")
    assert decision.description == "Add a Github Action to run tests and linting."
    assert "run it on all push" in decision.body and "`.github/workflows/ci.yml`" in decision.body


def test_a_stated_cause_and_only_related_commits(encode):
    encode(*SP, "fa812bfe-b295-4cca-9c2f-fdf01028cb46.jsonl")
    (inc,) = facts(encode.memdir, "incident")
    assert inc.status == "resolved"
    assert inc.path == "incidents/sync-session-file-2-idempotent-repeated-duplicate-messages.md"
    assert "Cause (as the agent stated): The idempotency test is failing because" in inc.body
    assert "uuid" in inc.body
    # the session made several commits; only one touched the fix's files
    commits = [ln for ln in inc.body.splitlines() if ln.startswith("Commit:")]
    assert len(commits) <= 1


def test_pasted_test_output_and_diffs_are_context_never_an_incident(encode):
    encode(*CCL, "cbc0f75b-b36d-4efd-a7da-ac800ea30eb6.jsonl")
    encode(*CCL, "71c9afe9-d9cc-4583-86b3-e62ba682b83a.jsonl")
    assert facts(encode.memdir, "incident") == []
    for fact in facts(encode.memdir, "decision"):
        assert "FAILED" not in fact.description and "diff" not in fact.description


def test_a_revision_in_a_later_session_supersedes_without_instead(encode):
    encode(*CCL, "cbc0f75b-b36d-4efd-a7da-ac800ea30eb6.jsonl")
    report = encode(*CCL, "71c9afe9-d9cc-4583-86b3-e62ba682b83a.jsonl")
    decisions = {f.path: f for f in facts(encode.memdir, "decision")}
    assert len(decisions) == 2
    new = next(f for f in decisions.values() if f.supersedes)
    old = decisions[new.supersedes]
    assert old.superseded_by == new.path
    assert new.description == "Take the least nested path first, but take the latest if there are equal depths."
    assert "picking the latest one" in old.body  # history kept
    assert any("supersedes" in (op.get("note") or "") for op in report.operations)


def test_only_files_the_session_changed(encode):
    # /init on an empty repo: the Write of CLAUDE.md was never granted
    report = encode("claude-code", "claude-code-viewer", "sample-project",
                    "1af7fc5e-8455-4414-9ccd-011d40f70b2a.jsonl")
    assert not [op for op in report.operations if op.get("path")]
    # a joke file created, edited and deleted again is no change
    report = encode("agentlogs", "claudecode", "crud.jsonl")
    assert not [op for op in report.operations if op.get("path")]
    report = encode("agentlogs", "codex", "crud.jsonl")
    assert not [op for op in report.operations if op.get("path")]


def test_compacted_epic_is_remembered_with_its_constraints(encode):
    report = encode(*SP, "258c7280-ae70-4798-800f-63464d01a85d.jsonl")
    assert report.gates["min_tier"] in ("RECORD", "FULL")
    (decision,) = facts(encode.memdir, "decision")
    # a bare "implement the epic" request: the epic is the project's goal, and the work is
    # remembered under it (MEDIUM): files, commits, the compacted summary's design points
    assert decision.description.startswith("Project goal: implement spotter-gqc")
    assert decision.confidence == "MEDIUM"
    assert "annotation_message_ref.ex" in decision.body
    learned = {f.description for f in facts(encode.memdir, "learning")}
    assert "Ecto sandbox `{:shared, self()}` mode required for LiveView tests (separate process)" in learned
    assert any("ash.codegen" in d and "SQLite" in d for d in learned)


def test_highest_compression_keeps_explanations_over_repeated_edit_lines():
    session = read_transcript(corpus_path(*SP, "fa812bfe-b295-4cca-9c2f-fdf01028cb46.jsonl"))
    digest = build_digest(session, budget=2500)
    lines = digest.text.splitlines()
    edits = [ln for ln in lines if "] EDIT " in ln]
    said = [ln for ln in lines if "] ASSISTANT: " in ln]
    assert digest.stats["level"] == 5  # the tightest level that still keeps the agent's words
    # edit lines went first (the files section lists every file with its count) ...
    assert edits == [] and "sync_transcripts.ex" in digest.text
    # ... and the agent's explanations and reports are still there
    assert len(said) >= 10
    looser = build_digest(session, budget=4000).text.splitlines()
    edits = [ln for ln in looser if "] EDIT " in ln]
    assert len(edits) == len({ln.split("] EDIT ", 1)[1].split(" (")[0] for ln in edits})  # once per file


def test_distinct_named_subjects_with_shared_wording_are_not_merged(tmp_path, monkeypatch):
    import json

    from dualtrace.pipeline import encode_session

    monkeypatch.setenv("DUALTRACE_HOME", str(tmp_path / "state"))
    memdir = tmp_path / "mem"
    techs = ("kafka", "sqs", "nats", "pulsar", "redis", "rabbitmq", "kinesis", "pubsub")
    for i in range(80):
        chat = tmp_path / f"s{i:02d}.jsonl"
        turns = [
            ("user", f"We decided to use {techs[i % 8]}{i + 10} for the agent{i // 8} session bus, "
                     "because the team compared the options and this one keeps the latency low."),
            ("assistant", "Understood, I'll wire it into the bus configuration."),
        ]
        chat.write_text("".join(json.dumps({"role": r, "content": c,
                                            "timestamp": f"2026-02-{1 + i % 28:02d}T09:0{j}:00Z"}) + "\n"
                                for j, (r, c) in enumerate(turns)), encoding="utf-8")
        encode_session(chat, memory_dir=memdir, backend="offline")
    decisions = facts(memdir, "decision")
    assert len(decisions) == 80
    # the same subject restated is still one memory
    again = tmp_path / "again.jsonl"
    again.write_text(json.dumps({"role": "user", "content": "We decided to use kafka10 for the agent0 "
                                 "session bus, because the team compared the options and this one "
                                 "keeps the latency low.", "timestamp": "2026-03-01T09:00:00Z"}) + "\n",
                     encoding="utf-8")
    report = encode_session(again, memory_dir=memdir, backend="offline")
    assert [op["action"] for op in report.operations] == ["update"]
    assert len(facts(memdir, "decision")) == 80


def test_two_work_items_of_one_project_are_two_decisions(encode):
    """Issue 12 item 3, the real case: spotter's bead spotter-4te (OpenTelemetry) session
    after its bead spotter-fum (readability) session. They share the project's wording and a
    framework name (LiveView); the later one was written as an update of the earlier."""
    encode(*SP, "8463c716-a2ea-4c14-9efa-87158ebd9f20.jsonl")
    (fum,) = facts(encode.memdir, "decision")
    before = fum.body
    report = encode(*SP, "ae4a77f8-aedd-4bc1-888f-c94edc91af04.jsonl")
    by_path = {f.path: f for f in facts(encode.memdir, "decision")}
    assert len(by_path) == 2, [op["path"] for op in report.operations]
    assert by_path[fum.path].body == before  # the readability decision is untouched
    (otel,) = (f for p, f in by_path.items() if p != fum.path)
    assert "spotter-4te" in otel.description and "OpenTelemetry" in otel.description
    assert "spotter-fum" not in otel.body


def test_the_agents_new_test_file_failing_is_no_incident(encode):
    """spotter 8463c716: `mix test` fails in test/spotter_web/live/session_live_test.exs, a
    file the agent wrote minutes before (missing Endpoint config, lazy_html, sandbox mode);
    the agent gets its new tests to run. Not a failure of the project: no incident (the
    gitignored-assets lesson is kept)."""
    report = encode(*SP, "8463c716-a2ea-4c14-9efa-87158ebd9f20.jsonl")
    assert facts(encode.memdir, "incident") == [], [op["path"] for op in report.operations]
    (learned,) = facts(encode.memdir, "learning")
    assert "priv/static/assets" in learned.description


def test_a_compacted_summarys_constraints_go_where_they_belong(encode):
    """spotter ae4a77f8's compacted summary: what the pre-commit hooks enforce is a project
    convention; "OTEL failures must never crash the app or hooks" is part of the
    OpenTelemetry work (its decision's key points, with the opt-out variable), no lesson."""
    encode(*SP, "ae4a77f8-aedd-4bc1-888f-c94edc91af04.jsonl")
    assert facts(encode.memdir, "learning") == []
    conventions = next(encode.memdir.glob("system/*/conventions.md")).read_text()
    assert "Pre-commit hooks enforcing: mix format, credo --strict, dialyzer, mix test." in conventions
    (decision,) = facts(encode.memdir, "decision")
    points = next(ln for ln in decision.body.splitlines() if ln.startswith("Key points"))
    assert "SPOTTER_OTEL_ENABLED environment variable for opt-out" in points
    assert "Graceful degradation (OTEL failures must never crash the app or hooks)" in points


def test_a_stack_statement_is_one_decision_per_subject_and_a_goal_is_a_project_fact(tmp_path, monkeypatch):
    import json

    from dualtrace.pipeline import encode_session

    monkeypatch.setenv("DUALTRACE_HOME", str(tmp_path / "state"))
    chat = tmp_path / "brief.jsonl"
    chat.write_text("".join(json.dumps(x) + "\n" for x in [
        {"role": "user", "content": "I want to build an inventory service for our warehouses. I want to use "
                                    "FastAPI with PostgreSQL, Redis for caching, Docker, Python 3.12.",
         "timestamp": "2026-02-01T09:00:00Z"},
        {"role": "assistant", "content": "Great, I'll scaffold it.", "timestamp": "2026-02-01T09:01:00Z"}]),
        encoding="utf-8")
    memdir = tmp_path / "mem"
    encode_session(chat, memory_dir=memdir, backend="offline")
    paths = sorted(f.path for f in facts(memdir, "decision"))
    assert paths == ["decisions/build-inventory-service-warehouses.md", "decisions/docker.md",
                     "decisions/fastapi.md", "decisions/postgresql.md", "decisions/python-3-12.md",
                     "decisions/redis-caching.md"]
    assert not (memdir / "system" / "human.md").exists()  # the goal is not a personal preference
    redis = MemoryStore(memdir).read_fact("decisions/redis-caching.md")
    assert redis.body.startswith("The user stated") and "Redis for caching" in redis.description


def test_the_agents_own_new_test_failing_is_no_incident_and_a_one_off_request_is_the_works(encode):
    # 37f83ec9: the agent writes test_combined_transcript_link.py, runs it red while it
    # is being written, then green; the user asks for that test to be kept.
    report = encode(*CCL, "37f83ec9-f2ea-42a9-925e-0d5c105cb6e8.jsonl")
    paths = [op["path"] for op in report.operations if op.get("path")]
    assert not facts(encode.memdir, "incident"), paths
    assert not any("uv-run" in p or "pytest" in p.rsplit("/", 1)[-1] for p in paths), paths
    # the request without its politeness ("oh, ... can you please ...?"), same words
    (decision,) = facts(encode.memdir, "decision")
    assert decision.description == ("I didn't find those cross-session navigation links helpful: "
                                    "replace them with a single link to the combined transcript instead.")
    # "I'd actually love that test to be saved a permanent unit test" asks for one thing of
    # this work: it is in the work's memory, never a standing preference of the person
    assert 'The user added: "I\'d actually love that test to be saved a permanent unit test"' in decision.body
    assert paths == [decision.path]
    human = encode.memdir / "system" / "human.md"
    assert not human.exists() or "permanent unit test" not in human.read_text()
    assert facts(encode.memdir, "preference") == []


@pytest.mark.parametrize("said,kind", [
    ("I'd actually love that test to be saved a permanent unit test", None),  # 37f83ec9
    ("I want this function renamed to load_rows", None),
    ("I'd love it if you added a test for that", None),
    ("I prefer tabs over spaces.", "preference"),
    ("I'd love it if you always ran the tests first", "preference"),
    ("I hate it when tests sleep", "preference"),
    ("I like this style of small commits", "preference"),
    ("I'd rather you ask before deleting files", "preference"),
])
def test_a_wish_about_a_thing_of_this_session_is_no_standing_preference(said, kind):
    from dualtrace.encoder.backends.offline import lead_type

    assert lead_type(said) == kind


@pytest.mark.parametrize("said,plain", [
    # real requests from the corpus (claude-code-log, claude-code-viewer, spotter)
    ("oh, I didn't find those cross-session navigation links helpful, can you please replace them "
     "with a single link to the combined transcript instead?",
     "I didn't find those cross-session navigation links helpful: replace them with a single link "
     "to the combined transcript instead?"),
    ("Hey Claude, please have a look at the git diff of claude_code_log/renderer.py",
     "Have a look at the git diff of claude_code_log/renderer.py"),
    ("/orchestrator create TODO app by Next.js", "Create TODO app by Next.js"),
    ("/handgemacht:create-beads websearch to learn how to fastest setup credo, dialyzer, mix_audit "
     "(basically all supported by https://github.com/bradleygolden/claude-marketplace-elixir) Maybe there "
     "are igniter installers", "Websearch to learn how to fastest setup credo, dialyzer, mix_audit. Maybe "
     "there are igniter installers"),
    ("Work on bead spotter-a0y and continue until all are done", "Work on bead spotter-a0y"),
    ("Help to use these Pydanctic models in a better way", "Use these Pydanctic models in a better way"),
    ("Oh no, we lost the session navigation section from the combined transcript somehow :(",
     "We lost the session navigation section from the combined transcript somehow"),
    # statements keep their words
    ("I prefer tabs over spaces.", "I prefer tabs over spaces."),
    ("So we decided to use Postgres.", "We decided to use Postgres."),
])
def test_requests_lose_politeness_and_fillers_not_their_words(said, plain):
    from dualtrace.encoder.backends.work import unpolite

    assert unpolite(said) == plain


def test_another_failure_in_a_later_session_is_a_new_incident_the_same_one_recurs(encode, tmp_path):
    """Across sessions: one incident per failure signature (issue 12 item 2). The later
    sessions are the real fa812bfe transcript under a new session id, once unchanged (the
    same failure recurs: updated in place) and once with another test failing."""
    name = "fa812bfe-b295-4cca-9c2f-fdf01028cb46"
    real = corpus_path(*SP, f"{name}.jsonl").read_text(encoding="utf-8")
    encode(*SP, f"{name}.jsonl")
    (first,) = facts(encode.memdir, "incident")

    def later(sid: str, text: str) -> Path:
        path = tmp_path / f"{sid}.jsonl"
        path.write_text(text.replace(name, sid), encoding="utf-8")
        return path

    from dualtrace.pipeline import encode_session

    same = later("aaaaaaaa-0000-4000-8000-000000000001", real)
    encode_session(same, memory_dir=encode.memdir, backend="offline")
    (again,) = facts(encode.memdir, "incident")
    assert again.path == first.path and len(again.sessions) == 2
    other = later("bbbbbbbb-0000-4000-8000-000000000002",
                  real.replace("is idempotent \u2014 repeated sync does not duplicate messages",
                               "keeps the message order \u2014 a resync never reorders rows"))
    encode_session(other, memory_dir=encode.memdir, backend="offline")
    incidents = {f.path: f for f in facts(encode.memdir, "incident")}
    assert len(incidents) == 2, sorted(incidents)
    new = next(f for p, f in incidents.items() if p != first.path)
    assert "message order" in new.description and new.status == "resolved"
    assert "message order" not in incidents[first.path].body


def test_a_problem_the_user_reports_without_tool_activity_is_an_open_incident(encode):
    # tool_heavy: "scrolling back in xterm.js still does not work (maybe because ...)?"
    # - no edit, no failing command: the user's words are the only signal
    report = encode(*SP, "tool_heavy.jsonl")
    assert any("does not work" in r for r in report.gates["reasons"]), report.gates
    (inc,) = facts(encode.memdir, "incident")
    assert inc.status == "investigating" and "xterm.js" in inc.description


def test_what_a_fix_broke_is_part_of_that_fix_one_incident(encode):
    # 937c6e6b: the user runs `uv run ty check` (invalid-assignment errors in
    # test/test_tui_expansion.py) and asks for a fix; the agent rewrites the test's fakes
    # with unittest.mock, ty passes; the user pastes the rewritten tests failing
    # (AssertionError in test_row_expansion_functionality), the agent fixes the same file
    # and the tests pass. One debugging episode: one incident, the breakage in its story.
    report = encode(*CCL, "937c6e6b-27e7-4edd-86f1-ad28f9731841.jsonl")
    paths = [op["path"] for op in report.operations if op.get("path")]
    (inc,) = facts(encode.memdir, "incident")
    assert paths == [inc.path] == ["incidents/invalid-assignment-test-tui-expansion.md"]
    assert inc.status == "resolved"
    assert "Fix: edited `test/test_tui_expansion.py`" in inc.body
    broke = next(ln for ln in inc.body.splitlines() if ln.startswith("Then the fix broke:"))
    assert "test_row_expansion_functionality" in broke and "AssertionError" in broke
    assert "mock `expanded_content.renderable` is not being updated" in broke
    assert "`uv run pytest -m tui test/test_tui_expansion.py -v` passed afterwards" in inc.body
