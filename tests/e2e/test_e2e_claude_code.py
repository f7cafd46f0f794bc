"""The real Claude Code (pinned, from npm) with dualtrace installed by ``dualtrace install``.

Claude Code runs headless (``claude -p``) in a temp HOME against the local fake
Messages API, with an API key and base URL in its environment as a person's setup
would have. The hooks and the detached worker are the real ones.
"""

from __future__ import annotations

import shutil
import subprocess
import time
from datetime import datetime, timezone
from pathlib import Path

import pytest

from dualtrace import queue
from tests.conftest import REPO_ROOT
from tests.e2e.claude_host import (
    Claude,
    LiveSession,
    last_user_text,
    request_text,
    scripted_assistant,
)
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
LOGGING = ("We're switching to JSON structured logging instead of plain text, because "
           "Datadog cannot parse free-form lines.")
RECALL_HEAD = "dualtrace recalled memories"


def wait_for(found, timeout: float = 60.0):
    """``found()`` once it is truthy, polled until ``timeout`` (then its last value)."""
    deadline = time.monotonic() + timeout
    while True:
        value = found()
        if value or time.monotonic() >= deadline:
            return value
        time.sleep(0.05)


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
    runs = box.wait_encoded(turn.session_id)
    assert runs[-1]["error"] is None, runs[-1]
    assert runs[-1]["backend"] == "offline", runs[-1]
    assert runs[-1]["commit"], runs[-1]
    memdir = only_memory_dir(box)
    assert "PostgreSQL" in memory_text(memdir)
    assert claude.foreign_requests() == []
    assert all(last_user_text(b) for b in turn.requests)


def test_later_sessions_get_the_memory_back(claude):
    box = claude.box
    box.wait_encoded(claude.turn(DECISION).session_id)
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
    box.wait_encoded(sid)
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
    runs = box.wait_encoded(turn.session_id)
    assert runs and runs[-1]["commit"] and runs[-1]["backend"] == "offline", (runs, box.logs())
    assert "PostgreSQL" in memory_text(only_memory_dir(box))
    later = claude.turn("Let's plan the next sprint.")
    assert "<dualtrace-memory>" in request_text(later.requests[0])
    assert claude.foreign_requests() == []

    # An interactive session: the plugin's Stop hook is "async" (Claude Code runs it in
    # the background, the turn does not wait for it) and still queues the session while
    # the session lives; SessionEnd (synchronous) at the end makes it encode now.
    live = LiveSession(claude_bin, box)
    try:
        _, result = live.turn(LOGGING)
        sid = result["session_id"]
        stops = wait_for(lambda: [j for j in queue.list_jobs(str(box.state))
                                  if j.get("session_id") == sid
                                  and j.get("events", {}).get("stop")])
        assert stops and not stops[0]["immediate"], (stops, box.logs())
    finally:
        live.close()
    box.wait_idle()
    assert [r for r in box.runs() if r.get("session") == sid and r["commit"]], box.logs()
    assert "Datadog" in memory_text(only_memory_dir(box))


ENC = "mcp__dualtrace__"
SECOND = ("We decided to keep PostgreSQL for billing and add a read replica, because the "
          "reporting queries slow down invoice updates.")
STORE = {"type": "decision", "anchor": "billing-postgresql",
         "description": "Billing uses PostgreSQL, not MySQL (row-level locking for invoices)",
         "body": "The billing service uses PostgreSQL rather than MySQL because billing needs "
                 "row-level locking for invoice updates.",
         "scores": {"durability": 3, "scope": 2, "rationale": 3, "retrieval": 3},
         "confidence": "HIGH",
         "moment": {"narrative": "The user decided to use PostgreSQL, not MySQL, for the "
                                 "billing service, because billing needs row-level locking "
                                 "for invoice updates.",
                    "what": "decided PostgreSQL over MySQL for billing",
                    "marker": datetime.now(timezone.utc).date().isoformat()}}


