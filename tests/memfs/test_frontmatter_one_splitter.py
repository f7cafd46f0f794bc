"""One frontmatter splitter (memfs/formats.split_frontmatter) for memory files, session
records, `dualtrace status` and the merge driver. Before, status had its own rule (any
line starting with '---' closed the frontmatter), so a file every reader refused was
counted as a good memory by status."""

from __future__ import annotations

import re

from dualtrace.memfs import merge
from dualtrace.memfs.store import MemoryStore
from dualtrace.memfs.summary import store_summary
from tests.conftest import package_files_spelling

# A fact whose frontmatter is never closed: its '---' line has text after it.
UNCLOSED = ("---\ndescription: Retries back off exponentially\ntype: decision\n"
            "confidence: HIGH\nstored: 2026-06-01\n---- not a closer\n\nBody.\n")


def test_status_and_the_scan_agree_on_a_frontmatter_that_is_not_closed(memdir):
    store = MemoryStore(memdir, project="demo")
    (memdir / "decisions").mkdir()
    (memdir / "decisions" / "retries.md").write_text(UNCLOSED)
    scan = store.scan()
    assert not scan.memories and len(scan.problems) == 1
    for full in (False, True):
        info = store_summary(store, full=full)
        assert info["facts"] == info["moments"] == 0, (full, info)
        assert len(info["problems"]) == 1 and "not closed" in info["problems"][0], info


def test_the_merge_driver_reads_a_records_frontmatter_by_the_same_rule():
    ours = "---\ntype: session\nturns: 2\n---\n\nBody ours.\n"
    theirs = "---\ntype: session\nturns: 3\n---\n\nBody theirs.\n"
    assert merge._split_doc(ours) == ({"type": "type: session", "turns": "turns: 2"}, "\nBody ours.\n")
    assert merge._split_doc(UNCLOSED) is None
    assert "turns: 3" in merge.merge_text(None, ours, theirs, "sessions/2026-06/x.md",
                                          date="2026-06-02").text


def test_only_formats_splits_frontmatter():
    splits = re.compile(r"""find\(["']\\n---|["']\\A---""")
    assert package_files_spelling(splits) == ["memfs/formats.py"]
