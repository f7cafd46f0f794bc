"""The Stop / SessionEnd entries install writes run in the shell's background, with the
payload (issue 17.4): the host's shell returns at once and the hook still gets its stdin.

Real shells (sh, and bash when present), real hook processes; the real hosts run these
same entries in tests/e2e (a `claude -p` / `codex exec` session is still stored).
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys

import pytest

from dualtrace import queue
from dualtrace.hooks import install as inst
from dualtrace.hooks import registry
from tests import hook_helpers
from tests.hook_helpers import claude_payload, hook_cmd, runs, wait_drained, wait_until

pytestmark = pytest.mark.skipif(os.name == "nt", reason="POSIX shells only")

SHELLS = sorted({s for s in ("/bin/sh", shutil.which("dash"), shutil.which("bash")) if s})
hook_env = hook_helpers.hook_env  # the fixture


def _entry(agent: str, event: str, command: str) -> str:
    return inst.wanted_entries(agent, command)[event]["hooks"][0]["command"]


def test_only_events_without_output_go_to_the_background():
    for agent in registry.names():
        host = registry.get(agent)
        for event, (ours, _, _) in host.EVENTS.items():
            line = _entry(agent, event, "/x/dualtrace")
            assert inst.is_ours({"command": line})  # uninstall still finds it
            if event in host.BACKGROUND_EVENTS:
                assert line.startswith("exec 3<&0; /x/dualtrace hook ") and line.endswith("&")
                assert ours not in ("session-start", "prompt")  # their stdout is the context
            else:
                assert line.startswith("/x/dualtrace hook ")
    assert "Stop" in registry.get("claude-code").BACKGROUND_EVENTS
    assert "SessionEnd" in registry.get("codex").BACKGROUND_EVENTS
    assert not registry.get("letta").BACKGROUND_EVENTS  # its hooks take order tickets


def test_an_older_install_is_updated_to_the_background_form():
    old = {"hooks": {"Stop": [{"hooks": [{"type": "command", "timeout": 10,
                                           "command": "/x/dualtrace hook stop"}]}]}}
    new, changes = inst.merge(old, inst.wanted_entries("claude-code", "/x/dualtrace"))
    assert "updated Stop: " + _entry("claude-code", "Stop", "/x/dualtrace") in changes
    assert len(new["hooks"]["Stop"][0]["hooks"]) == 1
    assert inst.remove(new)[0] == {}


@pytest.mark.parametrize("shell", SHELLS)
def test_the_shell_returns_before_the_hook_and_the_hook_gets_the_payload(shell, tmp_path):
    """A stand-in hook command that blocks until released: the shell must exit while it
    is still blocked (the host's turn goes on), and it must still read the whole payload
    (dash gives background commands /dev/null as stdin unless the entry routes it)."""
    release, got = tmp_path / "release", tmp_path / "got.json"
    fake = tmp_path / "fakehook"
    fake.write_text(f"#!{sys.executable}\n"
                    "import os, sys, time\n"
                    f"while not os.path.exists({str(release)!r}):\n"
                    "    time.sleep(0.01)\n"
                    f"open({str(got)!r}, 'wb').write(sys.stdin.buffer.read())\n")
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    line = _entry("claude-code", "Stop", str(fake))
    payload = json.dumps({"session_id": "s1", "hook_event_name": "Stop", "pad": "x" * 4000})
    proc = subprocess.run([shell, "-c", line], input=payload.encode(), capture_output=True,
                          timeout=10)
    assert proc.returncode == 0 and proc.stdout == b"" and proc.stderr == b""
    assert not got.exists()  # the shell is gone, the hook still waits
    release.write_text("")
    wait_until(lambda: got.exists() and got.read_bytes() == payload.encode(), timeout=10,
               what="the background hook to read the payload")


@pytest.mark.parametrize("shell", SHELLS)
def test_the_installed_stop_and_session_end_entries_queue_the_session(shell, hook_env,
                                                                       state_dir, tmp_path):
    """The real hook behind the real entries, as a host's shell runs them: Stop queues
    the session, SessionEnd makes it immediate, and the worker it starts encodes it."""
    transcript = tmp_path / "proj" / "s-bg.jsonl"
    transcript.parent.mkdir(parents=True)
    transcript.write_text('{"type":"user","message":{"role":"user","content":"hi"}}\n')
    command = " ".join(hook_cmd())

    def run(event: str) -> None:
        payload = claude_payload(event, "s-bg", transcript, str(tmp_path))
        proc = subprocess.run([shell, "-c", _entry("claude-code", event, command)],
                              input=json.dumps(payload).encode(), capture_output=True,
                              env=hook_env, cwd=tmp_path, timeout=10)
        assert proc.returncode == 0 and proc.stdout == b"" and proc.stderr == b""

    def job() -> dict | None:
        found = [j for j in queue.list_jobs(str(state_dir)) if j.get("session_id") == "s-bg"]
        return found[0] if found else None

    run("Stop")
    first = wait_until(job, timeout=30, what="the Stop hook's job")
    assert first["events"] == {"stop": 1} and not first["immediate"]  # debounced
    run("SessionEnd")
    wait_until(lambda: any(r["session"] == "s-bg" for r in runs(state_dir)), timeout=90,
               what="the session encoded after the background SessionEnd hook")
    wait_drained(state_dir)
    log = state_dir / "logs" / "hook.log"
    assert not log.exists() or "s-bg" not in log.read_text()
