"""Warm starts for ``dualtrace mcp``: hosts start the server for every session (Claude
Code for every ``claude -p`` turn) and wait for its handshake, and importing the ``mcp``
SDK alone costs ~0.4 s of CPU. So ``dualtrace mcp`` is a thin client:

- a per-user **warm server** (one per interpreter, dualtrace version and state dir) has
  the SDK and the server module imported and waits on a Unix socket in ``<state>/run``
  (0700; the peer's uid is checked);
- ``dualtrace mcp`` connects, hands it its stdin, stdout and stderr (SCM_RIGHTS) with its
  argv, cwd, environment and umask, and waits; the warm server forks a child that takes
  those over and runs the real server (dualtrace/mcp_server.py) exactly as a fresh
  process would, then sends back the exit status, which ``dualtrace mcp`` exits with;
- no warm server yet (or a stale one): ``dualtrace mcp`` starts one, detached, and
  connects when it listens (the first start pays the import once); anything failing
  before the child took over falls back to serving in this process.

Only the warm server itself ever removes its socket, and it lets go of its lock right
after, before its (slow) interpreter exit; it leaves as soon as its socket file is gone or
replaced (nobody could reach it). A client that finds no socket stops waiting as soon as
the server it started has exited and nobody holds the lock (one retry), so a dying or
failing server costs a start in process, never the ``START_WAIT`` cap.

The child is forked before any thread or event loop exists in the warm server, and
builds everything per session after the fork (memory dir, index, redactor). If the
``dualtrace mcp`` process dies (the host killed it), the child sees its socket close and
exits. Before each fork the warm server re-checks the files of every module it loaded
(dualtrace's and the SDK's), and where the semantic extra's packages and the embedder's
weights are (``semantic_fingerprint``, taken after the preload: installing or removing
``dualtrace[semantic]`` imports nothing by name): after an upgrade or such an install it
refuses the session (the client serves it in process) and exits. A session's server
re-checks the same before each recall, search and remember, and loads the embedder again
when it changed. It exits after ``DUALTRACE_MCP_IDLE`` seconds (default 600)
with no session. ``mcp_warm = false`` in the user config or ``DUALTRACE_MCP_WARM=0``
turns all of this off; fallbacks are logged in ``<state>/logs/mcp.log``. Standard library only at module
level: this runs on every host start.

``dualtrace recall`` uses the same server when one is running (issue 11: a new process per
question pays ~60-100 ms for numpy, the embedder and the read path's imports): the
preloaded server marks itself ready (``<socket>.ready``); a recall that finds the mark
connects, waits for the fork's hello (only then are its stdio descriptors sent), and the
fork runs ``dualtrace.recallcmd`` as the new process would, with its stdout and stderr
re-opened in the client's encoding. No server is ever started for a recall, and a dead
(refusing), stale (closing) or hung (silent for ``READY_WAIT``) one means the recall is
answered in its own process.
"""

from __future__ import annotations

import json
import os
import struct
import sys
import time

TYPE_CHECKING = False  # (not typing's: this module runs on every host start, typing costs)
if TYPE_CHECKING:
    import socket
    import subprocess
    from typing import IO, Any

# socket (~2 ms with its enums and selectors) and hashlib are imported where they are
# used: a ``recall`` with no warm server around looks for a socket file and goes on.

IDLE_SECONDS = 600.0
START_WAIT = 20.0  # seconds a first start waits for the warm server to listen
# Seconds a ``recall`` waits for a listening warm server to take it over (normally a few
# ms: the fork); past that it answers in process. DUALTRACE_WARM_READY_WAIT overrides.
READY_WAIT = 2.0
READY_SUFFIX = ".ready"  # beside the socket: this server has preloaded (``_mark_ready``)
_HEADER = struct.Struct("!I")
HELLO, READY, STATUS = b"H", b"R", b"S"  # fork is there; fork has the session; exit status


