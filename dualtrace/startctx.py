"""The SessionStart text, kept ready: the hook prints it without building it.

Building the text (settings, the memory store, the index, session records, the MCP
registry) costs the SessionStart hook ~70 ms of imports and queries on an idle machine
and several times that under load, before every session. So the text is stored in
``<state>/session-start/<key>.json`` with a *signature* of everything it was built
from, and the hook prints it when the signature still holds:

- the memory directory and the person's own memory: file count, total size and the
  newest mtime of every file and folder (a commit, an edit, a rename, a delete or a
  ``git reset`` all change it), outside ``.git`` and ``.dualtrace``;
- the settings files: the user config, and ``dualtrace.toml`` / ``.git`` at every level
  from the cwd up (where the project root and its settings come from);
- the MCP registry (whether the text says the tools are connected) and the memory
  dir's conflict list;
- the cache key itself: cwd, host, the hook's command and every ``DUALTRACE_*``
  variable.

Anything else means a miss: the hook builds the text as before and stores it. The
worker rebuilds the stored texts of a memory directory after each commit to it, so the
next session's hook finds a fresh one. Only the worker adds the memories related to the
last session (a hybrid recall: numpy and the embedding model would cost the hook
~100 ms): a text the hook built is marked ``related: false`` and the worker, the next
time it runs, rebuilds it complete (``complete``). Texts that show open conflicts are never stored
(showing them marks them shown, which the full path does). The cached text comes from
memory files, which are redacted; the state dir gets no other text.

Imported on the hook path: standard library only, nothing at module level beyond os
and json.
"""

from __future__ import annotations

import json
import os
import zlib

from dualtrace import atomic

DIR = "session-start"
SKIP = frozenset({".git", ".dualtrace"})
MAX_FILES = 20_000  # a bigger tree is not signed (a miss every time, never a wrong hit)


def cache_key(cwd: str, host: str, command: str) -> str:
    env = sorted((k, v) for k, v in os.environ.items() if k.startswith("DUALTRACE_"))
    raw = json.dumps([os.path.abspath(cwd), host, command, env])
    return f"{zlib.crc32(raw.encode('utf-8')):08x}-{len(raw)}"


def cache_path(state: str, key: str) -> str:
    return os.path.join(state, DIR, key + ".json")


