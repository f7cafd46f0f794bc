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
    from dualtrace.memfs.store import MemoryStore
    from dualtrace.pipeline import encode_session

    memdir = workspace.memory_dir
    candidate = Path(session_or_path).expanduser()
    if candidate.is_file():
        transcript: str | None = str(candidate.resolve())
        sid = None
    else:
        hit = find_transcript(session_or_path, memdir)
        sid, transcript = hit if hit else (None, None)
    committed: list[dict] = []
    if memdir.is_dir() and (memdir / ".git").exists():
        store = MemoryStore(memdir, project=workspace.project, read_only=True)
        try:
            for entry in store.git.session_log(500):
                if entry.session and entry.session.startswith(sid or session_or_path):
                    committed.append({"date": entry.date, "sha": entry.sha,
                                      "backend": entry.backend, "operations": list(entry.operations)})
                    sid = sid or entry.session
        finally:
            store.close()
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
    return result
