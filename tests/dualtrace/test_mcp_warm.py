"""``dualtrace mcp`` through the warm server (dualtrace/mcp_warm.py): real processes, a real
Unix socket, a real fork per host session; the host side is a JSON-RPC client over pipes."""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path

import pytest

from dualtrace.pipeline import encode_session
from tests.conftest import EXAMPLES
from tests.dualtrace.mcp_helpers import ask_line, dualtrace_argv
from tests.hook_helpers import wait_until

INIT = {"protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "test-host", "version": "0"}}


@pytest.fixture
def warm_env(monkeypatch, state_dir):
    """Warm starts on; the socket goes in <state>/run. Yields the state dir."""
    monkeypatch.setenv("DUALTRACE_MCP_WARM", "1")
    monkeypatch.setenv("DUALTRACE_MCP_IDLE", "30")
    yield state_dir
    for pid in _warm_processes(state_dir):  # the warm server and any session still open
        try:
            os.kill(pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
    wait_until(lambda: not _warm_processes(state_dir), 30, what="the warm server to exit")


def _warm_servers(runtime: Path) -> list[int]:
    """Pids of warm servers listening under ``runtime`` (their argv names the socket;
    their forks share that argv, so a process whose parent matches is a session)."""
    found = _warm_processes(runtime)
    return sorted(pid for pid, parent in found.items() if parent not in found)


def _warm_processes(runtime: Path) -> dict[int, int]:
    """pid -> parent pid of every warm server and fork of one under ``runtime``."""
    found: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmd = (entry / "cmdline").read_bytes()
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if b"serve_forever" in cmd and str(runtime).encode() in cmd and fields[0] != "Z":
            found[int(entry.name)] = int(fields[1])
    return found


def _children(pid: int) -> list[int]:
    out = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == pid and fields[0] != "Z":
                out.append(int(entry.name))
    return out


def _host(memdir: Path, cwd: Path) -> subprocess.Popen:
    return subprocess.Popen(dualtrace_argv("mcp", "--memory-dir", str(memdir)), cwd=cwd,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)


def _recall(proc: subprocess.Popen, question: str) -> str:
    ask_line(proc, 1, "initialize", INIT)
    ask_line(proc, None, "notifications/initialized", {})
    assert len(ask_line(proc, 2, "tools/list", {})["result"]["tools"]) == 5
    answer = ask_line(proc, 3, "tools/call", {"name": "recall", "arguments": {"question": question}})
    assert not answer["result"].get("isError"), answer
    return answer["result"]["content"][0]["text"]


@pytest.fixture
def stocked(memdir):
    assert encode_session(EXAMPLES / "pilot-5-session-storage.jsonl", memory_dir=memdir,
                          backend="offline").commit
    return memdir


def test_host_sessions_are_forks_of_one_warm_server(warm_env, stocked, tmp_path):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    first = _host(stocked, tmp_path)
    assert _recall(first, "why postgres for sessions").startswith("(STATE A retrieval")
    [warm] = _warm_servers(warm_env)
    # A second session, open at the same time, with another memory dir and cwd: its own
    # fork takes its argv, cwd and environment.
    second = _host(tmp_path / "no-memory", elsewhere)
    assert "(STATE C retrieval" in _recall(second, "why postgres for sessions")
    assert _warm_servers(warm_env) == [warm]
    assert len(_children(warm)) == 2
    assert first.pid not in _children(warm) and second.pid not in _children(warm)
    # The host closes one session: that server ends and dualtrace mcp exits with its status.
    first.stdin.close()
    assert first.wait(timeout=60) == 0
    assert "warm-up done" in first.stderr.read()  # the fork's stderr is the host's pipe
    # The host stops the other one as Claude Code does (SIGINT): 130, no traceback, and
    # its fork stops too.
    second.send_signal(signal.SIGINT)
    assert second.wait(timeout=60) == 130
    assert "Traceback" not in second.stderr.read()
    wait_until(lambda: not _children(warm), 30, what="the forked servers to exit")
    assert not (tmp_path / "no-memory").exists()  # STATE C created nothing


def test_an_idle_warm_server_exits_and_the_next_start_brings_a_new_one(warm_env, stocked,
                                                                         tmp_path, monkeypatch):
    monkeypatch.setenv("DUALTRACE_MCP_IDLE", "0.3")
    proc = _host(stocked, tmp_path)
    assert _recall(proc, "why postgres for sessions").startswith("(STATE A retrieval")
    [warm] = _warm_servers(warm_env)
    proc.stdin.close()
    assert proc.wait(timeout=60) == 0
    wait_until(lambda: not _warm_servers(warm_env), 30, what="the idle warm server to exit")
    assert list((warm_env / "run").glob("*.sock")) == []  # it removed its socket
    again = _host(stocked, tmp_path)
    assert _recall(again, "why postgres for sessions").startswith("(STATE A retrieval")
    assert _warm_servers(warm_env) not in ([], [warm])
    again.stdin.close()
    assert again.wait(timeout=60) == 0


def test_a_socket_dir_others_can_open_is_not_used(warm_env, stocked, tmp_path):
    shared = warm_env / "run"
    shared.mkdir(mode=0o755)
    shared.chmod(0o755)
    proc = _host(stocked, tmp_path)
    assert _recall(proc, "why postgres for sessions").startswith("(STATE A retrieval")
    proc.stdin.close()
    assert proc.wait(timeout=60) == 0
    assert _warm_servers(warm_env) == [] and list(shared.iterdir()) == []  # served in process
    assert "warm server not used" in (warm_env / "logs" / "mcp.log").read_text()


def test_the_setting_turns_warm_starts_off(warm_env, stocked, tmp_path):
    (warm_env / "config.toml").write_text("# mine\nmcp_warm = false\n")
    proc = _host(stocked, tmp_path)
    assert _recall(proc, "why postgres for sessions").startswith("(STATE A retrieval")
    proc.stdin.close()
    assert proc.wait(timeout=60) == 0
    assert _warm_servers(warm_env) == [] and not (warm_env / "run").exists()


def test_a_warm_server_whose_code_changed_never_serves(warm_env, stocked, tmp_path):
    """An upgrade replaces files the warm server has loaded: it refuses the next session
    (which is served in process, by the new code) and exits."""
    proc = _host(stocked, tmp_path)
    assert _recall(proc, "why postgres for sessions").startswith("(STATE A retrieval")
    proc.stdin.close()
    assert proc.wait(timeout=60) == 0
    [warm] = _warm_servers(warm_env)
    import dualtrace.errors

    loaded = Path(dualtrace.errors.__file__)  # loaded by the warm server, not in the key
    before = loaded.stat()
    try:
        os.utime(loaded, ns=(before.st_atime_ns, before.st_mtime_ns + 1_000_000_000))
        again = _host(stocked, tmp_path)
        assert _recall(again, "why postgres for sessions").startswith("(STATE A retrieval")
        assert again.pid not in _children(warm)
        again.stdin.close()
        assert again.wait(timeout=60) == 0
    finally:
        os.utime(loaded, ns=(before.st_atime_ns, before.st_mtime_ns))
    wait_until(lambda: warm not in _warm_servers(warm_env), 30, what="the stale server to exit")
    text = (warm_env / "logs" / "mcp.log").read_text()
    # Either the stale server was asked and refused, or (seen in 1 of ~8 CI runs, cause not
    # found) the new session never reached it and waited out START_WAIT: both serve in
    # process, by the new code, which is the promise checked above.
    assert "serving in process" in text, text
    assert "changed since it started" in text or "did not listen within" in text, text
