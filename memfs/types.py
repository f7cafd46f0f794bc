"""The memory types: one row each. Everything that names a type, its folder or its
system file (formats, the index, the store, the validator, the CLI's choices, the
encoder's tool schemas) derives from this table.

A new type is one row here; its routing rules (docs/PROTOCOL.md §7) and the offline
encoder's cues are behaviour, and live with that behaviour.
"""

from __future__ import annotations

from typing import NamedTuple


class MemoryType(NamedTuple):
    name: str  # the frontmatter `type`
    folder: str  # <folder>/<anchor>.md for facts, scenes/<folder>/<anchor>.md for moments
    aliases: tuple[str, ...]  # other folder spellings accepted when reading (pilot data)
    bullet_file: str | None  # "human" or "conventions": its fact is a bullet there, no file


MEMORY_TYPES: tuple[MemoryType, ...] = (
    MemoryType("decision", "decisions", ("decision",), None),
    MemoryType("incident", "incidents", ("incident", "debug"), None),
    MemoryType("convention", "conventions", ("convention",), "conventions"),
    MemoryType("preference", "preferences", ("preference",), "human"),
    MemoryType("pattern", "patterns", ("pattern",), None),
    MemoryType("learning", "learning", ("learnings",), None),
)
BY_NAME = {t.name: t for t in MEMORY_TYPES}
