"""The structural merge of memory files (pure functions: no git here)."""

from __future__ import annotations

import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from dualtrace.memfs import formats
from dualtrace.memfs.conflicts import open_conflicts
from dualtrace.memfs.formats import Fact, Moment, Scores, SystemFile
from dualtrace.memfs.merge import (
    CONFLICT_TITLE,
    has_conflict_markers,
    merge_text,
    merge_timeline,
    union,
)

DAY = "2026-12-01"


def incident(**kw) -> Fact:
    base = dict(path="incidents/auth-401-race.md", type="incident",
                description="Intermittent 401s from the auth middleware under load",
                body="The token refresh raced with the request retry in auth/middleware.py.",
                confidence="MEDIUM", stored="2026-11-20", evidence_score=9,
                scores=Scores(3, 2, 2, 2), tier="RECORD", status="investigating",
                sessions=("s-base",), related=())
    base.update(kw)
    return Fact(**base)


def text(memory) -> str:
    return formats.render_memory(memory)


def merged_fact(base: Fact, ours: Fact, theirs: Fact):
    result = merge_text(text(base), text(ours), text(theirs), base.path, date=DAY)
    assert not has_conflict_markers(result.text)
    fact = formats.parse(result.text, base.path)
    assert isinstance(fact, Fact)
    return fact, result


def test_trivial_cases_take_the_changed_side():
    a = text(incident())
    b = text(incident(body="other"))
    assert merge_text(a, a, b, "incidents/x.md", date=DAY).text == b
    assert merge_text(a, b, a, "incidents/x.md", date=DAY).text == b
    assert merge_text(None, b, b, "incidents/x.md", date=DAY).text == b


def test_same_incident_updated_on_both_sides_keeps_every_paragraph_and_session():
    base = incident()
    ours = replace(base, sessions=("s-base", "s-alice"), updated="2026-11-25",
                   confidence="HIGH", body=base.body + "\n\n**Update 2026-11-25, session "
                   "s-alice:** recurred after the deploy; the lock fixed it.")
    theirs = replace(base, sessions=("s-base", "s-bob"), updated="2026-11-24",
                     stored="2026-11-19", related=("decisions/retry-policy.md",),
                     body=base.body + "\n\n**Update 2026-11-24, session s-bob:** seen on "
                     "staging with 3 replicas.")
    fact, result = merged_fact(base, ours, theirs)
    assert result.clean
    assert fact.sessions == ("s-base", "s-alice", "s-bob")
    assert fact.related == ("decisions/retry-policy.md",)
    assert fact.confidence == "HIGH"          # the higher
    assert fact.stored == "2026-11-19"        # the earlier
    assert fact.updated == "2026-11-25"       # the later
    paras = fact.body.split("\n\n")
    assert paras[0] == base.body
    # Both appended at the same place: ordered by their dates, each once.
    assert paras[1].startswith("**Update 2026-11-24") and paras[2].startswith("**Update 2026-11-25")
    assert len(paras) == 3


def test_one_sided_field_changes_win_and_unchanged_ones_stay():
    base = incident()
    ours = replace(base, status="resolved")
    theirs = replace(base, description="401s from the auth middleware when tokens refresh",
                     body=base.body + "\n\nMore detail.")
    fact, result = merged_fact(base, ours, theirs)
    assert result.clean
    assert fact.status == "resolved"
    assert fact.description == "401s from the auth middleware when tokens refresh"
    assert fact.body.endswith("More detail.")


def test_superseded_by_one_side_is_taken_two_different_ones_conflict():
    base = incident(path="decisions/use-redis.md", type="decision", status=None)
    ours = replace(base, superseded_by="decisions/use-postgres.md")
    fact, result = merged_fact(base, ours, base)
    assert fact.superseded_by == "decisions/use-postgres.md" and result.clean
    fact, result = merged_fact(base, ours, replace(base, superseded_by="decisions/use-memcached.md",
                                                   body=base.body + "\n\nBob's note."))
    assert fact.superseded_by == "decisions/use-postgres.md"   # this side's, in frontmatter
    assert len(result.conflicts) == 1 and "superseded_by" in result.conflicts[0]
    # Both values are in the file under a clear heading; the other side's body kept too.
    assert f"## {CONFLICT_TITLE} {DAY}" in fact.body
    assert "decisions/use-memcached.md" in fact.body and "Bob's note." in fact.body
    # Both sides agreeing is no conflict.
    same = replace(base, superseded_by="decisions/use-postgres.md", body="x")
    fact, result = merged_fact(base, ours, same)
    assert result.clean and fact.superseded_by == "decisions/use-postgres.md"


