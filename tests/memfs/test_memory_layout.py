"""One listing of the memory files (memfs/layout.py): the store's scan, the search index,
`dualtrace status` and `dualtrace list` see the same files, by the layout of
docs/PROTOCOL.md §2. Before, the store and status walked fact folders to any depth while
the index read them flat, so a fact in ``decisions/old/`` was counted and listed but
never recalled; and status read a linked file."""

from __future__ import annotations

import os
import re

from dualtrace.memfs import formats, layout
from dualtrace.memfs.archive import list_memories
from dualtrace.memfs.formats import Fact, Moment
from dualtrace.memfs.index import Index
from dualtrace.memfs.store import MemoryStore
from dualtrace.memfs.summary import store_summary
from tests.conftest import package_files_spelling

DATE = "2026-06-01"

# The memory files of the tree below, and the markdown no reader sees.
MEMORIES = [
    "debug/worker-oom.md",  # a singular spelling from the pilots
    "decisions/jwt-rotation.md",
    "incidents/redis-timeout.md",
    "learning/sqlite-wal.md",
    "scenes/decisions/jwt-rotation.md",
    "system/demo/conventions.md",
    "system/human.md",
]
STRAY = [
    "decisions/old/retired-choice.md",  # fact folders are flat
    "scenes/decisions/2025/old-scene.md",  # scenes/<folder>/ is the deepest
    "system/demo/notes/extra.md",  # so is system/<project>/
]


def _fact(path: str, text: str, kind: str = "decision") -> str:
    return formats.render_memory(Fact(path=path, type=kind, description=text, body=text,
                                      confidence="HIGH", stored=DATE))


def _tree(root, tmp_path) -> None:
    def put(rel: str, text: str) -> None:
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text, encoding="utf-8")

    for rel in [m for m in MEMORIES + STRAY if not m.startswith(("system/", "scenes/"))]:
        kind = {"debug": "incident", "incidents": "incident", "learning": "learning"}.get(
            rel.split("/")[0], "decision")
        put(rel, _fact(rel, f"Memory {rel} about rotation keys", kind))
    for rel in ("scenes/decisions/jwt-rotation.md", "scenes/decisions/2025/old-scene.md"):
        anchor = rel.rsplit("/", 1)[1][:-3]
        put(rel, formats.render_memory(Moment(
            path=rel, anchor=anchor, description=f"Scene cue for {anchor} -- rotation",
            linked_fact=f"decisions/{anchor}.md", narrative="Rotation keys were rotated.",
            timeline=(f"{anchor} -> rotated [{DATE}]",), confidence="HIGH", stored=DATE)))
    put("system/human.md", "---\ndescription: The user's preferences.\n---\n\n- Prefers tabs\n")
    put("system/demo/conventions.md", "---\ndescription: Conventions.\n---\n\n- Use uv\n")
    put("system/demo/notes/extra.md", "---\ndescription: Deep.\n---\n\n- Not a memory\n")
    # Never memories: records, the archive, dot-names, other folders, files at the top.
    put("sessions/2026-06/2026-06-01-abcdef12.md", "---\ntype: session\n---\n\n# Session\n")
    put(".dualtrace/sessions/2026-06/2026-06-01-12345678.md", "---\ntype: session\n---\n")
    put("archive/decisions/forgotten.md", _fact("decisions/forgotten.md", "Forgotten rotation"))
    put(".obsidian/decisions/x.md", _fact("decisions/x.md", "Editor state rotation"))
    put("decisions/.draft.md", _fact("decisions/draft.md", "A draft rotation"))
    put("decisions/.hidden/y.md", _fact("decisions/y.md", "Hidden rotation"))
    put("notes/todo.md", _fact("decisions/todo.md", "Unrelated notes rotation"))
    put("README.md", "# my memories\n")
    # Links, file or folder, are never followed.
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "stolen.md").write_text(_fact("decisions/stolen.md", "Stolen rotation keys"))
    os.symlink(outside / "stolen.md", root / "decisions" / "stolen.md")
    os.symlink(outside, root / "patterns")
    os.symlink(outside, root / "decisions" / "linked")


def test_the_layout_lists_exactly_the_protocols_memory_files(memdir, tmp_path):
    MemoryStore(memdir, project="demo")
    _tree(memdir, tmp_path)
    assert layout.memory_files(memdir) == MEMORIES
    assert layout.stray_files(memdir) == STRAY
    assert [p.relative_to(memdir).as_posix() for p in layout.record_folders(memdir)] == [
        "sessions", "sessions/2026-06", ".dualtrace/sessions", ".dualtrace/sessions/2026-06"]


def test_store_index_status_and_list_see_the_same_files(memdir, tmp_path, run_cli):
    store = MemoryStore(memdir, project="demo")
    _tree(memdir, tmp_path)
    assert store.iter_files() == MEMORIES
    scan = store.scan()
    assert sorted(m.path for m in scan.memories) == MEMORIES and not scan.problems

    index = Index.open(memdir, create=True)
    try:
        indexed = {p for (p,) in index.conn.execute("SELECT path FROM files")}
    finally:
        index.close()
    records = {"sessions/2026-06/2026-06-01-abcdef12.md",
               ".dualtrace/sessions/2026-06/2026-06-01-12345678.md"}
    assert indexed == set(MEMORIES) | records

    facts = [m for m in MEMORIES if not m.startswith(("system/", "scenes/"))]
    for full in (False, True):
        info = store_summary(store, full=full)
        assert (info["facts"], info["moments"]) == (len(facts), 1) and not info["problems"], info
        assert info["stray"] == STRAY
    assert sorted(r.path for r in list_memories(store)) == facts

    result = run_cli("status", "--memory-dir", str(memdir))
    assert result.exit_code == 0, result.output
    assert "memories:   4 (facts, the rows of `dualtrace list`)" in result.output
    assert "moments:    1 (scenes" in result.output
    assert "not read:   3 file(s) deeper than memory files live" in result.output
    for rel in STRAY:
        assert f"  {rel}\n" in result.output
    assert "Stolen" not in result.output


def test_no_other_module_lists_the_memory_folders():
    """The listing is spelled once: nothing else in memfs walks the memory dir (the
    records' own listing in sessions.py reads only ``sessions/``)."""
    walks = re.compile(r"os\.walk\(|\.rglob\(|walk_md\(|\.iterdir\(\)|os\.scandir\(|os\.listdir\(")
    memfs = [p for p in package_files_spelling(walks) if p.startswith("memfs/")]
    assert memfs == ["memfs/gitrepo.py", "memfs/layout.py", "memfs/sessions.py",
                     "memfs/store.py", "memfs/transaction.py"], memfs
