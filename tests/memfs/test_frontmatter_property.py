"""The fast frontmatter parser agrees with yaml.safe_load wherever it answers.

``formats._fast_front`` parses the flat subset dualtrace writes and returns None for
anything else (the caller then asks YAML). Property: for any frontmatter text, it is
None or it means what ``yaml.safe_load`` means (dates compared as the ISO text the
record readers turn them into).
"""

from __future__ import annotations

import datetime as dt

import yaml
from hypothesis import example, given, settings
from hypothesis import strategies as st

from dualtrace.memfs.formats import _fast_front

KEYS = st.sampled_from(["type", "description", "stored", "confidence", "related",
                        "scores", "tier", "evidence_score", "linked_scene", "a.b", "x_1"])
TOKENS = st.sampled_from([
    "decision", "2026-03-02", "2026-03-02 10:05", "2026-03-02T10:05:00Z", "10:05", "yes",
    "No", "null", "~", "1.5", "1e3", ".5", "007", "-3", "0x1F", "[]", "[a, b]", "[a, 'b']",
    "{durability: 2, scope: 3}", "{a: b}", "'it''s'", "'a'b'", '"q"', "a: b", "a #c",
    "a#c", "- item", "&anchor", "*ref", "!tag x", "|", ">", "@x", "`x`", "%x", "?x",
    "x,y", "Scene cue for x -- y", "[007, yes]", "[1.5, a]", "[2026-03-02]", "[on]",
    "{a: 08}", "{a: 007}", "{1: 2}", "{yes: 1}", "[a b]", "HIGH", "decisions/x.md", "", " ", "inf", ".nan",
])
TEXT = st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cs", "Cc")),
               max_size=30)
VALUES = st.one_of(TOKENS, TEXT, st.lists(TOKENS, max_size=3).map(" ".join))
LINES = st.lists(st.tuples(KEYS, VALUES), max_size=6)


def _norm(value):
    if isinstance(value, (dt.date, dt.datetime)):
        return value.isoformat()
    if isinstance(value, list):
        return [_norm(v) for v in value]
    if isinstance(value, dict):
        return {k: _norm(v) for k, v in value.items()}
    return value


@settings(max_examples=600, deadline=None)
@given(LINES)
@example([("stored", "2026-03-02 10:05")])
@example([("related", "[a, b]"), ("scores", "{durability: 2, scope: 3}")])
@example([("type", "\xa0")])  # YAML's white space is space and tab, not U+00A0
@example([("scores", "{a: 2\xa0}")])
@example([("type", "x\u2003")])
@example([("type", "=")])  # YAML 1.1's value key: safe_load refuses it
@example([("type", "<<")])
def test_fast_frontmatter_means_what_yaml_means(lines):
    front = "\n".join(f"{key}: {value}" for key, value in lines)
    fast = _fast_front(front)
    if fast is None:
        return  # not in the simple subset: the caller asks YAML
    try:
        slow = yaml.safe_load(front) if front.strip() else {}
    except yaml.YAMLError:
        raise AssertionError(f"fast parser accepted what YAML rejects: {front!r}") from None
    assert _norm(fast) == _norm(slow or {}), front


def test_a_colon_without_a_space_is_not_a_key():
    assert _fast_front("type:decision") is None
    assert yaml.safe_load("type:decision") == "type:decision"
    assert _fast_front("type:") == {"type": None}


def test_what_dualtrace_writes_stays_on_the_fast_path():
    from dualtrace.memfs import formats
    from dualtrace.memfs.formats import Fact, Scores

    fact = Fact(path="decisions/json-logs.md", type="decision",
                description="Use JSON logs: the shipper parses them (#ops, 100%)",
                body="Why.", confidence="HIGH", stored="2026-03-02", evidence_score=9,
                scores=Scores(3, 2, 3, 1), tier="FULL", related=("incidents/x.md",),
                sessions=("abc123",))
    text = formats.render_memory(fact)
    front = text.split("---\n")[1]
    assert _fast_front(front) is not None, front
    assert formats.parse(text, fact.path) == fact
