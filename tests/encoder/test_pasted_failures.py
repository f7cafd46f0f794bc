"""A failure the user pastes into the chat (or runs with the shell escape) and the agent
fixes in the session is one incident: what failed, the cause the agent stated, the files
edited for the fix, and ``resolved`` when it was fixed (issue 12 item 2).

The rule for "fixed": a later run of the same check passes (the pasted command's runner,
else a test run for a failing test, a checker for a checker's error); with no re-run,
the user saying it works now; else the agent saying it fixed it after its last edit (said
so in the body, confidence MEDIUM). "Still failing" reopens it; a failure the user moves
on from before anything was edited is no incident. Transcripts written for the test."""

from __future__ import annotations

from pathlib import Path

from dualtrace.memfs.store import MemoryStore
from dualtrace.pipeline import encode_session
from tests.encoder.test_offline import claude, tool

PYTEST_PASTE = """I get this when I run the tests:

```
$ uv run pytest tests/test_invoice.py
============================= test session starts ==============================
collected 4 items

tests/test_invoice.py ..F.                                               [100%]

=================================== FAILURES ===================================
_________________________________ test_total_rounds_half_up _________________________________

    def test_total_rounds_half_up():
>       assert invoice_total([Decimal("0.125")]) == Decimal("0.13")
E       AssertionError: assert Decimal('0.12') == Decimal('0.13')

tests/test_invoice.py:14: AssertionError
=========================== short test summary info ============================
FAILED tests/test_invoice.py::test_total_rounds_half_up - AssertionError: assert Decimal('0.12') == Decimal('0.13')
========================= 1 failed, 3 passed in 0.05s ==========================
```
can you fix it?"""

TRACEBACK_PASTE = """The export crashes on startup:

Traceback (most recent call last):
  File "/home/dev/app/export/cli.py", line 41, in main
    rows = load_rows(settings["source"])
KeyError: 'source'
"""


def user(text: str) -> dict:
    return {"type": "user", "message": {"role": "user", "content": text}}


def said(n: int, text: str) -> dict:
    return {"type": "assistant", "message": {"id": f"a{n}", "role": "assistant",
                                             "content": [{"type": "text", "text": text}]}}


def edit(n: int, path: str) -> list[dict]:
    return tool(n, "Edit", {"file_path": f"/home/dev/app/{path}", "old_string": "a", "new_string": "b"},
                "The file has been updated.")


def bash(n: int, command: str, output: str, failed: bool = False) -> list[dict]:
    return tool(n, "Bash", {"command": command}, output, failed)


def encode(tmp_path: Path, records: list[dict], name: str = "s.jsonl"):
    report = encode_session(claude(tmp_path / name, records), memory_dir=tmp_path / "mem",
                            backend="offline")
    store = MemoryStore(tmp_path / "mem")
    facts = store.scan().facts()
    return report, [f for f in facts if f.type == "incident"], [f for f in facts if f.type == "decision"]


def test_a_pasted_test_failure_fixed_and_rerun_green_is_one_resolved_incident(tmp_path):
    records = [user(PYTEST_PASTE),
               said(1, "The test fails because `invoice_total` uses banker's rounding "
                       "(ROUND_HALF_EVEN) instead of ROUND_HALF_UP."),
               *edit(2, "billing/invoice.py"),
               *bash(3, "uv run pytest tests/test_invoice.py -q", "4 passed in 0.04s"),
               said(4, "Fixed: totals now round half up; all 4 tests pass.")]
    _report, incidents, decisions = encode(tmp_path, records)
    (inc,) = incidents
    assert inc.status == "resolved" and inc.confidence == "HIGH"
    assert "test-total-rounds-half-up" in inc.path
    # the failing test, the error, and the cause the agent stated (the assertion's full
    # text stays in the body: with the cause it would not fit in 200 characters)
    # the check as the user ran it, cut at whole arguments so the cause fits
    assert inc.description == ("`uv run pytest ...` failed: test_total_rounds_half_up: AssertionError; "
                               "cause: the test fails because `invoice_total` uses banker's rounding "
                               "(ROUND_HALF_EVEN) instead of ROUND_HALF_UP.")
    assert "AssertionError: assert Decimal('0.12') == Decimal('0.13')" in inc.body
    assert len(inc.description) <= 200 and "\n" not in inc.description
    assert "Cause (as the agent stated): The test fails because `invoice_total` uses banker's" in inc.body
    assert "Fix: edited `billing/invoice.py`" in inc.body
    assert "Resolved: `uv run pytest tests/test_invoice.py -q` passed afterwards" in inc.body
    # the request was only the failure: no second memory of the same work
    assert decisions == []


