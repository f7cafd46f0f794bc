"""``dualtrace sync``: fetch, integrate, push the memory directory's git repository.

The distributed engine is git and its remotes; this module adds what makes sharing
a memory safe:

- **Structural merges.** Diverged histories are merged off the work tree: a
  temporary index gets git's three-way ``read-tree``, every path both sides changed
  is merged in-process by :mod:`dualtrace.memfs.merge` (no subprocess per file, no
  conflict marker ever), and the merge commit is built with ``write-tree`` /
  ``commit-tree``. The work tree then moves by a fast-forward only.
- **The same merge for plain git.** ``.gitattributes`` (committed: every clone gets
  it) routes ``*.md`` to the ``dualtrace`` merge driver, and each clone's git config
  defines it as ``dualtrace merge-file %O %A %B %P``; a person's own ``git pull``
  merges memories the same way.
- **Crash safety.** Fetching and building the merge commit touch no branch, index or
  file. The one step that changes the work tree (the fast-forward) is journaled in
  ``.dualtrace/sync-journal.json``; a sync killed during it is undone by the next
  sync (files the interrupted checkout wrote are put back) and then completed.
- **Derived state.** The search index is updated for the paths the integration
  changed; what the merge could not merge becomes an open conflict for SessionStart.

The local steps (merge, fast-forward, index) run under the store lock, so an encoder never
commits halfway through them; fetch and push run outside it (under a sync lock of their
own), so a slow network never makes an encoder's commit wait.
"""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass, field
from datetime import date as _date
from pathlib import Path

from dualtrace.atomic import write_text as atomic_write_text
from dualtrace.errors import DualtraceError
from dualtrace.memfs.layout import FACT_FOLDERS, NESTED, RECORDS

DRIVER = "dualtrace"
ATTRIBUTES = ".gitattributes"
ATTRIBUTES_LINES = (
    "# dualtrace: memory files merge structurally (dualtrace merge-file), never with markers",
    "*.md merge=dualtrace",
)
JOURNAL = "sync-journal.json"
STATUS = "sync.json"
SYNC_TRAILER = "Dualtrace-Sync"
EMPTY_TREE = "4b825dc642cb6eb9a060e54bf8d69288fbee4904"
MAX_ROUNDS = 4  # fetch/merge/push again when someone pushed in between


class SyncError(DualtraceError):
    """A sync that could not complete; ``offline`` when the remote was unreachable;
    ``refused`` when nothing changes until the person acts (a remote that is not this
    memory, a branch to pick, a merge to finish): retrying on a timer cannot help."""

    def __init__(self, message: str, *, offline: bool = False, refused: bool = False) -> None:
        super().__init__(message)
        self.offline = offline
        self.refused = refused


@dataclass
class SyncReport:
    remote: str
    branch: str
    remote_branch: str = ""    # the remote's branch it synced with (usually ``branch``)
    incoming: int = 0          # commits integrated from the remote
    outgoing: int = 0          # commits the remote did not have before the push
    merged: list[str] = field(default_factory=list)      # files merged structurally
    conflicts: list[str] = field(default_factory=list)   # what could not be merged
    head: str = ""
    pushed: bool = False
    recovered: str | None = None   # what an interrupted earlier sync left and was undone
    took_ms: float = 0.0

    def to_dict(self) -> dict:
        return asdict(self)


# ------------------------------------------------------------------ git plumbing


def _env(extra: dict[str, str] | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")
           or k in ("GIT_SSH", "GIT_SSH_COMMAND", "GIT_ASKPASS", "GIT_EXEC_PATH",
                    "GIT_SSL_CAINFO", "GIT_SSL_CAPATH", "GIT_CONFIG_NOSYSTEM")}
    # A background sync must never wait for a password or a host-key prompt.
    env["GIT_TERMINAL_PROMPT"] = "0"
    env.setdefault("GIT_SSH_COMMAND", "ssh -o BatchMode=yes")
    env["LC_ALL"] = "C"
    if extra:
        env.update(extra)
    return env


class Git:
    def __init__(self, root: Path, author: tuple[str, str]) -> None:
        self.root = root
        self.author = author

    def run(self, *args: str, input: bytes | None = None, check: bool = True,
            env: dict[str, str] | None = None) -> subprocess.CompletedProcess[bytes]:
        proc = subprocess.run(["git", *args], cwd=self.root, input=input, capture_output=True,
                              env=_env(env), timeout=600)
        if check and proc.returncode != 0:
            message = proc.stderr.decode("utf-8", "replace").strip() or \
                proc.stdout.decode("utf-8", "replace").strip()
            raise SyncError(f"git {args[0]} failed in {self.root}: {' '.join(message.split())[:300]}")
        return proc

    def out(self, *args: str, **kw) -> str:
        return self.run(*args, **kw).stdout.decode("utf-8", "replace").strip()

    def ok(self, *args: str) -> bool:
        return self.run(*args, check=False).returncode == 0

    def rev(self, ref: str) -> str | None:
        proc = self.run("rev-parse", "-q", "--verify", ref + "^{commit}", check=False)
        return proc.stdout.decode().strip() or None if proc.returncode == 0 else None

    def author_env(self) -> dict[str, str]:
        name, email = self.author
        return {"GIT_AUTHOR_NAME": name, "GIT_AUTHOR_EMAIL": email,
                "GIT_COMMITTER_NAME": name, "GIT_COMMITTER_EMAIL": email}


