"""The background worker: drains the durable queue, then exits.

One worker per state directory (an ``flock`` on ``<state>/worker.lock``, released by
the kernel when the process dies, so a SIGKILL never leaves a stale lock). It runs
jobs one at a time, grouped by memory directory; the pipeline takes that
directory's lock itself, so a manual ``dualtrace encode`` cannot interleave either.

Every job gets a run record in ``<state>/runs.jsonl``. A failed job is retried with
exponential backoff up to ``max_attempts`` times, then parked with its error until
``dualtrace retry``. A job left ``running`` by a dead worker is recovered at start.
The worker waits for debounced jobs that come due within ``MAX_WAIT`` and exits
when nothing is pending; the next hook starts a new one.

Idle, it does not re-read the queue: it sleeps until the next job is due and polls
only the queue folder's mtime (a hook's write renames a file into it). The queue
lock is held only to claim, finish or fail one job and to decide to exit; job
files are read and settings loaded outside it, so a worker paused at any moment
(SIGSTOP, a laptop lid) blocks a hook for no longer than one small file write.

A full state directory (ENOSPC) stops the worker with one line in its log; the
jobs stay queued, and the next session start's sweep also queues sessions whose
hooks could not write their job.
"""

from __future__ import annotations

import errno
import os
import sys
import time
import traceback
from pathlib import Path

from dualtrace import config, faults, logfile, queue, sweepmark
from dualtrace.errors import DualtraceError
from dualtrace.hooks import registry
from dualtrace.retry import Retry

POLL_SECONDS = 0.5
MAX_WAIT_SECONDS = 900.0
RETRY_BASE_SECONDS = 30.0
SWEEP_MAX_AGE_DAYS = 7.0
SETTINGS_TTL = 60.0
# A queue folder mtime this recent may share its (coarse) clock tick with a write
# that follows it: look again instead of trusting it.
FRESH_NS = 50_000_000
FULL_ERRNOS = (errno.ENOSPC, errno.EDQUOT)


def _env_float(name: str, default: float) -> float:
    try:
        return float(os.environ[name])
    except (KeyError, ValueError):
        return default


