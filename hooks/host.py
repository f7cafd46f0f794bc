"""The Host protocol: everything dualtrace knows about one coding agent.

Each host is one module in hooks/ (``claude_code``, ``codex``, ``letta``) that
satisfies this protocol with module-level names, listed once in ``hooks/registry.py``.
The hook fast path (``dualtrace.hookcmd``), the transcript reader, ``install``, the
worker, ``backfill`` and the CLI's ``--agent`` choices all ask the registry; none of
them names a host. Host modules import only the standard library at module level:
the hook imports them on every agent turn.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Protocol

# A host's hook event -> (our event name, timeout in seconds, matcher or None).
HookSpec = tuple[str, int, "str | None"]


class Host(Protocol):
    NAME: str  # "claude-code": the --host/--agent value and the queue's host field
    TRANSCRIPT_FORMAT: str  # the reader its transcripts are read with (hooks/transcripts.py)
    EVENTS: dict[str, HookSpec]  # the hook events `dualtrace install` registers
    TIMEOUT_UNIT: int  # settings-file timeout units per second (Letta counts milliseconds)
    SCOPES: tuple[str, ...]  # install scopes it has (user, project, local)
    REQUIRES_TRANSCRIPT: bool  # a session payload without a transcript path is an error
    SWEEP_ON_START: bool  # session-start queues a sweep of the transcript's folder
    # The sweep's other sessions are the files of the transcript's own folder: the
    # worker keeps a mark of it, and SessionStart skips a sweep that could find
    # nothing (dualtrace/sweepmark.py).
    SWEEP_FOLDER: bool
    KEEPS_OWN_TRANSCRIPT: bool  # dualtrace writes the transcript itself (from payloads)
    # Host events whose hook prints nothing and that the host runs through a POSIX shell:
    # install puts them in the shell's background, so the turn never waits for Python.
    BACKGROUND_EVENTS: frozenset[str]
    # Host events whose hook prints context (the turn waits for it) and that
    # dualtrace.hookcmd's fast path answers: install starts them without site
    # (``python -S .../dualtrace/fasthook.py``) on POSIX.
    FAST_EVENTS: frozenset[str]

    def detect(self, payload: dict) -> bool:
        """True when a hook payload (read without ``--host``) comes from this host."""
        ...

    def normalize(self, payload: dict, event: str, state: str) -> dict:
        """``{"session_id", "transcript", "cwd", "agent_id", "ignore"}`` (``ignore``: a
        reason to do nothing; ``lines``: raw payload text for a transcript dualtrace
        keeps, see ``keep``; ``kept: False``: a KEEPS_OWN_TRANSCRIPT host wrote this
        one's transcript itself, so nothing is kept). Payload text never goes into the
        queue, which is in the state dir: the worker reads the session from its
        transcript."""
        ...

    def keep(self, state: str, payload: dict, lines: list[dict]) -> tuple[str, str | None]:
        """KEEPS_OWN_TRANSCRIPT hosts: append already-redacted ``lines`` to the
        transcript dualtrace keeps; returns its path and the session id of a job this
        one supersedes, or None. Runs in the hook's detached child, never in the hook."""
        ...

    def context_output(self, event: str, text: str) -> str:
        """The stdout of a session-start / prompt hook that adds ``text`` to the context."""
        ...

    def settings_path(self, scope: str, root: Path, home: Path) -> Path:
        """The settings file `install` merges our hooks into, for one scope."""
        ...

    def project_transcripts(self, root: Path) -> list[Path]:
        """Where this host keeps the sessions of project ``root`` (backfill discovery)."""
        ...

    def transcripts_place(self, root: Path) -> str:
        """Where ``project_transcripts`` looks, in words a person can check (backfill
        says it when it finds nothing)."""
        ...

    def find_transcript(self, session_id: str) -> str | None:
        """A session's transcript when the payload had none (Codex), else None."""
        ...

    def sibling_transcripts(self, transcript: str) -> list[str]:
        """The other sessions next to ``transcript`` (the session-start sweep), or []."""
        ...

    def session_of(self, transcript: str) -> str:
        """The session id a transcript file belongs to (its job's id, for the sweep)."""
        ...

    def memory_dir(self, agent_id: str | None) -> str | None:
        """A memory directory the host owns for this agent (Letta's memfs), else None."""
        ...


if TYPE_CHECKING:  # mypy checks that every host module satisfies the protocol
    from dualtrace.hooks import claude_code, codex, letta

    _checked: tuple[Host, ...] = (claude_code, codex, letta)