def test_a_pasted_traceback_with_no_rerun_is_resolved_on_the_agents_word_and_says_so(tmp_path):
    records = [user(TRACEBACK_PASTE),
               said(1, "The crash happens because the settings file has no `source` key when it "
                       "was written by an older version."),
               *edit(2, "export/cli.py"),
               said(3, "I've fixed it: `main` now falls back to the default source when the key is "
                       "missing.")]
    _report, (inc,), _decisions = encode(tmp_path, records)
    assert inc.status == "resolved" and inc.confidence == "MEDIUM"
    assert "KeyError: 'source'" in inc.description and inc.description.startswith("The user reported")
    assert "keyerror" in inc.path
    assert "The user pasted this failure" in inc.body
    assert ("Resolved: the agent stated the fix (no check re-ran in the session): \"I've fixed it"
            in inc.body)
    assert "Fix: edited `export/cli.py`" in inc.body


def test_still_failing_reopens_it_and_the_users_works_now_resolves_it(tmp_path):
    records = [user(TRACEBACK_PASTE),
               *edit(1, "export/cli.py"),
               said(2, "That should fix the crash."),
               user("still the same error:\n" + TRACEBACK_PASTE),
               said(3, "The key is read a second time in `load_rows`, because the settings are "
                       "passed through unchanged."),
               *edit(4, "export/rows.py"),
               said(5, "Please try again."),
               user("works now, thanks")]
    _report, (inc,), _decisions = encode(tmp_path, records)
    assert inc.status == "resolved" and inc.confidence == "HIGH"
    assert "Resolved: the user confirmed it works: \"works now, thanks\" (2 failing runs before)" in inc.body
    assert "`export/cli.py`, `export/rows.py`" in inc.body


def test_the_same_failure_pasted_then_run_by_the_agent_is_one_incident(tmp_path):
    failing = ("Exit code 1\nFAILED tests/test_invoice.py::test_total_rounds_half_up - AssertionError: "
               "assert Decimal('0.12') == Decimal('0.13')\n1 failed, 3 passed in 0.05s")
    records = [user(PYTEST_PASTE),
               *bash(1, "uv run pytest tests/test_invoice.py", failing, True),
               said(2, "Reproduced. The rounding mode is the problem: the quantize call needs "
                       "ROUND_HALF_UP."),
               *edit(3, "billing/invoice.py"),
               *bash(4, "uv run pytest tests/test_invoice.py", "4 passed in 0.04s")]
    _report, incidents, _decisions = encode(tmp_path, records)
    assert len(incidents) == 1, [f.path for f in incidents]
    assert incidents[0].status == "resolved"
    assert "2 failing runs before" in incidents[0].body


def test_tests_updated_to_an_intended_change_are_no_incident(tmp_path):
    records = [user("Please update these tests, we round half up on purpose now:\n\n"
                    + PYTEST_PASTE.split("```")[1]),
               *edit(1, "tests/test_invoice.py"),
               *bash(2, "uv run pytest tests/test_invoice.py", "4 passed in 0.04s")]
    _report, incidents, _decisions = encode(tmp_path, records)
    assert incidents == []


def test_a_failure_the_user_moves_on_from_before_any_edit_is_no_fixed_incident(tmp_path):
    records = [user(TRACEBACK_PASTE),
               said(1, "Your settings file is missing the `source` key."),
               user("Never mind that. Add a --dry-run flag to the export command instead."),
               *edit(2, "export/cli.py"),
               *edit(3, "export/options.py"),
               *edit(4, "README.md")]
    _report, incidents, decisions = encode(tmp_path, records)
    # the user's report may stay an open incident; nothing says it was fixed
    assert all(f.status != "resolved" and "Fix: edited" not in f.body for f in incidents)
    assert any("dry-run" in d.description for d in decisions)


def test_a_failing_run_with_the_shell_escape_and_the_users_ask_is_one_incident(tmp_path):
    # Claude Code's "!" prefix: the run and its output arrive wrapped in the user's turn
    records = [user("<bash-input>uv run pytest tests/test_invoice.py</bash-input>"),
               user("<bash-stdout>FAILED tests/test_invoice.py::test_total_rounds_half_up - AssertionError: "
                    "assert Decimal('0.12') == Decimal('0.13')\n1 failed, 3 passed in 0.05s</bash-stdout>"
                    "<bash-stderr></bash-stderr>"),
               user("the rounding is wrong again, please fix the code"),
               said(1, "The issue is that `invoice_total` quantizes with ROUND_HALF_EVEN."),
               *edit(2, "billing/invoice.py"),
               *bash(3, "uv run pytest tests/test_invoice.py", "4 passed in 0.04s")]
    _report, incidents, decisions = encode(tmp_path, records)
    (inc,) = incidents
    assert inc.status == "resolved" and "the user's run" in inc.body
    assert "Fix: edited `billing/invoice.py`" in inc.body
    assert decisions == []


