"""A session that only asked a question (review 7, F1): the user asks, the agent says
"OK.", nothing else happens. It writes no session record, and a record written for one
before is never the answer when the question is asked again: not in `dualtrace recall`
(words only or with meaning), not in the prompt hook, not in SessionStart's recent
sessions. A session where the agent did answer keeps its record. Real transcripts encoded
by the real CLI into tmp_path memories, real hook processes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import git
import pytest

from dualtrace.memfs import sessions
from dualtrace.memfs.index import Index
from dualtrace.memfs.recall import LABEL_B_RECORD, LABEL_C, LABELS
from tests.dualtrace.test_session_start_cache import _start
from tests.e2e.test_session_records import Transcript
from tests.hook_helpers import claude_payload, run_hook

QUESTION = "How should money amounts be represented in billing code?"
WORK = "aaaa1111-7d1a-4b8e-9c55-2f0e8a1d3b44"
OTHERS = [  # sessions on other subjects, each with work: the index's background
    ("Add a CSV export to the orders report.",
     "The orders report now has a CSV export button in orders/views.py."),
    ("Rename the helper in utils.py to slugify_title.", "Renamed it and updated the two callers."),
    ("Why is the login page slow?",
     "The login view loads every user row; I added an index on users.email (40 ms now)."),
    ("Bump the Django version to 5.1.", "Updated requirements.txt to Django 5.1; tests pass."),
    ("Add type hints to the shipping module.", "shipping.py now has type hints; mypy is clean."),
]


def cli(memdir: Path, *args: str, cwd: Path | None = None, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "dualtrace.cli", *args, "--memory-dir",
                           str(memdir)], capture_output=True, text=True, cwd=cwd,
                          env={**os.environ, **env})


def encode(memdir: Path, transcript: Path, cwd: Path | None = None) -> dict:
    proc = cli(memdir, "encode", str(transcript), "--backend", "offline", "--json", cwd=cwd)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def work_session(path: Path) -> Transcript:
    """A fix, then the decision the later question is about."""
    t = Transcript(path, sid=WORK, day="2026-03-20")
    t.user("test_empty_cart in test_billing.py fails, please fix it and make sure the tests pass.")
    t.bash("python -m pytest -q test_billing.py", "FAILED test_billing.py::test_empty_cart - "
           "ZeroDivisionError: division by zero\n1 failed, 2 passed", failed=True)
    t.edit("/home/dev/shop/billing.py")
    t.bash("python -m pytest -q test_billing.py", "3 passed")
    t.bash("git commit -qam 'Fix ZeroDivisionError in average_price'", "[main 1a2b3c4] Fix")
    t.say("Fixed. average_price divided by len(items), which is 0 for an empty cart; it now "
          "returns 0.0 for an empty cart.")
    t.user("We decided to store money as integer cents instead of floats, because float "
           "rounding broke the invoice totals last month. Update total() and its test.")
    t.edit("/home/dev/shop/billing.py")
    t.edit("/home/dev/shop/test_billing.py")
    t.bash("python -m pytest -q test_billing.py", "3 passed")
    t.say("total() now returns integer cents and its test expects 330.")
    return t


def asked(path: Path, n: int, question: str, reply: str = "OK.") -> Path:
    t = Transcript(path, sid=f"{n}bbb2222-7d1a-4b8e-9c55-2f0e8a1d3b44", day=f"2026-03-2{n + 1}")
    t.user(question)
    t.say(reply)
    return t.write()


def records(memdir: Path) -> list[str]:
    return sorted(p.relative_to(memdir).as_posix() for p in (memdir / "sessions").rglob("*.md"))


@pytest.fixture
def worked(memdir: Path, tmp_path: Path) -> Path:
    """The work session and five others, encoded in the project folder tmp_path/shop (a
    record's project is where encode runs)."""
    project = tmp_path / "shop"
    project.mkdir()
    encode(memdir, work_session(tmp_path / "work.jsonl").write(), cwd=project)
    for i, (request, reply) in enumerate(OTHERS):
        t = Transcript(tmp_path / f"o{i}.jsonl", sid=f"{i}ccc3333-7d1a-4b8e-9c55-2f0e8a1d3b44",
                       day=f"2026-03-1{i}")
        t.user(request)
        t.edit("/home/dev/shop/x.py")
        t.say(reply)
        encode(memdir, t.write(), cwd=project)
    return memdir


@pytest.fixture
def shop(worked: Path, tmp_path: Path) -> Path:
    """Then the question asked twice, each time left at "OK."."""
    for n in range(2):
        encode(worked, asked(tmp_path / f"q{n}.jsonl", n, QUESTION), cwd=tmp_path / "shop")
    return worked


# ------------------------------------------------------------------ write side


@pytest.mark.parametrize("reply", ["OK.", "Got it, thanks!", "Sure.",
                                   "Hello! How can I help you today?"])
def test_a_question_left_at_an_acknowledgement_writes_no_record(memdir, tmp_path, reply):
    encode(memdir, work_session(tmp_path / "work.jsonl").write())
    before = records(memdir)
    head = git.Repo(memdir).head.commit.hexsha
    report = encode(memdir, asked(tmp_path / "q.jsonl", 0, QUESTION, reply))
    assert report["record"] is None and report["commit"] is None
    assert records(memdir) == before and git.Repo(memdir).head.commit.hexsha == head
    # backfill --records applies the same gate
    proc = cli(memdir, "backfill", "--records", str(tmp_path / "q.jsonl"))
    assert proc.returncode == 0, proc.stderr
    assert records(memdir) == before


@pytest.mark.parametrize("reply", [
    "Store them as integer cents: floats cannot represent 0.10 exactly.",
    "No.",  # to a yes/no question, "no" is the answer
])
def test_a_question_the_agent_answered_keeps_its_record(memdir, tmp_path, reply):
    question = QUESTION if reply != "No." else "Should billing code store money as floats?"
    report = encode(memdir, asked(tmp_path / "q.jsonl", 0, question, reply))
    assert report["record"] and records(memdir) == [report["record"]]
    text = (memdir / report["record"]).read_text()
    assert f"> {question}" in text and f"> {reply}" in text


def test_the_description_is_the_request_the_agent_answered(memdir, tmp_path):
    t = Transcript(tmp_path / "s.jsonl", sid=WORK)
    t.user(QUESTION)
    t.say("OK.")
    t.user("Fix test_empty_cart in test_billing.py.")
    t.edit("/home/dev/shop/billing.py")
    t.bash("python -m pytest -q test_billing.py", "3 passed")
    t.say("average_price returns 0.0 for an empty cart now.")
    report = encode(memdir, t.write())
    record = sessions.read_record(memdir, report["record"])
    assert record.description == "Fix test_empty_cart in test_billing.py."
    assert [turn.user for turn in record.turns][0] == QUESTION  # the question is kept
    # ... and asked again, the question does not find that session's record
    proc = cli(memdir, "recall", QUESTION, DUALTRACE_EMBEDDER="off")
    assert LABEL_C in proc.stdout and "Session record" not in proc.stdout, proc.stdout


# ------------------------------------------------------------------ read side


def test_asking_again_does_not_recall_the_question(shop):
    assert len(records(shop)) == 1 + len(OTHERS)  # the two question-only sessions: none
    words = cli(shop, "recall", QUESTION, DUALTRACE_EMBEDDER="off")
    assert words.returncode == 0, words.stderr
    # The decision shares one word with the question: words alone abstain rather than
    # quote the question back.
    assert words.stdout.splitlines()[1] == LABEL_C, words.stdout
    meaning = cli(shop, "recall", QUESTION)
    assert meaning.returncode == 0, meaning.stderr
    lines = meaning.stdout.splitlines()
    assert lines[0] == LABELS["A"], meaning.stdout
    assert lines[2].startswith("1. decisions/store-money-integer-cents.md"), meaning.stdout
    quoted = [ln for ln in lines if ln.strip().startswith("> ")]
    assert quoted and f"> {QUESTION}" not in [q.strip() for q in quoted]
    assert all(WORK[:8] in ln for ln in lines if "Session record" in ln)


def test_a_question_with_the_stored_words_recalls_the_decision_first(shop, tmp_path):
    question = "Why do we store money as integer cents?"
    encode(shop, asked(tmp_path / "q9.jsonl", 7, question))
    proc = cli(shop, "recall", question, DUALTRACE_EMBEDDER="off")
    lines = proc.stdout.splitlines()
    assert lines[0] == LABELS["A"], proc.stdout
    assert lines[2].startswith("1. decisions/store-money-integer-cents.md"), proc.stdout
    assert f"> {question}" not in proc.stdout


def _legacy(memdir: Path, n: int, question: str, day: str) -> str:
    """A question-only record as the encoder wrote them before this gate, committed."""
    sid = f"{n}ddd4444-7d1a-4b8e-9c55-2f0e8a1d3b44"
    project = sessions.read_record(memdir, WORK).project
    rel = sessions.record_path(sid, f"{day}T09:01:00Z")
    record = sessions.SessionRecord(
        path=rel, session=sid, host="claude-code", project=project,
        started=f"{day}T09:01:00Z", ended=f"{day}T09:02:00Z", description=question,
        turns=(sessions.Turn(1, day, "09:01", user=question, agent="OK."),))
    (memdir / rel).parent.mkdir(parents=True, exist_ok=True)
    (memdir / rel).write_text(sessions.render_record(record))
    repo = git.Repo(memdir)
    repo.index.add([rel])
    repo.index.commit(f"record {rel}")
    return rel


def test_question_only_records_written_before_are_never_a_hit(shop):
    legacy = [_legacy(shop, n, QUESTION, f"2026-03-2{n + 5}") for n in range(2)]
    legacy.append(_legacy(shop, 2, "We use floats for prices today. Should we keep them?",
                          "2026-03-28"))
    with Index.open(shop) as index:  # the old index's schema is rebuilt
        chunks = {d.path: d for d in index.docs_of_type(("session",))}
    assert legacy[0] not in chunks and legacy[1] not in chunks  # no words left to index
    assert chunks[legacy[2]].data["text"] == "We use floats for prices today."
    words = cli(shop, "recall", QUESTION, DUALTRACE_EMBEDDER="off")
    assert LABEL_B_RECORD not in words.stdout and "Session record" not in words.stdout
    meaning = cli(shop, "recall", QUESTION)
    assert meaning.stdout.startswith(LABELS["A"])
    assert not any(rel in meaning.stdout for rel in legacy[:2]), meaning.stdout


def test_the_prompt_hook_does_not_inject_the_question_back(worked, tmp_path):
    for n in range(2):  # the question asked twice, recorded before this gate
        _legacy(worked, n, QUESTION, f"2026-03-2{n + 5}")
    env = {**os.environ, "DUALTRACE_MEMORY_DIR": str(worked)}
    payload = claude_payload("UserPromptSubmit", "s-ask", tmp_path / "s-ask.jsonl",
                             str(tmp_path), prompt=QUESTION)
    proc = run_hook("prompt", payload, env=env)
    assert proc.returncode == 0, proc.stderr
    assert QUESTION.encode() not in proc.stdout and b"Session record" not in proc.stdout
    # the hook still injects a record passage that answers
    proc = run_hook("prompt", {**payload, "prompt": "why is the login page slow? users.email"},
                    env=env)
    assert b"users.email" in proc.stdout and b"Session record" in proc.stdout, proc.stdout


def test_session_start_lists_the_sessions_that_did_something(shop, tmp_path, state_dir):
    project = tmp_path / "shop"
    # Three newer question-only records (written before the gate) would fill "the last 3".
    for n in range(3):
        _legacy(shop, n, f"{QUESTION[:-1]} number {n}?", f"2026-03-2{n + 5}")
    env = {**os.environ, "DUALTRACE_MEMORY_DIR": str(shop)}
    text, _modules = _start(env, project)
    recent = text.split("## Recent sessions in this project", 1)[1].split("\n\n", 1)[0]
    lines = [ln for ln in recent.splitlines() if ln.startswith("- ")]
    assert len(lines) == 3, recent
    assert WORK[:8] in lines[0] and "test_empty_cart" in lines[0], recent
    assert QUESTION[:20] not in recent
    infos = sessions.recent_records(shop, 3)
    assert infos[0].session == WORK and len(infos) == 3
