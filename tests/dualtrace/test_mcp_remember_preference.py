"""MCP ``remember`` of a preference reaches the person's own memory (issue 11 leftovers).

An encode puts a preference learned on this machine into the person's own memory too
(``preferences = "both"``, the default) or only there (``"user"``); ``remember`` used to
commit every change into the project memory alone, so a preference the person asked the
agent to remember was never injected in their other projects. A real stdio MCP session
(subprocess + the SDK's client) in a temp HOME; git read back from the repositories.
"""

from __future__ import annotations

import json
import subprocess

from tests.dualtrace.mcp_helpers import server_params, text_of, with_session
from tests.hook_helpers import run_hook

PREFERENCE = "The user wants answers in British English"


def _remember(memdir, cwd, args: dict) -> str:
    async def body(client):
        return await client.call_tool("remember", args)

    result = with_session(server_params(memdir, cwd), body)
    assert not result.is_error, text_of(result)
    return text_of(result)


def _log(repo) -> str:
    return subprocess.run(["git", "-C", str(repo), "log", "--format=%s%n%b"],
                          capture_output=True, text=True, check=True).stdout


def test_a_remembered_preference_goes_to_your_own_memory_and_the_project(memdir, tmp_path,
                                                                         state_dir):
    own = state_dir / "user-memory"
    said = _remember(memdir, tmp_path, {"type": "preference", "description": PREFERENCE})
    assert said.startswith("bullet system/human.md [BULLET, evidence ")  # not [FULL ...]
    assert "in your own memory (commit " in said
    assert PREFERENCE in (own / "system" / "human.md").read_text(encoding="utf-8")
    assert "mem: store system/human" in _log(own)
    assert PREFERENCE in (memdir / "system" / "human.md").read_text(encoding="utf-8")  # "both"
    # Another project with no memory of its own: SessionStart injects the preference.
    other = tmp_path / "other-project"
    other.mkdir()
    payload = {"session_id": "s-new", "transcript_path": str(other / "t.jsonl"),
               "cwd": str(other), "hook_event_name": "SessionStart", "source": "startup"}
    proc = run_hook("session-start", payload)
    assert proc.returncode == 0, proc.stderr
    context = json.loads(proc.stdout)["hookSpecificOutput"]["additionalContext"]
    assert PREFERENCE in context
    # A decision stays the project's: the person's memory gets no new commit for it.
    before = _log(own)
    decided = _remember(memdir, tmp_path, {"type": "decision",
                                           "description": "Deploy with blue-green switches"})
    assert "own memory" not in decided and _log(own) == before


def test_preferences_user_keeps_a_remembered_preference_out_of_the_project(memdir, tmp_path,
                                                                           state_dir):
    (state_dir / "config.toml").write_text('preferences = "user"\n', encoding="utf-8")
    said = _remember(memdir, tmp_path, {"type": "preference", "description": PREFERENCE})
    assert "] in your own memory (commit " in said  # no project commit at all
    assert PREFERENCE in (state_dir / "user-memory" / "system" / "human.md").read_text("utf-8")
    assert not (memdir / "system" / "human.md").exists()