def test_a_conflict_section_merged_again_is_not_duplicated():
    base = incident()
    ours, theirs = replace(base, status="resolved"), replace(base, status="root-cause-confirmed")
    first = merge_text(text(base), text(ours), text(theirs), base.path, date=DAY)
    again = merge_text(text(base), first.text, first.text + "\n", base.path, date=DAY)
    assert again.text.count(f"## {CONFLICT_TITLE}") == 1


def test_new_fields_merge_without_being_named():
    """Unknown frontmatter keys: flow lists as unions, scalars three-way."""
    base = incident(extra_raw=("records: [sessions/a.md]", "owner: team-a"))
    ours = replace(base, extra_raw=("records: [sessions/a.md, sessions/b.md]", "owner: team-a"))
    theirs = replace(base, extra_raw=("records: [sessions/a.md, sessions/c.md]", "owner: team-b"))
    result = merge_text(text(base), text(ours), text(theirs), base.path, date=DAY)
    assert "records: [sessions/a.md, sessions/b.md, sessions/c.md]" in result.text
    assert "owner: team-b" in result.text and result.clean


def test_moment_timeline_union_by_date_prior_after_from_both():
    base = Moment(path="scenes/incidents/auth-401-race.md", anchor="auth-401-race",
                  description="Scene cue for auth-401-race", linked_fact="incidents/auth-401-race.md",
                  narrative="pytest tests/test_auth.py failed with 401 on the retry.",
                  timeline=("auth-401-race -> first seen [2026-11-20]",),
                  prior="Deploy of the token cache.", after="Added a lock.",
                  stored="2026-11-20")
    ours = replace(base, timeline=base.timeline + ("auth-401-race -> recurred [2026-11-25]",),
                   after="Added a lock.\nLock made per-tenant.")
    theirs = replace(base, timeline=base.timeline + ("auth-401-race -> on staging [2026-11-22]",),
                     prior="Deploy of the token cache.\nStaging had 3 replicas.",
                     narrative=base.narrative + "\n\nBob reproduced it with 3 replicas.")
    result = merge_text(text(base), text(ours), text(theirs), base.path, date=DAY)
    moment = formats.parse(result.text, base.path)
    assert isinstance(moment, Moment) and result.clean
    assert [t.split("[")[1] for t in moment.timeline] == ["2026-11-20]", "2026-11-22]",
                                                          "2026-11-25]"]
    assert moment.prior.splitlines() == ["Deploy of the token cache.", "Staging had 3 replicas."]
    assert moment.after.splitlines() == ["Added a lock.", "Lock made per-tenant."]
    assert "Bob reproduced it" in moment.narrative


def test_timeline_keeps_undated_entries_after_the_entry_they_followed():
    ours = ("a -> one [2026-01-02]", "a -> then this [later that day]")
    theirs = ("a -> zero [2026-01-01]",)
    assert merge_timeline(ours, theirs) == ("a -> zero [2026-01-01]", "a -> one [2026-01-02]",
                                            "a -> then this [later that day]")


def test_conventions_bullets_union_equivalent_bullets_once():
    base = SystemFile(path="system/proj/conventions.md", description="Conventions of proj",
                      body="- Money is integer cents.")
    ours = replace(base, body=base.body + "\n- Use ruff for linting.")
    theirs = replace(base, body=base.body + "\n- use Ruff for linting\n- Tests use tmp_path.")
    result = merge_text(text(base), text(ours), text(theirs), base.path, date=DAY)
    system = formats.parse(result.text, base.path)
    assert isinstance(system, SystemFile) and result.clean
    assert system.bullets == ("Money is integer cents.", "Use ruff for linting.",
                              "Tests use tmp_path.")