# ------------------------------------------------------------------ setup


def driver_command() -> str:
    """The merge driver as git runs it (through a shell): this interpreter, absolutely."""
    return f"{shlex.quote(sys.executable)} -m dualtrace merge-file %O %A %B %P"


def ensure_merge_driver(store) -> bool:
    """Register the driver in this clone's git config and in .gitattributes (committed).

    Idempotent and cheap when already done; returns True when it changed something.
    """
    git = Git(store.root, store.author)
    changed = False
    key = f"merge.{DRIVER}.driver"
    if _config_value(store.root, f'merge "{DRIVER}"', "driver") != driver_command():
        git.run("config", "--local", key, driver_command())
        git.run("config", "--local", f"merge.{DRIVER}.name",
                "dualtrace structural merge of memory files")
        changed = True
    path = store.root / ATTRIBUTES
    try:
        current = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        current = ""
    if ATTRIBUTES_LINES[1] not in current.splitlines():
        text = current + ("" if not current or current.endswith("\n") else "\n")
        atomic_write_text(path, text + "\n".join(ATTRIBUTES_LINES) + "\n")
        store.commit([ATTRIBUTES], "mem: register the dualtrace merge driver for memory files\n")
        changed = True
    return changed


def _git_config(root: Path):
    """.git/config read as INI (no git process); an unreadable one reads as empty."""
    import configparser

    parser = configparser.RawConfigParser(strict=False, interpolation=None)
    try:
        parser.read(root / ".git" / "config", encoding="utf-8")
    except (OSError, configparser.Error):
        return configparser.RawConfigParser()
    return parser


def _config_value(root: Path, section: str, key: str) -> str | None:
    value = _git_config(root).get(section, key, fallback=None)
    return None if value is None else value.strip()


def _branch(root: Path) -> str | None:
    try:
        head = (root / ".git" / "HEAD").read_text(encoding="utf-8").strip()
    except OSError:
        return None
    prefix = "ref: refs/heads/"
    return head[len(prefix):] if head.startswith(prefix) else None


def remotes(root: Path) -> list[tuple[str, str]]:
    """(name, url) of the memory repository's remotes, read from .git/config (no git)."""
    parser = _git_config(root)
    out = []
    for section in parser.sections():
        if section.startswith('remote "') and section.endswith('"'):
            out.append((section[8:-1], parser.get(section, "url", fallback="")))
    return out


# Transports git has built in; another scheme needs a ``git-remote-<scheme>`` helper.
_SCHEMES = frozenset({"ssh", "git", "http", "https", "ftp", "ftps", "file"})


def _has_remote_helper(scheme: str) -> bool:
    import shutil

    if shutil.which(f"git-remote-{scheme}"):
        return True
    proc = subprocess.run(["git", "--exec-path"], capture_output=True, text=True, env=_env(),
                          check=False)
    return proc.returncode == 0 and (Path(proc.stdout.strip()) / f"git-remote-{scheme}").exists()


def _local_repository(path: Path) -> bool:
    """A git repository (bare or with a work tree) right at ``path``, not a folder inside one."""
    if (path / ".git").exists():
        return True
    return (path / "HEAD").is_file() and (path / "objects").is_dir() and (path / "refs").is_dir()


def check_remote_url(url: str, root: Path | None = None) -> str:
    """The remote URL as it will be stored, or a DualtraceError saying what is wrong.

    No network: a remote can be added offline. What can be checked without one is:
    something was given, it is one line and not an option, a URL names a transport git
    has and a host and a path, and a local path (or ``file://`` URL) is a git repository
    that is not the memory directory itself. A local path is made absolute where the
    person typed it (git would resolve it against the memory repository).
    """
    import re

    given = url.strip()
    if not given:
        raise DualtraceError("the remote URL is empty; give the path or URL of the shared "
                             "memory repository (e.g. `dualtrace remote add "
                             "git@github.com:team/memory.git`)")
    if any(ord(c) < 32 or ord(c) == 127 for c in given):
        raise DualtraceError(f"the remote URL {given!r} contains a control character "
                             "(a pasted newline?); give it on one line")
    if given.startswith("-"):
        raise DualtraceError(f"the remote URL {given!r} starts with '-' and would be read as "
                             "an option; give a path or URL")
    local: Path | None = None
    scheme = re.match(r"([A-Za-z][A-Za-z0-9+.-]*)://(.*)", given)
    if scheme:
        name, rest = scheme.group(1).lower(), scheme.group(2)
        if name == "file":
            local = Path(rest or "/")
        else:
            if name not in _SCHEMES and not _has_remote_helper(name):
                raise DualtraceError(f"the remote URL {given!r} uses {name}://, a transport "
                                     "git does not have (ssh://, https://, git://, file:// "
                                     "or a path)")
            host, _, path = rest.partition("/")
            if not host.rpartition("@")[2] or not path.strip("/"):
                raise DualtraceError(f"the remote URL {given!r} needs a host and a repository "
                                     f"path (e.g. {name}://host/team/memory.git)")
            return given
    elif "::" in given and not Path(given).expanduser().exists():
        helper, _, address = given.partition("::")   # <transport>::<address>, a remote helper
        if not helper or not address or not _has_remote_helper(helper):
            raise DualtraceError(f"the remote URL {given!r} names no remote helper git has "
                                 f"(git-remote-{helper or '?'})")
        return given
    elif ":" in given.split("/", 1)[0] and not Path(given).expanduser().exists():
        host, _, path = given.partition(":")     # scp-like [user@]host:path
        if not host.rpartition("@")[2] or not path.strip("/"):
            raise DualtraceError(f"the remote URL {given!r} needs a host and a repository "
                                 "path (e.g. git@github.com:team/memory.git)")
        return given
    else:
        local = Path(given)
    path = local.expanduser()
    path = path.resolve() if path.exists() else path.absolute()
    if not path.is_dir():
        raise DualtraceError(f"the remote {given!r} is not a URL and {path} is not a folder; "
                             f"create the shared repository first (`git init --bare {path}`) "
                             "or give its URL")
    if not _local_repository(path):
        raise DualtraceError(f"the remote {path} is not a git repository; create one there "
                             f"(`git init --bare {path}`) or give the right path")
    if root is not None and path == Path(root).resolve():
        raise DualtraceError(f"the remote {path} is the memory directory itself; give the "
                             "shared repository's path or URL")
    return given if scheme else str(path)


