"""``dualtrace explain SESSION``: why a session stored what it stored, or nothing.

Two sources, kept apart in the output: what was committed for the session (the git
history of the memory directory, whatever backend wrote it), and a fresh dry run of
the offline encoder on the session's transcript, which shows the gate verdict and
every candidate with its scores. The dry run writes nothing and sends nothing
anywhere; it is the offline encoder's view even when a model encoded the session.

The dry run reads the memory as it was just before the session's first commit
(``<commit>^``, checked out in a temporary clone), so it decides what the session
decided then: a memory the session stored comes back as a store, a recurrence as an
update. Against today's memory, which already holds the session's output, it could
only say what a second run would add (nothing). A session with no commit is run
against today's memory.
"""

from __future__ import annotations

import re
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path

from dualtrace import config
from dualtrace.errors import DualtraceError


@dataclass
class Explanation:
    session: str
    transcript: str | None
    committed: list[dict] = field(default_factory=list)
    report: dict | None = None
    unavailable: str | None = None
    # The commit the dry run read the memory at (the parent of the session's first
    # commit), "" for an empty memory (that commit was the first), None: today's memory.
    against: str | None = None

    def to_dict(self) -> dict:
        return dict(self.__dict__)


def find_transcript(session: str, memory_dir: Path) -> tuple[str, str] | None:
    """(session id, transcript path) of the session whose id starts with ``session``,
    from the cursors that encodes into ``memory_dir`` left in the state directory."""
    from dualtrace import cursors

    found: dict[str, str] = {}
    for cursor in cursors.saved():
        sid = cursor.session_id or ""
        if sid.startswith(session) and cursor.memory_dir == str(memory_dir):
            found[sid] = cursor.path
    if len(found) > 1:
        raise DualtraceError(f"{session!r} matches {len(found)} sessions "
                             f"({', '.join(sorted(found)[:5])}): give more of the id")
    return next(iter(found.items()), None)


def explain(session_or_path: str, workspace: config.Workspace) -> Explanation:
    from dualtrace.pipeline import encode_session

    memdir = workspace.memory_dir
    candidate = Path(session_or_path).expanduser()
    if candidate.is_file():
        transcript: str | None = str(candidate.resolve())
        sid = None
    else:
        hit = find_transcript(session_or_path, memdir)
        sid, transcript = hit if hit else (None, None)
    # A transcript path names no session until the dry run has read it: the commits
    # are looked up by the id then (by a path, nothing ever matched).
    committed: list[dict] = []
    if not (transcript and sid is None):
        committed, committed_sid = _committed(workspace, sid or session_or_path)
        sid = sid or committed_sid
    result = Explanation(sid or session_or_path, transcript, committed)
    if transcript is None or not Path(transcript).is_file():
        if not committed:
            raise DualtraceError(f"no session {session_or_path!r} was encoded into {memdir}, and "
                                 "it is not a transcript path")
        result.unavailable = ("the transcript is no longer on disk: only what was committed can "
                              "be shown")
        return result
    if not result.committed:
        # A transcript path: its session id is known only once it is read.
        from dualtrace.hooks.transcripts import read_transcript
        from dualtrace.sanitize import safe_session_id

        read = read_transcript(Path(transcript)).session_id  # as the encode names it
        session_id = read or safe_session_id(Path(transcript).stem)
        if session_id:  # never "": every commit's id starts with it
            result.committed, _ = _committed(workspace, session_id)
    with _memory_before(workspace, result.committed) as (before, against):
        report = encode_session(transcript, workspace=before, backend="offline", dry_run=True,
                                force=True)
    result.against = against
    result.report = report.to_dict()
    result.report["memory_dir"] = str(memdir)
    result.session = report.session_id or result.session
    _mark_already_stored(result, workspace)
    return result