def enabled(argv: list[str], state: str) -> bool:
    import socket

    if os.environ.get("DUALTRACE_MCP_WARM", "").strip().lower() in ("0", "false", "no"):
        return False
    if "--encoder" in argv or not (hasattr(socket, "AF_UNIX") and hasattr(socket, "send_fds")
                                   and hasattr(os, "fork")):
        return False
    return _setting(state)


def _setting(state: str) -> bool:
    """``mcp_warm`` in the user config (``mcp_warm = false`` in ``<state>/config.toml``); the
    file is parsed only when it mentions the key (this runs on every host start)."""
    try:
        with open(os.path.join(state, "config.toml"), "rb") as fh:
            raw = fh.read()
    except OSError:
        return True
    if b"mcp_warm" not in raw:
        return True
    import tomllib

    try:
        data = tomllib.loads(raw.decode("utf-8"))
    except (ValueError, UnicodeDecodeError):
        return True  # the CLI reports a broken config; the server still starts
    table = data.get("dualtrace")
    value = data.get("mcp_warm", table.get("mcp_warm", True) if isinstance(table, dict) else True)
    return value not in (False, "false", "0", "no", 0)


def log(state: str, message: str) -> None:
    """One line in ``<state>/logs/mcp.log`` (a host shows the server's stderr to few)."""
    from dualtrace import logfile

    try:
        logfile.append(logfile.path(state, "mcp.log"), logfile.line(message))
    except OSError:
        pass


MAX_SOCKET_PATH = 100  # sun_path is 104-108 bytes


def _socket_dir(state: str, name: str) -> str:
    """``<state>/run``; a shorter private folder when that path is too long for a socket."""
    here = os.path.join(state, "run")
    if len(os.path.join(here, name)) <= MAX_SOCKET_PATH:
        return here
    base = os.environ.get("XDG_RUNTIME_DIR") or "/tmp"
    return os.path.join(base, f"dualtrace-{os.getuid()}")


def _private_dir(path: str) -> str:
    """The folder, created 0700; refused unless it is ours and no one else's (a socket
    there is trusted with our file descriptors and environment)."""
    os.makedirs(path, mode=0o700, exist_ok=True)
    st = os.lstat(path)
    import stat

    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid() or st.st_mode & 0o077:
        raise OSError(f"{path} is not a private directory of this user")
    return path


def key(state: str) -> str:
    """Which warm server this process may use: same interpreter, same code, same state.
    (The warm server also re-checks every module it has loaded before each fork.)"""
    import hashlib
    from importlib.util import find_spec

    from dualtrace import __version__

    here = os.path.dirname(os.path.abspath(__file__))
    parts = [sys.executable, __version__, state]
    spec = find_spec("mcp")
    files = [os.path.join(here, n) for n in ("mcp_server.py", "mcp_sdk.py",
                                                 "agent_tools.py", "mcp_warm.py")]
    files += [spec.origin] if spec and spec.origin else []
    for path in files:
        try:
            st = os.stat(path)
            parts.append(f"{path}:{st.st_mtime_ns}:{st.st_size}")
        except OSError:
            parts.append(path)
    return hashlib.sha256("\0".join(parts).encode("utf-8", "surrogatepass")).hexdigest()[:24]


def socket_path(state: str) -> str:
    name = f"mcp-{key(state)}.sock"
    return os.path.join(_socket_dir(state, name), name)


# ------------------------------------------------------------------ the client side


def _connect(path: str) -> socket.socket | None:
    import socket

    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.connect(path)
    except OSError:
        sock.close()
        return None
    return sock


# ``-c`` puts "" (the working directory, the host's project) first on sys.path: a project
# holding a ``dualtrace`` folder (a checkout of it) or one named like any library the
# sessions import later would shadow the installed code, in the server and in every fork
# (which works in the session's cwd). Dropped before anything is imported; "-P" would do
# it too, from Python 3.11 on only.
_BOOT = ("import sys\n"
         "if sys.path[:1] == ['']: del sys.path[0]\n"
         "from dualtrace.mcp_warm import serve_forever\n"
         "serve_forever(sys.argv[1], sys.argv[2])\n")