def probe_remote(url: str, timeout: float = 20.0) -> str | None:
    """``git ls-remote`` of ``url`` once: None when git can read it, else git's reason
    in one line (no prompt: a background-safe environment, as for a sync)."""
    try:
        proc = subprocess.run(["git", "ls-remote", "--heads", "--", url], capture_output=True,
                              env=_env(), timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        return f"no answer within {timeout:.0f}s"
    except OSError as exc:
        return str(exc)
    if proc.returncode == 0:
        return None
    text = proc.stderr.decode("utf-8", "replace").strip() or f"git exited {proc.returncode}"
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    return (lines[0] if lines else text)[:300].removeprefix("fatal: ")


def check_remote_name(name: str) -> str:
    proc = subprocess.run(["git", "check-ref-format", f"refs/remotes/{name}/x"],
                          capture_output=True, env=_env(), check=False)
    if not name or name.startswith("-") or proc.returncode != 0:
        raise DualtraceError(f"{name!r} is not a valid remote name (use letters, digits, "
                             "'-' or '_', e.g. --name team)")
    return name


def add_remote(store, url: str, name: str = "origin") -> None:
    """Add remote ``name`` (validated by ``check_remote_url``) and register the merge
    driver; on a bad URL or name nothing is changed."""
    git = Git(store.root, store.author)
    url = check_remote_url(url, store.root)
    check_remote_name(name)
    if any(n == name for n, _ in remotes(store.root)):
        raise DualtraceError(f"the memory repository already has a remote named {name!r}; "
                             f"pick another name with --name, or `git -C {store.root} remote "
                             f"set-url {name} URL`")
    with store.lock():
        git.run("remote", "add", "--", name, url)
        ensure_merge_driver(store)


def pick_remote(root: Path, wanted: str | None) -> str:
    names = [n for n, _ in remotes(root)]
    if wanted:
        if wanted not in names:
            raise DualtraceError(f"no remote named {wanted!r} in {root} "
                                 f"(remotes: {', '.join(names) or 'none'})")
        return wanted
    if not names:
        raise DualtraceError(f"the memory repository {root} has no remote; add one with "
                             "`dualtrace remote add URL`")
    return "origin" if "origin" in names else names[0]


# ------------------------------------------------------------------ status file


def read_status(root: Path) -> dict:
    try:
        data = json.loads((root / ".dualtrace" / STATUS).read_text(encoding="utf-8"))
        return data if isinstance(data, dict) else {}
    except (OSError, ValueError):
        return {}


def _write_status(root: Path, **updates: object) -> None:
    data = read_status(root)
    data.update(updates)
    path = root / ".dualtrace" / STATUS
    try:  # replace, without fsync: a status line is not worth a disk flush per sync
        atomic_write_text(path, json.dumps(data, indent=1) + "\n", fsync=False)
    except OSError:
        pass  # status is a convenience; the sync itself stands


def status_line(root: Path, mode: str, job: dict | None, now: float | None = None) -> str:
    """``dualtrace status``'s sync line: mode, remote, last success, offline backoff."""
    now = time.time() if now is None else now
    names = [n for n, _ in remotes(root)]
    if not names:
        return "sync:       off (no remote; share this memory with `dualtrace remote add URL`)"
    how = "after each encode" if mode == "after-encode" else \
        ("by hand (`dualtrace sync`)" if mode == "off" else f"unknown mode {mode!r}, by hand")
    info = read_status(root)
    head = f"sync:       {how} with {info.get('remote') or names[0]}"

    def ago(stamp: object) -> str:
        try:
            when = float(str(stamp))
        except ValueError:
            return "at an unknown time"
        seconds = max(0, int(now - when))
        if seconds < 90:
            return f"{seconds}s ago"
        if seconds < 5400:
            return f"{seconds // 60} min ago"
        return time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(when))

    parts = []
    if info.get("last_error") and info.get("refused"):
        # Not retried: the worker stops syncing after encodes until a sync by hand works.
        parts.append(f"REFUSED {ago(info.get('last_attempt') or now)}: {info['last_error']}; "
                     "not retried: fix that, then run `dualtrace sync`")
    elif info.get("last_error"):
        state = "OFFLINE" if info.get("offline") else "FAILING"
        failures = int(info.get("failures") or 1)
        parts.append(f"{state}: {failures} failed attempt{'s' if failures > 1 else ''}, last "
                     f"{ago(info.get('last_attempt') or now)}: {info['last_error'][:120]}")
        if job and job.get("status") == "pending":
            wait = float(job.get("not_before") or 0) - now
            parts.append("next try " + (f"in {int(wait // 60) + 1} min" if wait > 0 else
                                        "when the worker runs"))
    if info.get("last_ok"):
        parts.append(f"last ok {ago(info['last_ok'])} ({int(info.get('incoming') or 0)} in, "
                     f"{int(info.get('outgoing') or 0)} out)")
    elif not info.get("last_error"):
        parts.append("never synced")
    if job and job.get("status") == "pending" and not info.get("last_error"):
        parts.append("a sync is queued")
    return head + "; " + "; ".join(parts)


