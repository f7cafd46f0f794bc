"""Counts for ``dualtrace status``.

What is counted: ``facts`` are the memories (one per fact file, exactly the rows
``dualtrace list`` shows), ``moments`` the scenes paired with FULL facts (a fact's
episode, not a memory of its own) and ``bullets`` the lines of the system files.

A store of 10,000 files must report in well under a second, so the default scan
reads only the few frontmatter lines it counts (``type``, ``tier``,
``linked_scene``) and checks each file's structure (frontmatter present and
closed, a known type). ``full=True`` parses every file completely, as encoding
and recall do, and reports each broken file with its path and line.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from dualtrace.errors import FormatError, PathError
from dualtrace.memfs import formats, layout
from dualtrace.memfs.anchors import read_nofollow
from dualtrace.memfs.formats import Fact, Moment, SystemFile
from dualtrace.memfs.store import MemoryStore

_WANTED = ("type", "tier", "linked_scene")


def _quick(text: str) -> dict[str, str] | str:
    """The wanted keys of a file's frontmatter (read line by line, not parsed), or a
    problem description; split by the same rule as every reader."""
    try:
        front, _body, _line = formats.split_frontmatter(text, "")
    except FormatError as exc:
        return f"{exc.line}: {exc.reason}"
    out: dict[str, str] = {}
    for line in front.split("\n"):
        key, sep, value = line.partition(":")
        if sep and key in _WANTED:
            out[key] = value.strip()
    return out


def store_summary(store: MemoryStore, *, full: bool = False) -> dict[str, Any]:
    types: Counter[str] = Counter()
    tiers: Counter[str] = Counter()
    bullets: Counter[str] = Counter()
    problems: list[str] = []
    facts = moments = 0
    if full:
        scan = store.scan()
        problems = [str(p) for p in scan.problems]
        for memory in scan.memories:
            if isinstance(memory, Fact):
                facts += 1
                types[memory.type] += 1
                tiers[memory.tier or ("FULL" if memory.linked_scene else "RECORD")] += 1
            elif isinstance(memory, Moment):
                moments += 1
            elif isinstance(memory, SystemFile):
                bullets[formats.type_of_system_file(memory.path)] += len(memory.bullets)
    else:
        for rel in store.iter_files():
            try:
                # The listing has no links; a file swapped for one since is refused.
                text = read_nofollow(store.root / rel, rel)
            except PathError as exc:  # a link, or over the size limit
                problems.append(f"{rel}:1: {exc}")
                continue
            except OSError as exc:
                problems.append(f"{rel}:1: unreadable: {exc}")
                continue
            if rel.startswith("system/"):
                bullets[formats.type_of_system_file(rel)] += sum(
                    1 for line in text.split("\n") if line.startswith(("- ", "* ")))
                continue
            meta = _quick(text)
            if isinstance(meta, str):
                problems.append(f"{rel}:{meta}")
                continue
            kind = meta.get("type", "").strip("'\"").lower()
            if rel.startswith("scenes/"):
                moments += 1
            elif kind in formats.TYPES:
                facts += 1
                types[kind] += 1
                tier = meta.get("tier") or ("FULL" if meta.get("linked_scene") else "RECORD")
                tiers[tier] += 1
            else:
                problems.append(f"{rel}:2: unknown type {kind!r}")
    return {
        "facts": facts,
        "moments": moments,
        "types": dict(types),  # facts per type
        "bullets": dict(bullets),  # bullets per system file kind
        "tiers": dict(tiers),
        "problems": problems,
        # Markdown a person put deeper than the layout: no reader sees it, so say so.
        "stray": layout.stray_files(store.root),
        "last_commit": store.git.last_commit_line(),
    }


def memories_phrase(info: dict[str, Any]) -> str:
    """The one way a count of memories is said (status, list, reindex): facts are the
    memories; their moments and the system files' bullets are added apart, as
    ``3 memories, +2 moments, +1 preference bullet``."""
    facts, moments = info["facts"], info["moments"]
    parts = [f"{facts} {'memory' if facts == 1 else 'memories'}"]
    if moments:
        parts.append(f"+{moments} {'moment' if moments == 1 else 'moments'}")
    for kind, count in sorted(info["bullets"].items()):
        if count:
            parts.append(f"+{count} {kind} {'bullet' if count == 1 else 'bullets'}")
    return ", ".join(parts)