class Worker:
    def __init__(self, state: Path) -> None:
        self.state = state
        self.s = str(state)
        self.poll = _env_float("DUALTRACE_WORKER_POLL", POLL_SECONDS)
        self.max_wait = _env_float("DUALTRACE_WORKER_MAX_WAIT", MAX_WAIT_SECONDS)
        self.retry_base = _env_float("DUALTRACE_RETRY_SECONDS", RETRY_BASE_SECONDS)
        self.lock = queue.FileLock(os.path.join(self.s, "worker.lock"))
        self._settings: dict[str, tuple[float, config.Settings]] = {}
        self.current_memdir: str | None = None
        self.scans = 0  # full reads of the queue (for tests and the log)
        self.start_texts_due = True  # texts a hook stored without related memories
        self.start_rechecks = 0

    # ---------------------------------------------------------------- lifecycle

    def run(self) -> int:
        queue.ensure_dirs(self.s)
        if not self.lock.acquire(blocking=False):
            return 0  # another worker owns the queue
        released = False
        try:
            Path(self.s, "worker.pid").write_text(str(os.getpid()), encoding="ascii")
            self.log("start")
            self.recover_stale()
            while True:
                jobs, stamp = self.scan()
                claimed = self.claim(jobs)
                if claimed is not None:
                    self.process(*claimed)
                    self.start_texts_due = True
                    continue
                if self.start_texts_due:
                    self.start_texts_due = False
                    self.complete_start_texts()
                wait = self.idle_wait(jobs, stamp)
                if wait is None and self.start_rechecks < 3 and self.start_texts_pending() \
                        and self.lock.acquire(blocking=False):
                    # A SessionStart hook stored a text while this worker ran (it
                    # spawned it, then built the text): complete it before exiting.
                    # Checked after the lock is released, as the hook writes the text
                    # before it tries the lock: one of the two always sees the other.
                    Path(self.s, "worker.pid").write_text(str(os.getpid()), encoding="ascii")
                    self.start_texts_due = True
                    self.start_rechecks += 1  # a text that cannot be built: no loop
                    continue
                if wait is None:
                    # A hook that could not get the queue lock deferred its touch to
                    # queue/incoming/ and saw this worker alive: stay for it.
                    if queue.has_incoming(self.s) and self.lock.acquire(blocking=False):
                        Path(self.s, "worker.pid").write_text(str(os.getpid()),
                                                              encoding="ascii")
                        continue
                    released = True  # released under the queue lock in idle_wait
                    break
                self.nap(wait, stamp)
        except OSError as exc:
            if exc.errno not in FULL_ERRNOS:
                raise
            # Nothing more can be recorded; the job files stay as they are (a job left
            # running is recovered by the next worker) and nothing is lost.
            self.log(f"state directory {self.s} is full ({exc.strerror}): stopping; "
                     "queued sessions run when space is free", stderr=True)
            self.lock.release()
            released = True
            return 0
        finally:
            if not released:
                self.lock.release()
        self.log(f"idle, exiting ({self.scans} queue scans)")
        return 0

    def scan(self) -> tuple[list[dict], tuple[int, int] | None]:
        """Every job, and the queue folder's stamp taken before reading them.

        No lock: job files are replaced atomically, so a read sees a whole file; a
        write after the stamp changes the folder's mtime (see ``nap``).
        """
        self.scans += 1
        if queue.has_incoming(self.s):
            with queue.queue_lock(self.s):
                queue.fold_incoming(self.s)  # touches hooks deferred while the lock was held
        stamp = self._stamp()
        return queue.list_jobs(self.s), stamp

    def _stamp(self) -> tuple[int, int] | None:
        """The queue folder's and its incoming folder's mtimes (None: no queue)."""
        try:
            st = os.stat(queue.queue_dir(self.s))
        except OSError:
            return None
        try:
            incoming = os.stat(queue.incoming_dir(self.s)).st_mtime_ns
        except OSError:
            incoming = 0
        return st.st_mtime_ns, incoming

    def nap(self, seconds: float, stamp: tuple[int, int] | None) -> None:
        """Sleep up to ``seconds``; wake early when a job file is written."""
        deadline = time.monotonic() + seconds
        fresh = stamp is None or time.time_ns() - max(stamp) < FRESH_NS
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                return
            time.sleep(min(self.poll, left))
            if fresh or self._stamp() != stamp:
                return

    def idle_wait(self, jobs: list[dict], stamp: tuple[int, int] | None) -> float | None:
        """Seconds to sleep before the next scan, or None to exit.

        Exit is decided and the worker lock released while holding the queue lock:
        a hook that queues a job after that sees the lock free and starts a worker.
        The lock covers one stat: the dues were computed from ``jobs`` before.
        """
        now = time.time()
        dues = [self.due(job) for job in jobs if job.get("status") == queue.PENDING]
        if not dues or min(dues) - now > self.max_wait:
            with queue.queue_lock(self.s):
                if self._stamp() != stamp or stamp is None:
                    return 0.0  # a job was written since the scan: look again
                try:
                    os.unlink(os.path.join(self.s, "worker.pid"))
                except OSError:
                    pass
                self.lock.release()
                return None
        return max(0.0, min(dues) - now)

    def recover_stale(self) -> None:
        """We hold the worker lock, so any job marked running belongs to a dead worker."""
        jobs, _stamp = self.scan()
        stale = [j for j in jobs if j.get("_corrupt") or j.get("status") == queue.RUNNING]
        for job in stale:
            self.settings_for(job.get("cwd"))  # loaded before the lock, not under it
        if not stale:
            return
        with queue.queue_lock(self.s):
            for job in stale:
                if job.get("_corrupt"):
                    self.log(f"removing corrupt job file {job['id']}")
                    _unlink(queue.job_path(self.s, job["id"]))
                    continue
                current = queue.read_json(queue.job_path(self.s, job["id"]))
                if not current or current.get("status") != queue.RUNNING:
                    continue
                reason = f"worker pid {current.get('worker_pid')} died during the job"
                self._fail(current, reason, backoff=False)
                self.log(f"recovered {job['id']}: {reason}")

    # ---------------------------------------------------------------- scheduling

    def settings_for(self, cwd: str | None) -> config.Settings:
        key = cwd or ""
        hit = self._settings.get(key)
        if hit and time.monotonic() - hit[0] < SETTINGS_TTL:
            return hit[1]
        faults.point("worker-settings")
        try:
            settings = config.load_settings(config.project_root(cwd) if cwd else None)
        except DualtraceError as exc:
            self.log(f"settings for {cwd}: {exc}; using defaults")
            settings = config.Settings()
        self._settings[key] = (time.monotonic(), settings)
        return settings

    def due(self, job: dict) -> float:
        debounce = os.environ.get("DUALTRACE_DEBOUNCE_SECONDS")
        try:
            seconds = float(debounce) if debounce else \
                self.settings_for(job.get("cwd")).debounce_minutes * 60.0
        except ValueError:
            seconds = self.settings_for(job.get("cwd")).debounce_minutes * 60.0
        return queue.due_at(job, seconds)

    def memory_dir_for(self, job: dict) -> str:
        if job.get("memory_dir"):
            return str(job["memory_dir"])
        settings = self.settings_for(job.get("cwd"))
        if job.get("host") in registry.HOSTS and not (settings.memory_dir
                                                      or os.environ.get("DUALTRACE_MEMORY_DIR")):
            owned = registry.get(job["host"]).memory_dir(job.get("agent_id"))  # Letta's memfs
            if owned:
                return owned
        return str(config.resolve_memory_dir(None, job.get("cwd"), settings))

    def claim(self, jobs: list[dict]) -> tuple[dict, int, str | None] | None:
        """Mark the next ready job running; sweeps first, then the current memory dir.

        Chosen from the scan without the lock (settings and memory directories are
        resolved there); under the lock only that job is re-read and marked.
        """
        now = time.time()
        ready = [j for j in jobs if j.get("status") == queue.PENDING and self.due(j) <= now]
        if not ready:
            return None
        sweeps = [j for j in ready if j.get("kind") == "sweep"]
        memdirs: dict[str, str | None] = {}
        for job in ready:
            if job.get("kind") != "sweep":
                try:
                    memdirs[job["id"]] = self.memory_dir_for(job)
                except DualtraceError:
                    memdirs[job["id"]] = None
        same = [j for j in ready if memdirs.get(j["id"]) == self.current_memdir]
        chosen = (sweeps or same or ready)[0]
        path = queue.job_path(self.s, chosen["id"])
        with queue.queue_lock(self.s):
            current = queue.read_json(path)
            if not current or current.get("_corrupt") or \
                    current.get("status") != queue.PENDING or self.due(current) > time.time():
                return None  # changed since the scan; the next scan sees it
            current.update(status=queue.RUNNING, worker_pid=os.getpid(), started_at=now,
                           immediate=False)
            queue.atomic_write_json(path, current)
        memdir = memdirs.get(current["id"])
        if (current.get("memory_dir"), current.get("cwd")) != (chosen.get("memory_dir"),
                                                               chosen.get("cwd")):
            memdir = None  # re-resolved by encode
        return current, int(current.get("rev") or 0), memdir

    # ---------------------------------------------------------------- running

    def process(self, job: dict, rev: int, memdir: str | None) -> None:
        if job.get("kind") == "sync":
            self.sync(job, rev)
            return
        if job.get("kind") == "sweep":
            try:
                self.sweep(job)
            except Exception as exc:  # noqa: BLE001 - a sweep failure only costs a catch-up
                self.log(f"sweep {job.get('session_id')}: {type(exc).__name__}: {exc}")
            self._finish(job, rev, None)
            return
        self.current_memdir = memdir
        started = time.time()
        record: dict = {
            "session": job.get("session_id"), "job": job["id"], "host": job.get("host"),
            "memory_dir": memdir, "attempt": int(job.get("attempts") or 0) + 1,
            "worker_pid": os.getpid(), "started_at": started, "backend": None,
            "operations": [], "tokens": 0, "commit": None, "error": None, "skipped": None,
        }
        seen = None
        try:
            _hold("before")
            seen = self.encode(job, memdir, record)
            _hold("after")
        except Exception as exc:  # noqa: BLE001 - every failure is recorded and retried
            expected = isinstance(exc, DualtraceError)
            resume_at = getattr(exc, "resume_at", None)  # spend.BudgetExceeded, over_budget=wait
            if isinstance(resume_at, float):
                record["skipped"] = f"waiting for the daily budget: {exc}"
                record["deferred_until"] = resume_at
            else:
                record["error"] = f"{type(exc).__name__}: {exc}" if not expected else str(exc)
            if not expected:
                self.log("".join(traceback.format_exception(type(exc), exc, exc.__traceback__)))
        record["finished_at"] = time.time()
        record["duration"] = round(record["finished_at"] - started, 3)
        queue.append_line(os.path.join(self.s, queue.RUNS), record)
        self.log(encode_line(record))
        self.settings_for(job.get("cwd"))  # for _fail, loaded before the lock
        if record.get("deferred_until"):
            self.log(f"{job['id']}: deferred until the budget resets")
            with queue.queue_lock(self.s):
                current = queue.read_json(queue.job_path(self.s, job["id"]))
                if current and not current.get("_corrupt"):
                    current.update(status=queue.PENDING, worker_pid=None, started_at=None,
                                   not_before=record["deferred_until"], immediate=True,
                                   last_error=record["skipped"][:2000])
                    queue.atomic_write_json(queue.job_path(self.s, job["id"]), current)
        elif record["error"]:
            self.log(f"{job['id']}: failed: {record['error']}")
            with queue.queue_lock(self.s):
                current = queue.read_json(queue.job_path(self.s, job["id"]))
                if current and not current.get("_corrupt"):
                    self._fail(current, record["error"], backoff=True)
        else:
            self._finish(job, rev, seen)
            target = record.get("memory_dir") or memdir
            if record.get("commit") and target:
                self.queue_sync(job, str(target))
                self.refresh_start_texts(str(target))

    def refresh_start_texts(self, memdir: str) -> None:
        """The next session's SessionStart hook prints a stored text instead of building
        it (dualtrace.startctx): rebuild the ones of the memory dir just committed to."""
        from dualtrace import startctx

        try:
            startctx.refresh(self.s, memdir)
        except Exception as exc:  # noqa: BLE001 - a stale text only costs the hook a build
            self.log(f"session-start text for {memdir}: {type(exc).__name__}: {exc}")

    def start_texts_pending(self) -> bool:
        from dualtrace import startctx

        try:
            return startctx.pending(self.s)
        except Exception:  # noqa: BLE001 - nothing to complete then
            return False

    def complete_start_texts(self) -> None:
        """SessionStart texts a hook built and stored lack the memories related to the
        last session (a hybrid recall the hook does not pay for): rebuild them whole."""
        from dualtrace import startctx

        try:
            startctx.complete(self.s)
        except Exception as exc:  # noqa: BLE001 - the hook's own text stays usable
            self.log(f"session-start texts: {type(exc).__name__}: {exc}")

    # ---------------------------------------------------------------- team sync

    def queue_sync(self, job: dict, memdir: str) -> None:
        """After a commit, with ``sync = "after-encode"``: a sync job for that memory dir.

        A job of its own (not a call here) so it backs off on its own schedule when
        the remote is unreachable, survives the worker exiting, and one job serves
        any number of commits made before it runs.
        """
        settings = self.settings_for(job.get("cwd"))
        if settings.sync != "after-encode":
            return
        refused = sync_refused(memdir)
        if refused:
            self.log(f"sync {memdir}: not queued, the last sync was refused ({refused[:200]}); "
                     "after-encode syncs resume once `dualtrace sync` succeeds")
            return
        queue_sync_job(self.s, memdir, job.get("cwd"))

    def sync(self, job: dict, rev: int) -> None:
        from dualtrace.memfs.store import MemoryStore
        from dualtrace.memfs.sync import sync as do_sync

        memdir = str(job.get("memory_dir") or "")
        settings = self.settings_for(job.get("cwd"))
        try:
            if not memdir:
                raise DualtraceError("sync job without a memory directory")
            store = MemoryStore(memdir, author=(settings.author_name, settings.author_email),
                                create=False)
            try:
                report = do_sync(store, settings.sync_remote)
            finally:
                store.close()
        except Exception as exc:  # noqa: BLE001 - a failed sync is retried, never fatal
            error = str(exc) if isinstance(exc, DualtraceError) else \
                f"{type(exc).__name__}: {exc}"
            if _needs_the_user(exc):
                # Retrying on a timer cannot help: stop; status says why and what to run.
                self.log(f"sync {memdir}: refused, not retried: {error}")
                self._finish(job, rev, None)
                return
            self.log(f"sync {memdir}: failed: {error}")
            with queue.queue_lock(self.s):
                current = queue.read_json(queue.job_path(self.s, job["id"]))
                if current and not current.get("_corrupt"):
                    # Offline is normal for a laptop: back off (capped), never park.
                    attempts = int(current.get("attempts") or 0) + 1
                    current.update(status=queue.PENDING, attempts=attempts, immediate=True,
                                   last_error=error[:2000], worker_pid=None, started_at=None,
                                   not_before=time.time() + self.retry(None).wait(attempts),
                                   updated_at=time.time())
                    queue.atomic_write_json(queue.job_path(self.s, job["id"]), current)
            return
        self.log(f"sync {memdir}: {report.incoming} in, {report.outgoing} out, "
                 f"{len(report.merged)} merged, {len(report.conflicts)} conflicts "
                 f"({report.took_ms:.0f} ms)")
        self._finish(job, rev, None)

    def encode(self, job: dict, memdir: str | None, record: dict) -> dict | None:
        """Run the pipeline for one session job; fills ``record``; returns a seen record."""
        settings = self.settings_for(job.get("cwd"))
        if config.is_disabled(settings):
            record["skipped"] = "dualtrace disabled for this project"
            return None
        if memdir is None:
            memdir = self.memory_dir_for(job)
            record["memory_dir"] = memdir
        cwd = job.get("cwd")
        if cwd and _inside(Path(cwd), Path(memdir)):
            record["skipped"] = "session runs inside the memory directory"
            return None
        transcript = job.get("transcript")
        if not transcript and job.get("host") in registry.HOSTS:
            transcript = registry.get(job["host"]).find_transcript(str(job.get("session_id")))
        if not transcript or not os.path.isfile(transcript):
            raise DualtraceError(f"transcript not found: {transcript or '(none given)'}")
        record["transcript"] = transcript
        stat = os.stat(transcript)
        from dualtrace.pipeline import encode_session

        ws = config.workspace(cwd, memory_dir=memdir, settings=settings)
        report = encode_session(
            Path(transcript), workspace=ws, backend=settings.backend, host=job.get("host"),
            # Hooks never lose a session to a model outage: offline unless the config
            # asks for retries instead (fallback = "none").
            fallback=settings.fallback or "offline",
        )
        info = report.to_dict()
        for key in ("backend", "operations", "commit", "skipped", "cursor"):
            record[key] = info.get(key)
        usage = info.get("usage") or {}
        record["tokens"] = int(usage.get("input_tokens") or 0) + int(usage.get("output_tokens") or 0)
        record["usage"] = usage
        record["encode_ms"] = (info.get("timings_ms") or {}).get("total")
        return {"transcript": transcript, "size": stat.st_size, "mtime": stat.st_mtime,
                "mtime_ns": stat.st_mtime_ns, "at": time.time()}

    def sweep(self, job: dict) -> None:
        """Queue this project's transcripts that grew since we last encoded them.

        Only sessions dualtrace has seen before count (a seen record exists): a
        first install must not bill a model for every old session on disk. The
        exception is a session that was never queued although dualtrace was already
        recording this project (its transcript changed after the project's first
        seen record): its hooks could not write a job (a full state directory, a
        crash). It is queued debounced, so a session still going on is left alone
        until it is quiet.
        """
        name = job.get("host") or registry.DEFAULT
        host = registry.get(name)
        current = job.get("transcript") or ""
        # The folder as it is before any file is judged: what this sweep accounts for
        # (sweepmark; hosts whose sweep looks at that folder only).
        folder = os.path.dirname(current) if current else str(job.get("session_id") or "")
        before = sweepmark.listing(folder) if host.SWEEP_FOLDER and folder else None
        horizon = time.time() - SWEEP_MAX_AGE_DAYS * 86400
        candidates = []
        for path in host.sibling_transcripts(current or str(job.get("session_id")) + "/x"):
            if path == current:
                continue
            session = host.session_of(path)
            jid = queue.job_id(name, session)
            seen = queue.read_json(os.path.join(self.s, queue.SEEN, jid + ".json"))
            candidates.append((path, session, jid, None if seen and seen.get("_corrupt")
                               else seen))
        recording_since = min((float(seen["at"]) for *_, seen in candidates
                               if seen and isinstance(seen.get("at"), (int, float))),
                              default=None)
        queued = missed = 0
        for path, session, jid, seen in candidates:
            if os.path.exists(queue.job_path(self.s, jid)):
                continue
            try:
                st = os.stat(path)
            except OSError:
                continue
            if st.st_mtime < horizon:
                continue
            if not seen:
                if recording_since is None or st.st_mtime <= recording_since:
                    continue
                missed += 1
            elif path == seen.get("transcript"):
                if st.st_size <= int(seen.get("size") or 0):
                    continue
            elif st.st_mtime <= float(seen.get("mtime") or 0):
                # Another file for a seen session (Codex rewrites an idle rollout as
                # .jsonl.zst and deletes the plain one): sizes do not compare; queue it
                # once when it is newer than the record (the cursor skips what is done).
                continue
            queue.touch(self.s, host=name, session_id=session, event="sweep",
                        immediate=bool(seen), transcript=path, cwd=job.get("cwd"),
                        memory_dir=job.get("memory_dir"))
            queued += 1
        if before is not None:
            sweepmark.record(self.s, name, folder, before, current or None)
        self.log(f"sweep {os.path.dirname(current)}: queued {queued}"
                 + (f" ({missed} never queued by their hooks)" if missed else ""))

    def _finish(self, job: dict, rev: int, seen: dict | None) -> None:
        path = queue.job_path(self.s, job["id"])
        with queue.queue_lock(self.s):
            current = queue.read_json(path)
            if seen is not None:
                os.makedirs(os.path.join(self.s, queue.SEEN), exist_ok=True)
                queue.atomic_write_json(os.path.join(self.s, queue.SEEN, job["id"] + ".json"),
                                        seen)
                self._note_encoded(job, seen)
            if current is None or current.get("_corrupt") or int(current.get("rev") or 0) == rev:
                _unlink(path)
                return
            # A hook touched the job while it ran: keep it for the new turns.
            current.update(status=queue.PENDING, worker_pid=None, started_at=None,
                           attempts=0, last_error=None, not_before=0.0)
            queue.atomic_write_json(path, current)

    def _note_encoded(self, job: dict, seen: dict) -> None:
        """The encoded transcript's entry in its folder's sweep mark (sweepmark)."""
        name = str(job.get("host") or "")
        if name not in registry.HOSTS or not registry.get(name).SWEEP_FOLDER \
                or not isinstance(seen.get("mtime_ns"), int):
            return
        try:
            sweepmark.encoded(self.s, name, str(seen["transcript"]), int(seen["size"]),
                              seen["mtime_ns"])
        except OSError as exc:  # a stale mark only costs the next SessionStart a sweep
            self.log(f"sweep mark for {seen.get('transcript')}: {exc}")

    def retry(self, tries: int | None) -> Retry:
        """A failed job waits ``retry_base`` seconds, doubling per failure up to an hour;
        it is parked after ``tries`` (None: never, a sync job)."""
        return Retry(base=self.retry_base, cap=queue.BACKOFF_CAP_SECONDS, tries=tries)

    def _fail(self, job: dict, error: str, *, backoff: bool) -> None:
        """Record a failed attempt (queue lock held): back off, or park after K tries."""
        attempts = int(job.get("attempts") or 0) + 1
        limit = max(1, int(self.settings_for(job.get("cwd")).max_attempts))
        job.update(attempts=attempts, last_error=error[:2000], worker_pid=None,
                   started_at=None, updated_at=time.time())
        policy = self.retry(limit)
        if policy.exhausted(attempts):
            job["status"] = queue.PARKED
        else:
            job["status"] = queue.PENDING
            job["immediate"] = True
            job["not_before"] = time.time() + (policy.wait(attempts) if backoff else 0.0)
        queue.atomic_write_json(queue.job_path(self.s, job["id"]), job)

    def log(self, message: str, stderr: bool = False) -> None:
        line = logfile.line(message)
        try:
            logfile.append(logfile.path(self.s, "worker.log"), line)
        except OSError:
            stderr = True  # e.g. the state directory is full: at least say it once
        if stderr:
            try:
                sys.stderr.write("dualtrace worker: " + line.split(" ", 2)[2])
                sys.stderr.flush()
            except (OSError, ValueError):
                pass