# ------------------------------------------------------------------ the sync


def _hold(phase: str) -> None:
    """Fault injection for tests: DUALTRACE_SYNC_HOLD=<phase>:SECONDS sleeps at a phase
    (fetched, merged, checkout, integrated, pushing) so a test can SIGKILL the sync there."""
    spec = os.environ.get("DUALTRACE_SYNC_HOLD", "")
    if spec.startswith(phase + ":"):
        sys.stderr.write(f"dualtrace sync: holding at {phase}\n")
        sys.stderr.flush()
        time.sleep(float(spec.split(":", 1)[1]))


def sync(store, remote: str | None = None, *, today: str | None = None,
         allow_unrelated: bool = False) -> SyncReport:
    """Fetch, integrate and push ``store``'s memory repository; see the module docstring.

    ``allow_unrelated``: the remote's memory history shares no commit with this one and
    both hold memories (a memory started on two machines, joined later): merge them.
    Without it that sync is refused, and a remote that is not a memory repository is
    refused always; a refused sync leaves refs, files and index as they were.
    """
    started = time.perf_counter()
    root = store.root
    now = time.time()
    try:
        name = pick_remote(root, remote)
    except DualtraceError as exc:  # no remote, or not the one the config names
        _write_status(root, remote=remote or "", last_attempt=now, last_error=str(exc),
                      offline=False, refused=True,
                      failures=int(read_status(root).get("failures") or 0) + 1)
        raise SyncError(str(exc), refused=True) from exc
    git = Git(root, store.author)
    try:
        with _sync_lock(store):
            report = _sync_rounds(store, git, name, today or _date.today().isoformat(),
                                  allow_unrelated)
    except SyncError as exc:
        _write_status(root, remote=name, last_attempt=now, last_error=str(exc),
                      offline=exc.offline, refused=exc.refused,
                      failures=int(read_status(root).get("failures") or 0) + 1)
        raise
    report.took_ms = round((time.perf_counter() - started) * 1000, 1)
    _write_status(root, remote=name, last_attempt=now, last_ok=time.time(), last_error=None,
                  offline=False, refused=False, failures=0, head=report.head,
                  incoming=report.incoming,
                  outgoing=report.outgoing, conflicts=len(report.conflicts))
    return report


def _refs(git: Git, *patterns: str) -> dict[str, str]:
    """refname -> sha for the refs under ``patterns`` (one process)."""
    out = git.out("for-each-ref", "--format=%(objectname) %(refname)", *patterns)
    return {ref: sha for sha, _, ref in (line.partition(" ") for line in out.splitlines()) if ref}


def _stored_refs(git: Git, root: Path, prefix: str) -> dict[str, str]:
    """refname -> sha of the (non-symbolic) refs under ``prefix``: from ``.git``'s files
    (no process on the path every sync takes), else from git."""
    from dualtrace.memfs.gitrepo import stored_refs

    found = stored_refs(root, prefix)
    if found is None:
        found = {ref: sha for ref, sha in _refs(git, prefix).items() if ref != prefix + "HEAD"}
    return found


def _restore_refs(git: Git, prefix: str, before: dict[str, str]) -> None:
    """Put the refs under ``prefix`` back as they were (a refused sync fetched them)."""
    now = {ref: sha for ref, sha in _refs(git, prefix).items() if ref != prefix + "HEAD"}
    lines = [f"delete {ref} {sha}\n" for ref, sha in now.items() if ref not in before]
    lines += [f"update {ref} {sha}\n" for ref, sha in before.items() if now.get(ref) != sha]
    if lines:
        git.run("update-ref", "--stdin", input="".join(lines).encode("utf-8"))


