"""The Pi, OpenCode and Cline readers: hand-written sessions in tests/data, the real ones
of the shared corpus (skipped when absent), cursors over JSON documents, bad input."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from dualtrace.errors import TranscriptError
from dualtrace.hooks.transcripts import DocumentReader, detect_format, read_transcript
from tests.conftest import DATA, corpus_path, run_dualtrace

PI = DATA / "pi_session.jsonl"
OPENCODE = DATA / "opencode_session.json"
CLINE = DATA / "cline_task" / "1772716500000" / "api_conversation_history.json"


def users(session) -> list[str]:
    return [e.text for e in session.events if e.kind == "user"]


def commands(session) -> list[tuple[str, int | None]]:
    return [(e.command, e.exit_code) for e in session.events if e.kind == "command"]


def edits(session) -> list[tuple[str, str]]:
    return [(e.path, e.edit_kind) for e in session.events if e.kind == "edit"]


def test_each_format_is_detected_from_the_file():
    assert detect_format(PI) == "pi"
    assert detect_format(OPENCODE) == "opencode"
    assert detect_format(CLINE) == "cline"


# ---------------------------------------------------------------------------- Pi


def test_pi_session_reads_the_active_branch_with_its_tools():
    s = read_transcript(PI)
    assert (s.host, s.session_id, s.cwd) == ("pi", "5e55a0d1-0000-4000-8000-0000000000a1",
                                            "/home/dev/invoices")
    assert (s.started, s.ended) == ("2026-03-04T09:00:00.000Z", "2026-03-04T09:03:00.000Z")
    # The skill's text pi put in the message is context, not what the user typed.
    assert users(s) == ["The totals test fails since yesterday, please fix it. We round money "
                        "with Decimal, never float."]
    skill = next(e for e in s.events if e.tool == "attachment")
    assert "Run tests with -q" in (skill.result or "")
    # the failing run (exit code from the bash tool's error text), the fix, the passing run,
    # then the user's own `!git diff --stat`
    assert commands(s) == [("pytest -q tests/test_totals.py", 1),
                           ("pytest -q tests/test_totals.py", 0), ("git diff --stat", 0)]
    assert next(e for e in s.events if e.kind == "command").failed
    assert edits(s) == [("src/invoices/totals.py", "modify")]
    # The branch the user left with /tree is not the session; pi's summary of it is.
    assert not any("billing" in e.text and e.kind == "user" for e in s.events)
    assert not any(e.path == "src/billing/__init__.py" for e in s.events)
    summary = next(e for e in s.events if e.kind == "compaction")
    assert summary.detail == "branch_summary" and "abandoned" in summary.text
    assert dict(s.noise)["abandoned-branch"] == 3
    assert s.skipped_lines == 1  # the line cut short is counted, the rest still read


def test_pi_read_from_a_cursor_keeps_the_header_and_reads_only_what_is_new(tmp_path: Path):
    path = tmp_path / "2026-03-04T09-00-00_x.jsonl"
    shutil.copy(PI, path)
    first = read_transcript(path)
    with path.open("a") as fh:
        fh.write(json.dumps({"type": "message", "id": "u9", "parentId": "x1",
                             "timestamp": "2026-03-04T09:10:00.000Z",
                             "message": {"role": "user", "content": "Now commit it."}}) + "\n")
    later = read_transcript(path, cursor=first.cursor)
    assert later.session_id == first.session_id and later.cwd == "/home/dev/invoices"
    assert users(later) == ["Now commit it."]
    assert later.started == "2026-03-04T09:10:00.000Z"


# ---------------------------------------------------------------------------- OpenCode


def test_opencode_export_reads_words_tools_and_answers():
    s = read_transcript(OPENCODE)
    assert (s.host, s.session_id, s.cwd) == ("opencode", "ses_0f1e2d3c4b5aFixtureSess01",
                                            "/home/dev/shop")
    assert s.started == "2026-03-05T08:40:00.000Z"
    # A synthetic part is OpenCode's; the answer to its question tool is the user's.
    assert users(s) == ["The cart total test fails. Fix it; we use pnpm here, not npm.",
                        "yes, in src/cart.test.ts"]
    assert [e.detail for e in s.events if e.kind == "user"] == [None, "answer to question"]
    assert commands(s) == [("pnpm test cart", 1), ("pnpm test cart", 0)]
    assert edits(s) == [("/home/dev/shop/src/cart.ts", "modify"),
                        ("/home/dev/shop/src/cart.regression.test.ts", "create")]
    # The prompt the agent wrote for its sub-agent is the sub-agent's brief, not the user's.
    sub = next(e for e in s.events if e.kind == "subagent")
    assert sub.text.startswith("Search for other") and sub.detail == "explore"
    failed = next(e for e in s.events if e.tool == "webfetch")
    assert failed.is_error and "fetch failed" in (failed.result or "")
    assert [e.text for e in s.events if e.kind == "assistant" and e.detail is None][-1] \
        .startswith("Fixed: quantities")


# ---------------------------------------------------------------------------- Cline


def test_cline_history_tells_the_users_words_from_clines_text():
    s = read_transcript(CLINE)
    assert (s.host, s.session_id, s.cwd) == ("cline", "1772716500000", "/home/dev/notes")
    # the task id dates the start; "Current Time" (2:18:00 PM at UTC+1) the last message
    assert (s.started, s.ended) == ("2026-03-05T13:15:00.000Z", "2026-03-05T13:18:00.000Z")
    said = users(s)
    assert said == ["Add a /health endpoint to src/app.py. Keep Flask, no new dependencies.",
                    "no requests, put the route in src/app.py itself",
                    "thanks. always run the tests with .venv/bin/python"]
    assert not any("environment_details" in t or "task_progress" in t or "Current Time" in t
                   for e in s.events for t in (e.text,) if e.kind == "user")
    # The denied write is the user speaking, with the call it answers; nothing was written.
    rejection = next(e for e in s.events if e.kind == "user" and e.detail)
    assert rejection.detail == "rejection of write_to_file src/health.py"
    assert edits(s) == [("src/app.py", "modify")]
    assert commands(s) == [("python -m pytest -q", 1), (".venv/bin/python -m pytest -q", 0)]
    assert next(e for e in s.events if e.kind == "command").result.startswith(
        "E   ModuleNotFoundError")
    # XML tool calls in older Cline's text, and attempt_completion's result as the agent's word
    assert ("tool", "read_file", "src/app.py") in [(e.kind, e.tool, e.path) for e in s.events]
    texts = [e.text for e in s.events if e.kind == "assistant" and e.detail is None]
    assert texts == ["I'll look at the app.",
                     "Added GET /health to src/app.py; tests pass with the project's .venv."]


# ---------------------------------------------------------------------------- documents


def _history(messages: list[dict]) -> str:
    return json.dumps(messages, indent=2) + "\n"


def _task(n: int) -> dict:
    return {"role": "user", "content": [{"type": "text", "text": f"<feedback>\nstep {n}\n</feedback>"}]}


def test_a_rewritten_cline_history_is_read_from_its_cursor(tmp_path: Path):
    path = tmp_path / "api_conversation_history.json"
    path.write_text(_history([_task(1), _task(2)]))
    first = read_transcript(path)
    assert users(first) == ["step 1", "step 2"]
    path.write_text(_history([_task(1), _task(2), _task(3)]))  # Cline rewrites the whole file
    later = read_transcript(path, cursor=first.cursor)
    assert users(later) == ["step 3"]
    assert read_transcript(path, cursor=later.cursor).events == ()


def test_an_opencode_export_keeps_its_offsets_when_the_title_grows(tmp_path: Path):
    doc = json.loads(OPENCODE.read_text())
    path = tmp_path / "ses.json"
    doc["messages"] = doc["messages"][:1]
    path.write_text(json.dumps(doc, indent=2))
    first = read_transcript(path)
    doc["info"]["title"] = "A much longer title OpenCode wrote once the session had a subject"
    doc["messages"].append({"info": {"id": "msg_09", "role": "user", "time": {"created": 1772700200000}},
                            "parts": [{"id": "prt_90", "type": "text", "text": "and the tax?"}]})
    path.write_text(json.dumps(doc, indent=2))
    later = read_transcript(path, cursor=first.cursor)
    assert users(later) == ["and the tax?"]


def test_a_document_cut_short_yields_its_whole_elements(tmp_path: Path):
    text = _history([_task(1), _task(2)])
    path = tmp_path / "api_conversation_history.json"
    path.write_text(text[: text.rindex("step 2") + 3])  # Cline is writing the file
    s = read_transcript(path)
    assert users(s) == ["step 1"] and s.skipped_lines == 0
    # the next read, once the file is whole, picks up where this one stopped
    path.write_text(text)
    assert users(read_transcript(path, cursor=s.cursor)) == ["step 2"]


def test_a_document_damaged_inside_is_read_up_to_the_damage(tmp_path: Path):
    path = tmp_path / "api_conversation_history.json"
    text = _history([_task(1), _task(2), _task(3)])
    damaged = text.replace("step 2", 'step 2" oops {', 1)
    assert damaged != text
    path.write_text(damaged)
    s = read_transcript(path)
    assert users(s) == ["step 1"] and s.skipped_lines == 1


def test_document_reader_counts_elements_and_offsets_in_bytes(tmp_path: Path):
    path = tmp_path / "h.json"
    path.write_text(_history([_task(1), {"role": "user", "content": "ünïcödé"}]), encoding="utf-8")
    reader = DocumentReader(path)
    assert len(list(reader.elements())) == 2 and reader.lines == 2
    assert reader.end <= path.stat().st_size
    again = DocumentReader(path, cursor=reader.end)
    assert list(again.elements()) == []


@pytest.mark.parametrize("body", [b"[1, 2, 3]\n", b'{"info": {"id": "x"}, "messages": []}\n',
                                  b"[\n  {\n", b"\x00\x01\x02 binary"])
def test_a_document_no_reader_knows_is_a_clear_error(tmp_path: Path, body: bytes):
    path = tmp_path / "t.json"
    path.write_bytes(body)
    with pytest.raises(TranscriptError, match="unknown transcript format"):
        read_transcript(path)


def test_encode_reads_each_format_and_refuses_an_unreadable_file(run_cli, tmp_path: Path,
                                                                 state_dir: Path):
    mem = tmp_path / "mem"
    for path in (PI, OPENCODE, CLINE):
        res = run_cli("encode", "--memory-dir", str(mem), "--backend", "offline", "--json",
                      str(path))
        assert res.exit_code == 0, res.output
        report = json.loads(res.output[res.output.index("{"):])
        assert report["host"] == detect_format(path) and report["commit"]
    bad = tmp_path / "api_conversation_history.json"
    bad.write_bytes(b"\xff\xfe[ not json at all")
    proc = run_dualtrace("encode", "--memory-dir", str(mem), "--backend", "offline", str(bad),
                         ok=False)
    assert proc.returncode == 1
    assert proc.stderr.strip().startswith("Error: unknown transcript format")
    assert len(proc.stderr.strip().splitlines()) == 1


# ---------------------------------------------------------------------------- the real ones


@pytest.mark.parametrize("name", ["pi/crud.jsonl", "pi/branched.jsonl", "pi/image.jsonl",
                                  "opencode/crud.json", "opencode/all-tools.json", "cline/crud.json"])
def test_real_sessions_read_whole(name: str):
    path = corpus_path("agentlogs", name)
    s = read_transcript(path)
    assert s.host == name.split("/")[0] == detect_format(path)
    assert s.skipped_lines == 0 and s.session_id and s.cwd and s.started
    assert users(s) and any(e.kind == "assistant" and e.detail is None for e in s.events)
    for text in users(s):
        assert "<environment_details>" not in text and "task_progress" not in text


def test_real_pi_branch_left_behind_is_not_the_session():
    s = read_transcript(corpus_path("agentlogs", "pi", "branched.jsonl"))
    assert users(s) == ["write a haiku about coding to haiku1.txt",
                        "instead write a limerick to limerick.txt"]
    assert [p for p, _ in edits(s)] == ["haiku1.txt", "limerick.txt"]
    assert commands(s) == [("rm -f haiku1.txt haiku2.txt limerick.txt", 0)]


def test_real_opencode_question_answer_is_the_user():
    s = read_transcript(corpus_path("agentlogs", "opencode", "all-tools.json"))
    assert "figure it out sir" in users(s)
    assert ("temp-tool-usage.txt", "create") in edits(s) and ("temp-tool-usage.txt", "delete") in edits(s)
    assert ("git status --short", 0) in commands(s)


def test_real_cline_task_and_feedback_are_the_users_words():
    s = read_transcript(corpus_path("agentlogs", "cline", "crud.json"))
    said = users(s)
    assert said[0] == "tell me abouth this repo"
    assert "api_conversation_history.json" in said[1] and len(said) == 2
    assert s.cwd == "/Users/bee/dev/agentlogs" and s.started == "2026-02-12T16:22:08.000Z"
    assert any(c.startswith("cp ") and code == 1 for c, code in commands(s))


# ---------------------------------------------------------------------------- not hosts


def test_backfill_of_a_folder_finds_cline_tasks_and_pi_sessions(tmp_path: Path):
    from dualtrace.backfill import discover

    tasks = tmp_path / "tasks"
    for task in ("1772716500000", "1772716600000"):
        (tasks / task).mkdir(parents=True)
        shutil.copy(CLINE, tasks / task / "api_conversation_history.json")
        (tasks / task / "task_metadata.json").write_text("{}")  # beside it, not a transcript
    shutil.copy(PI, tasks / "pi.jsonl")
    found = discover([tasks])
    assert sorted(p.relative_to(tasks).as_posix() for p in found) == [
        "1772716500000/api_conversation_history.json",
        "1772716600000/api_conversation_history.json", "pi.jsonl"]
    assert {read_transcript(p).host for p in found} == {"cline", "pi"}


@pytest.mark.parametrize("name", ["pi", "opencode", "cline"])
def test_install_refuses_a_format_dualtrace_has_no_hooks_for(state_dir: Path, name: str):
    proc = run_dualtrace("install", "--agent", name, "--dry-run", ok=False)
    assert proc.returncode == 1 and proc.stdout == ""
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error:")
    assert f"'{name}' is not one of 'claude-code', 'codex', 'letta'" in lines[0]
    base = state_dir.parent  # the test's HOME and state dir
    assert not list(base.glob("**/settings*.json")) and not list(base.glob("**/hooks.json"))


def test_two_cline_tasks_a_minute_apart_are_named_apart(run_cli, tmp_path: Path,
                                                        state_dir: Path):
    """Cline's task ids are millisecond timestamps: two tasks a minute apart share their
    first 8 digits, which is all a listing showed (review 8 F14); `show` then found the id
    ambiguous. Each task is named by its whole id, and `show` takes that name back."""
    mem = tmp_path / "mem"
    tasks = ("1772716500000", "1772716560000")
    for task in tasks:
        (tmp_path / task).mkdir()
        shutil.copy(CLINE, tmp_path / task / "api_conversation_history.json")
        res = run_cli("encode", "--memory-dir", str(mem), "--backend", "offline",
                      str(tmp_path / task / "api_conversation_history.json"))
        assert res.exit_code == 0, res.output
    listing = run_cli("sessions", "--memory-dir", str(mem))
    assert listing.exit_code == 0, listing.output
    shown = [line.split()[2] for line in listing.output.splitlines()]
    assert sorted(shown) == sorted(tasks), listing.output
    for task in tasks:
        res = run_cli("show", "--memory-dir", str(mem), task)
        assert res.exit_code == 0, res.output
        assert f"session: '{task}'" in res.output or f"session: {task}" in res.output, res.output
    log = run_cli("log", "--memory-dir", str(mem))
    assert log.exit_code == 0 and all(task in log.output for task in tasks), log.output


def test_an_opencode_session_is_shown_by_the_name_backfill_gives_it(run_cli, tmp_path: Path,
                                                                    state_dir: Path):
    """Review 10: backfill named the OpenCode session `ses_450b70e6` (its id cut at 12),
    `sessions` by a hash, and `show ses_450b70e6` said no memory has that anchor. Every
    command names it as `sessions` does, and `show` finds the record by its id's start."""
    mem = tmp_path / "mem"
    res = run_cli("backfill", "--memory-dir", str(mem), "--backend", "offline", str(OPENCODE))
    assert res.exit_code == 0, res.output
    sid = read_transcript(OPENCODE).session_id
    from dualtrace.memfs.ids import short_id

    assert short_id(sid) in res.output and sid[:12] not in res.output, res.output
    listing = run_cli("sessions", "--memory-dir", str(mem))
    assert short_id(sid) in listing.output, listing.output
    for name in (short_id(sid), sid[:12], sid):
        shown = run_cli("show", "--memory-dir", str(mem), name)
        assert shown.exit_code == 0 and f"session: {sid}" in shown.output, (name, shown.output)
    missing = run_dualtrace("show", "--memory-dir", str(mem), "no-such-anchor", ok=False)
    assert missing.returncode == 1 and missing.stderr.strip() == \
        "Error: no memory with anchor or path 'no-such-anchor'", missing.stderr

