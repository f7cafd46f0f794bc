"""A check piped into a filter (``cargo test 2>&1 | tail -20``) exits with the filter's
status: its verdict is the runner's own summary line (review 6, finding 1)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dualtrace.encoder.backends.work import fix_arcs
from dualtrace.encoder.digest import build_digest
from dualtrace.encoder.session import Event
from dualtrace.hooks.transcripts import read_transcript


def _run(command: str, output: str, code: int | None = 0) -> Event:
    return Event("command", "2026-02-03T10:00:00Z", tool="Bash", command=command,
                 exit_code=code, result=output)


@pytest.mark.parametrize("command,output", [
    ("cargo test 2>&1 | tail -20", "test parse_header ... FAILED\n\ntest result: FAILED. 4 passed; 1 failed"),
    ("npx jest --ci | tail -5", "Tests:       2 failed, 40 passed, 42 total"),
    ("uv run pytest -x 2>&1 | head -40", "FAILED tests/test_money.py::test_round - assert 3 == 4\n1 failed in 0.2s"),
    ("mix test 2>&1 | tail -3", "Finished in 0.9 seconds\n120 tests, 3 failures"),
    ("go test ./... | tee /tmp/go.log", "--- FAIL: TestQuote (0.00s)\nFAIL\tshop/quote\t0.01s"),
])
def test_a_failing_check_through_a_pipe_failed(command: str, output: str) -> None:
    assert _run(command, output).failed


@pytest.mark.parametrize("command,output", [
    ("cargo test 2>&1 | tail -20", "test result: ok. 5 passed; 0 failed"),
    ("mix test 2>&1 | tail -3", "120 tests, 0 failures"),
    ("uv run pytest -q | tail -1", "37 passed in 1.1s"),
    # Not a check: a log search that prints failure words is no failed run.
    ("grep -r 'failed' logs/ | head", "logs/a.log: 3 failed logins"),
    ("cat report.txt | head", "FAILED: 2 builds"),
])
def test_a_passing_or_non_check_pipe_did_not_fail(command: str, output: str) -> None:
    assert not _run(command, output).failed


def test_exit_codes_still_decide_without_a_pipe() -> None:
    assert _run("pytest", "1 passed", code=1).failed
    assert not _run("pytest", "2 failed", code=0).failed  # no pipe: the exit status is pytest's


def _transcript(path: Path, runs: list[tuple[str, str]]) -> Path:
    lines = [{"type": "user", "uuid": "u0", "sessionId": "s", "timestamp": "2026-02-03T10:00:00Z",
              "message": {"content": "the quote rounding is off, fix it"}}]
    for i, (kind, body) in enumerate(runs):
        ts = f"2026-02-03T10:0{i + 1}:00Z"
        if kind == "edit":
            tool = {"type": "tool_use", "id": f"t{i}", "name": "Edit",
                    "input": {"file_path": "/w/shop/quote.py", "old_string": "a", "new_string": "b"}}
            result = "The file /w/shop/quote.py has been updated."
        else:
            tool = {"type": "tool_use", "id": f"t{i}", "name": "Bash",
                    "input": {"command": "uv run pytest -q 2>&1 | tail -3"}}
            result = body
        lines.append({"type": "assistant", "uuid": f"a{i}", "sessionId": "s", "timestamp": ts,
                      "cwd": "/w", "message": {"id": f"m{i}", "content": [tool]}})
        lines.append({"type": "user", "uuid": f"r{i}", "sessionId": "s", "timestamp": ts,
                      "message": {"content": [{"type": "tool_result", "tool_use_id": f"t{i}",
                                               "content": result}]}})
    path.write_text("\n".join(json.dumps(x) for x in lines) + "\n")
    return path


def test_a_piped_fail_edit_pass_is_a_fix_arc(tmp_path: Path) -> None:
    session = read_transcript(_transcript(tmp_path / "t.jsonl", [
        ("run", "FAILED tests/test_quote.py::test_round_half_even - assert 2.5 == 2.0\n1 failed in 0.3s"),
        ("edit", ""),
        ("run", "12 passed in 0.3s"),
    ]))
    text = build_digest(session).text
    assert "TEST FAIL: $ uv run pytest -q 2>&1 | tail -3" in text
    assert "(failed at 10:01, now passes)" in text
    arcs = fix_arcs(session)
    assert len(arcs) == 1
