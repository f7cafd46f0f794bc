"""The model backend's summary paragraph in the session record (issue 11): marked as the
model's, validated like a moment (no specific the session does not contain), redacted;
through the real anthropic SDK over HTTP against tests/fake_anthropic.py."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from dualtrace import config
from dualtrace.encoder.grounding import Grounding, check_summary
from dualtrace.encoder.operations import Rejected
from dualtrace.memfs import sessions
from tests.e2e.test_session_records import SID, fix_session
from tests.fake_anthropic import FakeAnthropic, message, tool_use

SUMMARY = ("The session fixed the flaky auth test: refresh_token was not idempotent, so the "
           "token refresh now retries once (commit 9ab12cd) and pytest passes; the staging "
           "logs were not checked yet.")
HEADING = "## Summary (by anthropic, not the session's words)"


@pytest.fixture
def api():
    with FakeAnthropic() as server:
        yield server


def encode(api: FakeAnthropic, memdir: Path, transcript: Path) -> dict:
    (config.state_dir() / "config.toml").write_text(f'base_url = "{api.url}"\nmax_turns = 4\n')
    import os

    env = dict(os.environ, ANTHROPIC_API_KEY="sk-ant-test-dummy")
    proc = subprocess.run([sys.executable, "-m", "dualtrace.cli", "encode", str(transcript),
                           "--backend", "anthropic", "--memory-dir", str(memdir), "--json"],
                          capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert report["backend"] == "anthropic", report
    return report


def test_the_models_summary_is_written_marked_into_the_record(api, memdir, tmp_path):
    api.enqueue(message(tool_use("finish", {"summary": "nothing new to store",
                                            "session_summary": SUMMARY})))
    report = encode(api, memdir, fix_session(tmp_path / "fix.jsonl").write())
    text = (memdir / report["record"]).read_text(encoding="utf-8")
    assert f"\n{HEADING}\n\n{SUMMARY}\n" in text
    assert text.index(HEADING) < text.index("## Turn 1 ")  # first, before the session's words
    record = sessions.parse_record(text, report["record"])
    assert record.summary == SUMMARY and record.summary_by == "anthropic"
    assert "summary_by: anthropic" in text
    # The session's own words are still there, verbatim.
    assert "> We decided to retry the token refresh once because the staging proxy drops " \
           "the first call." in text
    # The finish tool offered the field to the model.
    finish = next(t for t in api.message_requests()[0]["tools"] if t["name"] == "finish")
    assert "session_summary" in finish["input_schema"]["properties"]
    windows = sessions.turn_windows(text)
    assert windows[0].kind == "summary" and "not idempotent" in windows[0].text


def test_a_summary_with_invented_specifics_is_refused_and_the_model_told(api, memdir, tmp_path):
    invented = ("The session moved billing to src/billing/invoice.py in commit deadbeef1 and "
                "cut latency by 40%.")
    api.enqueue(message(tool_use("finish", {"session_summary": invented})),
                message(tool_use("finish", {"summary": "done"})))
    report = encode(api, memdir, fix_session(tmp_path / "fix.jsonl").write())
    second = api.message_requests()[1]
    result = next(b for b in second["messages"][-1]["content"] if b["type"] == "tool_result")
    assert result.get("is_error") is True
    assert "not in the session" in result["content"]
    assert "src/billing/invoice.py" in result["content"] and "deadbeef1" in result["content"]
    text = (memdir / report["record"]).read_text(encoding="utf-8")
    assert "## Summary" not in text and "summary_by: null" in text
    assert "invoice" not in text


def test_a_secret_in_the_summary_never_reaches_the_record(api, memdir, tmp_path):
    secret = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"
    api.enqueue(message(tool_use("finish", {
        "session_summary": f"The session fixed the flaky auth test with token {secret}."})),
        message(tool_use("finish", {})))
    report = encode(api, memdir, fix_session(tmp_path / "fix.jsonl").write())
    text = (memdir / report["record"]).read_text(encoding="utf-8")
    assert secret not in text
    log = subprocess.run(["git", "log", "-p"], cwd=memdir, capture_output=True, text=True).stdout
    assert secret not in log


def test_summary_check_rules():
    grounding = Grounding("pytest -q tests/test_auth.py failed: AssertionError 401; commit 9ab12cd",
                          "2026-03-25")
    ok = check_summary("  The auth test failed with an AssertionError\n and was fixed in "
                       "commit 9ab12cd.  ", grounding)
    assert ok == "The auth test failed with an AssertionError and was fixed in commit 9ab12cd."
    for bad, reason in [("", "empty"), ("x " * 400, "at most"),
                        ("# Heading\nthe auth test", "plain paragraph"),
                        ("It failed with a KeyError in 3 places.", "not in the session")]:
        with pytest.raises(Rejected, match=reason):
            check_summary(bad, grounding)


def test_a_later_part_adds_its_paragraph_and_keeps_the_earlier_one(api, memdir, tmp_path):
    t = fix_session(tmp_path / "fix.jsonl")
    path = t.write()
    api.enqueue(message(tool_use("finish", {"session_summary": SUMMARY})))
    first = encode(api, memdir, path)
    start = len(t.lines)
    t.user("Now check the staging logs. We decided to log every refresh retry at WARN "
           "level because ops needs to see them.")
    t.bash("pytest -q tests/test_logging.py", "FAILED tests/test_logging.py::test_warn - "
           "AssertionError: no WARN record\n1 failed", failed=True)
    t.edit("/home/dev/shop/src/shop/auth.py")
    t.bash("pytest -q tests/test_logging.py", "3 passed in 0.2s")
    t.say("The refresh retry is now logged at WARN; the staging logs show it retried once.")
    t.append_to_file(start)
    later = "Later every refresh retry was logged at WARN level and the logging test passed."
    api.enqueue(message(tool_use("finish", {"session_summary": later})))
    second = encode(api, memdir, path)
    assert second["record"] == first["record"]
    record = sessions.read_record(memdir, SID)
    assert record.summary == f"{SUMMARY}\n\n{later}" and record.parts == 2