def _remote_branch(root: Path, remote: str, branch: str, names: list[str]) -> str:
    """The remote branch that holds this memory: the branch's configured upstream on
    ``remote``, else the one of the same name, else (a remote whose default branch has
    another name) the remote's only branch; a remote with no branch gets ours."""
    parser = _git_config(root)
    section = f'branch "{branch}"'
    merge = parser.get(section, "merge", fallback="").strip()
    if parser.get(section, "remote", fallback="").strip() == remote and \
            merge.startswith("refs/heads/") and len(merge) > len("refs/heads/"):
        return merge[len("refs/heads/"):]
    if branch in names or not names:
        return branch
    if len(names) == 1:
        return names[0]
    shown = ", ".join(sorted(names)[:6]) + (", ..." if len(names) > 6 else "")
    raise SyncError(f"{remote} has no branch '{branch}' (it has {shown}); nothing was merged "
                    f"or pushed: pick the branch that holds this memory with `git -C {root} "
                    f"branch --set-upstream-to {remote}/BRANCH`, then sync again", refused=True)


def _sync_rounds(store, git: Git, remote: str, today: str,
                 allow_unrelated: bool = False) -> SyncReport:
    """The sync itself, with the sync lock held. The store lock (which an encode's
    commit needs) is held for the local steps only, never across the network: a slow
    or hung fetch or push must not make the worker's commit wait (and time out)."""
    root = store.root
    with store.lock():
        # Open the repository before anything is written: a plain clone with no branch
        # checked out takes its remote's branch there (MemoryRepo), or stops.
        _ = store.git
        branch = _branch(root)
        if not branch:
            raise SyncError(f"the memory repository {root} has a detached HEAD; check out a "
                            "branch (e.g. `git switch main`) and retry", refused=True)
        report = SyncReport(remote=remote, branch=branch, remote_branch=branch)
        report.recovered = _recover(store, git)
        _preflight(git, root)
    prefix = f"refs/remotes/{remote}/"
    registered = False
    for _round in range(MAX_ROUNDS):
        # What the fetch is about to change, so that a refused sync can put it back.
        # Only syncs write these refs, and the sync lock keeps them one at a time.
        before = _stored_refs(git, root, prefix)
        proc = git.run("fetch", "--quiet", "--no-tags", "--prune", remote,
                       f"+refs/heads/*:{prefix}*", check=False)
        if proc.returncode != 0:
            why = " ".join(proc.stderr.decode("utf-8", "replace").split())[:300]
            raise SyncError(f"cannot fetch from {remote}: {why}", offline=True)
        _hold("fetched")
        with store.lock():
            _preflight(git, root)   # lock -> re-check: git may have started a merge since
            # Both tips in one process (this runs on every sync, most of them no-ops).
            shas = _refs(git, f"refs/heads/{branch}", prefix)
            ours = shas.get(f"refs/heads/{branch}")
            if ours is None:
                raise SyncError(f"the memory repository {root} has no commits yet")
            names = [r[len(prefix):] for r in shas
                     if r.startswith(prefix) and r != prefix + "HEAD"]
            try:
                report.remote_branch = _remote_branch(root, remote, branch, names)
                tracking = prefix + report.remote_branch
                theirs = shas.get(tracking)
                base = None
                if theirs is not None and theirs != ours:
                    base = git.out("merge-base", ours, theirs,
                                   check=False).split("\n")[0] or None
                    if base is None:
                        _vet_unrelated(git, root, remote, report.remote_branch, ours, theirs,
                                       allow_unrelated)
            except SyncError:
                _restore_refs(git, prefix, before)
                raise
            if not registered:
                # After the checks: a refused sync commits and configures nothing.
                registered = True
                if ensure_merge_driver(store):
                    ours = git.rev(f"refs/heads/{branch}") or ours
                    if theirs is not None:   # ours moved on by one commit: its base too
                        base = git.out("merge-base", ours, theirs,
                                       check=False).split("\n")[0] or None
            target = ours
            if theirs is not None and theirs != ours:
                if base == ours:
                    target = theirs
                elif base != theirs:
                    target, merged, conflicts = _merge_commit(
                        store, git, base, ours, theirs, f"{remote}/{report.remote_branch}",
                        today)
                    report.merged += [p for p in merged if p not in report.merged]
                    report.conflicts += conflicts
                _hold("merged")
                if target != ours:
                    report.incoming += int(git.out("rev-list", "--count", f"{ours}..{theirs}"))
                    _fast_forward(store, git, ours, target)
                    _after_integrate(store, git, ours, target, report.conflicts, today)
            _hold("integrated")
            report.head = target
            if theirs == target:
                report.pushed = False
                _remember_upstream(git, root, remote, report.branch, report.remote_branch)
                return report
            outgoing = int(git.out("rev-list", "--count", target if theirs is None
                                   else f"{theirs}..{target}"))
            # Taken as pushed before the lock goes: an encode that commits while the push
            # is under way must not amend a commit that is leaving (amendable() asks the
            # remote-tracking refs). Put back below if the push fails; a kill is healed
            # by the next sync's fetch, which rewrites this ref.
            git.run("update-ref", tracking, target)
        _hold("pushing")
        push = git.run("push", "--quiet", "--no-verify", remote,
                       f"{target}:refs/heads/{report.remote_branch}", check=False)
        if push.returncode == 0:
            report.outgoing = outgoing
            report.pushed = True
            _remember_upstream(git, root, remote, report.branch, report.remote_branch)
            if not names:
                _point_head(root, remote, report.remote_branch)
            return report
        if theirs is None:
            git.run("update-ref", "-d", tracking, check=False)
        else:
            git.run("update-ref", tracking, theirs, check=False)
        why = " ".join(push.stderr.decode("utf-8", "replace").split())
        if "rejected" not in why and "fetch first" not in why and "non-fast-forward" not in why:
            raise SyncError(f"cannot push to {remote}: {why[:300]}", offline=True)
        # Someone pushed since our fetch: fetch and integrate again (never a force push).
    raise SyncError(f"{remote} kept moving: gave up after {MAX_ROUNDS} fetch/push rounds")