def test_one_pasted_failure_is_one_memory_whatever_the_user_said_around_it(tmp_path):
    # "definitely" confirms the user's own report; the test file and the changelog the fix
    # also touched are part of that fix, not a second piece of work
    records = [user("This definitely happens on every run since yesterday:\n\n" + TRACEBACK_PASTE),
               said(1, "The crash happens because `main` reads `settings[\"source\"]` before the "
                       "defaults are merged."),
               *edit(2, "export/cli.py"),
               *edit(3, "tests/test_cli.py"),
               *edit(4, "CHANGELOG.md"),
               *bash(5, "pytest tests/test_cli.py", "5 passed in 0.02s"),
               said(6, "Fixed: the defaults are merged first, and a regression test covers it.")]
    report, incidents, decisions = encode(tmp_path, records)
    written = [op["path"] for op in report.operations if op.get("path")]
    assert len(incidents) == 1 and decisions == [], written
    assert incidents[0].status == "resolved"


def test_a_pasted_failure_the_agent_reproduces_with_another_check_is_one_incident(tmp_path):
    # the user's traceback and the agent's failing test run are one debugging episode
    records = [user(TRACEBACK_PASTE),
               *bash(1, "pytest tests/test_cli.py", "Exit code 1\nFAILED tests/test_cli.py::test_main_without_"
                     "source - KeyError: 'source'\n1 failed, 4 passed in 0.03s", True),
               said(2, "Reproduced: the problem is that `main` reads the key before the defaults merge."),
               *edit(3, "export/cli.py"),
               *bash(4, "pytest tests/test_cli.py", "5 passed in 0.02s")]
    report, incidents, _decisions = encode(tmp_path, records)
    assert len(incidents) == 1, [op["path"] for op in report.operations if op.get("path")]
    assert incidents[0].status == "resolved" and "passed afterwards" in incidents[0].body


def test_the_same_pasted_failure_in_a_later_session_updates_the_incident(tmp_path):
    first = [user(TRACEBACK_PASTE), *edit(1, "export/cli.py"), said(2, "I've fixed the crash.")]
    encode(tmp_path, first, "a.jsonl")
    later = [{**r, "sessionId": "cafe0000-0000-4000-8000-000000000002"} for r in first]
    _report, incidents, _decisions = encode(tmp_path, later, "b.jsonl")
    (inc,) = incidents
    assert len(inc.sessions) == 2


def test_the_users_report_before_the_paste_is_the_same_incident(tmp_path):
    records = [user("The nightly export definitely crashes on startup since the upgrade."),
               said(1, "Can you paste the traceback?"),
               user(TRACEBACK_PASTE),
               *edit(2, "export/cli.py"),
               said(3, "Fixed: `main` merges the defaults before reading the key.")]
    report, incidents, _decisions = encode(tmp_path, records)
    assert len(incidents) == 1, [op["path"] for op in report.operations if op.get("path")]
    assert incidents[0].status == "resolved"


TY_FAILING = ("error[invalid-assignment]: Object of type `FakeClock` is not assignable to attribute "
              "`clock` of type `Clock`\n  --> tests/test_invoice.py:12:5\n   |\n12 |     billing.clock = "
              "FakeClock()\n   |     ^^^^^^^^^^^^^\nFound 1 diagnostic")
DISCOUNT_PASTE = """The tests fail now:

```
FAILED tests/test_invoice.py::test_discount_applies_once - AssertionError: assert 2 == 1
```"""


def _ty_fixed_then(between: list[dict]) -> list[dict]:
    return [user("Please make `uv run ty check` pass."),
            *bash(1, "uv run ty check", TY_FAILING, True),
            said(2, "The test assigns a hand-written fake to a typed attribute; I'll use "
                    "unittest.mock.patch.object instead."),
            *edit(3, "tests/test_invoice.py"),
            *bash(4, "uv run ty check", "All checks passed!"),
            *between,
            user(DISCOUNT_PASTE),
            said(6, "The patched clock is no longer advanced between the two calls, so the "
                    "discount is counted twice."),
            *edit(7, "tests/test_invoice.py"),
            *bash(8, "uv run pytest tests/test_invoice.py", "5 passed in 0.05s")]


def test_what_a_fix_broke_in_its_own_files_joins_that_incident_another_request_does_not(tmp_path):
    # right after ty's fix, the rewritten test fails and is fixed in the same file: one episode
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    _report, incidents, _decisions = encode(tmp_path / "a", _ty_fixed_then([]))
    (inc,) = incidents
    assert "invalid-assignment" in inc.path and inc.status == "resolved"
    assert "Then the fix broke: test_discount_applies_once: AssertionError: assert 2 == 1" in inc.body
    assert "Resolved: `uv run pytest tests/test_invoice.py` passed afterwards" in inc.body
    # the user asked for something else in between: the later failure is its own incident
    asked = [user("Now add a test that a discount code applies only once."),
             said(5, "Added test_discount_applies_once."), *edit(5, "tests/test_invoice.py")]
    _report, incidents, _decisions = encode(tmp_path / "b", _ty_fixed_then(asked))
    assert len(incidents) == 2, [f.path for f in incidents]
    assert not any("Then the fix broke" in f.body for f in incidents)