def _start_server(path: str, state: str) -> subprocess.Popen[bytes]:
    import subprocess

    logs = os.path.join(state, "logs")
    os.makedirs(logs, exist_ok=True)
    with open(os.path.join(logs, "mcp.log"), "ab") as err:
        return subprocess.Popen([sys.executable, "-c", _BOOT, path, state],
                                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err,
                                start_new_session=True, close_fds=True)


def _lock_free(path: str) -> bool:
    """Nobody holds the warm server's lock: no server is starting, serving or leaving."""
    import fcntl

    try:
        fd = os.open(path + ".lock", os.O_RDONLY | os.O_CREAT, 0o600)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except OSError:
        return False
    finally:
        os.close(fd)  # closing drops our shared lock too
    return True


def _reach(path: str, state: str) -> socket.socket | None:
    """A connection to the warm server, starting one when none listens.

    The wait ends as soon as nobody can answer: the server we started exited without
    listening (it found the lock taken, or failed) and the lock is free. That is retried
    once, for a server that was leaving when ours started; a holder of the lock that
    neither listens nor leaves (starting, under heavy load) is waited for up to
    ``START_WAIT``."""
    sock = _connect(path)
    if sock is not None:
        return sock
    started = [_start_server(path, state)]
    deadline = time.monotonic() + START_WAIT
    while time.monotonic() < deadline:
        sock = _connect(path)
        if sock is not None:
            return sock
        if started[-1].poll() is not None and _lock_free(path):
            sock = _connect(path)  # it may have listened and left in between
            if sock is not None or len(started) == 2:
                return sock
            started.append(_start_server(path, state))
        time.sleep(0.01)
    return None


def client(argv: list[str], state: str) -> int | None:
    """Serve this host session through the warm server; its exit status, or None when it
    could not take the session over (the caller then serves it in process)."""
    try:
        path = socket_path(state)
        _private_dir(os.path.dirname(path))
        start = time.monotonic()
        sock = _reach(path, state)
    except OSError as exc:
        log(state, f"warm server not used: {exc}")
        return None
    if sock is None:
        log(state, f"warm server did not listen (waited {time.monotonic() - start:.1f} s): "
                   "serving in process")
        return None
    return _hand_over(sock, "mcp", argv, state, START_WAIT)


def may_be_listening(state: str) -> bool:
    """A preloaded warm server has marked itself ready in this state's socket folder: the
    cheap look a ``recall`` takes before it pays for the key, the socket module and a
    connect (a server killed without cleaning up leaves the mark: the connect fails)."""
    here = _socket_dir(state, f"mcp-{'0' * 24}.sock")  # (the folder depends on the length)
    try:
        return any(name.endswith(READY_SUFFIX) for name in os.listdir(here))
    except OSError:
        return False


def forward(kind: str, argv: list[str], state: str) -> int | None:
    """Run ``dualtrace <kind> ARGV`` (``recall``: one question, one new process) in a fork
    of the warm server, if one is listening already: none is started for it, and a dead
    one (its socket refuses), a stale one (it closes) or a hung one (no answer within
    ``READY_WAIT``) costs at most that wait. The fork's exit status, or None when no
    server took it over (the caller then answers in process)."""
    try:
        path = socket_path(state)
        if not _is_private_dir(os.path.dirname(path)) or not os.path.exists(
                path + READY_SUFFIX):
            return None  # none of this code is ready here (or not a folder to trust)
        sock = _connect(path)
    except OSError:
        return None
    if sock is None:
        return None
    return _hand_over(sock, kind, argv, state, _ready_wait())


def _ready_wait() -> float:
    try:
        return float(os.environ.get("DUALTRACE_WARM_READY_WAIT") or READY_WAIT)
    except ValueError:
        return READY_WAIT


