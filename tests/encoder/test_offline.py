"""The offline encoder on transcripts the tests write: conversations, fix arcs, narration."""

from __future__ import annotations

import json
from pathlib import Path

from dualtrace.memfs.store import MemoryStore
from dualtrace.pipeline import encode_session


def chat(path: Path, turns: list[tuple[str, str]]) -> Path:
    path.write_text("".join(json.dumps({"role": r, "content": c}) + "\n" for r, c in turns))
    return path


def claude(path: Path, records: list[dict]) -> Path:
    lines = []
    for n, rec in enumerate(records):
        base = {"sessionId": "cafe0000-0000-4000-8000-000000000001", "uuid": f"u{n}",
                "cwd": "/home/dev/app", "gitBranch": "main", "timestamp": f"2026-05-01T10:{n:02d}:00Z"}
        lines.append(json.dumps({**base, **rec}))
    path.write_text("\n".join(lines) + "\n")
    return path


def tool(n: int, name: str, inp: dict, result: str, is_error: bool = False) -> list[dict]:
    return [
        {"type": "assistant", "message": {"id": f"m{n}", "role": "assistant", "content": [
            {"type": "tool_use", "id": f"t{n}", "name": name, "input": inp}]}},
        {"type": "user", "message": {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": f"t{n}", "content": result, "is_error": is_error}]}},
    ]


def test_settled_restatement_becomes_a_decision_with_problem_and_code(tmp_path):
    path = chat(tmp_path / "csv-export.jsonl", [
        ("user", "The ERP import mangled our part numbers again: 00042 came in as 42."),
        ("assistant", "I'll quote every field in `export_rows()`."),
        ("user", "No - the ERP still strips zeros from quoted digits. Only leading-zero digit "
                 "strings must be written as a text formula, because its parser keeps those."),
        ("assistant", "Settled: export_rows() writes leading-zero digit strings as =\"...\"; all "
                      "other fields use minimal quoting; rows end with CRLF."),
    ])
    report = encode_session(path, memory_dir=tmp_path / "mem", backend="offline")
    (op,) = [o for o in report.operations if o["action"] != "skip"]
    assert op["type"] == "decision" and op["action"] == "store"
    assert "export-rows" in op["path"]
    fact = MemoryStore(tmp_path / "mem").read_fact(op["path"])
    assert fact.body.startswith("Settled in the conversation")
    assert "Problem: The ERP import mangled our part numbers again" in fact.body
    assert "because its parser keeps those" in fact.body
    assert "`export_rows`" in fact.body


def test_amendment_supersedes_and_a_restatement_updates(tmp_path):
    mem = tmp_path / "mem"
    first = encode_session(chat(tmp_path / "a.jsonl", [
        ("user", "Contacts are duplicated after every sync run."),
        ("assistant", "Settled: merge_records keys on the lowercased email and keeps the newest record."),
    ]), memory_dir=mem, backend="offline")
    original = next(o["path"] for o in first.operations if o["type"] == "decision")
    second = encode_session(chat(tmp_path / "b.jsonl", [
        ("user", "Amendment to the merge rule: keep-newest wipes names we already had."),
        ("assistant", "Amended rule, superseding keep-newest: merge_records keys on the lowercased "
                      "email and keeps the record with more filled fields."),
    ]), memory_dir=mem, backend="offline")
    new = next(o for o in second.operations if o["type"] == "decision")
    assert new["action"] == "store" and "supersedes" in new["note"]
    store = MemoryStore(mem)
    assert store.read_fact(original).superseded_by == new["path"]
    third = encode_session(chat(tmp_path / "c.jsonl", [
        ("user", "Remind me how duplicate contacts are resolved?"),
        ("assistant", "Understood: merge_records keys on the lowercased email and the record with "
                      "more filled fields wins a clash."),
    ]), memory_dir=mem, backend="offline")
    again = next(o for o in third.operations if o["type"] == "decision")
    assert again["action"] == "update" and again["path"] == new["path"]


def test_narration_after_a_tool_result_is_not_a_decision(tmp_path):
    records = [{"type": "user", "message": {"role": "user", "content": "Add tracing to the app."}}]
    records += tool(1, "Read", {"file_path": "/home/dev/app/lib/otel.ex"}, "defmodule Otel do end")
    records.append({"type": "assistant", "message": {"id": "m9", "role": "assistant", "content": [
        {"type": "text", "text": "Perfect! So I can configure propagators via the application "
                                 "environment. Let me update the module to always use them first."}]}})
    report = encode_session(claude(tmp_path / "s.jsonl", records), memory_dir=tmp_path / "mem",
                            backend="offline")
    assert not [o for o in report.operations if o["type"] == "decision"]


def test_failing_test_fixed_and_passing_is_a_resolved_incident(tmp_path):
    records = [{"type": "user", "message": {"role": "user", "content": "Run the tests and fix them."}}]
    records += tool(1, "Bash", {"command": "git add nothing"}, "Exit code 128\nfatal: pathspec", True)
    records += tool(2, "Bash", {"command": "pytest -q tests/test_api.py"},
                    "Exit code 1\ncollected 3 items\nE   KeyError: 'user_id'\nFAILED tests/test_api.py::test_get", True)
    records += tool(3, "Edit", {"file_path": "/home/dev/app/api/views.py", "old_string": "a",
                                "new_string": "b"}, "The file has been updated.")
    records += tool(4, "Bash", {"command": "pytest -q tests/test_api.py"}, "3 passed in 0.1s")
    report = encode_session(claude(tmp_path / "s.jsonl", records), memory_dir=tmp_path / "mem",
                            backend="offline")
    (op,) = [o for o in report.operations if o["type"] == "incident"]
    assert op["tier"] == "FULL" and op["action"] == "store"
    store = MemoryStore(tmp_path / "mem")
    fact = store.read_fact(op["path"])
    assert fact.status == "resolved"
    assert "KeyError: 'user_id'" in fact.description and "git add" not in fact.description
    moment = store.read_moment(fact.linked_scene)
    assert "`api/views.py`" in moment.narrative and "pytest -q tests/test_api.py" in moment.narrative
