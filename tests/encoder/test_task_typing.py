"""What a request is, what an incident's cause is, and what an anchor is made of (issue 12
items 2, 3 and 5; review 7 F7 and F9).

- A task is not a decision. A request that states a choice (how, why, the means: "use X
  because Y") keeps that choice as the decision. A request that states none is either the
  project's goal or brief (it creates the project, it is an epic, the work wrote a plan, or
  the work was a feature of several commits or many files): a project fact, "Project goal:
  ...". Or it is a one-off task ("add a function called X and a test for it"): the session
  record keeps it and no fact is written.
- "Cause (as the agent stated)" is written only when the agent's sentence states a cause
  (because, due to, caused by, the problem was, "X was Y, so Z"). A step it plans ("Now I
  need to understand how ...") is not one.
- An anchor is made of the subject's content words: each word once, a compound name whole
  (`with_span/3`, end-to-end), no file extension, no redaction placeholder, and no trailing
  word that leads into a cut-off phrase. A description is one sentence: a lower-case next
  sentence ("... it. also we ...") ends it too.

Real transcripts from ../shared/corpus (skipped when absent), and chats written here in the
shape of requests found in public issue trackers, not in the labelled set."""

from __future__ import annotations

from pathlib import Path

import pytest

from dualtrace.encoder.backends import work
from dualtrace.encoder.backends.offline import anchor_words, one_sentence
from dualtrace.memfs.anchors import make_anchor
from dualtrace.memfs.store import MemoryStore
from dualtrace.pipeline import encode_session
from tests.conftest import corpus_path
from tests.encoder.test_offline import claude
from tests.encoder.test_pasted_failures import bash, edit, said, user


@pytest.fixture
def encode(tmp_path, monkeypatch):
    monkeypatch.setenv("DUALTRACE_HOME", str(tmp_path / "state"))

    def run(path: Path, memdir: Path | None = None):
        return encode_session(path, memory_dir=memdir or tmp_path / "mem", backend="offline")

    run.memdir = tmp_path / "mem"
    return run


def _facts(memdir: Path, kind: str | None = None):
    return [f for f in MemoryStore(memdir).scan().facts() if kind is None or f.type == kind]


def _records(memdir: Path) -> list[str]:
    return [p.read_text() for p in sorted(memdir.glob("sessions/*/*.md"))]


# ---------------------------------------------------------------- tasks


def test_a_one_off_task_writes_no_fact_and_its_record_keeps_it_real(encode):
    # claude-reliability's automated run: "Add a function called multiply_numbers(a: int, b:
    # int) -> int that multiplies two numbers together. Add a test for it." (one commit)
    report = encode(corpus_path("claude-code", "claude-reliability", "coverage-test-fix", "transcript.jsonl"))
    assert not _facts(encode.memdir, "decision"), [op.get("path") for op in report.operations]
    (record,) = _records(encode.memdir)
    assert "multiply_numbers" in record and "Add a test for it" in record


def test_a_project_brief_is_a_project_goal_real(encode):
    # claude-code-viewer: "/orchestrator create TODO app by Next.js" in an empty project
    encode(corpus_path("claude-code", "claude-code-viewer", "sample-project",
                       "fe5e1c67-53e7-4862-81ae-d0e013e3270b.jsonl"))
    (fact,) = _facts(encode.memdir, "decision")
    assert fact.description == "Project goal: create TODO app by Next.js."
    assert fact.path == "decisions/create-todo-app-next-js.md"  # Next.js is a name, not a file
    assert fact.confidence == "MEDIUM"
    assert "`todo-app/src/app/page.tsx`" in fact.body


def test_a_request_that_names_the_means_is_the_users_choice_real(encode):
    # claude-code-log b45ad5d8: "Can you please help to use these Pydanctic models in a better
    # way, I need to access the correct timestamp property based on type"
    encode(corpus_path("claude-code", "claude-code-log", "-Users-dain-workspace-claude-code-log-sample",
                       "b45ad5d8-81fb-4bcb-baba-19d9f503d731.jsonl"))
    (fact,) = _facts(encode.memdir, "decision")
    assert fact.description.startswith("Use these Pydanctic models in a better way"), fact.description


# three files: past the noise gate (docs/PROTOCOL.md §7), so what decides is the typing
WORK = [*edit(2, "src/export/csv.py"), *edit(3, "tests/test_csv.py"), *edit(4, "README.md"),
        said(5, "Added `export_csv()` in src/export/csv.py with a test; the suite passes.")]