def _hand_over(sock: socket.socket, kind: str, argv: list[str], state: str,
               wait: float) -> int | None:
    """Send this process's stdio, argv, cwd, environment and umask to the warm server's
    fork and wait for its exit status; None when it did not take the session (nothing of
    it was touched: the caller serves it in process)."""
    import socket

    umask = os.umask(0)
    os.umask(umask)
    fields: dict[str, object] = {"kind": kind, "argv": argv, "cwd": os.getcwd(),
                                 "env": dict(os.environ), "umask": umask}
    if kind != "mcp":  # text written by the fork as this process would have written it
        fields["stdio"] = [_stream_spec(sys.stdout), _stream_spec(sys.stderr)]
    header = json.dumps(fields).encode("utf-8", "surrogateescape")
    what = "the session" if kind == "mcp" else kind
    try:
        sock.settimeout(wait)  # a hung warm server must not hang the host
        # Our stdio goes only to a fork that is there to take it: descriptors in flight
        # to a server that never reads them would hold our stdout open after we exit (a
        # caller reading it to the end would wait for that server).
        if _recv_exact(sock, 1) != HELLO:
            raise ConnectionAbortedError("closed")
        socket.send_fds(sock, [_HEADER.pack(len(header)) + header], [0, 1, 2])
        if _recv_exact(sock, 1) != READY:
            raise ConnectionAbortedError("closed")
    except OSError as exc:  # nothing of the session was touched: serve it here
        sock.close()
        log(state, f"warm server refused {what} (stale or failing: {exc}): "
                   "serving in process")
        return None
    try:
        sock.settimeout(None)
        reply = _recv_exact(sock, 2)
    except OSError:
        reply = b""
    except KeyboardInterrupt:  # hosts stop their servers with SIGINT (Claude Code does)
        return 130  # closing the socket tells the session's fork to stop the same way
    finally:
        sock.close()
    if len(reply) == 2 and reply[:1] == STATUS:
        return reply[1]
    # The child took the session over and then died without a status: an error exit.
    log(state, f"warm server's fork for {what} ended without an exit status")
    return 1


def _stream_spec(stream: object) -> list[object]:
    return [getattr(stream, "encoding", None) or "utf-8",
            getattr(stream, "errors", None) or "strict",
            bool(getattr(stream, "line_buffering", False))]


def _is_private_dir(path: str) -> bool:
    """``_private_dir``'s check without creating the folder."""
    import stat

    try:
        st = os.lstat(path)
    except OSError:
        return False
    return stat.S_ISDIR(st.st_mode) and st.st_uid == os.getuid() and not st.st_mode & 0o077


