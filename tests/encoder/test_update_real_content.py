"""Updates add only what is new, keep the description, and never paste raw dumps (issue 12,
item 4), with real pasted content: the HTML template a real Claude Code session read."""

from __future__ import annotations

import json

from dualtrace.encoder.plan import Context, Grounding, PlanBuilder, Store, Update
from dualtrace.memfs.formats import Scores
from dualtrace.memfs.store import MemoryStore
from dualtrace.memfs.transaction import commit
from tests.conftest import corpus_path

CCL = ("claude-code", "claude-code-log", "-Users-dain-workspace-claude-code-log-sample")


def real_html() -> str:
    """The first big HTML tool result of a real session (the transcript template)."""
    path = corpus_path(*CCL, "37f83ec9-f2ea-42a9-925e-0d5c105cb6e8.jsonl")
    for line in path.read_text(encoding="utf-8").splitlines():
        rec = json.loads(line)
        content = rec.get("message", {}).get("content")
        if rec.get("type") == "user" and isinstance(content, list):
            for block in content:
                text = block.get("content") if block.get("type") == "tool_result" else None
                if isinstance(text, str) and "<html" in text and len(text) > 2000:
                    return text[:2500]
    raise AssertionError("no HTML tool result in the session")


def test_update_appends_only_new_sentences_and_never_raw_html(memdir):
    html = real_html()
    store = MemoryStore(memdir)
    ctx = Context("sess-0001", "test", "2025-07-14", Grounding("", "2025-07-14"))
    first = PlanBuilder(store, ctx)
    first.add(Store(type="incident", anchor="session-navigation-lost",
                    description="The combined transcript lost its session navigation section.",
                    body="The combined transcript lost its session navigation section. "
                         "The template checked combined_transcript_link first.",
                    scores=Scores(2, 2, 1, 2), confidence="MEDIUM", status="investigating"))
    commit(store, first.changeset())
    second = PlanBuilder(store, Context("sess-0002", "test", "2025-07-15", Grounding("", "2025-07-15")))
    second.add(Update(target="incidents/session-navigation-lost.md", reason="recurred",
                      body="The template checked combined_transcript_link first.\n" + html
                           + "\nThe fix reuses session_nav.html for both pages.",
                      description=html.replace("\n", " ")[:2000]))
    commit(store, second.changeset())
    fact = store.read_fact("incidents/session-navigation-lost.md")
    assert fact.description == "The combined transcript lost its session navigation section."
    assert "<" not in fact.body and "DOCTYPE" not in fact.body
    assert fact.body.count("The template checked combined_transcript_link first.") == 1
    update = fact.body.split("**Update 2025-07-15, session sess-0002:**", 1)[1]
    assert update.strip() == "The fix reuses session_nav.html for both pages."
