"""The memory directory's own git repository (GitPython), one commit per session.

Commit messages follow docs/PROTOCOL.md §9. Only the paths an operation touched are
staged; inherited GIT_* variables are stripped so a hook running inside another
repository's git process can never redirect our commits there.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from dualtrace.errors import GitError
from dualtrace.sanitize import one_line, safe_session_id

SESSION_TRAILER = "Dualtrace-Session"
BACKEND_TRAILER = "Dualtrace-Backend"
RANGE_TRAILER = "Dualtrace-Range"  # "<transcript key> <start>-<end>" byte offsets
RECORD_TRAILER = "Dualtrace-Record"  # the session record committed with the memories
FALLBACK_TRAILER = "Dualtrace-Fallback"  # the model backend that failed, and why (offline did it)
GITIGNORE = ".dualtrace/\n.*.tmp\n"
# Variables that only locate helpers or proxies are harmless; everything else
# (GIT_DIR, GIT_WORK_TREE, GIT_INDEX_FILE, GIT_AUTHOR_*, ...) is dropped.
_KEEP_GIT_ENV = ("GIT_EXEC_PATH", "GIT_SSH", "GIT_SSH_COMMAND", "GIT_ASKPASS",
                 "GIT_SSL_CAINFO", "GIT_SSL_CAPATH", "GIT_PYTHON_GIT_EXECUTABLE")


def head_commit(root: Path) -> str | None:
    """The memory repository's HEAD sha, or None (no repository, no commit yet).

    A plain ``git rev-parse`` process: callers on the encode path must not pay for
    GitPython, and a directory that is not a repository must not become one.
    """
    import subprocess

    if not (Path(root) / ".git").exists():
        return None
    out = subprocess.run(["git", "-C", str(root), "rev-parse", "-q", "--verify", "HEAD^{commit}"],
                         capture_output=True, text=True, env=_git_env(), check=False)
    return (out.stdout.strip() or None) if out.returncode == 0 else None


def in_history(root: Path, sha: str) -> bool:
    """True when commit ``sha`` is HEAD or one of its ancestors in ``root``'s repository."""
    import subprocess

    if not (Path(root) / ".git").exists():
        return False
    out = subprocess.run(["git", "-C", str(root), "merge-base", "--is-ancestor", sha, "HEAD"],
                         capture_output=True, env=_git_env(), check=False)
    return out.returncode == 0


def _git_env() -> dict[str, str]:
    # The same hygiene as clean_git_env, for one child process only.
    return {k: v for k, v in os.environ.items()
            if not k.startswith("GIT_") or k in _KEEP_GIT_ENV}


def clean_git_env() -> None:
    for key in list(os.environ):
        if key.startswith("GIT_") and key not in _KEEP_GIT_ENV:
            del os.environ[key]


def _has_objects(gitdir: Path) -> bool:
    """Any commit or blob stored, loose or packed (a fresh ``git init`` has none)."""
    objects = gitdir / "objects"
    try:
        for entry in objects.iterdir():
            if entry.name == "pack":
                if any(p.suffix == ".pack" for p in entry.iterdir()):
                    return True
            elif len(entry.name) == 2 and any(entry.iterdir()):
                return True
    except OSError:
        return False
    return False


def stored_refs(root: Path, prefix: str) -> dict[str, str] | None:
    """refname -> sha of the non-symbolic refs under ``prefix`` (``refs/remotes/origin/``),
    read from ``root/.git``'s packed-refs and loose ref files without a git process; None
    when the repository keeps its refs another way (reftable, a linked ``.git`` file).
    A loose ref overrides its packed line, as in git."""
    gitdir = Path(root) / ".git"
    if not gitdir.is_dir() or (gitdir / "reftable").exists():
        return None
    refs: dict[str, str] = {}
    try:
        packed = (gitdir / "packed-refs").read_text(encoding="utf-8")
    except FileNotFoundError:
        packed = ""
    for line in packed.splitlines():
        sha, _, ref = line.partition(" ")
        if ref.startswith(prefix) and not line.startswith(("#", "^")):
            refs[ref] = sha
    pending = [gitdir / prefix]
    while pending:
        folder = pending.pop()
        try:
            entries = list(os.scandir(folder))
        except OSError:
            continue
        for entry in entries:
            if entry.is_dir(follow_symlinks=False):
                pending.append(Path(entry.path))
            elif entry.is_file(follow_symlinks=False) and not entry.name.endswith(".lock"):
                text = Path(entry.path).read_text(encoding="utf-8", errors="replace").strip()
                if not text.startswith("ref:"):   # a symbolic ref (origin/HEAD) is no tip
                    refs[Path(entry.path).relative_to(gitdir).as_posix()] = text
    refs.pop(prefix + "HEAD", None)
    return refs