def _point_head(root: Path, remote: str, branch: str) -> None:
    """After the first push to an empty local bare repository whose HEAD names a branch
    it does not have (`git init --bare` says master; dualtrace pushes main), point HEAD
    at the pushed branch, so a teammate's `git clone` checks the memory out. Hosting
    services do this themselves on a first push; a remote elsewhere is left alone."""
    url = dict(remotes(root)).get(remote, "")
    path = Path(url[len("file://"):] if url.startswith("file://") else url)
    if "://" in url and not url.startswith("file://"):
        return
    try:
        head = (path / "HEAD").read_text(encoding="utf-8").strip()
    except OSError:
        return
    if (path / ".git").exists() or not head.startswith("ref: refs/heads/") or \
            head == f"ref: refs/heads/{branch}":
        return
    bare = Git(path, ("dualtrace", "dualtrace@localhost"))
    if bare.rev(head[len("ref: "):]) is None:   # HEAD names no branch there: ours then
        bare.run("symbolic-ref", "HEAD", f"refs/heads/{branch}", check=False)


@contextlib.contextmanager
def _sync_lock(store) -> Iterator[None]:
    """One sync of a memory directory at a time (the worker's and a person's)."""
    from filelock import FileLock, Timeout

    store.state_path.mkdir(parents=True, exist_ok=True)
    lock = FileLock(str(store.state_path / "sync.lock"), timeout=store.lock_timeout,
                    thread_local=False)
    try:
        lock.acquire()
    except Timeout:
        raise SyncError(f"another sync of {store.root} has been running for over "
                        f"{store.lock_timeout:.0f}s; let it finish, then retry") from None
    try:
        yield
    finally:
        lock.release()


def _remember_upstream(git: Git, root: Path, remote: str, branch: str,
                       remote_branch: str) -> None:
    """A remote branch of another name becomes the branch's upstream, so later syncs (and
    a person's `git pull`) keep using it even when the remote gains branches."""
    if remote_branch == branch:
        return
    parser = _git_config(root)
    section = f'branch "{branch}"'
    if parser.get(section, "remote", fallback="").strip() == remote and \
            parser.get(section, "merge", fallback="").strip() == f"refs/heads/{remote_branch}":
        return
    git.run("config", "--local", f"branch.{branch}.remote", remote)
    git.run("config", "--local", f"branch.{branch}.merge", f"refs/heads/{remote_branch}")


# Top-level names a memory repository's tree may hold folders under (docs/PROTOCOL.md §2).
_MEMORY_TOP_FOLDERS = frozenset(set(FACT_FOLDERS) | set(NESTED) | {RECORDS, "archive"})
_BOOKKEEPING = frozenset({".gitignore", ".gitattributes"})


def _vet_unrelated(git: Git, root: Path, remote: str, remote_branch: str, ours: str,
                   theirs: str, allow: bool) -> None:
    """The remote's branch shares no commit with ours: go on only when it is a memory
    repository and joining loses nothing or was asked for; else a SyncError saying what
    was found and what to do. Runs only on this rare path (no cost to a normal sync)."""
    label = f"{remote}/{remote_branch}"
    top = _top_entries(git, theirs)
    foreign = sorted(name for name, kind in top.items()
                     if kind == "tree" and name not in _MEMORY_TOP_FOLDERS)
    ignore = git.run("cat-file", "blob", f"{theirs}:.gitignore", check=False)
    marked = ignore.returncode == 0 and ".dualtrace/" in ignore.stdout.decode(
        "utf-8", "replace").split()
    fix = (f"if {remote} is the wrong remote, `git -C {root} remote set-url {remote} URL` "
           "points it at the right one")
    if foreign or not marked:
        found = (f"it holds {', '.join(foreign[:3])}{', ...' if len(foreign) > 3 else ''}"
                 if foreign else "its .gitignore does not list .dualtrace/")
        raise SyncError(f"{label} is not a dualtrace memory repository ({found}) and shares no "
                        f"history with this memory; nothing was merged or pushed; {fix}", refused=True)
    theirs_count = _memory_count(git, theirs, top)
    ours_count = _memory_count(git, ours, _top_entries(git, ours))
    if allow or not theirs_count or not ours_count:
        return  # joining an empty memory, or an empty memory joining: nothing to mix up
    raise SyncError(f"{label} is another memory ({theirs_count} memory files) with no commit in "
                    f"common with this one ({ours_count}); nothing was merged or pushed; to join "
                    f"the two, `dualtrace sync --allow-unrelated` merges both and loses "
                    f"nothing; {fix}", refused=True)


