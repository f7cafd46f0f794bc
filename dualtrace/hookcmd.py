"""``dualtrace hook EVENT``: the fast path that runs at the end of every agent turn.

Contract with the host (see docs/HOSTS.md): read the hook JSON from stdin with a short
timeout, record or refresh the session's job in the durable queue, make sure one
detached worker is running, exit 0. Never print on stdout for stop/session-end
(output would keep a Stop turn going), never exit non-zero (exit 2 blocks the
agent), log our own errors to ``<state>/logs/hook.log``.

Speed: this module and what it imports must stay on the standard library's cheap
modules. No click, no dualtrace.config (dataclasses + tomllib cost ~40 ms here), no
pipeline, git, jinja2, yaml or anthropic. ``entry`` is the console script: it routes
``dualtrace hook ...`` here before click is ever imported.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Callable

from dualtrace import logfile, queue, startctx, sweepmark, words

TYPE_CHECKING = False
if TYPE_CHECKING:
    from types import ModuleType

EVENTS = ("stop", "session-end", "session-start", "prompt", "pre-compact", "post-tool-use",
          "notify", "subagent-stop")
# Host event names (Claude Code / Codex / Letta) -> ours, for payload-driven dispatch.
_EVENT_ALIASES = {
    "Stop": "stop", "StopFailure": "stop", "SessionEnd": "session-end",
    "SessionStart": "session-start",
    "UserPromptSubmit": "prompt", "PreCompact": "pre-compact", "PostToolUse": "post-tool-use",
    "SubagentStop": "subagent-stop",
}
IMMEDIATE_EVENTS = frozenset({"session-end", "pre-compact"})
# Events whose payloads a KEEPS_OWN_TRANSCRIPT host (Letta) turns into transcript lines
# or queues the session for: handled in order by a detached child (order_ticket).
KEPT_EVENTS = frozenset({"stop", "post-tool-use", "session-end", "pre-compact"})
ORDER_DIR = "hook-order"
ORDER_WAIT = 60.0  # a child waits at most this long for the hooks before it
# The hook never waits longer than ~0.1 s on stdin or on the queue lock (issue 13.4):
# a payload is complete when it parses (no need for EOF); a queue lock held past
# LOCK_WAIT (a stopped worker) sends the touch to queue/incoming/ instead.
STDIN_TIMEOUT = 0.1  # seconds without a new byte before we take what arrived
STDIN_LIMIT = 0.5  # seconds in all, however slowly bytes keep trickling in
LOCK_WAIT = 0.1
STDIN_CAP = 4 * 1024 * 1024  # bigger payloads are drained and rejected, never parsed
WORKER_NICE = 10  # the worker's niceness above the hook's (worker_niceness)


class HookError(Exception):
    """A bad payload or environment: logged, never shown to the agent."""


# ------------------------------------------------------------------ entry points

HOOK_HELP = """Usage: dualtrace hook EVENT [--host HOST] [NOTIFY_JSON]

  Hook entry for a coding agent: reads the host's JSON payload on stdin, queues the
  session for the background worker, and for session-start / prompt prints the
  context to inject. Always exits 0 and never blocks the agent; problems go to the
  hook log in the state directory (`dualtrace status` shows where).

  EVENT: stop, session-end, pre-compact, session-start, prompt, notify (Codex),
  or the host's own event name. HOST: claude-code (default), codex, letta.
  `dualtrace install --agent HOST` writes these hooks into the agent's settings.
