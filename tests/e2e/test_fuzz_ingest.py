"""Fuzz: random and truncated JSONL never raises anything but TranscriptError."""

from __future__ import annotations

import json
import os
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dualtrace.encoder.digest import build_digest
from dualtrace.encoder.gates import evaluate
from dualtrace.encoder.redact import redact_session
from dualtrace.errors import TranscriptError
from dualtrace.hooks.transcripts import read_transcript
from tests.conftest import DATA

SAMPLES = [(DATA / n).read_bytes() for n in
           ("claude_session.jsonl", "codex_session.jsonl", "plain_session.jsonl",
            "pi_session.jsonl", "opencode_session.json",
            "cline_task/1772716500000/api_conversation_history.json")]

json_leaf = st.one_of(st.none(), st.booleans(), st.integers(), st.text(max_size=30))
json_value = st.recursive(json_leaf, lambda kids: st.one_of(
    st.lists(kids, max_size=4), st.dictionaries(st.text(max_size=8), kids, max_size=4)),
    max_leaves=12)
keys = st.sampled_from(["type", "role", "content", "message", "payload", "uuid", "timestamp",
                        "toolUseResult", "sessionId", "isCompactSummary", "subtype",
                        "id", "parentId", "toolCallId", "info", "parts", "state", "text"])
types = st.sampled_from(["user", "assistant", "system", "progress", "response_item",
                         "session_meta", "event_msg", "compacted", "function_call",
                         "session", "message", "toolResult", "toolCall", "tool", "tool_use",
                         "bashExecution", "branch_summary"])
record = st.dictionaries(keys, st.one_of(json_value, types), max_size=6)


def _pipeline(path: Path, cursor: int = 0) -> None:
    try:
        s = read_transcript(path, cursor=cursor)
    except TranscriptError:
        return
    red, _ = redact_session(s)
    build_digest(red, budget=300)
    evaluate(red)


common = settings(max_examples=int(os.environ.get("DUALTRACE_FUZZ_EXAMPLES", "60")), deadline=None,
                  suppress_health_check=[HealthCheck.function_scoped_fixture])


@common
@given(st.binary(max_size=600))
def test_random_bytes(tmp_path_factory, data: bytes):
    path = tmp_path_factory.mktemp("fz") / "t.jsonl"
    path.write_bytes(data)
    _pipeline(path)


@common
@given(st.lists(record, min_size=1, max_size=8))
def test_random_records(tmp_path_factory, recs):
    path = tmp_path_factory.mktemp("fz") / "t.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in recs))
    _pipeline(path)


@common
@given(st.sampled_from(range(len(SAMPLES))), st.integers(0, 10**6), st.integers(0, 10**6),
       st.binary(max_size=20))
def test_truncated_and_spliced_samples(tmp_path_factory, which, cut, cursor, junk):
    data = SAMPLES[which]
    cut %= len(data) + 1
    path = tmp_path_factory.mktemp("fz") / "t.jsonl"
    path.write_bytes(data[:cut] + junk)
    size = path.stat().st_size
    _pipeline(path, cursor % (size + 1) if size else 0)


@common
@given(st.lists(record, min_size=1, max_size=6), st.booleans(), st.integers(0, 10**6))
def test_random_documents(tmp_path_factory, recs, cline, cursor):
    """Cline- and OpenCode-shaped JSON documents holding random records."""
    path = tmp_path_factory.mktemp("fz") / "t.json"
    if cline:
        body = [{"role": "user", "content": [{"type": "text", "text": "<task>go</task>"}]}, *recs]
    else:
        body = {"info": {"id": "ses_fuzz", "directory": 3}, "messages": [*recs, {"info": recs[0]}]}
    path.write_text(json.dumps(body, indent=1))
    size = path.stat().st_size
    _pipeline(path, cursor % (size + 1))
