"""User-facing errors.

Every error a person can cause (bad input, a broken file, a locked repo) is a
DualtraceError: the CLI prints it as one ``Error: ...`` line and exits 1. Anything
else is a bug and gets a pasteable report in the state log.
"""

from __future__ import annotations


class DualtraceError(Exception):
    """An expected failure with a one-line message for the user."""


class PathError(DualtraceError):
    """A path or anchor that would leave the memory directory, or is not valid."""


class FormatError(DualtraceError):
    """A memory file that cannot be parsed; carries its path and line."""

    def __init__(self, path: str, line: int, message: str) -> None:
        self.path = path
        self.line = line
        self.reason = message
        super().__init__(f"{path}:{line}: {message}")


class GitError(DualtraceError):
    """The memory repository is in a state we refuse to commit into."""


class TranscriptError(DualtraceError):
    """A transcript that is missing, empty or in an unknown format."""


class BackendError(DualtraceError):
    """An encoder backend failed (model unreachable, bad output); the job is retryable."""