def _stat(path: str) -> list[int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return [st.st_mtime_ns, st.st_size]


def _git_mark(path: str) -> str | list[int] | None:
    """A ``.git`` as the project root sees it: a folder (its mtime moves with every git
    command, so only that it is one), a worktree's ``.git`` file (its stat), or None."""
    if os.path.isdir(path):
        return "dir"
    return _stat(path)


def _tree(root: str | None) -> list[int] | None:
    """[files, total size, newest mtime of a file or folder, a checksum of the names]
    under ``root`` (names too: a rename within one clock tick keeps every mtime)."""
    if not root:
        return None
    if not os.path.isdir(root):
        return None
    # Not the root folder's own mtime: creating .dualtrace/ (the index) moves it, and
    # anything under it that changes is seen through its own entry.
    files, size, newest, names = 0, 0, 0, 0
    stack = [root]
    while stack:
        folder = stack.pop()
        try:
            entries = list(os.scandir(folder))
        except OSError:
            continue
        for entry in entries:
            if entry.name in SKIP and folder == root:
                continue
            try:
                st = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            newest = max(newest, st.st_mtime_ns)
            names ^= zlib.crc32(entry.path.encode("utf-8", "surrogateescape"))
            if entry.is_dir(follow_symlinks=False):
                stack.append(entry.path)
            else:
                files += 1
                size += st.st_size
                if files > MAX_FILES:
                    return None
    return [files, size, newest, names]


def _ancestors(cwd: str) -> list[str]:
    path = os.path.realpath(cwd)
    out = [path]
    while True:
        parent = os.path.dirname(path)
        if parent == path:
            return out
        out.append(parent)
        path = parent


def signature(cwd: str, memory_dir: str, user_memory: str | None,
              files: list[str]) -> list | None:
    """What the text was built from, as plain JSON values (see the module docstring):
    the two trees, ``files`` (settings, the MCP registry) and the levels above the cwd.
    None when it cannot be signed (a tree too big to walk on every session)."""
    memory, own = _tree(memory_dir), _tree(user_memory)
    if memory is None or (user_memory and own is None and os.path.isdir(user_memory)):
        return None
    return [memory_dir, memory, user_memory, own, files, [_stat(f) for f in files],
            _levels(cwd)]


def _levels(cwd: str) -> list:
    return [[_stat(os.path.join(p, "dualtrace.toml")), _git_mark(os.path.join(p, ".git"))]
            for p in _ancestors(cwd)]


def _load(path: str) -> dict | None:
    """One stored entry; None when missing, unreadable or not an entry."""
    try:
        with open(path, encoding="utf-8") as fh:
            entry = json.load(fh)
    except (OSError, ValueError):
        return None
    return entry if isinstance(entry, dict) else None


def _entry_for(state: str, key: str, cwd: str) -> dict | None:
    entry = _load(cache_path(state, key))
    return entry if entry is not None and entry.get("cwd") == cwd else None


def read(state: str, key: str, cwd: str) -> str | None:
    """The stored text for this key when its signature still holds, else None."""
    entry = _valid(_entry_for(state, key, cwd), cwd)
    return None if entry is None else entry["text"]


def ready(state: str, key: str, cwd: str) -> tuple[str, bool] | None:
    """For the hook's fast path (no host module imported): the host's stdout for the
    stored text ("" when there is nothing to show) and whether the host sweeps this
    project's transcripts at session start, when the signature still holds and the
    entry has both (entries of older versions do not: None, the full path)."""
    entry = _valid(_entry_for(state, key, cwd), cwd)
    if entry is None or not isinstance(entry.get("output"), str) \
            or not isinstance(entry.get("sweep"), bool):
        return None
    return entry["output"], entry["sweep"]


def _valid(entry: dict | None, cwd: str) -> dict | None:
    """``entry`` when it has a text and what it was built from is unchanged, else None."""
    if entry is None or not isinstance(entry.get("text"), str):
        return None
    try:
        sig = entry["signature"]
        now = signature(cwd, sig[0], sig[2], sig[4])
    except (OSError, ValueError, KeyError, TypeError, IndexError):
        return None
    return entry if now is not None and now == sig else None


def prompt_settings(state: str, key: str, cwd: str) -> tuple[str, dict] | None:
    """For the prompt hook: the memory dir and the prompt settings the stored entry was
    built with, while what they were resolved from is unchanged (the settings files and
    the levels above the cwd, the key's environment); the memory tree may have changed
    (recall's index follows it). None: resolve them (dualtrace.config, ~30 ms of the
    hook's wait under load)."""
    entry = _entry_for(state, key, cwd)
    if entry is None:
        return None
    try:
        sig, values = entry["signature"], entry["prompt"]
        if [_stat(f) for f in sig[4]] != sig[5] or _levels(cwd) != sig[6]:
            return None
    except (OSError, ValueError, KeyError, TypeError, IndexError):
        return None
    memory_dir = sig[0]
    if not isinstance(memory_dir, str) or not isinstance(values, dict) \
            or not os.path.isdir(memory_dir):
        return None
    return memory_dir, values


def write(state: str, key: str, entry: dict) -> None:
    """Store one entry (cwd, host, command, memory_dir, signature, text), atomically."""
    # Not flushed: a lost entry is rebuilt on the next SessionStart.
    atomic.write_json(cache_path(state, key), entry, fsync=False)


def entries(state: str) -> list[tuple[str, dict]]:
    """Every stored entry, with its key (for the worker's rebuild)."""
    folder = os.path.join(state, DIR)
    try:
        names = sorted(n for n in os.listdir(folder) if n.endswith(".json"))
    except FileNotFoundError:
        return []
    out = []
    for name in names:
        entry = _load(os.path.join(folder, name))
        if entry is not None:
            out.append((name[:-5], entry))
    return out


# ------------------------------------------------------------------ building (not on the hit path)

def _log_warnings(state: str, warnings: tuple[str, ...]) -> None:
    """A config file's unknown keys, in the hook log: a hook prints nothing of its own,
    so this is where a typo shows (the CLI prints the same lines as warnings)."""
    if not warnings:
        return
    from dualtrace import logfile

    try:
        logfile.append(logfile.path(state, "hook.log"),
                       "".join(logfile.line(f"settings: {w}") for w in warnings))
    except OSError:
        pass  # the hook never fails for its log


def build(state: str, host: str, cwd: str, command: str, memory_dir: str | None = None,
          *, related: bool = False,
          for_agent: bool = True) -> tuple[str | None, list | None, dict]:
    """The SessionStart text for ``cwd`` as the hook shows it (None: nothing to show),
    the signature to store it under (None: do not store it), and the settings the prompt
    hook needs (``prompt_settings``). ``related``: with the memories recalled for the
    last session's request (the worker's build). ``for_agent``: the text is printed to an
    agent now; only then are open conflicts marked shown (a worker's rebuild that nobody
    reads must not use up their one showing)."""
    from dualtrace import config
    from dualtrace.memfs import inject

    ws = config.workspace(cwd or None, memory_dir=memory_dir)
    _log_warnings(state, ws.settings.warnings)
    if config.is_disabled(ws.settings):
        return None, None, {}
    prompt = {"prompt_chars": ws.settings.prompt_chars, "stale_days": ws.settings.stale_days}
    user_memory = config.user_memory_dir(ws.settings)
    if not ws.memory_dir.is_dir():
        # Nothing stored for this project yet (never create a memory dir from a hook);
        # the person's own preferences still follow them into it.
        return inject.own_preferences_context(user_memory, ws.settings), None, prompt
    from dualtrace.hooks.mcp_registration import REGISTRY, available
    from dualtrace.memfs.conflicts import FILE as CONFLICTS
    from dualtrace.memfs.conflicts import open_conflicts
    from dualtrace.memfs.store import MemoryStore

    store = MemoryStore(ws.memory_dir, project=ws.project, create=False)
    files = [os.path.join(state, config.USER_CONFIG), os.path.join(state, REGISTRY),
             str(store.state_path / CONFLICTS)]
    # Signed before reading: a change made while the text is built makes the next
    # read miss, never hit a text older than the files.
    sig = signature(cwd, str(ws.memory_dir), str(user_memory) if user_memory else None,
                    files)
    if open_conflicts(store):
        sig = None  # showing them marks them shown: only the full path does that
    text = inject.session_start_context(
        store, ws.settings, mcp_tools=available(host, ws.root), user_memory=user_memory,
        command=command, related=related, mark_shown=for_agent)
    return text, sig, prompt


def build_and_store(state: str, key: str, host: str, cwd: str, command: str,
                    memory_dir: str | None = None, *,
                    related: bool = False, for_agent: bool = True) -> tuple[str | None, bool]:
    """(the text, whether the stored text waits for the worker's related memories)."""
    text, sig, prompt = build(state, host, cwd, command, memory_dir, related=related,
                              for_agent=for_agent)
    pending = False
    if text is not None and sig is not None:
        # Without session records there is nothing to relate: complete as it is.
        pending = not related and _has_records(sig[0])
        from dualtrace.hooks import registry

        adapter = registry.get(host)
        output = adapter.context_output("session-start", text) if text else ""
        write(state, key, {"cwd": cwd, "host": host, "command": command,
                           "memory_dir": sig[0], "signature": sig, "text": text,
                           "related": not pending, "prompt": prompt, "output": output,
                           "sweep": bool(adapter.SWEEP_ON_START)})
    return text, pending


def _has_records(memory_dir: str) -> bool:
    from dualtrace.memfs.sessions import LOCAL_RECORDS_DIR, RECORDS_DIR

    return any(os.path.isdir(os.path.join(memory_dir, d))
               for d in (RECORDS_DIR, LOCAL_RECORDS_DIR))


def refresh(state: str, memory_dir: str | None = None) -> int:
    """Rebuild stored texts complete (with the related memories), so the next session's
    hook finds them fresh: those of ``memory_dir`` (the worker, after a commit to it), or
    with None the ones a hook built without the related memories (``complete``).
    Returns how many were rebuilt."""
    done = 0
    for key, entry in entries(state):
        if memory_dir is None:
            if entry.get("related") is not False:
                continue
        elif entry.get("memory_dir") != memory_dir:
            continue
        try:
            build_and_store(state, key, str(entry["host"]), str(entry["cwd"]),
                            str(entry["command"]), str(entry["memory_dir"]), related=True,
                            for_agent=False)
            done += 1
        except (KeyError, OSError):
            continue
    return done


def pending(state: str) -> bool:
    """Whether a stored text waits for the worker's related memories."""
    return any(entry.get("related") is False for _key, entry in entries(state))


def complete(state: str) -> int:
    """Rebuild, with the related memories, every stored text a hook built without them."""
    return refresh(state, None)