"""


def entry() -> None:
    """Console script: ``hook``, ``merge-file``, ``mcp`` and a plain ``recall`` never
    import click; everything else goes to the CLI."""
    argv = sys.argv[1:]
    if argv[:1] == ["hook"]:
        if any(a in ("-h", "--help") for a in argv[1:]):
            sys.stdout.write(HOOK_HELP)  # a person asking; hosts never pass --help
            sys.exit(0)
        sys.exit(run(argv[1:]))
    if argv[:1] == ["merge-file"]:
        # git runs this once per file a merge touches on both sides: no click, no CLI.
        from dualtrace.memfs.merge import run_driver

        sys.exit(run_driver(argv[1:]))
    if argv[:1] == ["mcp"]:  # a server the host starts at session start: skip click too
        from dualtrace.mcp_warm import main as mcp_main  # a fork of a warm server if it can

        sys.exit(mcp_main(argv[1:]))
    if argv[:1] == ["recall"]:  # a new process per question: click is ~15% of its budget
        from dualtrace.recallcmd import main as recall_main

        code = recall_main(argv[1:])
        if code is not None:  # None: --help or bad input, which click answers
            sys.exit(code)
    from dualtrace.cli import main

    main()


def run(argv: list[str], payload: dict | None = None) -> int:
    """``dualtrace hook EVENT [--host HOST] [NOTIFY_JSON]``; always returns 0.
    ``payload``: the hook JSON, when the fast path has read it from stdin already."""
    if _flag("DUALTRACE_CHILD") or _flag("DUALTRACE_DISABLE"):
        # Our own children (claude -p, the worker) and opted-out shells: do nothing.
        return 0
    event, host, extra = _parse_args(argv)
    state = None
    try:
        state = queue.fast_state_dir()
        output = handle(event, host, extra, state, payload)
        if output and event in ("session-start", "prompt"):
            sys.stdout.write(output)
            sys.stdout.flush()
    except BaseException as exc:  # noqa: BLE001 - a hook must never fail the agent
        if isinstance(exc, KeyboardInterrupt):
            return 0
        log(state, f"{event or '?'}: {type(exc).__name__}: {exc}")
    return 0


# ------------------------------------------------------------------ the fast path

# The hooks a turn waits for (they print context), as `install` writes them on POSIX:
#     PYTHON -S .../dualtrace/fasthook.py SCRIPT hook EVENT --host claude-code
# Python starts without site (no scan of site-packages, no editable-install finder: most
# of a bare start-up, ~10-25 ms here), and what needs nothing but the standard library
# and the state dir is answered at once. Everything else loads site and runs the full
# hook on the payload already read, so a fast-path miss costs what the hook cost before.
FAST_HOSTS = frozenset({"claude-code"})
FAST_EVENTS = {"session-start": "SessionStart", "prompt": "UserPromptSubmit"}


def fast_main(argv: list[str]) -> int:
    """``fasthook.py SCRIPT hook EVENT [--host HOST]``; always returns 0."""
    sys.argv = argv[:1] + argv[2:]  # as if SCRIPT ran (_own_command reads argv[0])
    if _flag("DUALTRACE_CHILD") or _flag("DUALTRACE_DISABLE"):
        return 0
    event, host, extra = _parse_args(argv[2:])
    payload = None
    state = None
    try:
        state = queue.fast_state_dir()
        payload = read_payload()
        output = _fast(event, host, extra, payload, state)
    except BaseException as exc:  # noqa: BLE001 - a hook must never fail the agent
        if isinstance(exc, KeyboardInterrupt) or payload is None:
            if not isinstance(exc, KeyboardInterrupt):
                log(state, f"{event or '?'}: {type(exc).__name__}: {exc}")
            return 0  # (no payload: the full hook would have nothing to work on either)
        output = None  # the full hook does it again, and logs what goes wrong there
    if output is not None:
        if output:
            sys.stdout.write(output)
            sys.stdout.flush()
        return 0
    _load_site()
    return run(argv[2:], payload)


def _fast(event: str, host: str | None, extra: list[str], payload: dict,
          state: str) -> str | None:
    """The hook's stdout ("" for nothing) when it needs no more than the standard
    library, else None (the full hook runs)."""
    if host is None or host not in FAST_HOSTS or extra or event not in FAST_EVENTS:
        return None
    if payload.get("hook_event_name", FAST_EVENTS[event]) != FAST_EVENTS[event]:
        return None
    transcript = payload.get("transcript_path") or None
    cwd = payload.get("cwd")
    if not isinstance(cwd, str) or not cwd or not isinstance(transcript, (str, type(None))):
        return None
    # A subagent's or sidechain's hook: the host adapter's normalize() ignores those
    # (hooks/claude_code.py); leave them to it.
    if payload.get("agent_id") or payload.get("agent_type") or payload.get("isSidechain") \
            or (transcript and f"{os.sep}subagents{os.sep}" in transcript):
        return None
    if event == "prompt":
        prompt = payload.get("prompt")
        if not isinstance(prompt, str):
            return None
        if not words.names_a_subject(prompt):
            return ""  # inject.prompt_context's first rule: nothing for a generic prompt
        return _fast_recall(host, {"cwd": cwd, "transcript": transcript}, prompt, state)
    info = {"cwd": cwd, "transcript": transcript}
    key, abs_cwd, _ = _start_key(host, info)
    ready = startctx.ready(state, key, abs_cwd)
    if ready is None:
        return None
    output, sweep = ready
    _start_session(state, host, info, sweep)
    return output


def _fast_recall(host: str, info: dict, prompt: str, state: str) -> str | None:
    """A subject prompt's recall without site, where the memory stack is importable
    without it (an installed dualtrace: the memfs package sits beside this module; a
    source checkout maps it through the editable install's finder, a part of site) and
    the stored SessionStart entry still gives the memory dir and settings; else None.
    The recall is lexical (no numpy), standard library only, and what the full hook
    runs (``_inject``): only site, the host registry and ``normalize`` are left out."""
    if not os.path.isfile(os.path.join(os.path.dirname(__file__), "memfs", "__init__.py")):
        return None
    key, abs_cwd, _ = _start_key(host, info)
    known = startctx.prompt_settings(state, key, abs_cwd)
    if known is None:
        return None
    from types import SimpleNamespace

    from dualtrace.hooks import claude_code
    from dualtrace.memfs import inject

    memory_dir, values = known
    text = inject.prompt_context(memory_dir, prompt, SimpleNamespace(**values))
    return claude_code.context_output("prompt", text) if text else ""


def _load_site() -> None:
    """What ``-S`` left out, before the full hook imports anything else: site-packages,
    their .pth files (an editable install's finder: how ``dualtrace.hooks`` is found
    in a source checkout)."""
    if sys.flags.no_site:
        import site

        site.main()


def _parse_args(argv: list[str]) -> tuple[str, str | None, list[str]]:
    event, host, extra = "", None, []
    it = iter(argv)
    for arg in it:
        if arg in ("--host", "--agent"):
            host = next(it, None)
        elif arg.startswith(("--host=", "--agent=")):
            host = arg.split("=", 1)[1]
        elif not event:
            event = arg
        else:
            extra.append(arg)
    event = _EVENT_ALIASES.get(event, event.lower())
    return event, host, extra


def _registry() -> ModuleType:
    """The host registry, imported when first needed: the fast path never needs it (and
    without site, a source checkout's ``dualtrace.hooks`` is not importable)."""
    from dualtrace.hooks import registry

    return registry


def _flag(name: str) -> bool:
    return os.environ.get(name, "").strip().lower() not in ("", "0", "false", "no")


# ------------------------------------------------------------------ the work

def handle(event: str, host: str | None, extra: list[str], state: str,
           payload: dict | None = None) -> str | None:
    """Validate, queue, kick the worker. Returns text to inject (session-start/prompt)."""
    if event not in EVENTS:
        raise HookError(f"unknown hook event {event!r}")
    if event == "subagent-stop":
        return None
    if event == "notify" or (extra and host in (None, "codex")):
        # Codex's legacy notify program: the payload is the last argv, stdin is unused
        # (the one host-specific calling convention; everything else goes by the registry).
        from dualtrace.hooks import codex

        if not extra:
            raise HookError("notify: missing JSON argument")
        try:
            info = codex.from_notify(extra[-1])
        except ValueError as exc:
            raise HookError(f"notify: bad JSON argument: {exc}") from exc
        return _queue(state, "stop", "codex", info, {})
    payload = read_payload() if payload is None else payload
    host = host or _registry().detect(payload)
    try:
        adapter = _registry().get(host)
    except KeyError:
        raise HookError(f"unknown host {host!r}") from None
    info = adapter.normalize(payload, event, state)
    lines = info.pop("lines", None) or []
    # ``kept: False``: the host wrote this session's transcript after all (Letta Code's
    # own transcript.jsonl): nothing to redact or append, queue it like any host's.
    if adapter.KEEPS_OWN_TRANSCRIPT and event in KEPT_EVENTS and info.pop("kept", True):
        # dualtrace writes this host's transcript from the payloads, in the state dir,
        # so their text is redacted first, and the redactor is too slow for a hook: a
        # detached child redacts, then writes and queues in the order the hooks came.
        ticket = order_ticket(state)
        detach(state, event, lambda: _keep_in_order(state, ticket, event, host, info,
                                                    payload, lines))
        return None
    return _queue(state, event, host, info, payload)


def _keep_in_order(state: str, ticket: str, event: str, host: str, info: dict,
                   payload: dict, lines: list[dict]) -> None:
    """The detached child of a KEEPS_OWN_TRANSCRIPT hook: redact, wait for the hooks
    that came before it, append to the transcript, queue the session."""
    try:
        _claim(ticket)
        if lines:
            from dualtrace.encoder.redact import Redactor  # ~0.3 s: never in the hook

            redactor = Redactor()  # one per payload: a value found once goes everywhere
            lines = [dict(r, content=redactor.redact(str(r.get("content") or "")))
                     for r in lines]
        _wait_turn(state, ticket)
        info["transcript"], replaces = _registry().get(host).keep(state, payload, lines)
        if replaces:  # Letta: that job's lines now live in this session's file
            queue.remove(state, queue.job_id(host, replaces))
        _queue(state, event, host, info, payload)
    finally:
        try:
            os.unlink(ticket)
        except OSError:
            pass


def _queue(state: str, event: str, host: str, info: dict, payload: dict) -> str | None:
    if info.get("ignore"):
        return None
    if event == "prompt":
        return _inject(event, host, info, payload, state)
    if event == "post-tool-use":
        return None
    ready = _stored_start_text(state, host, info) if event == "session-start" else None
    if ready is None and _project_disabled(info.get("cwd")):
        return None  # (a stored text was built with these same, enabled, settings)
    session_id = info.get("session_id")
    if event == "session-start":
        _start_session(state, host, info, _registry().get(host).SWEEP_ON_START)
        if ready is not None:
            return _registry().get(host).context_output(event, ready) if ready else None
        return _inject(event, host, info, payload, state)
    if not session_id:
        raise HookError(f"{event}: payload has no session id")
    if _registry().get(host).REQUIRES_TRANSCRIPT and not info.get("transcript"):
        raise HookError(f"{event}: payload has no transcript_path")
    transcript = info.get("transcript")
    if transcript and not _registry().get(host).KEEPS_OWN_TRANSCRIPT and not os.path.isfile(transcript):
        # Queue anyway: the file may appear (Stop can fire before the first flush); the
        # worker parks the job with this reason if it never does.
        log(state, f"{event}: transcript not found yet: {transcript}")
    queue.touch(state, host=host, session_id=session_id, event=event,
                immediate=event in IMMEDIATE_EVENTS, transcript=transcript,
                cwd=info.get("cwd"), agent_id=info.get("agent_id"),
                memory_dir=_env_memory_dir(), lock_wait=LOCK_WAIT)
    ensure_worker(state)
    return None


def _start_session(state: str, host: str, info: dict, sweep: bool) -> None:
    """SessionStart's queue work: a sweep request for the host's transcripts folder
    (``sweep``: the host's SWEEP_ON_START), and a worker for any queued job."""
    transcript = info.get("transcript")
    # Sessions killed before SessionEnd: the worker compares this project's transcripts
    # with their encode records and queues the changed ones. Not asked for while the
    # folder is as the worker last accounted for it (dualtrace.sweepmark): that sweep
    # would queue nothing, and its worker would take a core from the turn.
    if transcript and sweep and not sweepmark.unchanged(
            state, host, os.path.dirname(transcript), transcript):
        folder = os.path.dirname(transcript)
        queue.touch(state, host=host, session_id=folder, event="session-start",
                    immediate=True, kind="sweep", transcript=transcript, cwd=info.get("cwd"),
                    memory_dir=_env_memory_dir(), lock_wait=LOCK_WAIT, durable=False)
        ensure_worker(state)
    elif queue.list_jobs(state):
        ensure_worker(state)


def _env_memory_dir() -> str | None:
    """DUALTRACE_MEMORY_DIR of *this* hook's environment, kept with the job: the worker
    serves every session, so it must not apply the env of whichever hook started it."""
    env = os.environ.get("DUALTRACE_MEMORY_DIR")
    return os.path.realpath(os.path.expanduser(env)) if env else None


def _project_disabled(cwd: str | None) -> bool:
    """``enabled = false`` in the project's dualtrace.toml or the user config.

    Settings are parsed (via dualtrace.config, the one resolver) only when such a
    file exists, so the common no-config case pays a few stat calls, not the import.
    """
    found = os.path.isfile(os.path.join(queue.fast_state_dir(), "config.toml"))
    if not found and cwd:
        path = os.path.abspath(cwd)
        while True:
            if os.path.isfile(os.path.join(path, "dualtrace.toml")):
                found = True
                break
            parent = os.path.dirname(path)
            if parent == path:
                break
            path = parent
    if not found:
        return False
    from dualtrace import config

    settings = config.load_settings(config.project_root(cwd) if cwd else None)
    return config.is_disabled(settings)


def _own_command() -> str:
    """How this hook was run (the absolute script path the host's settings name), for the
    text that tells the agent how to ask: a bare ``dualtrace`` may not be on its PATH."""
    import shlex

    script = os.path.abspath(sys.argv[0]) if sys.argv and sys.argv[0] else ""
    if os.path.basename(script) in ("dualtrace", "dualtrace.exe") and os.path.isfile(script):
        return shlex.quote(script)
    return "dualtrace"


def _start_key(host: str, info: dict) -> tuple[str, str, str]:
    cwd = os.path.abspath(info.get("cwd") or os.getcwd())
    command = _own_command()
    return startctx.cache_key(cwd, host, command), cwd, command


def _stored_start_text(state: str, host: str, info: dict) -> str | None:
    """The SessionStart text the worker (or an earlier hook) stored, when nothing it
    was built from changed (dualtrace.startctx); None: build it."""
    key, cwd, _ = _start_key(host, info)
    return startctx.read(state, key, cwd)


def _inject(event: str, host: str, info: dict, payload: dict, state: str) -> str | None:
    """The stdout of a session-start or prompt hook: recalled context in the JSON the
    host expects (hooks/), or None. Errors propagate: ``run`` logs them, exits 0."""
    if event == "session-start":
        # Pinned system files, the memory index, open conflicts; stored for the next
        # session's hook (and rebuilt by the worker after each commit).
        key, cwd, command = _start_key(host, info)
        text, pending = startctx.build_and_store(state, key, host, cwd, command)
        if pending:
            # The worker adds the memories related to the last session (a hybrid
            # recall this hook does not pay for) before it exits: make sure one runs.
            ensure_worker(state)
        return _registry().get(host).context_output(event, text) if text else None
    prompt = payload.get("prompt")
    if not isinstance(prompt, str):
        return None
    # The memory dir and settings as the stored SessionStart entry resolved them, while
    # their sources are unchanged: no dualtrace.config import or settings parse per prompt.
    key, cwd, _ = _start_key(host, info)
    known = startctx.prompt_settings(state, key, cwd)
    settings: object
    if known is not None:
        from types import SimpleNamespace

        memory_dir, values = known
        root, settings = memory_dir, SimpleNamespace(**values)
    else:
        from dualtrace import config  # lazy: the Stop path never loads it

        ws = config.workspace(info.get("cwd") or None)
        if config.is_disabled(ws.settings) or not ws.memory_dir.is_dir():
            return None  # never create a memory dir from a hook
        root, settings = str(ws.memory_dir), ws.settings
    from dualtrace.memfs import inject

    # Recalled State A/B memories for the prompt. Recall needs only the directory,
    # not the store (whose imports cost ~30 ms before every prompt).
    text = inject.prompt_context(root, prompt, settings)
    return _registry().get(host).context_output(event, text) if text else None


# ------------------------------------------------------------------ stdin

def read_payload(timeout: float = STDIN_TIMEOUT, cap: int = STDIN_CAP) -> dict:
    """The hook JSON object from stdin; tolerant of a BOM, strict about the shape."""
    raw, still_open = read_stdin(timeout, cap)
    text = _decode(raw)
    if not text:
        raise HookError("empty payload on stdin" + (
            f" (stdin not closed after {timeout:.1f}s)" if still_open else ""))
    try:
        data = json.loads(text)
    except ValueError as exc:
        # Only the size: the log is in the state dir, and payload text may hold secrets.
        cause = f"stdin not closed after {timeout:.1f}s; " if still_open else ""
        raise HookError(f"payload is not JSON ({cause}{exc}); {len(raw)} bytes") from exc
    if not isinstance(data, dict):
        raise HookError(f"payload is a JSON {type(data).__name__}, not an object")
    return data


def _decode(raw: bytes) -> str:
    # removeprefix, not the utf-8-sig codec: that codec is one more import per call.
    return raw.removeprefix(b"\xef\xbb\xbf").decode("utf-8", errors="replace").strip()


def _complete(chunks: list[bytes]) -> bool:
    """The bytes so far are one whole JSON object (then EOF need not be waited for: no
    prefix of an object parses as one)."""
    if not chunks or not chunks[-1].rstrip().endswith(b"}"):
        return False
    try:
        json.loads(_decode(b"".join(chunks)))
    except ValueError:
        return False
    return True


def read_stdin(timeout: float, cap: int, limit: float = STDIN_LIMIT) -> tuple[bytes, bool]:
    """Stdin until EOF, until what arrived is a complete JSON object, or until no byte
    came for ``timeout`` (``limit`` in all); ``(bytes, still_open)``. A body over
    ``cap`` is drained and rejected. A host that keeps the pipe open costs at most
    ``timeout`` after its last byte, and its payload is still used."""
    try:
        fd = sys.stdin.fileno()
    except (AttributeError, OSError, ValueError):
        return b"", False
    if os.isatty(fd):
        return b"", False
    if os.name == "nt":  # pragma: no cover - select() does not work on Windows pipes
        data = sys.stdin.buffer.read(cap + 1)
        if len(data) > cap:
            raise HookError(f"payload larger than {cap} bytes")
        return data, False
    import select

    start = time.monotonic()
    chunks: list[bytes] = []
    total = 0
    last = start
    while True:
        now = time.monotonic()
        left = min(last + timeout, start + limit) - now
        if left <= 0:
            if total > cap:
                raise HookError(f"payload of {total}+ bytes is larger than {cap}")
            return b"".join(chunks), True
        ready, _, _ = select.select([fd], [], [], left)
        if not ready:
            continue
        chunk = os.read(fd, 1 << 20)
        if not chunk:
            break
        last = time.monotonic()
        total += len(chunk)
        if total <= cap:
            chunks.append(chunk)
            if _complete(chunks):
                return b"".join(chunks), False
        else:
            chunks.clear()  # keep draining so the host's write does not fail
    if total > cap:
        raise HookError(f"payload of {total} bytes is larger than {cap}")
    return b"".join(chunks), False


# ------------------------------------------------------------------ ordered children

def order_ticket(state: str) -> str:
    """A ticket for a detached child, named by arrival time: children do their writes
    in ticket order, whatever order their (slow) redaction finishes in. Holds no text."""
    folder = os.path.join(state, ORDER_DIR)
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, f"{time.time_ns():020d}-{os.getpid()}.ticket")
    os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
    return path


def _claim(ticket: str) -> None:
    """The child writes its pid into its ticket, so a dead child's ticket is skipped."""
    fd = os.open(ticket, os.O_WRONLY | os.O_TRUNC)
    try:
        os.write(fd, str(os.getpid()).encode("ascii"))
    finally:
        os.close(fd)


def _ticket_alive(path: str, now: float) -> bool:
    try:
        with open(path, "rb") as fh:
            pid = int(fh.read().strip() or 0)
        if not pid:  # not claimed yet: its child is starting, unless it never will
            return now - os.path.getmtime(path) < 10.0
        os.kill(pid, 0)
        return True
    except ProcessLookupError:
        return False
    except PermissionError:  # a pid we may not signal exists
        return True
    except (OSError, ValueError):
        return False


def _wait_turn(state: str, ticket: str) -> None:
    """Until every earlier ticket is gone (done, or its child dead); at most ORDER_WAIT."""
    folder = os.path.join(state, ORDER_DIR)
    mine = os.path.basename(ticket)
    deadline = time.monotonic() + ORDER_WAIT
    while True:
        try:
            earlier = sorted(n for n in os.listdir(folder) if n.endswith(".ticket") and n < mine)
        except FileNotFoundError:
            return
        now = time.time()
        waiting = False
        for name in earlier:
            path = os.path.join(folder, name)
            if _ticket_alive(path, now):
                waiting = True
                break
            try:
                os.unlink(path)  # a dead child's ticket: nobody else will remove it
            except OSError:
                pass
        if not waiting:
            return
        if time.monotonic() >= deadline:
            log(state, f"gave up waiting for {name} after {ORDER_WAIT:.0f}s")
            return
        time.sleep(0.01)


# ------------------------------------------------------------------ worker + log

def ensure_worker(state: str) -> bool:
    """Start a detached worker unless one holds the worker lock. True if started."""
    lock = queue.FileLock(os.path.join(state, "worker.lock"))
    if not lock.acquire(blocking=False):
        return False  # a worker is alive; it re-scans the queue before it exits
    lock.release()
    spawn_worker(state)
    return True


def detach(state: str, event: str, work: Callable[[], object]) -> None:
    """Run ``work`` in a detached grandchild and return at once; its errors go to the
    hook log. Without fork (Windows), it runs inline."""
    if not hasattr(os, "fork"):  # pragma: no cover - Windows
        work()
        return
    sys.stdout.flush()

    def run() -> None:
        try:
            work()
        except BaseException as exc:  # noqa: BLE001 - logged, never raised
            log(state, f"{event}: {type(exc).__name__}: {exc}")
            os._exit(1)
        os._exit(0)

    _orphan(run)


def spawn_worker(state: str) -> None:
    """Start the worker so that it outlives the hook and is nobody's child."""
    env = dict(os.environ, DUALTRACE_CHILD="1", DUALTRACE_HOME=state)
    env.pop("DUALTRACE_MEMORY_DIR", None)  # per job, recorded in the job file
    args = [sys.executable, "-m", "dualtrace.worker"]
    if not hasattr(os, "fork"):  # pragma: no cover - Windows
        import subprocess

        flags = getattr(subprocess, "DETACHED_PROCESS", 0) | getattr(
            subprocess, "CREATE_NEW_PROCESS_GROUP", 0)
        subprocess.Popen(args, env=env, cwd=state, close_fds=True, creationflags=flags,
                         stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL)
        return

    def run() -> None:
        os.chdir(state)
        _lower_priority()
        os.execve(sys.executable, args, env)

    _orphan(run)


def worker_niceness() -> int:
    """How much lower than the hook's the worker's CPU priority is (DUALTRACE_WORKER_NICE,
    0-19, default WORKER_NICE): its encode must not take the cores from the agent whose
    turn it follows (the machine may have two)."""
    raw = os.environ.get("DUALTRACE_WORKER_NICE", "").strip()
    try:
        value = int(raw) if raw else WORKER_NICE
    except ValueError:
        value = WORKER_NICE
    return max(0, min(19, value))


def _lower_priority() -> None:
    step = worker_niceness()
    if step and hasattr(os, "nice"):
        try:
            os.nice(step)
        except OSError:
            pass  # not allowed here: run at the hook's priority


def _orphan(grandchild: Callable[[], None]) -> None:
    """Double fork + setsid: ``grandchild`` runs in a process of its own session that the
    hook does not wait for (the first child exits at once).
    ``grandchild`` must end in ``os._exit`` or ``os.execve``; if it raises, that process
    exits 1. Its stdin/stdout/stderr are /dev/null: the host waits for EOF on the hook's
    pipes, so anything that outlives the hook must not hold them open. Only for a
    process that exits soon (a hook, a CLI command): the first child is never reaped
    by it."""
    if os.fork() == 0:
        code = 0
        try:
            # First let go of the host's pipes (it waits for their EOF), then detach.
            devnull = os.open(os.devnull, os.O_RDWR)
            for fd in (0, 1, 2):
                os.dup2(devnull, fd)
            os.setsid()
            if os.fork() == 0:
                grandchild()
        except BaseException:  # noqa: BLE001
            code = 1
        os._exit(code)
    # Not waited for: that child only forks and exits, and the hook, which exits next,
    # has no use for its status (init reaps it). Waiting cost the SessionStart hook the
    # child's scheduling delay, ~1-15 ms on a loaded machine.


def log(state: str | None, message: str) -> None:
    """One line in ``<state>/logs/hook.log``; stderr only if even that fails."""
    try:
        state = queue.fast_state_dir() if state is None else state
        logfile.append(logfile.path(state, "hook.log"), logfile.line(message))
    except BaseException:  # noqa: BLE001 - last resort; stderr is not fed to the model
        try:
            sys.stderr.write(f"dualtrace hook: {message}\n")
        except BaseException:  # noqa: BLE001
            pass


if __name__ == "__main__":
    sys.exit(run(sys.argv[1:]))