def encode_line(record: dict) -> str:
    """worker.log's line for one encode: session, backend, time, and what came of it
    (the commit and its operations, the skip reason, or the error)."""
    ms = record.get("encode_ms")
    took = f"{ms:.0f} ms" if isinstance(ms, (int, float)) else \
        f"{float(record.get('duration') or 0.0) * 1000:.0f} ms"
    head = (f"encode {record.get('session')} ({record.get('host') or 'hand'}, "
            f"attempt {record.get('attempt')}): backend {record.get('backend') or '-'}, {took}")
    if record.get("error"):
        return f"{head}: failed: {record['error']}"
    if record.get("commit"):
        ops = [op for op in record.get("operations") or []
               if isinstance(op, dict) and op.get("path") and op.get("action") != "skip"]
        what = ", ".join(f"{op['action']} {op['path']}" for op in ops[:6])
        more = f" (+{len(ops) - 6} more)" if len(ops) > 6 else ""
        return f"{head}: commit {str(record['commit'])[:12]}" + \
            (f": {what}{more}" if what else "")
    return f"{head}: no commit: {record.get('skipped') or 'nothing to store'}"


def _needs_the_user(exc: Exception) -> bool:
    """A sync failure only the person can end (memfs.sync's ``refused``: not this
    memory's remote, no such remote, a branch to pick, a merge to finish). Offline, a
    held lock and other git failures may pass by themselves, and are retried."""
    from dualtrace.memfs.sync import SyncError

    return isinstance(exc, SyncError) and exc.refused


