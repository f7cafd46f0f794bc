"""A request to do a task is not a decision about the project, and a subject keeps its
polarity (review 5 findings 5 and 11e, issue 12).

- A bare request ("Add a function called X", "Work on bead Y") is never a settled HIGH
  decision: a one-off task is kept in the session record only, a project goal (an epic, a
  brief, a feature) is a MEDIUM "Project goal:" fact (tests/encoder/test_task_typing.py).
  A request or a correction
  that says *how* or *why* (a decision or rule cue, a reason, an alternative, a
  restriction, a condition) stays the user's decision.
- An anchor keeps a negation: "turn off WAL mode" is not "turn WAL mode", "we decided
  not to use Docker" is not "docker".

Real transcripts from ../shared/corpus (skipped when absent) and chats written here."""

from __future__ import annotations

from pathlib import Path

import pytest

from dualtrace.encoder.backends.offline import Candidate, lead_type, states_choice, subject_of
from dualtrace.memfs.anchors import make_anchor
from dualtrace.memfs.store import MemoryStore
from dualtrace.pipeline import encode_session
from tests.conftest import corpus_path
from tests.encoder.test_offline import chat, claude
from tests.encoder.test_pasted_failures import edit, said, user

CCL = ("claude-code", "claude-code-log", "-Users-dain-workspace-claude-code-log-sample")


def _decisions(memdir: Path):
    return [f for f in MemoryStore(memdir).scan().facts() if f.type == "decision"]


@pytest.fixture
def encode(tmp_path, monkeypatch):
    monkeypatch.setenv("DUALTRACE_HOME", str(tmp_path / "state"))

    def run(path: Path):
        return encode_session(path, memory_dir=tmp_path / "mem", backend="offline")

    run.memdir = tmp_path / "mem"
    return run


def test_a_request_that_states_how_stays_the_users_decision_real(encode):
    # 71c9afe9: "Take the least nested path first, but take the latest if there are equal
    # depths": a rule the user chose, said as an imperative
    encode(corpus_path(*CCL, "71c9afe9-d9cc-4583-86b3-e62ba682b83a.jsonl"))
    (fact,) = _decisions(encode.memdir)
    assert fact.description.startswith("Take the least nested path first"), fact.description
    assert fact.confidence == "HIGH"


def test_a_written_bare_request_and_a_corrected_one(encode, tmp_path):
    work = [*edit(2, "app/text.py"), *edit(3, "tests/test_text.py"), *edit(4, "app/blog.py"),
            said(5, "Added `slugify()` to app/text.py and used it in app/blog.py, with tests.")]
    encode(claude(tmp_path / "bare.jsonl", [user("Write a slugify helper for the blog titles."), *work]))
    # a one-off task: no decision (test_task_typing.py); the session record keeps it
    assert not _decisions(encode.memdir)
    assert any("Write a slugify helper for the blog titles" in p.read_text()
               for p in encode.memdir.glob("sessions/*/*.md"))
    # the same request, corrected while the work ran: the user chose how
    memdir2 = tmp_path / "mem2"
    encode_session(claude(tmp_path / "corrected.jsonl", [
        user("Write a slugify helper for the blog titles."), *work[:4],
        user("Keep non-ASCII letters, do not transliterate them."), *edit(6, "app/text.py"), *work[4:]]),
        memory_dir=memdir2, backend="offline")
    (chosen,) = _decisions(memdir2)
    assert not chosen.description.startswith("Task:"), chosen.description
    assert chosen.confidence == "HIGH"
    assert "do not transliterate" in chosen.body


