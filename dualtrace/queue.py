"""Durable job queue: one JSON file per session in ``<state>/queue/``.

The hook fast path imports this module, so it uses only the standard library's
cheapest modules (no dataclasses, typing or pathlib-heavy helpers: each costs
milliseconds on every agent turn). Jobs are plain dicts for the same reason; the
keys are documented on ``new_job``.

Concurrency: every read-modify-write of a job file happens under one short
``flock`` on ``queue/.lock`` and every write is atomic (temp file + fsync +
rename), so hooks of many agents and the worker never see or leave a torn file.
"""

from __future__ import annotations

import json
import os
import time
import zlib
from collections.abc import Callable  # already loaded by json (re -> functools)

from dualtrace import atomic, logfile

try:  # POSIX; Windows falls back to msvcrt byte-range locks below.
    import fcntl
except ImportError:  # pragma: no cover - exercised only on Windows
    fcntl = None  # type: ignore[assignment]

QUEUE = "queue"
SEEN = "seen"
RUNS = "runs.jsonl"
LOGS = logfile.LOGS
LOCK_NAME = ".lock"
INCOMING = "incoming"  # touches deferred by a hook that could not get the lock in time
BACKOFF_CAP_SECONDS = 3600.0

PENDING = "pending"
RUNNING = "running"
PARKED = "parked"


# --------------------------------------------------------------------------- paths

def fast_state_dir() -> str:
    """The state directory (``dualtrace.paths``: the one resolver, stdlib only)."""
    from dualtrace.paths import state_dir

    return state_dir()


def queue_dir(state: str) -> str:
    return os.path.join(state, QUEUE)


def job_id(host: str, session_id: str) -> str:
    """A file-name-safe id; ids that needed escaping get a checksum so they stay unique."""
    safe = "".join(c if (c.isascii() and (c.isalnum() or c in "-_.")) else "_" for c in session_id)
    safe = safe.strip(".")[:96] or "session"
    if safe != session_id:
        safe = f"{safe}-{zlib.crc32(session_id.encode('utf-8')):08x}"
    return f"{host}--{safe}"


def job_path(state: str, jid: str) -> str:
    return os.path.join(queue_dir(state), jid + ".json")


# --------------------------------------------------------------------------- io

def atomic_write_json(path: str, data: dict, fsync: bool = True) -> None:
    """Write ``data`` so readers see the old or the new file, never a partial one.

    ``fsync``: the file is flushed before the rename (off for a request that is cheap
    to lose); the folder is not (a rename lost to a power cut leaves the old job, which
    only re-runs): one fsync per hook, not two.
    """
    atomic.write_json(path, data, fsync=fsync, fsync_dir=False, sort_keys=True)


def read_json(path: str) -> dict | None:
    """The job at ``path``; None when missing. A corrupt file is returned as a marker."""
    try:
        with open(path, "rb") as fh:
            raw = fh.read()
    except FileNotFoundError:
        return None
    try:
        data = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        return {"_corrupt": True}
    return data if isinstance(data, dict) else {"_corrupt": True}


def append_line(path: str, record: dict) -> None:
    """One JSON line, written with a single O_APPEND write (atomic for small lines)."""
    data = (json.dumps(record, ensure_ascii=False, sort_keys=True) + "\n").encode("utf-8")
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        os.write(fd, data)
    finally:
        os.close(fd)


