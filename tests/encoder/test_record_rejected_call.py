"""A tool call the user rejected is no failure in the session record (issue 12 item 1:
a rejection is the user speaking, never "exit 1"): nothing ran, and the reason the user
typed is their own line of the record."""

from __future__ import annotations

from dualtrace.encoder.records import record_for
from dualtrace.hooks.transcripts import read_transcript
from tests.e2e.test_session_records import Transcript

REJECTED = ("The user doesn't want to proceed with this tool use. The tool use was rejected (eg. if "
            "it was a file edit, the new_string was NOT written to the file). STOP what you are "
            "doing and wait for the user to tell you how to proceed. The user provided the "
            "following reason for the rejection: ")


def test_a_rejected_write_is_recorded_as_rejected_with_the_users_reason(tmp_path):
    t = Transcript(tmp_path / "t.jsonl", cwd="/home/dev/shop")
    t.user("Add a CONTRIBUTING.md that explains how to run the tests.")
    t.add("assistant", [{"type": "tool_use", "id": "tw", "name": "Write",
                         "input": {"file_path": "/home/dev/shop/CONTRIBUTING.md", "content": "# C\n"}}])
    t.add("user", [{"type": "tool_result", "tool_use_id": "tw", "is_error": True,
                    "content": REJECTED + "no CONTRIBUTING file, the guide lives on the wiki"}])
    t.say("Understood: the contributor guide goes on the wiki.")
    _record, text = record_for(read_transcript(t.write()), tmp_path, project="shop", memories=())
    assert "Write failed" not in text
    assert "Write CONTRIBUTING.md rejected by the user" in text
    assert "no CONTRIBUTING file, the guide lives on the wiki" in text
    assert "files_changed: []" in text  # nothing was written