@pytest.mark.parametrize("request_, chose", [
    ("Add retries to the HTTP client.", False),
    ("Create a landing page for the docs site.", False),
    ("Work on ticket WEB-12 and open a PR.", False),
    ("Write a script that renames the photos by date.", False),
    ("Please fix the flaky login test.", False),
    ("Use httpx instead of requests.", True),            # an alternative
    ("Only retry idempotent requests.", True),           # a restriction
    ("Don't add a new dependency for the CSV export.", True),
    ("Cache the thumbnails unless the source changed.", True),  # a condition
    ("Bump the timeout to 30 s because the CI runners are slow.", True),  # a reason
    ("We always pin versions in requirements.txt.", True),  # a rule
    ("Let's go with Postgres for the job queue.", True),  # a decision cue
])
def test_a_request_states_a_choice_only_when_it_says_how_or_why(request_, chose):
    assert states_choice(request_) is chose


def test_what_the_user_adds_while_the_work_runs_is_a_choice_only_when_it_says_how():
    assert not states_choice("Add a CSV export.", ["continue", "Thanks! Now update the README."])
    assert states_choice("Add a CSV export.", ["No, keep the old endpoint working."])


# ---------------------------------------------------------------- polarity (finding 11e)


@pytest.mark.parametrize("said_, anchor", [
    ("We decided not to use Docker for local development, because it is slow on macOS.", "no-docker"),
    ("We decided to turn off WAL mode for the local cache.", "turn-off-wal-mode"),
    ("We will not use GraphQL for the public API.", "no-graphql"),
    ("We decided against using Redis for sessions.", "no-redis"),
    ("From now on, no mocks in the integration tests.", "no-mocks"),
    ("Never commit generated files to the repository.", "never-commit"),
    ("Let's use plain SQL without an ORM.", "plain-sql-without-orm"),
    ("We will use Postgres for storage.", "postgres"),  # no negation: none added
])
def test_an_anchor_keeps_the_statements_polarity(said_, anchor):
    kind = lead_type(said_) or "decision"
    made = make_anchor(subject_of(Candidate(kind, [said_])))
    assert made.startswith(anchor), made
    if "no" not in anchor and "never" not in anchor and "off" not in anchor:
        assert not made.startswith(("no-", "never-")), made


@pytest.mark.parametrize("request_, anchor", [
    ("Keep non-ASCII letters, do not transliterate them.", "keep-non-ascii-letters-not-transliterate"),
    ("Don't add a new dependency for the CSV export.", "not-add-new-dependency-csv-export"),
    ("Port the parser to Rust (no Python bindings needed).", "port-parser-rust-no-python-bindings-needed"),
    ("Add a CSV export to the reports page.", "add-csv-export-reports-page"),
])
def test_a_work_requests_anchor_keeps_its_not(request_, anchor):
    from dualtrace.encoder.backends.offline import _polar_content

    assert make_anchor(" ".join(_polar_content(request_)[:8])) == anchor


def test_review_repro_negated_decisions_keep_their_polarity_end_to_end(encode, tmp_path):
    encode(chat(tmp_path / "neg.jsonl", [("user", "We decided not to use Docker for local development, "
                                                  "because the file-sync overhead made tests 4x slower on macOS.")]))
    (fact,) = _decisions(encode.memdir)
    assert fact.path.startswith("decisions/no-docker"), fact.path
    # a revision that turns something off supersedes the decision that turned it on
    encode(chat(tmp_path / "on.jsonl", [("user", "We decided to use SQLite with WAL mode for the local cache "
                                                 "instead of a JSON file, because concurrent writers corrupted it.")]))
    encode(chat(tmp_path / "off.jsonl", [("user", "We decided to turn off WAL mode for the local SQLite cache and "
                                                  "go back to the rollback journal, because WAL does not work on NFS.")]))
    paths = sorted(f.path for f in _decisions(encode.memdir))
    off = next(p for p in paths if "wal" in p and "off" in p)
    assert off == "decisions/turn-off-wal-mode.md", paths
    on = next(f for f in _decisions(encode.memdir) if f.path.startswith("decisions/sqlite-wal"))
    assert on.superseded_by == off, (on.path, on.superseded_by)

