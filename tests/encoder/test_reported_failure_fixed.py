"""A failure the user reports in words and the agent fixes is resolved (review 8 F1, issue
12 item 2: "every incident fixed in its session marked resolved").

"The login page returns 500 when ..." names no command: no failing run may be in the
transcript, or the failing command (a curl) is not what passes afterwards (the agent edits,
runs the app's tests green and says it is fixed). Such a report used to stay
"investigating" and be injected at every session start as an open bug. The agent's stated
fix after its last edit, with the checks run since then passing, resolves it (MEDIUM: no
check re-ran the report itself); a session that ends with no fix, or whose last check fails,
leaves it investigating. Claude Code
transcripts written for the test, in wording of their own."""

from __future__ import annotations

from pathlib import Path

from dualtrace.memfs.store import MemoryStore
from dualtrace.pipeline import encode_session
from tests.encoder.test_offline import claude
from tests.encoder.test_pasted_failures import bash, edit, said, user

REPORT = "The login page returns 500 when the password contains a non-ASCII character."
TESTS = "python -m pytest tests/test_auth.py"
FIXED = "Fixed: the password is encoded as UTF-8 before hashing, and the auth tests pass."


def _incident(tmp_path: Path, records: list[dict]):
    encode_session(claude(tmp_path / "s.jsonl", records), memory_dir=tmp_path / "mem", backend="offline")
    (incident,) = [f for f in MemoryStore(tmp_path / "mem").scan().facts() if f.type == "incident"]
    return incident


def test_a_reported_failure_with_no_failing_run_is_resolved_by_the_stated_fix_and_a_green_check(tmp_path):
    inc = _incident(tmp_path, [
        user(REPORT),
        said(1, "Let me look at the login view."),
        *edit(2, "app/auth/views.py"),
        *bash(3, TESTS, "14 passed in 0.31s"),
        said(4, FIXED),
    ])
    assert inc.status == "resolved", inc.body
    assert "500" in inc.description and "non-ASCII" in inc.description
    assert "Fix: edited `app/auth/views.py`" in inc.body
    assert f"`{TESTS}` passed afterwards" in inc.body and FIXED in inc.body
    assert inc.confidence == "MEDIUM"  # the check passed, but nothing re-ran the report itself


def test_a_reported_failure_resolved_by_another_check_than_the_failing_command(tmp_path):
    curl = "curl -s -o /dev/null -w '%{http_code}' http://localhost:8000/login"
    inc = _incident(tmp_path, [
        user(REPORT),
        *bash(1, curl, "500", failed=True),
        said(2, "It reproduces: the view raises UnicodeEncodeError while hashing."),
        *edit(3, "app/auth/views.py"),
        *bash(4, TESTS, "15 passed in 0.33s"),
        said(5, FIXED),
    ])
    assert inc.status == "resolved", inc.body
    assert f"`{curl}` failed: 500" in inc.body and f"`{TESTS}` passed afterwards" in inc.body


def test_a_session_that_ends_with_no_fix_leaves_the_report_investigating(tmp_path):
    inc = _incident(tmp_path, [
        user(REPORT),
        *bash(1, "grep -rn hash_password app/auth", "app/auth/views.py:41:    digest = hash_password(pw)"),
        said(2, "The hashing call looks right; I could not find the cause yet."),
    ])
    assert inc.status == "investigating" and "Resolved" not in inc.body


def test_a_stated_fix_the_last_check_contradicts_leaves_it_investigating(tmp_path):
    inc = _incident(tmp_path, [
        user(REPORT),
        *edit(1, "app/auth/views.py"),
        said(2, "This should fix it; running the tests."),
        *bash(3, TESTS, "FAILED tests/test_auth.py::test_login_unicode - UnicodeEncodeError: 'ascii' codec\n"
                        "1 failed, 13 passed", failed=True),
        said(4, "The test still fails; the hashing library needs bytes."),
    ])
    assert inc.status != "resolved", inc.body


def test_the_user_saying_it_still_fails_undoes_the_stated_fix(tmp_path):
    inc = _incident(tmp_path, [
        user(REPORT),
        *edit(1, "app/auth/views.py"),
        said(2, FIXED),
        user("It still returns 500 for me."),
    ])
    assert inc.status != "resolved", inc.body
