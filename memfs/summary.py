"""Counts for ``dualtrace status``."""

from __future__ import annotations

from collections import Counter
from typing import Any

from dualtrace.memfs.formats import Fact, Moment, SystemFile
from dualtrace.memfs.store import MemoryStore


def store_summary(store: MemoryStore) -> dict[str, Any]:
    scan = store.scan()
    types: Counter[str] = Counter()
    tiers: Counter[str] = Counter()
    for memory in scan.memories:
        if isinstance(memory, Fact):
            types[memory.type] += 1
            tier = memory.tier or ("FULL" if memory.linked_scene else "RECORD")
            tiers[tier] += 1
        elif isinstance(memory, Moment):
            types["scene"] += 1
        elif isinstance(memory, SystemFile):
            kind = "preference" if memory.path.endswith("human.md") else "convention"
            types[f"{kind} bullets"] += len(memory.bullets)
    return {
        "total": sum(1 for m in scan.memories if not isinstance(m, SystemFile)),
        "types": dict(types),
        "tiers": dict(tiers),
        "problems": [str(p) for p in scan.problems],
        "last_commit": store.git.last_commit_line(),
    }
