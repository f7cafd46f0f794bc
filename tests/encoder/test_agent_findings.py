"""What the agent found when the user asked it to look at something that is no failing
check, and the agent's closing takeaway, are learnings in the agent's own words (issue 12:
"record what the agent found and did"). A plan opener ("we're going to make ...") is no
decision; "don't use X, use Y" is the project's rule. Real encodes of transcripts the test
writes; the held-out session that showed the gap (bench --part fresh11) is not read here."""

from __future__ import annotations

from pathlib import Path

import pytest

from dualtrace.encoder.backends.offline import lead_type
from dualtrace.pipeline import encode_session
from tests.conftest import bench_transcript

Transcript = bench_transcript()


def _memories(mem: Path) -> dict[str, str]:
    return {str(p.relative_to(mem)): p.read_text() for p in mem.rglob("*.md")
            if ".git" not in p.parts and "sessions" not in p.parts and "scenes" not in p.parts}


def _encode(tmp_path: Path, t) -> tuple[object, dict[str, str]]:
    mem = tmp_path / "mem"
    report = encode_session(t.write(tmp_path / "t.jsonl"), memory_dir=mem, backend="offline")
    return report, _memories(mem)


def test_what_the_agent_found_when_asked_to_check_is_a_learning(tmp_path):
    t = (Transcript(71).user("Run the nightly export for the reports service and commit the result.")
         .bash("python -m reports.export --nightly", "export started: 3 workers")
         .bash("git commit -am 'nightly export'", "[main 1a2b3c4] nightly export\n 1 file changed")
         .say("Started the export with 3 workers and committed the result.")
         .user("The export workers seem to be stuck... can you check?")
         .bash("ps aux | grep reports.export", "user 412 reports.export worker (sleeping)")
         .say("The workers are idle, not stuck. `flush_batch()` only runs when the queue "
              "reaches 500 rows, so a small nightly export never writes until the worker exits.")
         .say("Nothing is lost: the rows are written at exit."))
    report, mems = _encode(tmp_path, t)
    learned = {k: v for k, v in mems.items() if k.startswith("learning/")}
    assert len(learned) == 1, (report.operations, list(mems))
    (path, text), = learned.items()
    assert "`flush_batch()` only runs when the queue reaches 500 rows" in text
    assert 'Asked (' in text and "seem to be stuck" in text  # the question it answers
    assert "flush" in path and "batch" in path


def test_a_check_answered_only_with_a_plan_stores_no_learning(tmp_path):
    t = (Transcript(72).user("Add a retry to the upload client and commit it.")
         .edit("client/upload.py", "def upload():\n", "def upload(retries=3):\n")
         .bash("git commit -am 'retry uploads'", "[main 9f8e7d6] retry uploads\n 1 file changed")
         .say("Added a retry to client/upload.py.")
         .user("Can you check the upload logs?")
         .say("I'll look at the upload logs now.")
         .bash("tail -n 5 logs/upload.log", "upload ok\nupload ok"))
    report, mems = _encode(tmp_path, t)
    assert not any(k.startswith("learning/") for k in mems), (report.operations, list(mems))


def test_the_agents_closing_takeaway_is_a_learning_in_its_words(tmp_path):
    t = (Transcript(73).user("Split the billing tests into unit and integration suites and commit.")
         .edit("tests/unit/test_billing.py", "", "def test_total():\n    assert True\n")
         .edit("tests/integration/test_billing_db.py", "", "def test_db():\n    assert True\n")
         .bash("git commit -am 'split billing tests'", "[main 5e6f7a8] split billing tests\n 2 files changed")
         .say("Done: the billing tests are split.\n\n**Key takeaway:** the integration suite "
              "needs `BILLING_DB_URL` set, otherwise pytest silently skips every test in it."))
    report, mems = _encode(tmp_path, t)
    learned = [v for k, v in mems.items() if k.startswith("learning/")]
    assert len(learned) == 1, (report.operations, list(mems))
    assert "needs `BILLING_DB_URL` set, otherwise pytest silently skips" in learned[0]
    assert "takeaway at the end of the session" in learned[0]


@pytest.mark.parametrize(("said", "kind"), [
    ("We're going to make a little experiment here.", None),
    ("We're going to build three small prototypes today.", None),
    ("We're going to switch to Postgres for the billing data.", "decision"),
    ("We are going back to Redis for the session cache.", "decision"),
    ("We're moving from MySQL to Postgres.", "decision"),
    ("To be clear: don't use ClMail for communication, use the builtin subagent teams.", "convention"),
    ("Do not use npm; use pnpm instead.", "convention"),
    ("Don't use that helper here.", None),
])
def test_a_plan_opener_is_no_decision_and_a_tool_ruled_out_for_another_is_a_rule(said, kind):
    assert lead_type(said) == kind


def test_a_rule_keeps_its_words_not_its_aside(tmp_path):
    t = (Transcript(74).user("We're going to try an experiment with the docs build. To be clear: "
                             "don't use Sphinx for the API pages, use mkdocs with mkdocstrings.")
         .edit("mkdocs.yml", "", "site_name: api\nplugins:\n  - mkdocstrings\n")
         .bash("git commit -am 'mkdocs'", "[main 0a1b2c3] mkdocs\n 1 file changed")
         .say("Set up mkdocs with mkdocstrings for the API pages."))
    report, mems = _encode(tmp_path, t)
    rules = "".join(v for k, v in mems.items() if k.startswith("system/"))
    assert "- Don't use Sphinx for the API pages, use mkdocs with mkdocstrings." in rules, (
        report.operations, mems)
    assert not any("experiment" in k for k in mems), list(mems)