@dataclass(frozen=True)
class OpLine:
    """One operation as it appears in a commit: ``mem: <verb> <target> (<detail>, evidence:N)``."""

    verb: str  # store | update | upgrade
    target: str  # e.g. decisions/structured-logging-json or system/human
    detail: str
    score: int | None = None

    def line(self) -> str:
        # One line whatever the values hold: a newline in a model's reason would
        # otherwise forge a trailer (a Dualtrace-Range that marks a session done).
        tail = f", evidence:{int(self.score)}" if self.score is not None else ""
        return (f"mem: {one_line(self.verb, 20)} {one_line(self.target, 200)} "
                f"({one_line(self.detail, 200)}{tail})")


def commit_message(session_id: str | None, backend: str | None, ops: list[OpLine],
                   extra_trailers: tuple[str, ...] = ()) -> str:
    if not ops:
        raise ValueError("a commit needs at least one operation")
    if len(ops) == 1:
        subject, body = ops[0].line(), []
    else:
        stored = sum(1 for op in ops if op.verb == "store")
        updated = len(ops) - stored
        short = _short(session_id)
        subject = f"mem: encode session {short} ({stored} stored, {updated} updated)"
        body = [op.line() for op in ops]
    trailers = []
    session_id = safe_session_id(session_id)
    if session_id:
        trailers.append(f"{SESSION_TRAILER}: {session_id}")
    if backend:
        trailers.append(f"{BACKEND_TRAILER}: {one_line(backend, 60)}")
    trailers.extend(one_line(t, 300) for t in extra_trailers)
    parts = [subject]
    if body:
        parts.append("\n".join(body))
    if trailers:
        parts.append("\n".join(trailers))
    return "\n\n".join(parts) + "\n"


def _short(session_id: str | None) -> str:
    from dualtrace.memfs.ids import short_id

    return one_line(short_id(session_id)) if session_id else "manual"


def _trailers(message: str) -> list[str]:
    return [line for line in message.splitlines() if line.startswith("Dualtrace-")]


def merge_messages(old: str, new: str) -> str:
    """One message for a session encoded in two steps (a resumed session's new turns
    amended into its commit): every operation in order, every range, one subject."""
    ops = list(parse_message("", "", old).operations) + list(parse_message("", "", new).operations)
    # The session record is one file rewritten by each step: its latest line stands for it
    # and it is not a memory (not counted as "updated").
    record_ops = [op for op in ops if op.startswith("mem: record ")]
    ops = [op for op in ops if not op.startswith("mem: record ")]
    if len(ops) + min(len(record_ops), 1) == 1:
        subject, body = (ops or record_ops[-1:])[0], []
    else:
        stored = sum(1 for op in ops if op.startswith("mem: store "))
        session = parse_message("", "", new).session or parse_message("", "", old).session
        subject = (f"mem: encode session {_short(session)} "
                   f"({stored} stored, {len(ops) - stored} updated)")
        body = ops + record_ops[-1:]
    trailers: list[str] = []
    backends: list[str] = []
    for line in _trailers(old) + _trailers(new):
        key, _, value = line.partition(":")
        if key == BACKEND_TRAILER:
            backends.extend(b.strip() for b in value.split(",") if b.strip() not in backends)
        elif line not in trailers:
            trailers.append(line)
    if backends:
        at = next((i + 1 for i, t in enumerate(trailers) if t.startswith(SESSION_TRAILER)), 0)
        trailers.insert(at, f"{BACKEND_TRAILER}: {', '.join(dict.fromkeys(backends))}")
    parts = [subject] + (["\n".join(body)] if body else []) + (["\n".join(trailers)]
                                                              if trailers else [])
    return "\n\n".join(parts) + "\n"


def _text(value: str | bytes) -> str:
    """GitPython types commit messages as str or bytes (an undecodable encoding)."""
    return value if isinstance(value, str) else value.decode("utf-8", "replace")


@dataclass(frozen=True)
class LogEntry:
    sha: str
    date: str
    subject: str
    session: str | None
    backend: str | None
    operations: tuple[str, ...]