def _top_entries(git: Git, commit: str) -> dict[str, str]:
    """name -> object type (blob, tree, commit) of the top of ``commit``'s tree."""
    out = git.run("ls-tree", "-z", commit).stdout.decode("utf-8", "surrogateescape")
    entries = {}
    for entry in filter(None, out.split("\0")):
        meta, _, name = entry.partition("\t")
        entries[name] = meta.split()[1]
    return entries


def _memory_count(git: Git, commit: str, top: dict[str, str]) -> int:
    """Markdown files under the memory folders of ``commit`` (0: a fresh memory)."""
    folders = [n for n, kind in top.items() if kind == "tree" and n in _MEMORY_TOP_FOLDERS]
    if not folders:
        return 0
    out = git.out("ls-tree", "-r", "--name-only", commit, "--", *folders)
    return sum(1 for line in out.splitlines() if line.endswith(".md"))


def _preflight(git: Git, root: Path) -> None:
    gitdir = root / ".git"
    for marker in ("MERGE_HEAD", "rebase-merge", "rebase-apply", "CHERRY_PICK_HEAD"):
        if (gitdir / marker).exists():
            raise SyncError(f"the memory repository {root} is in the middle of a merge or "
                            f"rebase ({marker}); finish or abort it, then run sync again", refused=True)
    if (gitdir / "index.lock").exists():
        raise SyncError(f"{gitdir / 'index.lock'} exists: another git command is running in "
                        "the memory directory, or one crashed; if none is running, delete "
                        "that file and retry")


# ------------------------------------------------------------------ merging


def _merge_commit(store, git: Git, base: str | None, ours: str, theirs: str, label: str,
                  today: str) -> tuple[str, list[str], list[str]]:
    """Build the merge of ``ours`` and ``theirs`` (common ancestor ``base``; None for
    unrelated histories) in a temporary index; returns (commit, merged paths, conflict
    lines). Nothing the user sees changes."""
    from dualtrace.memfs.merge import merge_text

    base = base or EMPTY_TREE
    state = store.state_path
    state.mkdir(exist_ok=True)
    fd, index_file = tempfile.mkstemp(prefix="sync-index.", dir=state)
    os.close(fd)
    os.unlink(index_file)  # git wants to create it
    env = {"GIT_INDEX_FILE": index_file}
    try:
        git.run("read-tree", "-i", "-m", "--aggressive", base, ours, theirs, env=env)
        stages: dict[str, dict[int, tuple[str, str]]] = {}
        raw = git.run("ls-files", "-u", "-z", env=env).stdout.decode("utf-8", "surrogateescape")
        for entry in filter(None, raw.split("\0")):
            meta, path = entry.split("\t", 1)
            mode, sha, stage = meta.split()
            stages.setdefault(path, {})[int(stage)] = (mode, sha)
        blobs = _read_blobs(git, {sha for s in stages.values() for _, sha in s.values()})
        resolved: list[tuple[str, str, bytes]] = []   # (mode, path, content)
        merged: list[str] = []
        conflicts: list[str] = []
        for path in sorted(stages):
            st = stages[path]
            if 2 in st and 3 in st:
                base_text = _text(blobs[st[1][1]]) if 1 in st else None
                result = merge_text(base_text, _text(blobs[st[2][1]]), _text(blobs[st[3][1]]),
                                    path, date=today)
                resolved.append((st[2][0], path, result.text.encode("utf-8", "surrogateescape")))
                merged.append(path)
                conflicts += [f"{path}: {c}" if not c.startswith(path) else c
                              for c in result.conflicts]
            else:
                # Changed on one side, deleted on the other: keep the changed version
                # (a merge never loses a line).
                side = st.get(2) or st.get(3)
                if side is None:
                    continue
                resolved.append((side[0], path, blobs[side[1]]))
        shas = _write_blobs(git, [content for _, _, content in resolved])
        info = "".join(f"0 {'0' * 40}\t{path}\n{mode} {sha} 0\t{path}\n"
                       for (mode, path, _), sha in zip(resolved, shas, strict=True))
        if info:
            git.run("update-index", "--index-info", input=info.encode("utf-8", "surrogateescape"),
                    env=env)
        tree = git.out("write-tree", env=env)
    finally:
        try:
            os.unlink(index_file)
        except FileNotFoundError:
            pass
    lines = [f"mem: sync merge {label} ({len(merged)} merged, {len(conflicts)} conflicts)", ""]
    lines += [f"merged: {p}" for p in merged]
    lines += [f"conflict: {c}" for c in conflicts]
    lines += ["", f"{SYNC_TRAILER}: {label}"]
    message = "\n".join(lines) + "\n"
    commit = git.out("commit-tree", tree, "-p", ours, "-p", theirs, "-F", "-",
                     input=message.encode("utf-8"), env=git.author_env())
    return commit, merged, conflicts


def _text(data: bytes) -> str:
    return data.decode("utf-8", "surrogateescape")


