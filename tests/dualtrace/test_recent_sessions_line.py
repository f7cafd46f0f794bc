"""SessionStart's "Recent sessions" line names an open end once (review 7, F13): the
outcome's count gives way to the first open end's words."""

from __future__ import annotations

import json
import os

from tests.e2e.test_session_records import Transcript, encode
from tests.hook_helpers import run_hook


def _recent_lines(memdir, project) -> list[str]:
    env = dict(os.environ, DUALTRACE_MEMORY_DIR=str(memdir))
    payload = {"session_id": "next", "cwd": str(project), "hook_event_name": "SessionStart",
               "source": "startup"}
    proc = run_hook("session-start", payload, env=env, args=("--host", "claude-code"))
    assert proc.returncode == 0, proc.stderr
    text = json.loads(proc.stdout)["hookSpecificOutput"]["additionalContext"]
    block = text.split("## Recent sessions in this project", 1)[1].split("\n\n", 1)[0]
    return [ln for ln in block.splitlines() if ln.startswith("- ")]


def test_one_open_end_and_several_are_each_said_once(memdir, tmp_path):
    project = tmp_path / "shop"
    project.mkdir()
    one = Transcript(tmp_path / "one.jsonl", sid="1" + "0" * 35, day="2026-03-20",
                     cwd=str(project))
    one.user("Make the refresh retry once when the staging proxy drops the call.")
    one.edit(f"{project}/src/auth.py")
    one.bash("pytest -q tests/test_auth.py", "12 passed in 0.4s")
    one.say("Done: the refresh retries once. I haven't checked the staging logs yet.")
    encode(memdir, one.write(), cwd=project)
    two = Transcript(tmp_path / "two.jsonl", sid="2" + "0" * 35, day="2026-03-21",
                     cwd=str(project))
    two.user("Add a test for the coupon total.")
    two.edit(f"{project}/tests/test_cart.py")
    two.bash("pytest -q tests/test_cart.py", "FAILED tests/test_cart.py::test_coupon - "
             "AssertionError\n1 failed", failed=True)
    two.say("The new test fails: the coupon is applied after the tax. Still need to fix it.")
    encode(memdir, two.write(), cwd=project)

    latest, earlier = _recent_lines(memdir, project)
    assert latest.startswith("- 2026-03-21 20000000: Add a test for the coupon total. -> ")
    assert latest.endswith("; 2 open ends, the first: `pytest -q tests/test_cart.py` failed "
                           "on its last run (09:05)"), latest
    assert earlier.endswith("tests/test_auth.py passed; open end: agent: \"I haven't checked "
                            "the staging logs yet.\""), earlier
    for line in (latest, earlier):
        assert "open end;" not in line and line.count("open end") == 1