def parse_message(sha: str, date: str, message: str) -> LogEntry:
    lines = message.strip("\n").split("\n")
    subject = lines[0] if lines else ""
    session = backend = None
    ops: list[str] = []
    for line in lines[1:]:
        if line.startswith(f"{SESSION_TRAILER}:"):
            session = line.split(":", 1)[1].strip()
        elif line.startswith(f"{BACKEND_TRAILER}:"):
            backend = line.split(":", 1)[1].strip()
        elif line.startswith("mem: "):
            ops.append(line)
    if not ops and subject.startswith("mem: "):
        ops.append(subject)
    return LogEntry(sha, date, subject, session, backend, tuple(ops))


class MemoryRepo:
    """GitPython wrapper bound to exactly one directory (never a parent repository)."""

    def __init__(self, root: Path, author: tuple[str, str], *, read_only: bool = False) -> None:
        """Bind to ``root``'s own repository; create it unless ``read_only``.

        Read-only (the commands that only look: status, log, show) never creates a
        repository and never writes or commits a .gitignore.
        """
        clean_git_env()
        import git  # imported here: the hook fast path never loads GitPython

        self._git = git
        self.root = root
        self.actor = git.Actor(author[0], author[1])
        if (root / ".git").exists():
            try:
                self.repo = git.Repo(root, search_parent_directories=False)
            except git.exc.GitError as exc:  # corrupt or unreadable .git
                raise GitError(f"{root} is not a usable git repository: {exc}") from exc
        elif read_only:
            raise GitError(f"{root} is not a memory directory (it has no git repository); "
                           "nothing was read or changed")
        else:
            self.repo = git.Repo.init(root, initial_branch="main")
        if not read_only:
            self._check_branch()  # before the init commit could start a new root
            self._ensure_gitignore()

    def close(self) -> None:
        self.repo.close()

    # -------------------------------------------------------- preflight

    def _preflight(self) -> None:
        gitdir = Path(self.repo.git_dir)
        lock = gitdir / "index.lock"
        if lock.exists():
            raise GitError(
                f"{lock} exists: another git command is running in the memory directory, "
                "or one crashed. If no git command is running, delete that file and retry."
            )
        for marker in ("MERGE_HEAD", "rebase-merge", "rebase-apply", "CHERRY_PICK_HEAD"):
            if (gitdir / marker).exists():
                raise GitError(
                    f"the memory repository {self.root} is in the middle of a merge or rebase "
                    f"({marker}); finish or abort it, then retry"
                )
        self._check_branch()
        if self.repo.head.is_detached:
            sha = self.repo.head.commit.hexsha[:10]
            raise GitError(
                f"the memory repository {self.root} has a detached HEAD (at {sha}); "
                "check out a branch (e.g. `git switch main`) and retry"
            )

    def _check_branch(self) -> None:
        """HEAD names a branch that does not exist, in a repository that had commits:
        the branch ref was deleted (by hand, a tool, a damaged disk). Committing now
        would start a new root history beside the lost one, so stop and say how to
        get it back."""
        if self.has_commits():
            return
        gitdir = Path(self.repo.git_dir)
        try:
            head = (gitdir / "HEAD").read_text(encoding="utf-8").strip()
        except OSError:
            head = ""
        branch = head.removeprefix("ref: refs/heads/") if head.startswith("ref: ") else "main"
        last = None
        try:
            entries = (gitdir / "logs" / "HEAD").read_text(encoding="utf-8").splitlines()
        except OSError:
            entries = []
        for entry in reversed(entries):
            fields = entry.split()
            if len(fields) > 1 and fields[1].strip("0"):
                last = fields[1]
                break
        if last is None and not _has_objects(gitdir):
            return  # a new repository: nothing to lose
        if last is None and self._adopt_remote_branch(branch):
            return
        where = f"git -C {self.root}"
        restore = (f"`{where} branch {branch} {last[:12]}` restores it" if last else
                   f"`{where} fsck --lost-found` lists the commits left")
        raise GitError(
            f"the memory repository {self.root} has lost its branch '{branch}': HEAD names it "
            f"but it does not exist, and the repository has history"
            + (f" (last at {last[:12]})" if last else "") + ". Nothing was written. "
            f"See `{where} reflog`; {restore}; then retry.")

    def _adopt_remote_branch(self, head_branch: str) -> bool:
        """A plain ``git clone`` of a memory whose remote HEAD names a branch the remote
        does not have (a bare repository made with ``git init --bare`` says ``master``;
        dualtrace pushes ``main``): the clone has no branch, no checkout, only the
        remote's branch. That is a new clone, not a lost branch: check the remote's one
        branch out, tracking it. False when it is not that case (local branches exist,
        or the remotes hold several branches: which one is the person's choice)."""
        git = self.repo.git
        try:
            refs = git.for_each_ref("--format=%(refname)", "refs/heads", "refs/remotes").split()
        except self._git.exc.GitCommandError:
            return False
        if any(r.startswith("refs/heads/") for r in refs):
            return False
        tracking = [r.removeprefix("refs/remotes/") for r in refs
                    if r.startswith("refs/remotes/") and not r.endswith("/HEAD")]
        names = {t.split("/", 1)[1] for t in tracking if "/" in t}
        if len(names) != 1:
            if names:
                raise GitError(
                    f"the memory repository {self.root} has no branch checked out (HEAD names "
                    f"'{head_branch}', which its remote does not have); the remote has "
                    f"{', '.join(sorted(names))}: `git -C {self.root} switch BRANCH` picks one, "
                    "then retry. Nothing was written.")
            return False
        name = names.pop()
        upstream = sorted(t for t in tracking if t.endswith("/" + name))[0]
        try:
            git.checkout("-b", name, "--track", upstream)
        except self._git.exc.GitCommandError as exc:
            why = " ".join(str(exc.stderr or exc).split())[:300]
            raise GitError(f"the memory repository {self.root} has no branch checked out and "
                           f"`git checkout -b {name} --track {upstream}` failed: {why}. "
                           "Nothing was written.") from exc
        return True

    def _ensure_gitignore(self) -> None:
        path = self.root / ".gitignore"
        try:
            current = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            current = ""
        if ".dualtrace/" in current.split():
            return
        from dualtrace.atomic import write_text as atomic_write_text

        text = current + ("" if not current or current.endswith("\n") else "\n") + GITIGNORE
        atomic_write_text(path, text)
        if not self.has_commits():
            # The root commit names this memory: two memories started in the same second
            # by the same person would otherwise share one root commit (same tree, author
            # and time), and sync would take them for one history.
            import uuid

            self.commit([".gitignore"], "mem: init memory directory\n\n"
                        f"Dualtrace-Memory: {uuid.uuid4().hex}\n")

    # -------------------------------------------------------- commits

    def has_commits(self) -> bool:
        try:
            self.repo.head.commit  # noqa: B018 - raises on an unborn branch
            return True
        except ValueError:
            return False

    def amendable(self, session_id: str | None) -> str | None:
        """HEAD's message when HEAD is this session's own commit and was never pushed.

        A resumed session (``claude -p --resume``: every turn ends the process and fires
        SessionEnd) is encoded once per turn; its new turns are amended into the
        session's commit so the history keeps one commit per session. Anything else on
        top (another session, a person's commit) or a push ends that: a new commit.
        """
        if not session_id or not self.has_commits():
            return None
        head = self.repo.head.commit
        if parse_message(head.hexsha, "", _text(head.message)).session != \
                safe_session_id(session_id):
            return None
        if head.committer.name != self.actor.name or not head.parents:
            return None
        pushed = self.repo.git.execute(["git", "branch", "-r", "--contains", head.hexsha],
                                       with_exceptions=False)
        return None if str(pushed).strip() else _text(head.message)

    def commit(self, paths: list[str], message: str,
               session_id: str | None = None) -> str | None:
        """Stage exactly ``paths`` and commit them; returns the sha, or None if nothing changed.

        With ``session_id``, new work of a session whose unpushed commit is HEAD is
        amended into that commit (see ``amendable``).

        Two git processes through GitPython's command layer: ``add``, then ``commit``.
        Whatever a person staged by hand must stay staged and out of our commit. When
        git's index is exactly as our last commit left it (same inode, size and mtime:
        git replaces the file on every write), nothing else can be staged and a plain
        commit is safe; otherwise ``commit --only -- paths`` commits just our paths,
        at the price of a temporary index (+10 ms on a store of 800 files). GitPython's
        pure-Python index was measured 3x slower than plain git on a 1,000-file store:
        it parses and rewrites the whole index in Python on every commit.
        """
        self._preflight()
        if not paths:
            return None
        paths = sorted(set(paths))
        env = {
            "GIT_AUTHOR_NAME": self.actor.name, "GIT_AUTHOR_EMAIL": self.actor.email,
            "GIT_COMMITTER_NAME": self.actor.name, "GIT_COMMITTER_EMAIL": self.actor.email,
        }
        stamp = self._index_stamp()
        ours = stamp is not None and stamp == self._saved_stamp()
        # commit.gpgsign=false: a signing prompt would hang a background worker.
        # --cleanup=verbatim keeps the message and trailers exactly as written.
        previous = self.amendable(session_id)
        if previous is not None:
            message = merge_messages(previous, message)
        command = ["git", "-c", "commit.gpgsign=false", "commit", "-q", "--no-verify",
                   "--cleanup=verbatim", "-m", message]
        if previous is not None:
            command.append("--amend")
        if not ours:
            command += ["--only", "--", *paths]
        try:
            self.repo.git.execute(["git", "add", "--", *paths], env=env)
            self.repo.git.execute(command, env=env)
        except self._git.exc.GitCommandError as exc:
            text = f"{exc.stdout or ''} {exc.stderr or ''}"
            if "nothing to commit" in text or "no changes added" in text or "nothing added" in text:
                return None
            raise GitError(f"git failed in {self.root}: {' '.join(text.split())[:300]}") from exc
        clean = ours or self.repo.git.execute(
            ["git", "diff", "--cached", "--quiet"], with_exceptions=False, env=env,
            with_extended_output=True)[0] == 0
        self._save_stamp(self._index_stamp() if clean else None)
        return self.repo.head.commit.hexsha

    def uncommitted(self, paths: list[str]) -> list[str]:
        """Those of ``paths`` that are untracked or differ from HEAD (a file written or
        edited by hand and not committed yet), in the order given."""
        if not paths:
            return []
        out = self.repo.git.execute(
            ["git", "status", "--porcelain=v1", "-z", "--untracked-files=all",
             "--ignored=no", "--", *paths], with_exceptions=False)
        changed = {entry[3:] for entry in str(out).split("\0") if len(entry) > 3}
        return [p for p in paths if p in changed]

    def index_is_ours(self) -> bool:
        """True when git's index is exactly as our last commit left it (see commit)."""
        stamp = self._index_stamp()
        return stamp is not None and stamp == self._saved_stamp()

    def mark_index_ours(self) -> None:
        """After a checkout of our own (sync's fast-forward) that staged nothing else."""
        self._save_stamp(self._index_stamp())

    # The index stamp lives with dualtrace's derived state, not in .git.
    def _stamp_path(self) -> Path:
        return self.root / ".dualtrace" / "index-stamp"

    def _index_stamp(self) -> str | None:
        try:
            st = os.stat(Path(self.repo.git_dir) / "index")
        except OSError:
            return None
        return f"{st.st_ino}:{st.st_size}:{st.st_mtime_ns}"

    def _saved_stamp(self) -> str | None:
        try:
            return self._stamp_path().read_text(encoding="utf-8").strip() or None
        except OSError:
            return None

    def _save_stamp(self, stamp: str | None) -> None:
        path = self._stamp_path()
        try:
            if stamp is None:
                path.unlink(missing_ok=True)
            else:
                path.parent.mkdir(exist_ok=True)
                path.write_text(stamp + "\n", encoding="utf-8")
        except OSError:
            pass  # only an optimisation: without a stamp the next commit uses --only

    def session_log(self, limit: int = 20) -> list[LogEntry]:
        if not self.has_commits():
            return []
        entries = []
        for commit in self.repo.iter_commits(max_count=max(limit, 1) * 4):
            entry = parse_message(
                commit.hexsha, commit.committed_datetime.strftime("%Y-%m-%d %H:%M"),
                _text(commit.message)
            )
            if entry.session is None and not entry.operations:
                continue
            if entry.subject.startswith("mem: init"):
                continue
            entries.append(entry)
            if len(entries) >= limit:
                break
        return entries

    def last_commit_line(self) -> str | None:
        if not self.has_commits():
            return None
        commit = self.repo.head.commit
        when = commit.committed_datetime.strftime("%Y-%m-%d %H:%M")
        return f"{commit.hexsha[:10]} {when} {_text(commit.summary)}"

    def committed_range(self, key: str, start: int, depth: int = 200) -> int | None:
        """End offset of a commit that already encoded ``key`` from ``start``, if any.

        The cursor is saved after the commit; a worker killed between the two would
        otherwise encode the same piece of a transcript again on retry.
        """
        if not self.has_commits():
            return None
        out = self.repo.git.log(f"-n{depth}", f"--format=%(trailers:key={RANGE_TRAILER},valueonly)")
        prefix = f"{key} {start}-"
        for line in out.splitlines():
            line = line.strip()
            if line.startswith(prefix):
                try:
                    return int(line[len(prefix):])
                except ValueError:
                    continue
        return None