@pytest.mark.parametrize("request_, goal", [
    # one-off tasks, worded like tracker titles: no fact
    ("Add a --version flag to the CLI.", False),
    ("Fix the typo in the error message for missing config files.", False),
    ("Write a helper that converts Windows paths to POSIX paths.", False),
    # the project's brief or an epic: the project goal
    ("Build a small Flask app that tracks my reading list.", True),
    ("Scaffold a new CLI tool for syncing dotfiles between machines.", True),
    ("Start on the epic PAY-7: monthly invoices for the billing service.", True),
])
def test_a_bare_request_is_a_project_goal_or_only_in_the_record(encode, tmp_path, request_, goal):
    encode(claude(tmp_path / "s.jsonl", [user(request_), *WORK]))
    decisions = _facts(encode.memdir, "decision")
    if goal:
        (fact,) = decisions
        assert fact.description.startswith("Project goal: "), fact.description
        assert fact.confidence == "MEDIUM"
    else:
        assert not decisions, [f.description for f in decisions]
        (record,) = _records(encode.memdir)
        assert request_.rstrip(".") in record


def test_a_feature_of_several_commits_is_a_project_goal(encode, tmp_path):
    commits = []
    for n, msg in ((10, "Add CSV writer"), (12, "Wire CSV export into the reports page")):
        commits += [*edit(n, f"src/export/part{n}.py"),
                    *bash(n + 1, f"git commit -am '{msg}'", f"[main a{n}b{n}c{n}d] {msg}\n 1 file changed")]
    encode(claude(tmp_path / "s.jsonl", [user("Add a CSV export to the reports page."), *WORK, *commits]))
    (fact,) = _facts(encode.memdir, "decision")
    assert fact.description == "Project goal: add a CSV export to the reports page."
    assert "Wire CSV export into the reports page" in fact.body


def test_a_task_that_states_a_choice_keeps_it_as_the_decision(encode, tmp_path):
    encode(claude(tmp_path / "s.jsonl", [
        user("Add a CSV export, but use the stdlib csv module instead of pandas because the "
             "image must stay small."), *WORK]))
    (fact,) = _facts(encode.memdir, "decision")
    assert not fact.description.startswith(("Task:", "Project goal:")), fact.description
    assert "instead of pandas" in fact.description


# ---------------------------------------------------------------- stated causes

FAILING = """F                                                                        [100%]
=================================== FAILURES ===================================
______________________________ test_parse_entries ______________________________
E       AssertionError: assert 3 == 2
test_parser.py:14: AssertionError
=========================== short test summary info ============================
FAILED test_parser.py::test_parse_entries - AssertionError: assert 3 == 2
1 failed in 0.05s"""
RUN = "python -m pytest -q test_parser.py"


def _episode(tmp_path: Path, explanation: str):
    path = claude(tmp_path / "s.jsonl", [
        user("test_parse_entries is failing, please fix it."),
        *bash(1, RUN, f"Exit code 1\n{FAILING}", failed=True),
        said(2, explanation),
        *edit(3, "parser.py"),
        *bash(4, RUN, "1 passed in 0.03s"),
        said(5, "Fixed: test_parse_entries passes.")])
    encode_session(path, memory_dir=tmp_path / "mem", backend="offline")
    (inc,) = _facts(tmp_path / "mem", "incident")
    return inc


@pytest.mark.parametrize("narration", [
    "Now I need to understand how sidechain entries should be identified and formatted.",
    "Let me look at how the parser groups the entries before changing anything.",
    "I'll check what the fixture contains and then adjust the parser.",
])
def test_a_narration_line_is_never_the_stated_cause(tmp_path, narration):
    inc = _episode(tmp_path, narration)
    assert inc.status == "resolved"
    assert "Cause (as the agent stated)" not in inc.body, inc.body
    assert "cause:" not in inc.description


@pytest.mark.parametrize("cause", [
    "The count is off because sidechain entries are parsed as main-thread messages.",
    "The extra entry is due to the summary line being read as a message.",
    "The fixture was missing its uuid field, so the parser treated the summary as a new entry.",
    "The problem was that blank lines were kept as entries.",
])
def test_a_sentence_that_states_a_cause_is_the_cause(tmp_path, cause):
    inc = _episode(tmp_path, cause)
    assert f"Cause (as the agent stated): {cause}" in inc.body, inc.body


