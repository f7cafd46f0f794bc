"""Anchor rules (docs/PROTOCOL.md §3) and path confinement to the memory directory."""

from __future__ import annotations

import errno
import os
import re
from pathlib import Path, PurePosixPath

from dualtrace.errors import PathError

MAX_ANCHOR = 64
_ANCHOR = re.compile(r"^[a-z0-9]+(?:-[a-z0-9]+)*$")
_TYPE_PREFIXES = ("decision-", "incident-", "convention-", "preference-", "pattern-",
                  "learning-", "debug-", "scene-")
_DATE_PREFIX = re.compile(r"^\d{4}-\d{2}-\d{2}-")


def check_anchor(anchor: str) -> str:
    """Reject (never repair) an anchor proposed by a model or a person."""
    if not isinstance(anchor, str) or not anchor:
        raise PathError("anchor is empty")
    shown = anchor if len(anchor) <= 80 else anchor[:77] + "..."
    if len(anchor) > MAX_ANCHOR:
        raise PathError(f"anchor {shown!r} is longer than {MAX_ANCHOR} characters")
    if not _ANCHOR.match(anchor):
        raise PathError(
            f"anchor {shown!r} must be lowercase ASCII words joined by hyphens "
            "(no slashes, dots, spaces or other characters)"
        )
    return anchor


def make_anchor(text: str, *, date: str | None = None) -> str:
    """Build an anchor from free text: slug, no type prefix, optional date prefix."""
    from dualtrace.config import slugify  # here: readers of files need none of config

    slug = slugify(text, 200)
    for prefix in _TYPE_PREFIXES:
        if slug.startswith(prefix) and len(slug) > len(prefix):
            slug = slug[len(prefix):]
            break
    if date and not _DATE_PREFIX.match(slug + "-"):
        core = _cut_words(slug, MAX_ANCHOR - len(date) - 1)
        slug = f"{date}-{core}" if core else date
    slug = _cut_words(slug, MAX_ANCHOR)
    if not slug:
        raise PathError(f"cannot make an anchor from {text!r}")
    return slug


def _cut_words(slug: str, limit: int) -> str:
    """``slug`` within ``limit`` characters, cut between words (never inside one)."""
    if len(slug) <= limit:
        return slug.strip("-")
    cut = slug[: limit + 1]
    if cut.endswith("-"):
        return cut.strip("-")
    head = cut.rsplit("-", 1)[0] if "-" in cut else ""
    # One word longer than the limit is cut: there is no boundary to keep.
    return (head or slug[:limit]).strip("-")


# What dualtrace reads or writes as one memory file, at most (a hand-edited or planted
# file beyond it is reported, never read into a model request, the index or recall).
MAX_FILE_BYTES = 256 * 1024


class LinkError(PathError):
    """A path inside the memory directory goes through a symlink: never followed."""


def confine(root: Path, rel: str | os.PathLike[str]) -> Path:
    """Resolve a memory-relative path, refusing anything that leaves ``root``.

    Rejects absolute paths, ``..`` components, NUL bytes, and any symlink on the way:
    a link that stays inside the directory is refused too (``decisions/x.md ->
    ../.git/config`` would hand git's config, with its credentials, to a reader).
    """
    text = os.fspath(rel)
    if not text or "\x00" in text:
        raise PathError("memory path is empty or contains a NUL byte")
    shown = text if len(text) <= 80 else text[:77] + "..."
    posix = PurePosixPath(text.replace("\\", "/"))
    if posix.is_absolute() or re.match(r"^[A-Za-z]:", text):
        raise PathError(f"memory path {shown!r} is absolute; paths are relative to the memory directory")
    if any(part in ("..", "") for part in posix.parts) or ".." in posix.parts:
        raise PathError(f"memory path {shown!r} leaves the memory directory")
    if posix.parts and posix.parts[0] in (".git", ".dualtrace"):
        raise PathError(f"memory path {shown!r} points into dualtrace's or git's own state")
    root_real = root.resolve()
    candidate = root_real.joinpath(*posix.parts)
    step = root_real
    for part in posix.parts:
        step = step / part
        if os.path.islink(step):
            raise LinkError(f"memory path {shown!r} goes through a symlink "
                            f"({step.relative_to(root_real).as_posix()}); dualtrace never "
                            "follows links inside the memory directory")
    real = candidate.resolve()
    if real != root_real and root_real not in real.parents:
        raise PathError(f"memory path {shown!r} resolves outside the memory directory")
    return candidate


def read_confined(root: Path, rel: str, *, limit: int = MAX_FILE_BYTES) -> str:
    """The text of memory file ``rel``: confined, never through a link (the last step is
    opened with O_NOFOLLOW, so a file swapped for a link after the check is refused too),
    at most ``limit`` bytes (a bigger file is a PathError naming the limit)."""
    return read_nofollow(confine(root, rel), rel, limit=limit)


def read_nofollow(path: Path, rel: str, *, limit: int = MAX_FILE_BYTES) -> str:
    """``path``'s text, its last step opened with O_NOFOLLOW, at most ``limit`` bytes."""
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise LinkError(f"memory path {rel!r} is a symlink; dualtrace never follows links "
                            "inside the memory directory") from None
        raise
    with os.fdopen(fd, "rb") as fh:
        size = os.fstat(fh.fileno()).st_size
        if size > limit:
            raise PathError(f"memory file {rel} is {size / 1024:.0f} KB, over the "
                            f"{limit // 1024} KB limit for one memory file; not read")
        data = fh.read(limit + 1)
    if len(data) > limit:
        raise PathError(f"memory file {rel} is over the {limit // 1024} KB limit for one "
                        "memory file; not read")
    return data.decode("utf-8", errors="replace")