class FileLock:
    """An exclusive advisory lock on a file, released by the kernel if we die."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.fd: int | None = None

    def acquire(self, blocking: bool = True) -> bool:
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            if fcntl is not None:
                flags = fcntl.LOCK_EX | (0 if blocking else fcntl.LOCK_NB)
                fcntl.flock(fd, flags)
            else:  # pragma: no cover - Windows
                import msvcrt

                mode = msvcrt.LK_LOCK if blocking else msvcrt.LK_NBLCK
                msvcrt.locking(fd, mode, 1)
        except OSError:
            os.close(fd)
            if blocking:
                raise
            return False
        self.fd = fd
        return True

    def release(self) -> None:
        if self.fd is None:
            return
        try:
            if fcntl is not None:
                fcntl.flock(self.fd, fcntl.LOCK_UN)
        finally:
            os.close(self.fd)
            self.fd = None

    def __enter__(self) -> FileLock:
        self.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


def queue_lock(state: str) -> FileLock:
    return FileLock(os.path.join(queue_dir(state), LOCK_NAME))


def try_lock(lock: FileLock, wait: float) -> bool:
    """Take ``lock`` within ``wait`` seconds (polling a non-blocking flock); False if
    its holder keeps it longer (a worker stopped by SIGSTOP, a hung disk...)."""
    deadline = time.monotonic() + wait
    delay = 0.002
    while True:
        if lock.acquire(blocking=False):
            return True
        left = deadline - time.monotonic()
        if left <= 0:
            return False
        time.sleep(min(delay, left))
        delay = min(delay * 2, 0.02)


def ensure_dirs(state: str) -> None:
    os.makedirs(queue_dir(state), exist_ok=True)
    os.makedirs(os.path.join(state, LOGS), exist_ok=True)


def incoming_dir(state: str) -> str:
    return os.path.join(queue_dir(state), INCOMING)


# --------------------------------------------------------------------------- jobs

def new_job(jid: str, host: str, session_id: str, now: float) -> dict:
    """A fresh job. Keys:

    kind            "session" (encode one transcript), "sweep" (look for changed ones)
                    or "sync" (sync a memory directory with its remote; memory_dir set)
    status          pending | running | parked
    immediate       True: ready now (SessionEnd, pre-compact, sweep, retry);
                    False: ready ``debounce`` after ``dirty_at`` (Stop)
    dirty_at        time of the last event that touched the job
    not_before      earliest retry time after a failure (backoff)
    rev             bumped by every hook touch; the worker compares it after a run
                    to know whether the session changed while it was being encoded
    attempts, last_error, worker_pid, started_at: retry and crash bookkeeping
    """
    return {
        "id": jid, "kind": "session", "host": host, "session_id": session_id,
        "transcript": None, "cwd": None, "agent_id": None, "memory_dir": None,
        "status": PENDING, "immediate": False, "dirty_at": now, "not_before": 0.0,
        "rev": 0, "attempts": 0, "last_error": None, "events": {},
        "created_at": now, "updated_at": now,
        "worker_pid": None, "started_at": None,
    }


def touch(state: str, *, host: str, session_id: str, event: str, immediate: bool,
          kind: str = "session", transcript: str | None = None, cwd: str | None = None,
          agent_id: str | None = None, memory_dir: str | None = None,
          now: float | None = None, lock_wait: float | None = None,
          durable: bool = True) -> dict:
    """Create or refresh the job for one session (the hook's only write).

    ``lock_wait``: seconds the caller may wait for the queue lock (the hook: ~0.1 s);
    past that the touch is written to ``queue/incoming/`` instead (a file of its own,
    no lock needed) and folded into the job by the next ``fold_incoming`` (the worker
    before each scan, or the next touch). Returns the job, or for a deferred touch the
    request with ``"deferred": True``. None: wait as long as it takes. ``durable=False``:
    no fsync (a request that is cheap to lose, e.g. the SessionStart sweep: the next
    session start asks again; the fsync cost that hook ~10 ms of its wait).
    """
    now = time.time() if now is None else now
    ensure_dirs(state)
    request = {"host": host, "session_id": session_id, "event": event,
               "immediate": bool(immediate), "kind": kind, "transcript": transcript,
               "cwd": cwd, "agent_id": agent_id, "memory_dir": memory_dir, "now": now}
    lock = queue_lock(state)
    if lock_wait is None:
        lock.acquire()
    elif not try_lock(lock, lock_wait):
        return defer(state, request)
    try:
        fold_incoming(state)
        return _apply(state, request, fsync=durable)
    finally:
        lock.release()


def defer(state: str, request: dict) -> dict:
    """Write one touch request to ``queue/incoming/`` (atomic; unique name, in arrival
    order), for ``fold_incoming``. Holds what a job holds: ids and paths, no text."""
    folder = incoming_dir(state)
    os.makedirs(folder, exist_ok=True)
    name = f"{time.time_ns():020d}-{os.getpid()}.json"
    atomic_write_json(os.path.join(folder, name), request)
    return dict(request, deferred=True)


def fold_incoming(state: str) -> int:
    """Apply the deferred touches, oldest first, and delete them. Call it holding the
    queue lock. Returns how many were folded (an unreadable one is dropped)."""
    folder = incoming_dir(state)
    try:
        names = sorted(n for n in os.listdir(folder) if n.endswith(".json"))
    except FileNotFoundError:
        return 0
    folded = 0
    for name in names:
        path = os.path.join(folder, name)
        request = read_json(path)
        if request and not request.get("_corrupt") and request.get("session_id") \
                and request.get("host"):
            _apply(state, request)
            folded += 1
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass
    return folded


def has_incoming(state: str) -> bool:
    try:
        return any(n.endswith(".json") for n in os.listdir(incoming_dir(state)))
    except FileNotFoundError:
        return False


def _apply(state: str, request: dict, fsync: bool = True) -> dict:
    """The read-modify-write of one touch; the caller holds the queue lock."""
    host, session_id, kind = request["host"], str(request["session_id"]), \
        request.get("kind") or "session"
    now = float(request.get("now") or time.time())
    jid = job_id(host if kind == "session" else f"{host}-{kind}", session_id)
    path = job_path(state, jid)
    job = read_json(path)
    if job is None or job.get("_corrupt"):
        job = new_job(jid, host, session_id, now)
    elif _covered(job, request):
        return job
    job["kind"] = kind
    for key in ("transcript", "cwd", "agent_id", "memory_dir"):
        if request.get(key):
            job[key] = request[key]
    job["immediate"] = bool(job.get("immediate")) or bool(request.get("immediate"))
    job["dirty_at"] = max(now, float(job.get("dirty_at") or 0.0))
    job["updated_at"] = now
    job["rev"] = int(job.get("rev") or 0) + 1
    events: dict[str, int] = job["events"] if isinstance(job.get("events"), dict) else {}
    event = str(request.get("event") or "?")
    events[event] = int(events.get(event, 0)) + 1
    job["events"] = events
    atomic_write_json(path, job, fsync=fsync)
    return job


def _covered(job: dict, request: dict) -> bool:
    """A debounced touch (Stop) for a job whose encode is running and whose transcript
    has not changed since that run began: the run reads all of it, so the touch brings
    nothing to re-run. (Stop and SessionEnd of one turn run concurrently in the host
    shell's background; a Stop landing during SessionEnd's encode used to leave a
    debounced re-run behind, and a worker waiting for it.)"""
    if job.get("status") != RUNNING or request.get("immediate"):
        return False
    transcript = request.get("transcript") or job.get("transcript")
    try:
        started = float(job.get("started_at") or 0.0)
        return bool(transcript) and os.stat(str(transcript)).st_mtime < started
    except (OSError, TypeError, ValueError):
        return False


def remove(state: str, jid: str) -> bool:
    """Drop a job that is not running (its work moved elsewhere)."""
    path = job_path(state, jid)
    if not os.path.exists(path):
        return False
    with queue_lock(state):
        job = read_json(path)
        if job is None or job.get("status") == RUNNING:
            return False
        os.unlink(path)
    return True


def list_jobs(state: str) -> list[dict]:
    """Every job file, oldest first; corrupt files come back as ``{"_corrupt": path}``."""
    qdir = queue_dir(state)
    try:
        names = sorted(n for n in os.listdir(qdir) if n.endswith(".json"))
    except FileNotFoundError:
        return []
    jobs = []
    for name in names:
        job = read_json(os.path.join(qdir, name))
        if job is None:
            continue
        if job.get("_corrupt"):
            job = {"_corrupt": True, "id": name[:-5], "status": "corrupt"}
        jobs.append(job)
    jobs.sort(key=lambda j: (j.get("created_at") or 0.0, j.get("id", "")))
    return jobs


def due_at(job: dict, debounce_seconds: float) -> float:
    """When a pending job may run: now-ish if immediate, else after the debounce."""
    base = float(job.get("dirty_at") or 0.0)
    due = base if job.get("immediate") else base + debounce_seconds
    return max(due, float(job.get("not_before") or 0.0))


def retry(state: str, session: str | None = None) -> list[str]:
    """Re-queue parked (and failed-pending) jobs, all or those matching ``session``."""
    requeued: list[str] = []
    if not os.path.isdir(queue_dir(state)):
        return requeued
    with queue_lock(state):
        for job in list_jobs(state):
            if job.get("_corrupt") or job.get("status") == RUNNING:
                continue
            if session and session not in (job.get("session_id"), job.get("id")):
                continue
            if job.get("status") != PARKED and not job.get("last_error"):
                continue
            job.update(status=PENDING, immediate=True, attempts=0, not_before=0.0,
                       updated_at=time.time())
            atomic_write_json(job_path(state, job["id"]), job)
            requeued.append(job["id"])
    return requeued


def read_runs(state: str, limit: int = 10, memory_dir: str | None = None) -> list[dict]:
    """The last ``limit`` run records (tolerates a torn or foreign line); with
    ``memory_dir``, only the runs that encoded into that directory."""
    path = os.path.join(state, RUNS)
    try:
        with open(path, "rb") as fh:
            fh.seek(0, os.SEEK_END)
            size = fh.tell()
            fh.seek(max(0, size - 256 * 1024))
            lines = fh.read().splitlines()
    except FileNotFoundError:
        return []
    out: list[dict] = []
    for line in reversed(lines):  # newest first, so the filter still finds `limit`
        try:
            rec = json.loads(line)
        except ValueError:
            continue
        if isinstance(rec, dict) and (memory_dir is None or rec.get("memory_dir") in
                                      (None, memory_dir)):
            out.append(rec)
            if len(out) >= limit:
                break
    return out[::-1]


def status_summary(state: str | os.PathLike[str] | None = None, runs: int = 5,
                   memory_dir: str | None = None,
                   memory_dir_of: Callable[[dict], str] | None = None) -> dict:
    """What ``dualtrace status`` shows about the queue: counts, jobs, last runs (of
    ``memory_dir`` only, when given), worker. With ``memory_dir_of`` (the memory dir a
    job will write to), jobs for other memory dirs are only counted, as ``others``:
    one worker serves every project, but status speaks about this one."""
    state = os.fspath(state) if state is not None else fast_state_dir()
    jobs = list_jobs(state)
    counts = {PENDING: 0, RUNNING: 0, PARKED: 0, "corrupt": 0}
    listed = []
    others = 0
    here = os.path.realpath(memory_dir) if memory_dir else None
    for job in jobs:
        if here and memory_dir_of is not None and not job.get("_corrupt") and \
                os.path.realpath(memory_dir_of(job)) != here:
            others += 1
            continue
        status = job.get("status", PENDING)
        counts[status] = counts.get(status, 0) + 1
        listed.append({
            "id": job.get("id"), "session": job.get("session_id"), "host": job.get("host"),
            "kind": job.get("kind"), "status": status, "attempts": job.get("attempts", 0),
            "error": job.get("last_error"), "immediate": bool(job.get("immediate")),
            "dirty_at": job.get("dirty_at"),
        })
    pid = None
    try:
        with open(os.path.join(state, "worker.pid"), encoding="ascii") as fh:
            pid = int(fh.read().strip() or 0) or None
    except (OSError, ValueError):
        pid = None
    lock = FileLock(os.path.join(state, "worker.lock"))
    running = os.path.exists(lock.path) and not lock.acquire(blocking=False)
    if not running:
        lock.release()
    return {
        "state_dir": state, "counts": counts, "jobs": listed, "others": others,
        "worker": {"running": running, "pid": pid if running else None},
        "runs": read_runs(state, runs, memory_dir), "free_bytes": free_bytes(state),
    }


FULL_BYTES = 1 << 20  # below this, a hook's job write or a run record may not fit


def free_bytes(state: str) -> int | None:
    """Bytes free for us on the state directory's filesystem (None: unknown)."""
    try:
        st = os.statvfs(state)
    except (OSError, AttributeError):
        return None
    return st.f_bavail * st.f_frsize


def format_status(summary: dict) -> list[str]:
    """Human lines for the queue part of ``dualtrace status``."""
    c = summary["counts"]
    worker = summary["worker"]
    lines = [
        f"queue:      {c.get(PENDING, 0)} queued, {c.get(RUNNING, 0)} running, "
        f"{c.get(PARKED, 0)} failed" + (f", {c['corrupt']} corrupt" if c.get("corrupt") else "")
        + (f" (and {summary['others']} for other projects)" if summary.get("others") else ""),
        "worker:     " + (f"running (pid {worker['pid']})" if worker["running"] else "idle"),
    ]
    free = summary.get("free_bytes")
    if free is not None and free < FULL_BYTES:
        lines.append(f"state dir:  FULL ({free // 1024} KiB free in {summary['state_dir']}): "
                     "sessions cannot be queued; free space, and the next session start "
                     "catches them up")
    for job in summary["jobs"]:
        if job["status"] == PARKED or job.get("error"):
            lines.append(f"  {job['status']:<8} {job['session']}  attempts {job['attempts']}: "
                         f"{job.get('error') or ''}")
        elif job["status"] == RUNNING:
            lines.append(f"  running  {job['session']}")
    if summary["runs"]:
        lines.append("last runs:")
        for run in summary["runs"]:
            when = time.strftime("%Y-%m-%d %H:%M", time.localtime(run.get("finished_at") or 0))
            what = run.get("error") or run.get("skipped") or (
                f"{len(run.get('operations') or [])} ops, {run.get('tokens') or 0} tokens")
            lines.append(f"  {when}  {run.get('session')}  {run.get('backend') or '-'}  "
                         f"{float(run.get('duration') or 0):.1f}s  {what}")
    return lines
