"""The memory types: one row each. Everything that names a type, its folder or its
system file (formats, the index, the store, the validator, the CLI's choices, the
encoder's tool schemas and its prompt's type list) derives from this table.

A new type is one row here; its routing rules (docs/PROTOCOL.md §7) and the offline
encoder's cues are behaviour, and live with that behaviour.
"""

from __future__ import annotations

from dataclasses import dataclass


# A frozen dataclass, not a typing.NamedTuple: typing is ~3 ms of the prompt hook's imports,
# and dataclasses is imported by every module that reads this table anyway.
@dataclass(frozen=True)
class MemoryType:
    name: str  # the frontmatter `type`
    folder: str  # <folder>/<anchor>.md for facts, scenes/<folder>/<anchor>.md for moments
    aliases: tuple[str, ...]  # other folder spellings accepted when reading (pilot data)
    bullet_file: str | None  # "human" or "conventions": its fact is a bullet there, no file
    meaning: str  # what it holds, as the encoder prompt's type list says it


MEMORY_TYPES: tuple[MemoryType, ...] = (
    MemoryType("decision", "decisions", ("decision",), None,
               "a choice with rationale (alternatives, why, tradeoffs)."),
    MemoryType("incident", "incidents", ("incident", "debug"), None,
               "a bug, failure or outage: symptoms, root cause or current hypothesis, "
               "resolution/status, investigation path."),
    MemoryType("convention", "conventions", ("convention",), "conventions",
               'a project rule ("from now on", "always", "never", "the rule is").'),
    MemoryType("preference", "preferences", ("preference",), "human",
               "how the human likes to work."),
    MemoryType("pattern", "patterns", ("pattern",), None,
               "a recurring mistake or habit: occurrences and trajectory."),
    MemoryType("learning", "learning", ("learnings",), None,
               "understanding that changed: before, after, progression."),
)
BY_NAME = {t.name: t for t in MEMORY_TYPES}
