"""The real Claude Code (pinned, from npm) with dualtrace installed by ``dualtrace install``.

Claude Code runs headless (``claude -p``) in a temp HOME against the local fake
Messages API, with an API key and base URL in its environment as a person's setup
would have. The hooks and the detached worker are the real ones.
"""

from __future__ import annotations

import pytest

from tests.e2e.claude_host import Claude, last_user_text, scripted_assistant
from tests.e2e.e2e_hosts import memory_text
from tests.fake_anthropic import FakeAnthropic

pytestmark = pytest.mark.e2e

DECISION = ("We decided to use PostgreSQL, not MySQL, for the billing service, because "
            "billing needs row-level locking for invoice updates.")
REPLIES = {
    "We decided": "Understood: billing uses PostgreSQL rather than MySQL, "
                              "because invoice updates need row-level locking.",
    "database": "Billing uses PostgreSQL.",
}
RECALL_HEAD = "dualtrace recalled memories"


@pytest.fixture
def api():
    with FakeAnthropic() as server:
        server.default = scripted_assistant(REPLIES)
        yield server


@pytest.fixture
def claude(claude_bin, sandbox, api) -> Claude:
    sandbox.dualtrace("install", "--agent", "claude-code")
    return Claude(claude_bin, sandbox, api)


def only_memory_dir(box):
    dirs = box.memory_dirs()
    assert len(dirs) == 1, f"memory dirs: {dirs}\n{box.logs()}"
    return dirs[0]


def test_decision_is_stored_offline_and_nothing_from_dualtrace_reaches_the_model(claude):
    box = claude.box
    turn = claude.turn(DECISION)
    box.wait_idle()
    runs = [r for r in box.runs() if r.get("session") == turn.session_id]
    assert runs, f"no encode run for the session\n{box.logs()}"
    assert runs[-1]["error"] is None, runs[-1]
    assert runs[-1]["backend"] == "offline", runs[-1]
    assert runs[-1]["commit"], runs[-1]
    memdir = only_memory_dir(box)
    assert "PostgreSQL" in memory_text(memdir)
    assert claude.foreign_requests() == []
    assert all(last_user_text(b) for b in turn.requests)
