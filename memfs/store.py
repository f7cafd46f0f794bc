"""MemoryStore: typed, confined, atomic, locked access to one memory directory.

The store never deletes a memory file: it has no API to do so. Every
read-modify-write happens under ``store.lock()`` (a filelock in the gitignored
``.dualtrace/`` folder), and callers re-read state after acquiring it.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

from dualtrace.atomic import write_text as atomic_write_text
from dualtrace.errors import DualtraceError, FormatError, PathError
from dualtrace.memfs import formats, layout
from dualtrace.memfs.anchors import MAX_FILE_BYTES, LinkError, confine, read_confined
from dualtrace.memfs.formats import Fact, Memory, Moment, SystemFile
from dualtrace.memfs.types import MEMORY_TYPES

log = logging.getLogger(__name__)

STATE_FOLDER = ".dualtrace"
# What a memory directory may hold before dualtrace has touched it (see
# MemoryStore._refuse_foreign_directory): the type folders and their old spellings, the
# moment, bullet, record and archive folders, and git's own files.
_MEMORY_DIR_ENTRIES = frozenset(
    [t.folder for t in MEMORY_TYPES] + [a for t in MEMORY_TYPES for a in t.aliases]
    + ["scenes", "system", "sessions", "archive", ".git", ".gitignore", ".gitattributes"])


@dataclass(frozen=True)
class ScanResult:
    memories: tuple[Memory, ...]
    problems: tuple[FormatError, ...]

    def facts(self) -> list[Fact]:
        return [m for m in self.memories if isinstance(m, Fact)]



class MemoryStore:
    def __init__(
        self,
        root: Path | str,
        *,
        author: tuple[str, str] = ("dualtrace", "dualtrace@localhost"),
        project: str = "project",
        create: bool = True,
        read_only: bool = False,
        lock_timeout: float = 120.0,
    ) -> None:
        self.root = Path(root).expanduser().resolve()
        self.author = author
        self.project = project
        self.lock_timeout = lock_timeout
        # read_only: opened by a command that only looks; nothing is created or written.
        self.read_only = read_only
        if self.root.exists() and not self.root.is_dir():
            raise DualtraceError(f"memory directory {self.root} is not a directory")
        if create and not read_only:
            self.ensure()
        elif not self.root.is_dir():
            raise DualtraceError(f"memory directory {self.root} does not exist")

    # -------------------------------------------------------- setup

    @property
    def state_path(self) -> Path:
        return self.root / STATE_FOLDER

    def ensure(self) -> None:
        self._refuse_foreign_directory()
        try:
            self.root.mkdir(parents=True, exist_ok=True)
            self.state_path.mkdir(exist_ok=True)
        except OSError as exc:
            raise self._not_writable(exc) from None
        with self.lock():
            _ = self.git  # initialises the repository on first use

    def _refuse_foreign_directory(self) -> None:
        """A --memory-dir that points at someone's code or papers must never be
        git-initialised or committed into. A folder is taken as a memory directory when
        it is new or empty, has our state folder, is a clone of one (its .gitignore lists
        the state folder), or holds nothing but memory folders."""
        if not self.root.is_dir() or (self.root / STATE_FOLDER).is_dir():
            return
        try:
            ignore = (self.root / ".gitignore").read_text(encoding="utf-8", errors="replace")
        except OSError:
            ignore = ""
        if f"{STATE_FOLDER}/" in ignore.split():
            return
        try:
            names = sorted(p.name for p in self.root.iterdir())
        except OSError as exc:
            raise self._not_writable(exc) from None
        foreign = [n for n in names if n not in _MEMORY_DIR_ENTRIES]
        if foreign:
            shown = ", ".join(foreign[:3]) + (", ..." if len(foreign) > 3 else "")
            raise DualtraceError(
                f"{self.root} is not a dualtrace memory directory (it holds {shown}); "
                "nothing was changed: choose a new or empty folder for --memory-dir")

    @cached_property
    def git(self):
        from dualtrace.memfs.gitrepo import MemoryRepo

        return MemoryRepo(self.root, self.author, read_only=self.read_only)

    @cached_property
    def _lock(self):
        from filelock import FileLock

        self.state_path.mkdir(parents=True, exist_ok=True)
        # thread_local=False: one store object may be shared by a worker's threads.
        return FileLock(str(self.state_path / "lock"), timeout=self.lock_timeout,
                        thread_local=False)

    @contextlib.contextmanager
    def lock(self) -> Iterator[None]:
        """Exclusive access for a read-modify-write-commit; re-entrant per store."""
        from filelock import Timeout

        try:
            lock = self._lock
            lock.acquire()
        except Timeout:
            raise DualtraceError(
                f"memory directory {self.root} is locked by another dualtrace process "
                f"(waited {self.lock_timeout:.0f}s)"
            ) from None
        except OSError as exc:  # a read-only directory: no lock file, so no writes
            raise self._not_writable(exc) from None
        try:
            if lock.lock_counter == 1 and not self._recovering:
                self._recover()
            yield
        finally:
            lock.release()

    _recovering = False

    def _recover(self) -> None:
        """Lock -> re-check: finish a transaction a dead process left (memfs.transaction)."""
        from dualtrace.memfs import transaction

        if not transaction.journal_path(self).exists():
            return
        self._recovering = True
        try:
            transaction.recover(self)
        except OSError as exc:  # e.g. the disk is still full: retried by the next lock
            raise DualtraceError(f"memory directory {self.root}: an interrupted commit "
                                 f"could not be finished: {exc}") from None
        finally:
            self._recovering = False

    def _not_writable(self, exc: OSError) -> PathError:
        path = Path(exc.filename) if exc.filename else self.root
        if path in (self.root, self.state_path, self.state_path / "lock"):
            return PathError(f"memory directory {self.root} is not writable")
        return PathError(f"cannot create memory directory {self.root}: {exc.strerror} ({path})")

    def close(self) -> None:
        if "git" in self.__dict__:
            self.git.close()

    # -------------------------------------------------------- paths & reads

    def path(self, rel: str) -> Path:
        return confine(self.root, rel)

    def exists(self, rel: str) -> bool:
        """A memory file at ``rel`` (a symlink there is no memory: False, never followed)."""
        try:
            return self.path(rel).is_file()
        except LinkError:
            return False

    def read_text(self, rel: str) -> str:
        try:
            return read_confined(self.root, rel)
        except FileNotFoundError:
            raise DualtraceError(f"no memory file {rel}") from None
        except IsADirectoryError:
            raise DualtraceError(f"{rel} is a folder, not a memory file") from None

    def read(self, rel: str) -> Memory:
        return formats.parse(self.read_text(rel), rel)

    def read_fact(self, rel: str) -> Fact:
        memory = self.read(rel)
        if not isinstance(memory, Fact):
            raise DualtraceError(f"{rel} is not a fact file")
        return memory

    def read_moment(self, rel: str) -> Moment:
        memory = self.read(rel)
        if not isinstance(memory, Moment):
            raise DualtraceError(f"{rel} is not a moment file")
        return memory

    def system_file(self, rel: str, description: str) -> SystemFile:
        """The system file at ``rel``, or a new empty one with ``description``."""
        if self.exists(rel):
            memory = self.read(rel)
            if isinstance(memory, SystemFile):
                return memory
        return SystemFile(path=rel, description=description, body="")

    def human_file(self) -> SystemFile:
        return self.system_file(
            formats.human_path(), "Preferences of the human I work with (coding style, tools, habits)."
        )

    def conventions_file(self, project: str | None = None) -> SystemFile:
        project = project or self.project
        return self.system_file(
            formats.conventions_path(project),
            f"Conventions of the {project} project (rules the code and team follow).",
        )

    # -------------------------------------------------------- listing

    def iter_files(self) -> list[str]:
        """Relative paths of every memory file, by the one rule of memfs/layout.py."""
        return layout.memory_files(self.root)

    def scan(self) -> ScanResult:
        """Parse every memory file; broken ones are reported, never fatal."""
        memories: list[Memory] = []
        problems: list[FormatError] = []
        for rel in self.iter_files():
            try:
                text = read_confined(self.root, rel)
                memories.append(formats.parse(text, rel))
            except FormatError as exc:
                problems.append(exc)
            except PathError as exc:  # a file swapped for a link, or over the size limit
                problems.append(FormatError(rel, 1, str(exc)))
            except OSError as exc:
                problems.append(FormatError(rel, 1, f"unreadable: {exc}"))
        return ScanResult(tuple(memories), tuple(problems))

    def facts(self) -> list[Fact]:
        """Every fact, from the search index (it re-reads only the files that changed
        since it last looked; a scan reads and parses them all), else from a scan.

        The index's facts carry what a search reads, not scores or session records
        (``Index.facts``); read the file before rewriting one.
        """
        if not self.root.is_dir():
            return []
        import sqlite3

        from dualtrace.memfs.index import Index

        try:
            with Index.open(self.root) as index:
                return index.facts()
        except (sqlite3.Error, OSError, DualtraceError, KeyError, ValueError) as exc:
            log.info("facts from a scan: the index cannot be read (%s)", exc)
            return self.scan().facts()

    def find_fact(self, kind: str, anchor: str) -> Fact | None:
        """The fact of ``kind`` with ``anchor``, in the plural or a singular folder."""
        folders = [formats.CATEGORY[kind]] + [
            alias for alias, plural in formats.FOLDER_ALIASES.items()
            if plural == formats.CATEGORY[kind] and alias != formats.CATEGORY[kind]
        ]
        for folder in folders:
            rel = f"{folder}/{anchor}.md"
            if self.exists(rel):
                memory = self.read(rel)
                if isinstance(memory, Fact):
                    return memory
        return None

    def moment_for(self, memory: Fact | SystemFile, anchor: str | None = None) -> Moment | None:
        candidates: list[str] = []
        if isinstance(memory, Fact):
            if memory.linked_scene:
                candidates.append(memory.linked_scene)
            candidates.append(formats.scene_path(memory.type, memory.anchor))
        elif anchor:
            for kind in formats.BULLET_TYPES:
                candidates.append(formats.scene_path(kind, anchor))
        for rel in candidates:
            try:
                if self.exists(rel):
                    found = self.read(rel)
                    if isinstance(found, Moment):
                        return found
            except (PathError, FormatError):
                continue
        return None

    def lookup(self, target: str) -> tuple[Fact | SystemFile | Moment, Moment | None]:
        """Find a memory by path (``decisions/x.md``, ``decisions/x``) or bare anchor."""
        rel = target if target.endswith(".md") else f"{target}.md"
        if "/" in target:
            if not self.exists(rel):
                raise DualtraceError(f"no memory file {rel}")
            memory = self.read(rel)
            if isinstance(memory, Moment):
                fact_rel = memory.linked_fact
                if fact_rel and self.exists(fact_rel):
                    fact = self.read(fact_rel)
                    if isinstance(fact, (Fact, SystemFile)):
                        return fact, memory
                return memory, None
            return memory, self.moment_for(memory)
        anchor = target.removesuffix(".md")
        for kind in formats.FACT_FOLDER_TYPES:
            found = self.find_fact(kind, anchor)
            if found is not None:
                return found, self.moment_for(found)
        for kind in formats.BULLET_TYPES:
            rel = formats.scene_path(kind, anchor)
            if self.exists(rel):
                moment = self.read_moment(rel)
                if moment.linked_fact and self.exists(moment.linked_fact):
                    system = self.read(moment.linked_fact)
                    if isinstance(system, SystemFile):
                        return system, moment
                return moment, None
        raise DualtraceError(f"no memory with anchor or path {target!r}")

    # -------------------------------------------------------- writes

    def write(self, memory: Memory) -> str:
        """Atomically write one memory; returns its path. Unchanged content is not rewritten."""
        text = formats.render_memory(memory)
        return self.write_text(memory.path, text)

    def write_text(self, rel: str, text: str) -> str:
        path = self.path(rel)
        if path.is_dir():
            raise PathError(f"{rel} is a folder")
        size = len(text.encode("utf-8"))
        if size > MAX_FILE_BYTES:
            raise PathError(f"{rel} would be {size / 1024:.0f} KB, over the "
                            f"{MAX_FILE_BYTES // 1024} KB limit for one memory file; not written")
        try:
            if path.read_text(encoding="utf-8") == text:
                return rel
        except (FileNotFoundError, UnicodeDecodeError):
            pass
        try:
            atomic_write_text(path, text)
        except PermissionError as exc:
            # Read-only or immutable (chattr +i stops even root): the usual one line,
            # not an internal error; the transaction puts back what it already wrote.
            raise PathError(f"memory directory {self.root} is not writable "
                            f"({exc.strerror}: {rel})") from None
        return rel

    def commit(self, paths: list[str], message: str,
               session_id: str | None = None) -> str | None:
        """Commit exactly these paths (under the lock); None when nothing changed.
        ``session_id``: amend into that session's commit when it is HEAD, unpushed."""
        for rel in paths:
            self.path(rel)  # confinement check before anything reaches git
        with self.lock():
            sha = self.git.commit(paths, message, session_id)
        if sha:
            self._after_commit(paths)
        return sha

    def _after_commit(self, paths: list[str]) -> None:
        """Keep derived state (the search index) in step with the files."""
        try:
            from dualtrace.memfs import index as index_mod
        except ImportError:  # the index module is optional at this layer
            return
        updater = getattr(index_mod, "update_after_commit", None)
        if updater is not None:
            updater(self, paths)
