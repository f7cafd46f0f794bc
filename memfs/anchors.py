"""Anchor rules (docs/PROTOCOL.md §3) and path confinement to the memory directory."""

from __future__ import annotations

import os
import re
from pathlib import Path, PurePosixPath

from dualtrace.config import slugify
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


def confine(root: Path, rel: str | os.PathLike[str]) -> Path:
    """Resolve a memory-relative path, refusing anything that leaves ``root``.

    Rejects absolute paths, ``..`` components, NUL bytes, and symlinks whose
    target lies outside the memory directory.
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
    real = candidate.resolve()
    if real != root_real and root_real not in real.parents:
        raise PathError(f"memory path {shown!r} resolves outside the memory directory (symlink?)")
    return candidate
