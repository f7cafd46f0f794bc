"""A session record's frontmatter names each check once (issue 11).

The ``outcome`` line used to repeat every check of the ``checks`` list ("mix test ...
passed; mix test ... passed; ..."): on spotter fa812bfe (five mix test commands) the
frontmatter held each command twice, and what the frontmatter takes the body cannot, so
the agent's notes were cut for it. Now several checks are counted in the outcome line and
only a failed one is named there (cut short).
"""

from __future__ import annotations

import pytest
import yaml

from dualtrace.encoder.records import record_for
from dualtrace.hooks.transcripts import read_transcript
from dualtrace.memfs.sessions import Check, Commit, outcome_line
from tests.conftest import CORPUS

SPOTTER = CORPUS / "claude-code" / "spotter"


def _frontmatter(text: str) -> tuple[str, dict]:
    front = text.split("---\n", 2)[1]
    return front, yaml.safe_load(front)


@pytest.mark.skipif(not SPOTTER.is_dir(), reason="shared corpus not available")
def test_a_real_sessions_frontmatter_names_each_check_once(tmp_path):
    path = next(SPOTTER.glob("fa812bfe-*.jsonl"))
    record, text = record_for(read_transcript(path), tmp_path, project="spotter", memories=())
    front, data = _frontmatter(text)
    commands = [c["command"] for c in data["checks"]]
    assert len(commands) == 5 and "mix test 2>&1" in commands
    for command in commands:
        assert front.count(command) == 1, command
    assert data["outcome"] == "5 commits; 5 checks passed; open end"
    assert len(text.encode("utf-8")) <= 12000
    # The bytes the repeated checks took are the body's again: the agent's short
    # explanations between tool calls (the budget's minor notes) stay.
    assert "> The nesting comes from the `if` inside `Enum.find_value` inside `case`." in text
    assert "> I need to actually use `SyncTranscripts` in the LiveView mount." in text


def test_the_outcome_line_counts_several_checks_and_names_only_the_failed():
    one = [Check("pytest -q", 2, 1, "passed")]
    assert outcome_line([Commit("abc1234", "m")], one, 1) == "1 commit; pytest -q passed; open end"
    passed = [Check(f"pytest tests/test_{n}.py", 1, 0, "passed") for n in range(4)]
    assert outcome_line([], passed, 0) == "no commits; 4 checks passed"
    long = "mypy " + "src/package/module_with_a_long_name.py " * 3
    failed = [*passed, Check("ruff check .", 1, 1, "failed"), Check(long, 1, 1, "failed")]
    line = outcome_line([], failed, 2)
    assert line.startswith("no commits; 2 of 6 checks failed: ruff check ., mypy src/package/")
    assert line.endswith("...; 2 open ends") and len(line) < 150
    assert "pytest" not in line  # the passed ones are counted, not named
    three = [*failed, Check("tsc --noEmit", 1, 1, "failed")]
    assert "3 of 7 checks failed: mypy src/" in outcome_line([], three, 0)
    assert outcome_line([], three, 0).endswith(", tsc --noEmit and 1 more")
