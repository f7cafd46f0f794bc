"""A superseded decision never answers alone: its successor comes with it, first, even
when the successor shares none of the question's words (claude-code-log, new-user review:
"how does get_project_display_name pick the project name?" answered with the old rule)."""

from __future__ import annotations

from dualtrace.memfs.formats import Fact
from dualtrace.memfs.gitrepo import OpLine, commit_message
from dualtrace.memfs.recall import recall
from dualtrace.memfs.store import MemoryStore

OLD = "decisions/pick-the-latest-working-directory.md"
NEW = "decisions/least-nested-path-first.md"


def _store(tmp_path, *, revised: bool) -> MemoryStore:
    store = MemoryStore(tmp_path / "memory")
    old = Fact(path=OLD, type="decision", stored="2025-07-19",
               description="get_project_display_name picks the latest working directory "
                           "as the project name.",
               body="The user asked: just pick the latest one from the list we got from "
                    "messages, no complex path selection for the project name.",
               superseded_by=NEW if revised else None)
    facts = [old]
    if revised:
        facts.append(Fact(path=NEW, type="decision", stored="2025-07-19", supersedes=OLD,
                          description="Take the least nested path first, the latest if "
                                      "depths are equal.",
                          body="I changed my mind: least nested first, ties to the latest."))
    for fact in facts:
        store.write(fact)
    store.commit([f.path for f in facts], commit_message(
        "sess-1", "offline", [OpLine("store", f.path.removesuffix(".md"), "decision", 8)
                              for f in facts]))
    return store


QUESTION = "how does get_project_display_name pick the project name?"


def test_a_superseded_decision_brings_its_successor_first(tmp_path):
    store = _store(tmp_path, revised=True)
    result = recall(store.root, QUESTION, embedder=None, records=False)
    paths = [m.path for m in result.memories]
    assert paths[:2] == [NEW, OLD], paths
    assert result.memories[1].superseded_by == NEW


def test_without_a_revision_the_decision_answers_alone(tmp_path):
    store = _store(tmp_path, revised=False)
    result = recall(store.root, QUESTION, embedder=None, records=False)
    assert [m.path for m in result.memories] == [OLD]
