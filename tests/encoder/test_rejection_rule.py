"""A rejected tool call's reason that states a rule is a convention (review 8 F2, issue 12
item 1: "a user's rejection of a tool call with a reason is the user speaking ... a
preference/convention candidate"): "we don't want a CONTRIBUTING file, use the wiki" was
heard as nothing. A reason that states no rule ("not now", a question) stores nothing."""

from __future__ import annotations

import pytest

from dualtrace.pipeline import encode_session
from tests.e2e.test_session_records import Transcript
from tests.encoder.test_record_rejected_call import REJECTED


def _rejected(tmp_path, reason: str):
    t = Transcript(tmp_path / "t.jsonl", cwd="/home/dev/shop")
    t.user("Add a CONTRIBUTING.md that explains how to run the tests.")
    t.add("assistant", [{"type": "tool_use", "id": "tw", "name": "Write", "input": {
        "file_path": "/home/dev/shop/CONTRIBUTING.md", "content": "# Contributing\n"}}])
    t.add("user", [{"type": "tool_result", "tool_use_id": "tw", "is_error": True,
                    "content": REJECTED + reason}])
    t.say("Understood.")
    mem = tmp_path / "mem"
    return encode_session(t.write(), memory_dir=mem, backend="offline"), mem


@pytest.mark.parametrize("reason", ["we don't want a CONTRIBUTING file, use the wiki",
                                    "use pnpm, not npm", "no CONTRIBUTING file, the guide lives on the wiki"])
def test_a_rejection_that_states_a_rule_is_a_convention(tmp_path, reason):
    report, mem = _rejected(tmp_path, reason)
    [op] = [o for o in report.operations if o["action"] != "skip"]
    assert op["type"] == "convention" or op["path"].endswith("conventions.md"), op
    text = (mem / op["path"]).read_text(encoding="utf-8")
    assert reason[0].upper() + reason[1:] in text, text


@pytest.mark.parametrize("reason", ["not now", "wait, what does this do?"])
def test_a_rejection_that_states_no_rule_stores_nothing(tmp_path, reason):
    report, _mem = _rejected(tmp_path, reason)
    assert [o for o in report.operations if o["action"] != "skip"] == [], report.operations
