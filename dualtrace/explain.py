"""``dualtrace explain SESSION``: why a session stored what it stored, or nothing.

Two sources, kept apart in the output: what was committed for the session (the git
history of the memory directory, whatever backend wrote it), and a fresh dry run of
the offline encoder on the session's transcript, which shows the gate verdict and
every candidate with its scores. The dry run writes nothing and sends nothing
anywhere; it is the offline encoder's view even when a model encoded the session.
"""

from __future__ import annotations

from dataclasses import dataclass, field
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
    report = encode_session(transcript, workspace=workspace, backend="offline", dry_run=True,
                            force=True)
    result.report = report.to_dict()
    result.session = report.session_id or result.session
    if not result.committed and report.session_id:
        result.committed, _ = _committed(workspace, report.session_id)
    _mark_already_stored(result, workspace)
    return result


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
    """The dry run re-reads the session against the memory as it is now, so what the
    session stored comes back as "skip: nothing new" (the memory already counts this
    session). Say what happened instead: the candidate was stored, by which commit."""
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
            try:
                memory = store.read(op["path"])
            except (FormatError, PathError, OSError):
                continue
            if not isinstance(memory, Fact) or result.session not in memory.sessions:
                continue
            sha = next((c["sha"][:10] for c in result.committed
                        if any(op["path"].removesuffix(".md") in line for line in c["operations"])),
                       None)
            op["action"] = "stored"
            op["note"] = (f"stored by this session (commit {sha}); the re-run adds nothing to it"
                          if sha else "already holds this session; the re-run adds nothing to it")
    finally:
        store.close()