def test_states_cause_on_plain_sentences():
    assert work.states_cause("It crashed because the token had expired.")
    assert work.states_cause("The cache was stale, so the lookup returned the old row.")
    assert work.states_cause("The retry flag exists in the config but it's not being read by the client.")
    assert work.states_cause("The locale wasn't set before the formatter ran.")
    assert not work.states_cause("Now I need to understand how the messages are grouped.")
    assert not work.states_cause("The fix is to add a guard for empty lists.")
    assert not work.states_cause("The helper is memoised so that repeated calls stay cheap.")  # a purpose
    assert not work.states_cause("The build is red, so let me look at the log first.")  # a plan


# ---------------------------------------------------------------- anchors and descriptions


@pytest.mark.parametrize("subject, anchor", [
    # a pytest node id: each word once, no extension, the class glued from the same words dropped
    ("tests/test_timeline_browser.py::TestTimelineBrowser::test_timeline_filters failed",
     "tests-test-timeline-browser-filters-failed"),
    ("add function called multiply_numbers int int int multiplies",
     "add-function-called-multiply-numbers-int-multiplies"),
    # a redaction placeholder is never part of an anchor (review 7 F9)
    ("call GitHub API bot token [REDACTED:github-pat]", "call-github-api-bot-token"),
    ("OpenAI key [REDACTED", "openai-key"),
    ("openai key redacted", "openai-key"),
    # a compound name stays whole; a little word on its own goes
    ("with_span/3 no matching clause", "with-span-3-no-matching-clause"),
    ("the end-to-end tracing of the hooks", "end-to-end-tracing-hooks"),
    ("Next.js app router with the app directory", "next-js-app-router-directory"),
    # never ends on a word that leads into a cut-off phrase
    ("launch the cached session page rather", "launch-cached-session-page"),
])
def test_an_anchor_is_the_subjects_content_words(subject, anchor):
    assert make_anchor(anchor_words(subject)) == anchor


def test_a_long_subject_is_cut_between_whole_words():
    words = anchor_words("migrate the nightly export scheduler from cron to a durable queue with "
                         "retries and dead letter handling for the reporting service")
    made = make_anchor(words)
    assert len(made) <= 64 and made == words.replace(" ", "-")
    assert not made.endswith(("-for", "-the", "-with", "-to"))


def test_a_description_is_one_sentence_even_when_the_next_starts_lower_case():
    said_ = ("We have a cache so the viewer should open the stored HTML page rather than rebuild it. "
             "also we don't need to check whether the file exists, just open it.")
    assert one_sentence([said_]) == ("We have a cache so the viewer should open the stored HTML page "
                                     "rather than rebuild it.")
    # an abbreviation or an identifier after a period does not end it
    assert work.clean_sentence("Lint with ruff, black etc. and mypy.") == "Lint with ruff, black etc. and mypy."


def test_a_runners_progress_marker_is_not_part_of_the_description(tmp_path):
    out = ("tests/test_parser.py::test_parse_entries FAILED                      [ 20%]\n"
           "E       AssertionError: assert 3 == 2\n")
    path = claude(tmp_path / "s.jsonl", [
        user("Please make the parser tests pass."),
        *bash(1, "python -m pytest -v tests/test_parser.py", f"Exit code 1\n{out}", failed=True),
        said(2, "The count is off because blank lines are kept as entries."),
        *edit(3, "parser.py"),
        *bash(4, "python -m pytest -v tests/test_parser.py", "1 passed in 0.03s")])
    encode_session(path, memory_dir=tmp_path / "mem", backend="offline")
    (inc,) = _facts(tmp_path / "mem", "incident")
    assert "%]" not in inc.description, inc.description


def test_a_redacted_secret_is_never_part_of_the_anchor_end_to_end(encode, tmp_path):
    # review 7 F9: decisions/openai-key-redacted.md, decisions/call-github-api-bot-token-redacted.md
    from tests.encoder.test_offline import chat

    token = "ghp_" + "R4nd0mT0k3nV4lu3xYzAbCdEfGhIjKlMnOp12"
    report = encode(chat(tmp_path / "s.jsonl", [
        ("user", f"We decided to call the GitHub API with the bot token {token} instead of the "
                 "personal token, because the personal one expires."),
        ("assistant", "OK, using the bot token.")]))
    paths = [op["path"] for op in report.operations if op.get("path")]
    assert paths == ["decisions/call-github-api-bot-token.md"], paths
    assert token not in (encode.memdir / paths[0]).read_text()