def sync_refused(memdir: str) -> str | None:
    """The error of the memory dir's last sync when it was refused, else None."""
    from dualtrace.memfs.sync import read_status

    info = read_status(Path(memdir))
    return str(info["last_error"]) if info.get("refused") and info.get("last_error") else None


def sync_after_hand_commit(memdir: str, cwd: str | None, settings: config.Settings) -> str | None:
    """``sync = "after-encode"`` for a commit made by hand (``dualtrace encode``,
    ``backfill``): the same sync job a hook's commit gets, run by a background worker
    started now (it retries when offline); a line to print, or None (no sync wanted)."""
    from dualtrace.memfs.sync import remotes

    if settings.sync != "after-encode" or not remotes(Path(memdir)):
        return None
    refused = sync_refused(memdir)
    if refused:
        return (f"sync: not started, the last sync was refused ({refused[:200]}); fix that, "
                "then run `dualtrace sync`")
    from dualtrace.hookcmd import ensure_worker

    state = str(config.state_dir())
    queue.ensure_dirs(state)
    queue_sync_job(state, memdir, cwd)
    ensure_worker(state)
    return "sync: queued (sync = \"after-encode\"); the background worker pushes this commit, " \
        "`dualtrace status` shows how it went"


def queue_sync_job(state: str, memdir: str, cwd: str | None) -> None:
    """The memory dir's one sync job (``sync_key``), due at once."""
    queue.touch(state, host="dualtrace", session_id=sync_key(memdir), event="commit",
                immediate=True, kind="sync", cwd=cwd, memory_dir=memdir)


def sync_key(memdir: str) -> str:
    """The sync job's session id: one job per memory directory."""
    import hashlib

    return "sync-" + hashlib.sha256(str(Path(memdir).resolve()).encode()).hexdigest()[:12]


def _hold(phase: str) -> None:
    """Fault injection for tests: DUALTRACE_WORKER_HOLD=before:SECONDS or after:SECONDS
    sleeps around the pipeline call so a test can SIGKILL the worker at that point."""
    spec = os.environ.get("DUALTRACE_WORKER_HOLD", "")
    if spec.startswith(phase + ":"):
        time.sleep(float(spec.split(":", 1)[1]))


def _inside(path: Path, root: Path) -> bool:
    try:
        path.resolve().relative_to(root.resolve())
        return True
    except (ValueError, OSError):
        return False


def _unlink(path: str) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass


def main() -> int:
    """``python -m dualtrace.worker`` / ``dualtrace worker``: run until the queue is idle."""
    os.environ["DUALTRACE_CHILD"] = "1"  # anything we start must not re-enter our hooks
    return Worker(config.state_dir()).run()


if __name__ == "__main__":
    sys.exit(main())
