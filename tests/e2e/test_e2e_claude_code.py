"""The real Claude Code (pinned, from npm) with dualtrace installed by ``dualtrace install``.

Claude Code runs headless (``claude -p``) in a temp HOME against the local fake
Messages API, with an API key and base URL in its environment as a person's setup
would have. The hooks and the detached worker are the real ones.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from tests.conftest import REPO_ROOT
from tests.e2e.claude_host import Claude, last_user_text, request_text, scripted_assistant
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


def test_later_sessions_get_the_memory_back(claude):
    box = claude.box
    claude.turn(DECISION)
    box.wait_idle()
    assert "PostgreSQL" in memory_text(only_memory_dir(box))

    # SessionStart: the next session's requests carry the memory. (Claude Code 2.1.328
    # puts hook context in the system prompt: "SessionStart hook additional context: ...")
    later = claude.turn("Let's plan the next sprint.")
    assert later.requests
    for body in later.requests:
        assert "<dualtrace-memory>" in request_text(body) and "PostgreSQL" in request_text(body)
        assert RECALL_HEAD not in request_text(body)  # nothing in this prompt matched

    # UserPromptSubmit: a related prompt's request carries the recalled memory ...
    related = claude.turn("Which database should the billing service use for invoices?")
    text = request_text(related.requests[0])
    assert RECALL_HEAD in text
    recalled = text[text.index(RECALL_HEAD):]
    assert "PostgreSQL" in recalled[:2000] and "row-level locking" in recalled[:2000]
    # ... and an unrelated one's does not.
    unrelated = claude.turn("How do I center a div with CSS grid?")
    assert RECALL_HEAD not in request_text(unrelated.requests[0])
    assert claude.foreign_requests() == []


def test_several_turns_of_one_session_end_in_one_commit(claude):
    box = claude.box
    first = claude.turn(DECISION)
    sid = first.session_id
    second = claude.turn("We also decided to use Redis instead of memcached for the session "
                         "cache, because we need key expiry events.", resume=sid)
    third = claude.turn("Thanks, that is all for today.", resume=sid)
    assert second.session_id == third.session_id == sid
    box.wait_idle()
    memdir = only_memory_dir(box)
    text = memory_text(memdir)
    assert "PostgreSQL" in text and "Redis" in text
    commits = box.session_commits(memdir)
    assert len(commits) == 1, (commits, box.runs())
    assert claude.foreign_requests() == []


def clone_of_the_repository(dest: Path) -> Path:
    """The repository's files as a clone has them (tracked and new, never ignored ones
    such as .venv), from the working tree so uncommitted changes are what is tested."""
    listing = subprocess.run(["git", "-C", str(REPO_ROOT), "ls-files", "-z", "--cached",
                              "--others", "--exclude-standard"], capture_output=True)
    if listing.returncode != 0:
        pytest.skip("the plugin route needs the repository as a git checkout")
    for rel in filter(None, listing.stdout.decode().split("\0")):
        src = REPO_ROOT / rel
        if src.is_file():
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / rel)
    return dest


def test_plugin_route_from_a_clone(claude_bin, sandbox, api):
    box = sandbox
    clone = clone_of_the_repository(box.root / "clone")
    proc = box.run(claude_bin, "plugin", "validate", clone)
    assert "Validation passed" in proc.stdout, proc.stdout
    box.run(claude_bin, "plugin", "marketplace", "add", clone)
    proc = box.run(claude_bin, "plugin", "install", "dualtrace@dualtrace")
    assert "Successfully installed" in proc.stdout, proc.stdout
    assert not (box.home / ".claude" / "settings.json").read_text().count("dualtrace hook")

    claude = Claude(claude_bin, box, api)  # dualtrace on PATH, as pipx/uv tool would put it
    turn = claude.turn(DECISION)
    box.wait_idle()
    runs = [r for r in box.runs() if r.get("session") == turn.session_id]
    assert runs and runs[-1]["commit"] and runs[-1]["backend"] == "offline", (runs, box.logs())
    assert "PostgreSQL" in memory_text(only_memory_dir(box))
    later = claude.turn("Let's plan the next sprint.")
    assert "<dualtrace-memory>" in request_text(later.requests[0])
    assert claude.foreign_requests() == []