def encoder_model(body: dict) -> dict:
    """The encoder sub-agent's model: scripted tool calls to dualtrace's MCP tools,
    by turn (the number of assistant messages so far) and by session (the digest)."""
    from tests.fake_anthropic import message, text, tool_use

    turn = sum(1 for m in body.get("messages") or [] if m.get("role") == "assistant")
    second = "read replica" in request_text(body)
    if second:
        script = [[tool_use(ENC + "update_memory", {
                      "target": "decisions/billing-postgresql.md", "reason": "revisited",
                      "body": "Billing keeps PostgreSQL and adds a read replica, because the "
                              "reporting queries slow down invoice updates."})],
                  [tool_use(ENC + "finish", {"summary": "updated the billing decision"})]]
    else:
        script = [[tool_use(ENC + "read_memory", {"path": "../../../../etc/passwd"}),
                   tool_use(ENC + "store_memory", {**STORE, "anchor": "../../escape"})],
                  [tool_use(ENC + "store_memory", STORE)],
                  [tool_use(ENC + "skip", {"reason": "greeting, nothing durable"}),
                   tool_use(ENC + "finish", {"summary": "one decision"})]]
    return message(*script[turn]) if turn < len(script) else message(text("done"))


def tool_results(bodies: list[dict]) -> dict[str, tuple[bool, str]]:
    """tool_use id -> (is_error, text) from the tool results the host sent back."""
    out = {}
    for body in bodies:
        for msg in body.get("messages") or []:
            for block in msg.get("content") if isinstance(msg.get("content"), list) else []:
                if isinstance(block, dict) and block.get("type") == "tool_result":
                    content = block.get("content")
                    text_value = content if isinstance(content, str) else " ".join(
                        c.get("text", "") for c in content or [] if isinstance(c, dict))
                    out[block["tool_use_id"]] = (bool(block.get("is_error")), text_value)
    return out


def test_claude_backend_runs_the_real_claude_as_the_encoder(claude_bin, sandbox, api):
    box = sandbox
    box.env["PATH"] = f"{claude_bin.parent}:{box.env['PATH']}"  # `claude` on PATH, as for a user
    proc = box.dualtrace("install", "--agent", "claude-code", "--backend", "claude")
    assert "backend claude:" in proc.stdout and "claude -p" in proc.stdout

    def model(body: dict) -> dict:
        names = [t.get("name", "") for t in body.get("tools") or []]
        if any(n.startswith(ENC) for n in names):
            return encoder_model(body)
        return scripted_assistant({"We decided": "Understood, noted."})(body)

    api.default = model
    claude = Claude(claude_bin, box, api)
    box.wait_encoded(claude.turn(DECISION).session_id, timeout=120)
    box.wait_encoded(claude.turn(SECOND).session_id, timeout=120)

    records = box.runs()
    assert [r["backend"] for r in records if r.get("commit")] == ["claude", "claude"], (
        records, box.logs())
    assert all(r["error"] is None for r in records), records
    memdir = only_memory_dir(box)
    fact = (memdir / "decisions" / "billing-postgresql.md").read_text()
    assert "row-level locking" in fact and "read replica" in fact
    assert not list(box.root.rglob("escape*")), "a path escape was written"

    encoder = [r.body for r in api.requests
               if any(t.get("name", "").startswith(ENC) for t in (r.body or {}).get("tools") or [])]
    assert encoder, "the encoder sub-agent never reached the model"
    # The child is locked down: only our six MCP tools, no built-in tool (2.1.328 always
    # lists an empty "DeferredToolPlaceholder" entry, which names no tool).
    assert {t["name"] for t in encoder[0]["tools"]} - {"DeferredToolPlaceholder"} == {
        ENC + n for n in ("search_memory", "read_memory", "store_memory", "update_memory",
                          "skip", "finish")}
    calls = {b["id"]: (b["name"].removeprefix(ENC), b["input"]) for body in encoder
             for m in body["messages"] if m["role"] == "assistant"
             for b in m["content"] if isinstance(b, dict) and b.get("type") == "tool_use"}
    results = tool_results(encoder)
    by_name: dict[str, list[tuple[bool, str]]] = {}
    for call_id, (name, _input) in calls.items():
        if call_id in results:
            by_name.setdefault(name, []).append(results[call_id])
    assert by_name["read_memory"][0][0] and "leaves the memory directory" in by_name[
        "read_memory"][0][1]
    assert [err for err, _ in by_name["store_memory"]] == [True, False], by_name
    assert "anchor" in by_name["store_memory"][0][1]
    assert by_name["update_memory"] == [(False, by_name["update_memory"][0][1])]
    assert not by_name["skip"][0][0]
    log = subprocess.run(["git", "-C", str(memdir), "log", "--format=%B"], capture_output=True,
                         text=True).stdout
    assert log.count("Dualtrace-Backend: claude") == 2