def _recv_exact(sock: socket.socket, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            break
        data += chunk
    return data


# ------------------------------------------------------------------ the warm server


def _preload(state: str) -> None:
    """Load once what every session's warm-up would: the recall stack and the ``recall``
    command, the embedder (numpy, WordLlama's table and vocabulary) and the redactor with
    its ~490 compiled secret rules (a single-threaded native scanner). A fork inherits
    them; each session still opens its own index."""
    try:
        import dualtrace.cmdline  # noqa: F401
        import dualtrace.memfs.formats  # noqa: F401
        import dualtrace.memfs.index  # noqa: F401
        import dualtrace.memfs.recall  # noqa: F401
        import dualtrace.memfs.sessions  # noqa: F401
        import dualtrace.memfs.store  # noqa: F401
        import dualtrace.recallcmd  # noqa: F401
        from dualtrace.encoder.redact import redact_text

        redact_text("dualtrace warm server")  # builds the rules; finds nothing to remember
        _preload_embedder()
    except Exception as exc:  # noqa: BLE001 - sessions then load it themselves
        log(state, f"warm server preload failed: {exc}")


def _preload_embedder() -> None:
    """numpy and the embedder: ~60-100 ms that a new ``recall`` process pays each time.
    Only when numpy starts no BLAS thread pool (a person's OPENBLAS_NUM_THREADS=4 would):
    a process with threads must not fork, and the sessions then load it themselves."""
    from dualtrace.memfs import embed  # sets the thread counts to 1 unless they are set

    if any(os.environ.get(var, "1") != "1" for var in embed.BLAS_THREAD_VARS):
        return
    model = embed.get_embedder()
    if model is not None:
        model.embed(["dualtrace warm server"])  # maps the table, reads the vocabulary


def _preload_checked(state: str, path: str) -> bool:
    start = time.monotonic()
    _preload(state)
    if _threads() > 1:  # forking a process with other threads is not safe: stop
        log(state, "warm server stopping: a preloaded library started a thread")
        raise SystemExit(0)
    _mark_ready(path, True)
    log(state, f"warm server preloaded ({(time.monotonic() - start) * 1000:.0f} ms)")
    return True


def _mark_ready(path: str, ready: bool) -> None:
    """``<socket>.ready`` exists while this server has everything loaded: only then does
    a ``recall`` hand itself over (a server still preloading, ~0.3-8 s, would make it wait,
    and it answers faster in process)."""
    try:
        if ready:
            with open(path + READY_SUFFIX, "w"):
                pass
        else:
            os.unlink(path + READY_SUFFIX)
    except OSError:
        pass


def _threads() -> int:
    try:
        return len(os.listdir(f"/proc/{os.getpid()}/task"))
    except OSError:
        import threading

        return threading.active_count()


def _loaded_files() -> dict[str, int]:
    """mtime of every file this process imported code from that an upgrade would
    replace: dualtrace's own modules and the SDK's."""
    out: dict[str, int] = {}
    for name, module in list(sys.modules.items()):
        path = getattr(module, "__file__", None)
        if path and name.split(".")[0] in ("dualtrace", "mcp", "mcp_types", "pydantic",
                                            "pydantic_core", "anyio", "kingfisher_sdk",
                                            "numpy"):
            try:
                out[path] = os.stat(path).st_mtime_ns
            except OSError:
                out[path] = -1
    return out


# What semantic recall runs on, none of it imported by name (the embedder locates its
# package and reads the weights itself): a package installed, upgraded or removed after
# the preload does not show in ``_loaded_files``.
SEMANTIC_PACKAGES = ("wordllama", "simsimd")


def semantic_fingerprint() -> tuple[object, ...]:
    """Where the semantic extra's packages are found now, and the size and mtime of the
    embedder's weights and tokenizer files (None each when absent). Taken after the
    preload; a different value later means the embedder this process holds (or holds
    none of) is not the one a new process would load. ~0.1 ms; no import is executed."""
    import importlib.util

    from dualtrace.memfs import embed

    importlib.invalidate_caches()  # a package installed since: path finders look again
    out: list[object] = []
    package = None
    for name in SEMANTIC_PACKAGES:
        try:
            spec = sys.modules[name].__spec__ if name in sys.modules else \
                importlib.util.find_spec(name)
        except (ImportError, ValueError, AttributeError):
            spec = None
        where = None
        if spec is not None:
            where = spec.origin if spec.has_location else None
            if spec.submodule_search_locations:
                where = next(iter(spec.submodule_search_locations), where)
        if name == "wordllama":
            package = where
        # A module file's stamp (an upgrade replaces it); a package folder's would move
        # with its __pycache__, so only its place counts (its weights are stamped below).
        out.append((name, where, _stamp(where) if where and os.path.isfile(where) else None))
    if package:
        stem = f"{embed.WORDLLAMA_CONFIG}"
        for rel in (os.path.join("weights", f"{stem}_{embed.WORDLLAMA_DIM}.safetensors"),
                    os.path.join("tokenizers", f"{stem}_tokenizer_config.json")):
            out.append((rel, _stamp(os.path.join(package, rel))))
    return tuple(out)


def _stamp(path: str | None) -> tuple[int, int] | None:
    if not path:
        return None
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_size, st.st_mtime_ns


def _stale(loaded: dict[str, int]) -> str | None:
    for path, mtime in loaded.items():
        try:
            now = os.stat(path).st_mtime_ns
        except OSError:
            now = -1
        if now != mtime:
            return path
    return None


def _semantic_change(before: tuple[object, ...], now: tuple[object, ...]) -> str:
    """Which entry of the fingerprint moved, in a few words for the log."""
    was = {str(item[0]): item for item in before if isinstance(item, tuple)}
    for item in now:
        if isinstance(item, tuple) and was.get(str(item[0])) != item:
            gone = item[1] is None if len(item) == 3 else item[-1] is None
            return f"{item[0]}: {'now absent' if gone else 'installed or changed'}"
    return "an entry is gone"


def _take_lock(path: str) -> IO[str] | None:
    """The lock that makes this the one warm server for ``path`` (held for the process's
    life), or None when another holds it. A short wait covers a client's probe
    (``_lock_free``) and a server that is just leaving (it lets go right after it
    removes its socket)."""
    import fcntl

    lock = open(path + ".lock", "w")  # noqa: SIM115 - held for the process's life
    deadline = time.monotonic() + 0.5
    while True:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return lock
        except OSError:
            if time.monotonic() >= deadline:
                lock.close()
                return None
            time.sleep(0.01)


def _still_bound(path: str, bound: int) -> bool:
    """The socket file is still the one this server listens on (clients can reach it)."""
    try:
        return os.stat(path).st_ino == bound
    except OSError:
        return False


def serve_forever(path: str, state: str) -> None:
    """Listen on ``path`` until idle; fork one MCP server per connection."""
    import signal

    idle = float(os.environ.get("DUALTRACE_MCP_IDLE") or IDLE_SECONDS)
    lock = _take_lock(path)
    if lock is None:
        return  # another warm server for this key is starting or running
    import dualtrace.mcp_server  # noqa: F401 - the import every session would pay
    from dualtrace import faults

    faults.point("warm-listen")
    loaded = _loaded_files()
    semantics: tuple[object, ...] | None = None  # semantic_fingerprint() after the preload
    preloaded = False  # after the first fork: the session that started us waits for it
    listener, bound = _listen(path)
    def stop(*_: object) -> None:
        # Leave from the handler itself: a SystemExit raised wherever the signal lands
        # was, under load, sometimes lost, and the server kept listening after SIGTERM
        # (tests/dualtrace/test_recall_warm.py, the hung server's teardown).
        _leave(path, bound, state, "stopped")
        os._exit(0)

    signal.signal(signal.SIGTERM, stop)
    children: set[int] = set()
    last = time.monotonic()
    why = "idle"
    log(state, f"warm server listening on {path} ({len(loaded)} files loaded)")
    try:
        while children or time.monotonic() - last < idle:
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                conn = None
            if _reap(children):
                last = time.monotonic()
            if conn is None:
                if not _still_bound(path, bound):  # removed or replaced: unreachable now
                    why = "its socket file is gone"
                    break
                if not preloaded:
                    preloaded = _preload_checked(state, path)
                    loaded = {**_loaded_files(), **loaded}  # keep what the start saw
                    semantics = semantic_fingerprint()
                continue
            if not _same_user(conn):
                conn.close()
                continue
            changed = _stale(loaded)
            if changed is None and semantics is not None:
                now = semantic_fingerprint()
                if now != semantics:
                    changed = f"the semantic extra ({_semantic_change(semantics, now)})"
            if changed:  # upgraded or edited: never serve old code; the client serves itself
                log(state, f"warm server stopping: {changed} changed since it started")
                conn.close()
                why = "stale"
                break
            pid = os.fork()
            if pid == 0:  # the session's own process: it must never come back into this loop
                try:
                    listener.close()
                    lock.close()
                    _child(conn)  # exits the process
                finally:
                    os._exit(1)  # (this loop's cleanup below would remove the server's socket)
            conn.close()
            children.add(pid)
            last = time.monotonic()
            if not preloaded:
                preloaded = _preload_checked(state, path)
                loaded = {**_loaded_files(), **loaded}  # keep what the start saw
                semantics = semantic_fingerprint()
    except SystemExit:
        why = "stopped"  # a preloaded library started a thread (SIGTERM leaves in stop)
        raise
    finally:
        _leave(path, bound, state, why)
        listener.close()
        lock.close()


def _leave(path: str, bound: int, state: str, why: str) -> None:
    """Unreachable first, then free for a successor, before the (slow) interpreter exit:
    a client that finds no socket starts a new server, which needs the lock."""
    if _still_bound(path, bound):
        _mark_ready(path, False)
        try:
            os.unlink(path)
        except OSError:
            pass
    elif not os.path.exists(path):  # removed, not replaced: nobody's mark now
        _mark_ready(path, False)
    log(state, f"warm server exited ({why})")


def _listen(path: str) -> tuple[socket.socket, int]:
    """The listening socket at ``path`` (owner only), and the inode it was bound to."""
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass
    import socket

    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    os.chmod(path, 0o600)
    bound = os.stat(path).st_ino  # a later server may have replaced the file: not ours then
    listener.listen(16)
    listener.settimeout(1.0)
    return listener, bound


def _reap(children: set[int]) -> bool:
    """Forget the session processes that ended; True if any did."""
    ended = False
    for pid in list(children):
        try:
            done, _status = os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            done = pid
        if done:
            children.discard(pid)
            ended = True
    return ended


def _same_user(conn: socket.socket) -> bool:
    import socket

    if not hasattr(socket, "SO_PEERCRED"):
        return True  # the 0700 folder alone keeps others out
    creds = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    _pid, uid, _gid = struct.unpack("3i", creds)
    return uid == os.getuid()


def _child(conn: socket.socket) -> None:
    """One host session in a fork of the warm server; exits the process."""
    import signal
    import threading

    code = 1
    try:
        try:
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
            header = _take_over(conn)
            kind = header.get("kind", "mcp")
            try:
                conn.sendall(READY)
            except OSError:  # the client stopped waiting (and serves itself): say nothing
                os._exit(1)
            threading.Thread(target=_watch, args=(conn,), name="dualtrace-warm-watch",
                             daemon=True).start()
            code = _run_session(kind, list(header["argv"]))
        finally:
            # The session is over: the watch's SIGINT (sent when the client exits after
            # reading our status) must not interrupt what is left.
            signal.signal(signal.SIGINT, signal.SIG_IGN)
    except KeyboardInterrupt:  # the watch stopped the session after main() returned
        code = 130
    except SystemExit as exc:  # argparse's usage errors, as in a process of its own
        code = exc.code if isinstance(exc.code, int) else 1
    except BaseException:  # noqa: BLE001 - report through the status byte, never raise
        import traceback

        traceback.print_exc()
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except OSError:
        pass
    try:
        conn.sendall(STATUS + bytes([code & 0xFF]))
    except OSError:
        pass
    from dualtrace import faults

    faults.point("warm-exit")  # (the client exits now: its watch's SIGINT comes here)
    os._exit(code)


def _take_over(conn: socket.socket) -> dict[str, Any]:
    """Say hello, receive the client's header and stdio, and become that process (its
    fds, cwd, environment, umask, argv). Exits the fork before READY on anything wrong,
    so the client serves the session in its own process."""
    import socket

    try:
        conn.sendall(HELLO)
    except OSError:
        os._exit(1)  # the client gave up on us already: nothing was handed over
    conn.settimeout(START_WAIT)  # a client that connects and sends nothing
    msg, fds, _flags, _addr = socket.recv_fds(conn, 1 << 20, 3)
    if len(fds) != 3 or len(msg) < _HEADER.size:
        os._exit(1)
    (size,) = _HEADER.unpack(msg[:_HEADER.size])
    body = msg[_HEADER.size:]
    while len(body) < size:
        chunk = conn.recv(size - len(body))
        if not chunk:
            os._exit(1)
        body += chunk
    conn.settimeout(None)
    header = json.loads(body.decode("utf-8", "surrogateescape"))
    kind = header.get("kind", "mcp")
    if kind not in SESSION_KINDS:
        os._exit(1)  # before READY: the client serves it in process
    for target, fd in enumerate(fds):
        os.dup2(fd, target)
        os.close(fd)
    os.chdir(header["cwd"])
    os.environ.clear()
    os.environ.update(header["env"])
    os.umask(int(header["umask"]))
    sys.argv = ["dualtrace", kind, *header["argv"]]
    if header.get("stdio"):
        _reopen_stdio(header["stdio"])
    return header


def _watch(conn: socket.socket) -> None:
    """The dualtrace mcp process is gone (the host stopped or killed it, or it read our
    status and exited): stop as a server of its own would on SIGINT, and surely within
    5 s."""
    import signal

    try:
        conn.recv(1)
    except OSError:
        pass
    os.kill(os.getpid(), signal.SIGINT)
    time.sleep(5)
    os._exit(130)


SESSION_KINDS = ("mcp", "recall")


def _run_session(kind: str, argv: list[str]) -> int:
    """What a new ``dualtrace <kind> ARGV`` process would run, in this fork."""
    if kind == "recall":
        from dualtrace.recallcmd import main as recall

        code = recall(argv, warm=False)  # (this fork is the warm path)
        # The client forwards only what its own parse took; None cannot happen there.
        return 2 if code is None else code
    from dualtrace.mcp_server import main as serve

    return serve(argv)


def _reopen_stdio(specs: list[list[object]]) -> None:
    """sys.stdout / sys.stderr over the client's descriptors, with the client's encoding,
    error handler and line buffering (the warm server's own were set up for /dev/null)."""
    for fd, name, (encoding, errors, line) in zip((1, 2), ("stdout", "stderr"), specs,
                                                  strict=False):
        stream = open(fd, "w", buffering=1 if line else -1, encoding=str(encoding),  # noqa: SIM115
                      errors=str(errors), closefd=False)
        setattr(sys, name, stream)


def parse_argv(argv: list[str]) -> tuple[str | None, bool] | None:
    """``dualtrace mcp``'s arguments as hosts pass them (``--memory-dir DIR``, and
    ``--encoder`` for the claude backend's sub-agent): (memory dir, encoder), or None for
    anything else (``--help``, a typo), which ``via_click`` answers."""
    memory_dir: str | None = None
    encoder = False
    rest = list(argv)
    while rest:
        arg = rest.pop(0)
        if arg == "--encoder":
            encoder = True
        elif arg == "--memory-dir" and rest:
            memory_dir = rest.pop(0)
        elif arg.startswith("--memory-dir="):
            memory_dir = arg.split("=", 1)[1]
        else:
            return None
    return memory_dir, encoder


def via_click(argv: list[str]) -> int:
    """``dualtrace mcp --help`` and bad options: the click CLI's help text and its
    one-line ``Error: ...`` (exit 1), as for every other command."""
    from dualtrace.cli import main as cli

    cli(["mcp", *argv])  # exits on an error; a valid command line serves in process
    return 0


def main(argv: list[str]) -> int:
    """``dualtrace mcp ...`` as the host starts it."""
    from dualtrace.paths import state_dir

    if parse_argv(argv) is None:
        return via_click(argv)
    state = state_dir()
    if enabled(argv, state):
        code = client(argv, state)
        if code is not None:
            return code
    from dualtrace.mcp_server import main as serve_here

    return serve_here(argv)


__all__ = ["main", "client", "serve_forever", "socket_path", "key", "enabled", "parse_argv",
           "via_click"]
