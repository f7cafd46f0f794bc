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
    # SIGINT at its default, as a host leaves it (a test run started in the background
    # inherits it ignored, and the server would then never see the host's stop).
    return subprocess.Popen(dualtrace_argv("mcp", "--memory-dir", str(memdir)), cwd=cwd,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, preexec_fn=_default_sigint)


def _default_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


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


def _log(state: Path) -> str:
    path = state / "logs" / "mcp.log"
    return path.read_text() if path.exists() else ""


def _socket_of(state: Path) -> Path:
    socks = list((state / "run").glob("*.sock"))
    assert len(socks) == 1, f"the warm server's socket is gone: {socks}\n{_log(state)}"
    return socks[0]


def _one_session(stocked: Path, cwd: Path) -> None:
    proc = _host(stocked, cwd)
    assert _recall(proc, "why postgres for sessions").startswith("(STATE A retrieval")
    proc.stdin.close()
    assert proc.wait(timeout=60) == 0


def test_a_warm_server_whose_code_changed_never_serves(warm_env, stocked, tmp_path):
    """An upgrade replaces files the warm server has loaded: it refuses the next session
    (which is served in process, by the new code, at once) and exits."""
    _one_session(stocked, tmp_path)
    [warm] = _warm_servers(warm_env)
    assert "serving in process" not in _log(warm_env)  # the first session was its fork
    import dualtrace.errors

    loaded = Path(dualtrace.errors.__file__)  # loaded by the warm server, not in the key
    before = loaded.stat()
    try:
        os.utime(loaded, ns=(before.st_atime_ns, before.st_mtime_ns + 1_000_000_000))
        _one_session(stocked, tmp_path)
    finally:
        os.utime(loaded, ns=(before.st_atime_ns, before.st_mtime_ns))
    wait_until(lambda: warm not in _warm_servers(warm_env), 30, what="the stale server to exit")
    text = _log(warm_env)
    # The new session reached the stale server, which refused it: served in process
    # without waiting for a warm server that would never answer.
    assert "changed since it started" in text, text
    assert "refused the session (stale or failing" in text, text
    assert "did not listen" not in text, text


def test_a_session_ending_never_takes_the_warm_servers_socket_away(warm_env, stocked, tmp_path,
                                                                      monkeypatch):
    """The client exits as soon as it has its fork's status; the fork's watch then sends
    itself SIGINT while the fork is still finishing (here: held 1 s there). That must
    not unwind into the warm server's loop in the fork, whose cleanup removed the
    server's socket: the next session then found no server, started one that could not
    take the lock, and waited START_WAIT (20 s) before serving in process."""
    monkeypatch.setenv("DUALTRACE_FAULT", "warm-exit:sleep=1")
    _one_session(stocked, tmp_path)
    [warm] = _warm_servers(warm_env)
    sock = _socket_of(warm_env)
    inode = sock.stat().st_ino
    wait_until(lambda: not _children(warm), 30, what="the session's fork to exit")
    assert sock.stat().st_ino == inode  # still there, still the warm server's
    _one_session(stocked, tmp_path)
    assert _warm_servers(warm_env) == [warm]
    text = _log(warm_env)
    assert "serving in process" not in text and "Traceback" not in text, text


def test_a_warm_server_whose_socket_is_gone_leaves_and_the_next_start_is_warm(
        warm_env, stocked, tmp_path):
    """Nobody can reach a server whose socket file was removed: it exits (and lets go of
    its lock) instead of blocking every new warm server until it idles out."""
    _one_session(stocked, tmp_path)
    [warm] = _warm_servers(warm_env)
    _socket_of(warm_env).unlink()
    wait_until(lambda: warm not in _warm_servers(warm_env), 30, what="the server to leave")
    assert "warm server exited (its socket file is gone)" in _log(warm_env)
    _one_session(stocked, tmp_path)
    assert _warm_servers(warm_env) not in ([], [warm])
    assert "serving in process" not in _log(warm_env)


def test_a_warm_server_that_dies_before_listening_is_not_waited_for(warm_env, stocked,
                                                                     tmp_path, monkeypatch):
    """The started server exits without listening (here: killed) and nobody else holds
    its lock: the session is served in process at once (one retry), not after
    START_WAIT."""
    monkeypatch.setenv("DUALTRACE_FAULT", "warm-listen:kill")
    _one_session(stocked, tmp_path)
    assert _warm_servers(warm_env) == []
    text = _log(warm_env)
    [line] = [x for x in text.splitlines() if "did not listen" in x]
    waited = float(line.split("(waited ")[1].split(" s)")[0])
    from dualtrace.mcp_warm import START_WAIT

    assert waited < START_WAIT / 2, line  # two server starts under load: seconds, not 20
    assert line.endswith("serving in process")


def test_a_warm_server_started_from_a_checkout_runs_the_installed_code(warm_env, stocked,
                                                                        tmp_path):
    """The host runs ``dualtrace mcp`` in its project; a project holding a ``dualtrace``
    folder (a checkout of it) must not be what the warm server imports (``python -c``
    puts the working directory first on sys.path): the session is the warm server's fork,
    with the installed code."""
    checkout = tmp_path / "checkout"
    (checkout / "dualtrace").mkdir(parents=True)
    marker = tmp_path / "the-checkout-was-imported"
    (checkout / "dualtrace" / "__init__.py").write_text(
        f"open({str(marker)!r}, 'w').close()\nraise ImportError('the checkout')\n")
    _one_session(stocked, checkout)
    assert not marker.exists()
    assert len(_warm_servers(warm_env)) == 1
    text = _log(warm_env)
    assert "warm server listening" in text and "serving in process" not in text, text
