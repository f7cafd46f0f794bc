"""``dualtrace recall`` answered by a running warm server (dualtrace/mcp_warm.py).

Real processes: a real warm server (the code ``dualtrace mcp`` starts) listening on a real
Unix socket in the test's state dir, real ``dualtrace recall`` processes through the
console script's entry, a real memory directory. A recall hands itself over only to a
server that is listening and preloaded; a dead, stale, hung or unready one costs at most
``READY_WAIT`` and the question is answered in process, with the same output.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from dualtrace.mcp_warm import READY_SUFFIX, socket_path
from dualtrace.pipeline import encode_session
from tests.conftest import EXAMPLES
from tests.hook_helpers import wait_until

# The client reports whether it loaded the vector stack (a fork of the warm server answered
# if not); numpy it never loads (tests/memfs/test_vectors.py).
PROBE = """
import atexit, sys
atexit.register(lambda: sys.stderr.write("VECTORS %s\\n" % (
    "dualtrace.memfs.vectors" in sys.modules and "numpy" not in sys.modules)))
sys.argv = ["dualtrace", *sys.argv[1:]]
from dualtrace.hookcmd import entry
entry()
"""

try:
    import simsimd  # noqa: F401
    import wordllama  # noqa: F401  (located, not executed, by the embedder)
    SEMANTIC = True
except ImportError:
    SEMANTIC = False


@pytest.fixture
def stocked(memdir):
    assert encode_session(EXAMPLES / "pilot-5-session-storage.jsonl", memory_dir=memdir,
                          backend="offline").commit
    return memdir


class Server:
    def __init__(self, state: Path, extra_env: dict[str, str] | None = None) -> None:
        self.state = state
        self.sock = Path(socket_path(str(state)))
        self.sock.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        env = {**os.environ, "DUALTRACE_MCP_IDLE": "60", **(extra_env or {})}
        # Started as `dualtrace mcp` starts it (_start_server), with this interpreter.
        self.proc = subprocess.Popen(
            [sys.executable, "-c", "import sys; from dualtrace.mcp_warm import serve_forever; "
             "serve_forever(sys.argv[1], sys.argv[2])", str(self.sock), str(state)],
            env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL, start_new_session=True)
        wait_until(lambda: self.ready or self.proc.poll() is not None, 120,
                   what="the warm server to preload")
        assert self.ready, self.log()

    @property
    def ready(self) -> bool:
        return Path(str(self.sock) + READY_SUFFIX).exists()

    def log(self) -> str:
        path = self.state / "logs" / "mcp.log"
        return path.read_text() if path.exists() else ""

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGCONT)
            self.proc.terminate()
        self.proc.wait(timeout=60)


@pytest.fixture
def warm(state_dir, monkeypatch):
    monkeypatch.setenv("DUALTRACE_MCP_WARM", "1")
    servers: list[Server] = []

    def start(extra_env: dict[str, str] | None = None) -> Server:
        servers.append(Server(state_dir, extra_env))
        return servers[-1]

    yield start
    for server in servers:
        server.stop()


def recall(*args: str, **env: str) -> tuple[subprocess.CompletedProcess[str], bool]:
    """A `dualtrace recall` process; (its result without the probe line, vectors loaded)."""
    proc = subprocess.run([sys.executable, "-c", PROBE, "recall", *args], capture_output=True,
                          text=True, env={**os.environ, **env}, timeout=120)
    lines = proc.stderr.splitlines(keepends=True)
    probe = [ln for ln in lines if ln.startswith("VECTORS ")]
    assert probe, proc.stderr
    proc.stderr = "".join(ln for ln in lines if not ln.startswith("VECTORS "))
    return proc, probe[-1].strip() == "VECTORS True"


def same(a: subprocess.CompletedProcess[str], b: subprocess.CompletedProcess[str]) -> None:
    assert (a.returncode, a.stdout, a.stderr) == (b.returncode, b.stdout, b.stderr)


QUESTIONS = [
    ("why postgres for sessions",),
    ("--json", "--limit", "2", "how do we store user sessions"),
    ("--type=decision", "what", "did", "we", "choose", "for", "session", "storage"),
    ("what logging approach did we settle on",),  # nothing stored: STATE C
]


def test_a_running_warm_server_answers_in_a_fork_with_the_same_output(warm, stocked):
    server = warm()
    for args in QUESTIONS:
        argv = ("--memory-dir", str(stocked), *args)
        warm_run, warm_vectors = recall(*argv)
        cold_run, cold_vectors = recall(*argv, DUALTRACE_MCP_WARM="0")
        assert warm_run.returncode == 0, warm_run.stderr
        same(warm_run, cold_run)
        assert not warm_vectors  # answered by the server's fork, which has it loaded
        assert cold_vectors == SEMANTIC
    assert "STATE A" in recall("--memory-dir", str(stocked), "why postgres for sessions")[0].stdout
    # The question's own environment is the fork's: lexical when the person says so.
    lexical, _ = recall("--memory-dir", str(stocked), "postgres sessions",
                        DUALTRACE_EMBEDDER="off")
    same(lexical, recall("--memory-dir", str(stocked), "postgres sessions",
                         DUALTRACE_EMBEDDER="off", DUALTRACE_MCP_WARM="0")[0])
    # Written with the question's own stdout encoding and error handler, not the server's.
    argv = ("--memory-dir", str(stocked), "--json", "café postgres sessions")
    encoded, warm_vectors = recall(*argv, PYTHONIOENCODING="ascii:backslashreplace")
    assert "caf\\xe9" in encoded.stdout and not warm_vectors
    same(encoded, recall(*argv, PYTHONIOENCODING="ascii:backslashreplace",
                         DUALTRACE_MCP_WARM="0")[0])
    # An error is the same one line and exit 1.
    missing, warm_vectors = recall("--memory-dir", str(stocked.parent / "nothing"), "why")
    assert missing.returncode == 1 and missing.stderr.startswith("Error: no memory directory")
    same(missing, recall("--memory-dir", str(stocked.parent / "nothing"), "why",
                         DUALTRACE_MCP_WARM="0")[0])
    assert not warm_vectors
    assert server.proc.poll() is None and "serving in process" not in server.log()


def test_warm_starts_off_means_in_process(warm, stocked):
    warm()
    _, loaded = recall("--memory-dir", str(stocked), "why postgres for sessions",
                       DUALTRACE_MCP_WARM="0")
    assert loaded == SEMANTIC


def _timed(*args: str, **env: str) -> tuple[subprocess.CompletedProcess[str], bool, float]:
    start = time.monotonic()
    proc, loaded = recall(*args, **env)
    return proc, loaded, time.monotonic() - start


def test_a_dead_warm_server_is_not_waited_for(warm, stocked):
    """Killed without cleaning up: its socket file and ready mark stay, the connect is
    refused, and the question is answered in process without the READY wait (set to
    60 s here, so waiting at all would show)."""
    server = warm()
    argv = ("--memory-dir", str(stocked), "why postgres for sessions")
    expected, _ = recall(*argv, DUALTRACE_MCP_WARM="0")
    os.kill(server.proc.pid, signal.SIGKILL)
    server.proc.wait(timeout=60)
    assert server.sock.exists() and server.ready
    proc, loaded, took = _timed(*argv, DUALTRACE_WARM_READY_WAIT="60")
    same(proc, expected)
    assert loaded == SEMANTIC and took < 30


def test_a_stale_warm_server_refuses_and_the_recall_is_answered_in_process(warm, stocked):
    server = warm()
    argv = ("--memory-dir", str(stocked), "why postgres for sessions")
    expected, _ = recall(*argv, DUALTRACE_MCP_WARM="0")
    import dualtrace.errors

    loaded_file = Path(dualtrace.errors.__file__)  # loaded by the warm server
    before = loaded_file.stat()
    try:
        os.utime(loaded_file, ns=(before.st_atime_ns, before.st_mtime_ns + 1_000_000_000))
        proc, loaded, took = _timed(*argv, DUALTRACE_WARM_READY_WAIT="60")
    finally:
        os.utime(loaded_file, ns=(before.st_atime_ns, before.st_mtime_ns))
    same(proc, expected)
    assert loaded == SEMANTIC and took < 30
    server.proc.wait(timeout=60)  # it left, and took its ready mark with it
    assert not server.ready and not server.sock.exists()
    assert "refused recall (stale or failing" in server.log(), server.log()


def test_a_hung_warm_server_costs_at_most_the_ready_wait(warm, stocked):
    server = warm()
    argv = ("--memory-dir", str(stocked), "why postgres for sessions")
    expected, _ = recall(*argv, DUALTRACE_MCP_WARM="0")
    os.kill(server.proc.pid, signal.SIGSTOP)  # accepts (the kernel does), never answers
    try:
        proc, loaded, _ = _timed(*argv, DUALTRACE_WARM_READY_WAIT="0.5")
    finally:
        os.kill(server.proc.pid, signal.SIGCONT)
    same(proc, expected)
    assert loaded == SEMANTIC
    assert "refused recall (stale or failing: timed out)" in server.log(), server.log()


def test_a_server_not_marked_ready_is_not_used(warm, stocked):
    """Still preloading (here: its mark removed): the recall does not queue behind it."""
    server = warm()
    Path(str(server.sock) + READY_SUFFIX).unlink()
    _, loaded = recall("--memory-dir", str(stocked), "why postgres for sessions")
    assert loaded == SEMANTIC
    assert server.proc.poll() is None


@pytest.mark.skipif(not SEMANTIC, reason="dualtrace[semantic] not installed")
def test_a_server_whose_numpy_would_start_threads_skips_the_embedder_and_keeps_serving(
        warm, stocked):
    """A person's OPENBLAS_NUM_THREADS=2: numpy would start a thread pool, and a process
    with threads must not fork. The server does not preload it (instead of stopping) and
    its forks load it themselves."""
    server = warm({"OPENBLAS_NUM_THREADS": "2"})
    maps = Path(f"/proc/{server.proc.pid}/maps").read_text()
    assert "openblas" not in maps and len(os.listdir(f"/proc/{server.proc.pid}/task")) == 1
    argv = ("--memory-dir", str(stocked), "why postgres for sessions")
    proc, loaded = recall(*argv)
    same(proc, recall(*argv, DUALTRACE_MCP_WARM="0")[0])
    assert not loaded and server.proc.poll() is None
