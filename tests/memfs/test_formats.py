from __future__ import annotations

import pytest

from dualtrace.errors import FormatError
from dualtrace.memfs import formats
from dualtrace.memfs.formats import Fact, Moment, Scores, SystemFile


def _fact(**kw) -> Fact:
    base = dict(
        path="decisions/structured-logging-json.md",
        type="decision",
        description="Switched to JSON structured logging: Datadog couldn't parse free-form strings",
        body="The team moved from plain text to JSON logs.\n\nRejected: a log shipper.",
        confidence="HIGH",
        stored="2026-03-15",
        evidence_score=11,
        linked_scene="scenes/decisions/structured-logging-json.md",
        related=("incidents/2026-03-15-auth-timeout.md",),
        scores=Scores(3, 3, 3, 2),
        tier="FULL",
        sessions=("abc123",),
    )
    base.update(kw)
    return Fact(**base)


def _moment(**kw) -> Moment:
    base = dict(
        path="scenes/decisions/structured-logging-json.md",
        anchor="structured-logging-json",
        description="Scene cue for structured-logging-json -- JSON logs",
        linked_fact="decisions/structured-logging-json.md",
        narrative="While wiring src/logging/setup.py the developer found Datadog dropping lines.",
        timeline=(
            "structured-logging-json -> switched to JSON [2026-03-15]",
            "structured-logging-json -> revisited [commit abc1234]",
        ),
        prior="Plain-text logs.",
        after="Dashboards rebuilt on JSON fields.",
        confidence="HIGH",
        stored="2026-03-15",
    )
    base.update(kw)
    return Moment(**base)


@pytest.mark.parametrize(
    "memory",
    [
        _fact(),
        _fact(linked_scene=None, tier="RECORD", related=(), scores=None, evidence_score=None),
        _fact(type="incident", path="incidents/auth-middleware-401-race.md", status="resolved",
              description="quote: 'yes' # not a comment", updated="2026-04-01",
              supersedes=None, superseded_by=None),
        _fact(path="decisions/old.md", superseded_by="decisions/new.md"),
        _moment(),
        _moment(prior="", after="", timeline=("a -> b [2026-01-01]",)),
        SystemFile(path="system/human.md", description="Preferences", body="- keep functions short\n- tabs: no"),
        SystemFile(path="system/proj/conventions.md", description="Conventions: of proj", body=""),
    ],
)
def test_every_format_round_trips_byte_identical(memory):
    text = formats.render_memory(memory)
    parsed = formats.parse(text, memory.path)
    assert parsed == memory
    assert formats.render_memory(parsed) == text


def test_fact_layout_matches_protocol():
    text = formats.render_fact(_fact())
    lines = text.splitlines()
    assert lines[0] == "---"
    keys = [line.split(":")[0] for line in lines[1:lines.index("---", 1)]]
    assert keys[:7] == ["description", "type", "linked_scene", "related", "confidence",
                        "evidence_score", "stored"]
    assert "schema" in keys
    assert "stored: 2026-03-15" in lines  # dates unquoted


def test_record_fact_has_no_linked_scene():
    text = formats.render_fact(_fact(linked_scene=None, tier="RECORD"))
    assert "linked_scene" not in text


def test_moment_body_layout_and_footer():
    text = formats.render_moment(_moment())
    body = text.split("---\n", 2)[2]
    assert body.startswith("\n[MOMENT:structured-logging-json]\n\nMoment: While wiring")
    assert body.count("Timeline: ") == 2
    assert body.rstrip().endswith("(Mnemonic reconstruction only. Not a code specification.)")


def test_unknown_keys_are_kept_verbatim():
    text = (
        "---\n"
        "description: hand written\n"
        "type: decision\n"
        "owner_team:\n"
        "  - platform   # keep me\n"
        "  - infra\n"
        "related: []\n"
        "confidence: LOW\n"
        "stored: 2026-01-02\n"
        "x-custom: {a: 1}\n"
        "---\n\nBody.\n"
    )
    fact = formats.parse_fact(text, "decisions/x.md")
    out = formats.render_fact(fact)
    assert "owner_team:\n  - platform   # keep me\n  - infra\n" in out
    assert "x-custom: {a: 1}\n" in out
    assert formats.render_fact(formats.parse_fact(out, "decisions/x.md")) == out


def test_system_file_keeps_only_description_and_dedups_bullets():
    system = SystemFile(path="system/human.md", description="Prefs", body="- Keep functions under 30 lines")
    assert system.with_bullet("keep functions under 30 lines.") is system
    added = system.with_bullet("Prefers   pytest over unittest")
    assert added.bullets == ("Keep functions under 30 lines", "Prefers pytest over unittest")
    text = formats.render_system(added)
    assert text.split("---")[1].strip() == "description: Prefs"


@pytest.mark.parametrize(
    "text,line",
    [
        ("no frontmatter\n", 1),
        ("---\ndescription: x\ntype: decision\n", 1),
        ("---\ndescription: [unclosed\ntype: decision\n---\nbody\n", 3),
        ("---\ndescription: x\ntype: wish\n---\n", 2),
        ("---\n- a list\n---\n", 2),
        ("---\ndescription: x\ntype: decision\nconfidence: SURE\n---\n", 2),
    ],
)
def test_broken_files_raise_format_error_with_path_and_line(text, line):
    with pytest.raises(FormatError) as info:
        formats.parse_fact(text, "decisions/broken.md")
    assert info.value.path == "decisions/broken.md"
    assert info.value.line == line
    assert str(info.value).startswith(f"decisions/broken.md:{line}: ")


def test_singular_folder_aliases():
    assert formats.canonical_folder("decision") == "decisions"
    assert formats.canonical_folder("debug") == "incidents"
    assert formats.canonical_folder("preference") == "preferences"
    assert formats.canonical_folder("random") is None
