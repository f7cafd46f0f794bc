"""What the worker last saw of a transcripts folder, so SessionStart can skip the sweep.

Every SessionStart of a sweeping host asks the worker to compare this project's
transcripts with their encode records (sessions killed before SessionEnd). Mostly the
answer is "nothing to do", and asking cost a job file and a worker process (Python, the
worker's imports, the sweep) on the same cores as the turn that just started.

For a host whose sweep looks only at the files of the transcript's own folder (Claude
Code: ``<project folder>/<session>.jsonl``; ``Host.SWEEP_FOLDER``), the worker keeps a
*mark* of that folder in ``<state>/sweep-marks/``: each regular file's size and mtime as
the worker has accounted for it. A sweep writes the whole mark from the listing it took
before it judged the files (the transcript of the session that asked is left out: it was
not judged); an encode updates its transcript's entry with the stat it read the
transcript at. The hook skips the sweep request while the folder's listing equals the
mark, the asking session's own transcript aside: every file is then as a sweep or an
encode last saw it, so a sweep could queue nothing. Any difference (a session that grew
after its encode, a new file, a file gone, no mark, an unreadable folder) sweeps as
before. Hosts without ``SWEEP_FOLDER`` (Codex's rollouts span date folders) never get
a mark, so they always sweep.

Standard library only: the hook's fast path imports it. Only the worker writes marks.
"""

from __future__ import annotations

import json
import os
import zlib

from dualtrace import atomic

DIR = "sweep-marks"


def mark_path(state: str, host: str, folder: str) -> str:
    raw = json.dumps([host, os.path.abspath(folder)])
    return os.path.join(state, DIR, f"{zlib.crc32(raw.encode('utf-8')):08x}-{len(raw)}.json")


def listing(folder: str) -> dict[str, list[int]] | None:
    """``{name: [size, mtime_ns]}`` of the folder's regular files ({} for a folder that
    does not exist); None when it cannot be read whole."""
    try:
        with os.scandir(folder) as found:
            entries = list(found)
    except FileNotFoundError:
        return {}
    except OSError:
        return None
    out: dict[str, list[int]] = {}
    for entry in entries:
        try:
            if not entry.is_file(follow_symlinks=False):
                continue
            st = entry.stat(follow_symlinks=False)
        except OSError:
            return None
        out[entry.name] = [st.st_size, st.st_mtime_ns]
    return out


def _load(state: str, host: str, folder: str) -> dict | None:
    try:
        with open(mark_path(state, host, folder), encoding="utf-8") as fh:
            mark = json.load(fh)
    except (OSError, ValueError):
        return None
    if not isinstance(mark, dict) or mark.get("folder") != os.path.abspath(folder) \
            or not isinstance(mark.get("files"), dict):
        return None
    return mark


def record(state: str, host: str, folder: str, files: dict[str, list[int]],
           asking: str | None) -> None:
    """The worker's sweep: ``files`` (its listing, taken before it judged them) are
    accounted for, all but ``asking`` (the transcript of the session that asked)."""
    kept = {name: stat for name, stat in files.items()
            if not asking or name != os.path.basename(asking)}
    atomic.write_json(mark_path(state, host, folder),
                      {"folder": os.path.abspath(folder), "files": kept}, fsync=False)


def encoded(state: str, host: str, transcript: str, size: int, mtime_ns: int) -> None:
    """The worker encoded ``transcript`` as it was at ``size`` / ``mtime_ns``: its entry
    in its folder's mark (when there is one) says so."""
    folder = os.path.dirname(os.path.abspath(transcript))
    mark = _load(state, host, folder)
    if mark is None:
        return  # the next sweep writes a whole mark
    mark["files"][os.path.basename(transcript)] = [size, mtime_ns]
    atomic.write_json(mark_path(state, host, folder), mark, fsync=False)


def unchanged(state: str, host: str, folder: str, asking: str | None) -> bool:
    """Whether every file of ``folder`` but ``asking`` is as the worker last accounted
    for it (then a sweep of it could queue nothing)."""
    mark = _load(state, host, folder)
    if mark is None:
        return False
    now = listing(folder)
    if now is None:
        return False
    mine = os.path.basename(asking) if asking else None
    then = {name: stat for name, stat in mark["files"].items() if name != mine}
    return {name: stat for name, stat in now.items() if name != mine} == then