def test_unparseable_side_is_kept_quoted_under_the_heading_and_the_file_parses():
    base = incident()
    ours = replace(base, body=base.body + "\n\nAlice's paragraph.")
    broken = "---\ndescription: [unclosed\ntype: incident\n---\n\nBob hand-edited this.\n"
    result = merge_text(text(base), text(ours), broken, base.path, date=DAY)
    fact = formats.parse(result.text, base.path)
    assert isinstance(fact, Fact) and len(result.conflicts) == 1
    assert "Alice's paragraph." in fact.body
    assert "> Bob hand-edited this." in fact.body and f"## {CONFLICT_TITLE}" in fact.body
    assert not has_conflict_markers(result.text)


def test_unparseable_side_of_a_moment_cannot_inject_timeline_lines():
    base = Moment(path="scenes/decisions/x.md", anchor="x", description="d",
                  linked_fact="decisions/x.md", narrative="n", timeline=("x -> a [2026-01-01]",))
    broken = "no frontmatter\nTimeline: x -> injected [2026-01-09]\n[MOMENT:evil]\n"
    ours = replace(base, narrative="n, and more")
    result = merge_text(text(base), text(ours), broken, base.path, date=DAY)
    moment = formats.parse(result.text, base.path)
    assert isinstance(moment, Moment)
    assert moment.timeline == base.timeline and moment.anchor == "x"
    assert "injected" in moment.narrative


def test_session_record_like_markdown_merges_lists_and_sections():
    base = ("---\ntype: session\nsession: abc\nturns: 1\nfiles_changed: [a.py]\ncommits:\n"
            "- {sha: a1, message: one}\n---\n\n# Session\n\n## Turn 1 (2026-11-20)\n\n> hi\n")
    ours = base.replace("turns: 1", "turns: 2").replace("[a.py]", "[a.py, b.py]") + \
        "\n## Turn 2 (2026-11-21)\n\n> more\n"
    theirs = base.replace("- {sha: a1, message: one}", "- {sha: a1, message: one}\n"
                          "- {sha: b2, message: two}")
    result = merge_text(base, ours, theirs, "sessions/2026-11/2026-11-20-abc.md", date=DAY)
    assert result.clean
    assert "turns: 2" in result.text and "files_changed: [a.py, b.py]" in result.text
    assert "- {sha: b2, message: two}" in result.text and "## Turn 2" in result.text


def test_union_keeps_order_and_drops_duplicates():
    assert union(["a", "b", "d"], ["a", "c", "d", "e"]) == ["a", "b", "c", "d", "e"]
    assert union(["a", "a"], []) == ["a"]


def test_add_add_without_a_base():
    ours = incident(sessions=("s1",))
    theirs = incident(sessions=("s2",), body="Bob's own account.")
    result = merge_text(None, text(ours), text(theirs), ours.path, date=DAY)
    fact = formats.parse(result.text, ours.path)
    assert fact.sessions == ("s1", "s2") and "Bob's own account." in fact.body and result.clean


def test_the_driver_command_writes_ours_and_records_the_conflict(tmp_path: Path):
    """`dualtrace merge-file %O %A %B %P` as git runs it: in the work tree's top folder."""
    base = incident(path="decisions/x.md", type="decision", status=None)
    files = {}
    for name, fact in (("O", base), ("A", replace(base, superseded_by="decisions/y.md")),
                       ("B", replace(base, superseded_by="decisions/z.md"))):
        files[name] = tmp_path / f"{name}.tmp"
        files[name].write_text(text(fact), encoding="utf-8")
    run = subprocess.run([sys.executable, "-m", "dualtrace", "merge-file", str(files["O"]),
                          str(files["A"]), str(files["B"]), "decisions/x.md"],
                         cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    out = files["A"].read_text(encoding="utf-8")
    assert "decisions/z.md" in out and not has_conflict_markers(out)

    class Store:
        state_path = tmp_path / ".dualtrace"

    items = open_conflicts(Store())
    assert [i["path"] for i in items] == ["decisions/x.md"] and items[0]["kind"] == "merge"


@pytest.mark.parametrize("path", ["decisions/x.md", "system/p/conventions.md",
                                  "scenes/decisions/x.md", "notes.md", ".gitignore"])
def test_garbage_on_both_sides_never_raises_and_keeps_both(path):
    result = merge_text("a\n", "<<<<<<< x\nb\n", "c\n=======\n", path, date=DAY)
    assert "b" in result.text and "c" in result.text