def _read_blobs(git: Git, shas: Iterable[str]) -> dict[str, bytes]:
    shas = sorted(shas)
    if not shas:
        return {}
    out = git.run("cat-file", "--batch", input="".join(s + "\n" for s in shas).encode()).stdout
    blobs: dict[str, bytes] = {}
    pos = 0
    for sha in shas:
        header_end = out.index(b"\n", pos)
        _sha, _type, size = out[pos:header_end].split()
        start = header_end + 1
        blobs[sha] = out[start:start + int(size)]
        pos = start + int(size) + 1
    return blobs


def _write_blobs(git: Git, contents: list[bytes]) -> list[str]:
    if not contents:
        return []
    with tempfile.TemporaryDirectory(prefix="dualtrace-sync-") as tmp:
        names = []
        for i, content in enumerate(contents):
            name = os.path.join(tmp, str(i))
            with open(name, "wb") as fh:
                fh.write(content)
            names.append(name)
        out = git.out("hash-object", "-w", "--no-filters", "--stdin-paths",
                      input="".join(n + "\n" for n in names).encode())
    return out.split("\n")


# ------------------------------------------------------------------ moving the work tree


def _journal(root: Path) -> Path:
    return root / ".dualtrace" / JOURNAL


def _fast_forward(store, git: Git, old: str, new: str) -> None:
    """Move the branch and the work tree from ``old`` to ``new`` (a descendant).

    Journaled: a kill during the checkout leaves ``old`` checked out with some files
    of ``new``; the next sync's ``_recover`` puts those back before trying again.
    """
    ours_before = store.git.index_is_ours()
    atomic_write_text(_journal(store.root), json.dumps({"from": old, "to": new}) + "\n")
    _hold("checkout")
    proc = git.run("merge", "--ff-only", "--quiet", "--no-stat", "--no-verify", new,
                   check=False)
    if proc.returncode != 0:
        _journal(store.root).unlink(missing_ok=True)
        why = " ".join((proc.stderr or proc.stdout).decode("utf-8", "replace").split())
        raise SyncError(f"cannot update the memory directory to the merged state: {why[:400]} "
                        "(commit or undo hand edits to those files, then sync again)", refused=True)
    if ours_before:
        store.git.mark_index_ours()
    _journal(store.root).unlink(missing_ok=True)


def _changed_paths(git: Git, old: str, new: str) -> list[str]:
    out = git.run("diff", "--name-only", "-z", "--no-renames", old, new).stdout
    return [p for p in out.decode("utf-8", "surrogateescape").split("\0") if p]


def _after_integrate(store, git: Git, old: str, new: str, conflicts: list[str],
                     today: str) -> None:
    """The search index follows the files; unmerged things become open conflicts."""
    from dualtrace.memfs.index import update_after_commit

    update_after_commit(store, _changed_paths(git, old, new))
    if conflicts:
        from dualtrace.memfs.conflicts import record_merge_conflict

        for line in conflicts:
            path = line.split(":", 1)[0]
            record_merge_conflict(store.state_path, path, line, today)


def _recover(store, git: Git) -> str | None:
    """Undo what a sync killed during its checkout left behind; None when nothing."""
    journal = _journal(store.root)
    try:
        data = json.loads(journal.read_text(encoding="utf-8"))
        old, new = str(data["from"]), str(data["to"])
    except FileNotFoundError:
        return None
    except (OSError, ValueError, KeyError, TypeError):
        journal.unlink(missing_ok=True)
        return "removed an unreadable sync journal"
    head = git.rev("HEAD")
    if head == new:  # the checkout finished; only the bookkeeping was lost
        _after_integrate(store, git, old, new, [], _date.today().isoformat())
        journal.unlink(missing_ok=True)
        return f"an interrupted sync had reached {new[:10]}; index brought up to date"
    if head != old:
        journal.unlink(missing_ok=True)
        return "a stale sync journal (HEAD moved since) was removed"
    lock = store.root / ".git" / "index.lock"
    if lock.exists() and time.time() - lock.stat().st_mtime > 5:
        # We hold the store lock and the journal says our checkout was interrupted:
        # the lock is the killed git's.
        lock.unlink()
    restore: list[str] = []
    remove: list[str] = []
    for path in _changed_paths(git, old, new):
        current = store.root / path
        in_old = git.ok("cat-file", "-e", f"{old}:{path}")
        in_new = git.ok("cat-file", "-e", f"{new}:{path}")
        try:
            data_now: bytes | None = current.read_bytes()
        except FileNotFoundError:
            data_now = None
        states = set()
        for rev, present in ((old, in_old), (new, in_new)):
            states.add(git.run("cat-file", "blob", f"{rev}:{path}").stdout if present else None)
        if data_now not in states:
            raise SyncError(f"{path} was edited by hand after an interrupted sync; commit or "
                            f"undo that edit, then delete {journal} and sync again", refused=True)
        (restore if in_old else remove).append(path)
    if restore:
        git.run("checkout", old, "--", *restore)
    for path in remove:
        git.run("rm", "-q", "--cached", "--ignore-unmatch", "--", path)
        (store.root / path).unlink(missing_ok=True)
    journal.unlink(missing_ok=True)
    return f"undid an interrupted sync's partial checkout ({len(restore) + len(remove)} files)"