@contextmanager
def _memory_before(workspace: config.Workspace,
                   committed: list[dict]) -> Iterator[tuple[config.Workspace, str | None]]:
    """The workspace whose memory directory is the memory as it was before the oldest of
    ``committed`` (a temporary clone, removed on exit), and the commit it is at ("" for
    none: the memory was empty). No commit: the workspace itself, and None."""
    if not committed:
        yield workspace, None
        return
    memdir = workspace.memory_dir
    first = committed[-1]["sha"]  # newest first
    parent = _git(memdir, "rev-parse", "--verify", "--quiet", f"{first}^")
    with tempfile.TemporaryDirectory(prefix="dualtrace-explain-") as tmp:
        snapshot = Path(tmp) / (memdir.name or "memory")
        if parent:
            # --shared: the clone borrows the objects; nothing is written in memdir.
            _git(Path(tmp), "clone", "--quiet", "--shared", "--no-checkout", str(memdir),
                 str(snapshot), check=True)
            _git(snapshot, "checkout", "--quiet", "--detach", parent, check=True)
        yield replace(workspace, memory_dir=snapshot), parent or ""


def _git(cwd: Path, *args: str, check: bool = False) -> str:
    """stdout of a git command, stripped ("" when it fails and ``check`` is false)."""
    from dualtrace.memfs.gitrepo import clean_git_env

    clean_git_env()
    try:
        proc = subprocess.run(["git", "-C", str(cwd), *args], capture_output=True, text=True,
                              timeout=120)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise DualtraceError(f"git {args[0]} failed in {cwd}: {exc}") from exc
    if proc.returncode != 0:
        if check:
            raise DualtraceError(f"git {args[0]} failed in {cwd}: "
                                 f"{(proc.stderr or proc.stdout).strip()[:200]}")
        return ""
    return proc.stdout.strip()


def _committed(workspace: config.Workspace, prefix: str) -> tuple[list[dict], str | None]:
    """The commits of the session whose id starts with ``prefix``, newest first, and
    its full id (None: no commit names it)."""
    from dualtrace.memfs.store import MemoryStore

    memdir = workspace.memory_dir
    found: list[dict] = []
    sid: str | None = None
    if not (memdir.is_dir() and (memdir / ".git").exists()):
        return found, sid
    store = MemoryStore(memdir, project=workspace.project, read_only=True)
    try:
        for entry in store.git.session_log(500):
            if entry.session and entry.session.startswith(prefix):
                found.append({"date": entry.date, "sha": entry.sha, "backend": entry.backend,
                              "operations": list(entry.operations)})
                sid = sid or entry.session
    finally:
        store.close()
    return found, sid


def _mark_already_stored(result: Explanation, workspace: config.Workspace) -> None:
    """Never "skip" for a memory the session's commit wrote.

    Run on the memory before the session's commit, the dry run normally proposes what
    the commit did. When it does not (today's offline encoder differs from the one, or
    the model, that encoded the session), the commit's verb is shown with a note. With
    no commit to compare (run against today's memory), a fact that lists this session
    is labelled stored by it: the re-run sees the session's own output as nothing new.
    """
    from dualtrace.errors import FormatError, PathError
    from dualtrace.memfs.formats import Fact
    from dualtrace.memfs.store import MemoryStore

    operations = (result.report or {}).get("operations") or []
    skipped = [op for op in operations if op.get("action") == "skip" and op.get("path")]
    if not skipped or not workspace.memory_dir.is_dir():
        return
    store = MemoryStore(workspace.memory_dir, project=workspace.project, read_only=True)
    try:
        for op in skipped:
            # The commit of this session that wrote the file (its subject names the path).
            named = re.compile(rf"^mem: (\w+) {re.escape(op['path'].removesuffix('.md'))}(?:\s|$)")
            done = next(((c["sha"][:10], m.group(1)) for c in result.committed
                         for line in c["operations"] if (m := named.search(line))), None)
            if done is not None:
                sha, verb = done
                op["action"] = verb
                op["note"] = (f"commit {sha} did this ({verb}); this re-run of today's offline "
                              "encoder finds nothing new for it")
                continue
            if result.against is not None:
                continue
            try:
                memory = store.read(op["path"])
            except (FormatError, PathError, OSError):
                continue
            if not isinstance(memory, Fact) or result.session not in memory.sessions:
                continue
            op["action"] = "stored"
            op["note"] = "already holds this session; the re-run adds nothing to it"
    finally:
        store.close()
