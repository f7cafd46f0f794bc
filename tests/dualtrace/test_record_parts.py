"""A session encoded in parts ends with what one encode of the whole transcript writes
(review 7, F4): the Stop hook after each turn, or a killed session caught up by the sweep
and then resumed, cuts the transcript anywhere, inside a turn too.

- the record after the last part is the record of one encode (turns, commits, checks,
  open ends), only ``parts`` and the memories listed differ;
- a failure in one part and its fix in the next make one resolved incident, as in one
  encode (an incident of part 1 is updated by part 2, never left investigating).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from dualtrace.memfs import formats
from dualtrace.memfs.sessions import parse_record
from dualtrace.pipeline import encode_session
from tests import hook_helpers
from tests.conftest import corpus_path, run_dualtrace
from tests.e2e.test_session_records import Transcript
from tests.hook_helpers import claude_payload, run_hook, runs, wait_drained

hook_env = hook_helpers.hook_env  # the fixture, shared with the other hook tests


def _record_file(memory: Path) -> Path:
    (path,) = memory.glob("sessions/*/*.md")
    return path


def _comparable(text: str) -> str:
    """A record's text less what only the parts change: their count and the memories
    listed (a part stores under its own anchors what one encode stores under others)."""
    text = re.sub(r"(?m)^parts: \d+\n", "", text)
    return re.sub(r"(?ms)^memories:\n(?:- .*\n)*", "", text)


def _encode_in_parts(source: Path, cuts: list[int], memory: Path, work: Path) -> Path:
    """``source``'s lines written up to each cut and encoded, then the whole: the
    transcript grows as the host writes it, one encode per part."""
    lines = source.read_bytes().splitlines(keepends=True)
    growing = work / source.name
    for cut in [*cuts, len(lines)]:
        growing.write_bytes(b"".join(lines[:cut]))
        encode_session(growing, memory_dir=memory, backend="offline")
    return growing


def _incidents(memory: Path) -> list[formats.Fact]:
    return [formats.parse_fact(p.read_text(), str(p.relative_to(memory)))
            for p in sorted(memory.glob("incidents/*.md"))]


# Real sessions of other people, cut into parts at fractions of their lines: most cuts
# fall inside a turn (between a tool call and its result, or before the agent's reply).
CORPUS_SESSIONS = [
    ("claude-code", "claude-code-log", "-Users-dain-workspace-claude-code-log-sample",
     "12a546d1-83a7-49a6-abba-5400db340b43.jsonl"),
    ("claude-code", "claude-code-log", "-Users-dain-workspace-claude-code-log-sample",
     "37f83ec9-f2ea-42a9-925e-0d5c105cb6e8.jsonl"),
    ("claude-code", "claude-code-log", "-Users-dain-workspace-claude-code-log-sample",
     "fe869ecb-c176-478f-9734-7e4b8ef12cff.jsonl"),
    ("claude-code", "claude-reliability", "coverage-test-fix", "transcript.jsonl"),
    ("agentlogs", "codex", "crud.jsonl"),
    ("agentlogs", "claudecode", "images.jsonl"),
    # JSON documents (the host rewrites the whole file): a cut is a document still being
    # written. OpenCode's random session id must survive the record's last redaction pass,
    # or each part starts a record of its own.
    ("agentlogs", "opencode", "all-tools.json"),
    ("agentlogs", "cline", "crud.json"),
]


@pytest.mark.parametrize("parts", CORPUS_SESSIONS, ids=lambda p: p[-1][:12])
def test_a_real_session_encoded_in_parts_has_the_record_of_one_encode(parts, tmp_path):
    source = corpus_path(*parts)
    n = len(source.read_bytes().splitlines())
    cuts = sorted({max(1, min(n - 1, int(n * f))) for f in (0.3, 0.55, 0.8)})
    whole, growing = tmp_path / "whole", tmp_path / "grown"
    growing.mkdir()
    encode_session(source, memory_dir=whole, backend="offline")
    _encode_in_parts(source, cuts, tmp_path / "parts", growing)

    one, parted = _record_file(whole).read_text(), _record_file(tmp_path / "parts").read_text()
    assert _comparable(parted) == _comparable(one)
    record = parse_record(parted, "x")
    # (a first part with nothing done writes no record yet: it is not a part of it)
    assert 1 < record.parts <= len(cuts) + 1
    # Every memory the one encode wrote is found by the parts too (its anchor may differ),
    # and nothing a part stored stays listed as this session's if it is gone.
    assert len(list((tmp_path / "parts").glob("*/*.md"))) >= len(list(whole.glob("*/*.md")))
    assert "REDACTED" not in record.session  # named by its own id
    listed = {path for path, _ in record.memories}
    assert all((tmp_path / "parts" / path).is_file() for path in listed)


def _report_and_fix(path: Path, *, report_turn: bool) -> Transcript:
    """The user reports a failing test, the agent runs it (fails) and states the cause;
    with ``report_turn`` it stops there and asks, and the user's "go ahead" opens turn 2;
    then the fix and the same command passing."""
    t = Transcript(path, cwd="/home/dev/shop")
    t.user("test_empty_cart in tests/test_cart.py fails with ZeroDivisionError, can you fix it?")
    t.bash("python -m pytest -q tests/test_cart.py", "FAILED tests/test_cart.py::test_empty_cart - "
           "ZeroDivisionError: division by zero\n1 failed, 4 passed", failed=True)
    t.say("average_price divides by len(items), which is 0 for an empty cart, so it raises "
          "ZeroDivisionError. Should it return 0.0 for an empty cart?")
    if report_turn:
        t.user("Yes, go ahead: return 0.0 for an empty cart.")
    t.edit("/home/dev/shop/src/cart.py")
    t.bash("python -m pytest -q tests/test_cart.py", "5 passed in 0.1s")
    t.say("Fixed: average_price returns 0.0 for an empty cart and the tests pass.")
    return t


@pytest.mark.parametrize("cut_after", [2, 3, 4], ids=["after-the-failing-run",
                                                       "after-the-diagnosis",
                                                       "after-the-user-answers"])
def test_a_failure_in_one_part_and_its_fix_in_the_next_is_one_resolved_incident(
        cut_after, tmp_path):
    t = _report_and_fix(tmp_path / "whole.jsonl", report_turn=True).write()
    encode_session(t, memory_dir=tmp_path / "one", backend="offline")
    (one,) = _incidents(tmp_path / "one")
    assert one.status == "resolved"

    grown = tmp_path / "grown"
    grown.mkdir()
    _encode_in_parts(t, [cut_after], tmp_path / "parts", grown)
    (incident,) = _incidents(tmp_path / "parts")  # never a second one for the same failure
    assert incident.status == "resolved", incident.body
    assert "cart.py" in incident.body  # the fix's file, edited in the second part
    record = parse_record(_record_file(tmp_path / "parts").read_text(), "x")
    assert [t.number for t in record.turns] == [1, 2] and not record.open_ends
    assert (dict(record.memories)[incident.path] == "stored")  # stored by this session


def test_an_incident_opened_from_the_report_alone_is_resolved_by_the_next_part(tmp_path):
    """Part 1 holds the user's report and a look at the diff, no check run yet: the
    incident stored from their words is the one part 2's failing and passing runs resolve, not a second file."""
    t = Transcript(tmp_path / "t.jsonl", cwd="/home/dev/shop")
    t.user("The checkout tests are failing since the refactoring yesterday, can you fix them?")
    t.bash("git diff --stat HEAD~1", " src/checkout.py | 12 ++++++------\n 1 file changed")
    t.say("The refactoring changed src/checkout.py; I'll run the checkout tests next.")
    head = len(t.lines)
    t.bash("python -m pytest -q tests/test_checkout.py",
           "FAILED tests/test_checkout.py::test_total_with_coupon - AssertionError: "
           "assert 90 == 85\n1 failed, 7 passed", failed=True)
    t.say("The coupon is applied after the tax since the refactoring, so the total is off "
          "by the tax on the discount.")
    t.edit("/home/dev/shop/src/checkout.py")
    t.bash("python -m pytest -q tests/test_checkout.py", "8 passed in 0.2s")
    t.say("Fixed: the coupon is applied before the tax again; the checkout tests pass.")
    path = t.write()

    grown = tmp_path / "grown"
    grown.mkdir()
    lines = path.read_bytes().splitlines(keepends=True)
    (grown / path.name).write_bytes(b"".join(lines[:head]))
    encode_session(grown / path.name, memory_dir=tmp_path / "parts", backend="offline")
    opened = _incidents(tmp_path / "parts")
    assert [i.status for i in opened] == ["investigating"]  # from the report alone

    (grown / path.name).write_bytes(b"".join(lines))
    encode_session(grown / path.name, memory_dir=tmp_path / "parts", backend="offline")
    (incident,) = _incidents(tmp_path / "parts")
    assert incident.path == opened[0].path and incident.status == "resolved", incident.body
    assert "test_total_with_coupon" in incident.body and "checkout.py" in incident.body


def test_parts_through_the_stop_hook_end_with_the_record_of_one_encode(hook_env, state_dir,
                                                                       tmp_path):
    """The real hook processes and worker: a Stop after each turn (the second Stop's
    part begins with the user's answer), then the same transcript by one `encode`."""
    hook_env["DUALTRACE_DEBOUNCE_SECONDS"] = "0"
    project = tmp_path / "proj"
    project.mkdir()
    t = _report_and_fix(project / "s.jsonl", report_turn=True)
    lines = [json.dumps(line) + "\n" for line in t.lines]
    turn_1 = 4  # the report, the failing run (call and result), the agent's question
    with t.path.open("w") as fh:
        fh.writelines(lines[:turn_1])
    payload = claude_payload("Stop", t.sid, t.path, str(project))
    assert run_hook("stop", payload, env=hook_env).returncode == 0
    wait_drained(state_dir)
    with t.path.open("a") as fh:
        fh.writelines(lines[turn_1:])
    assert run_hook("stop", payload, env=hook_env).returncode == 0
    wait_drained(state_dir)
    done = [r for r in runs(state_dir) if r["session"] == t.sid]
    assert len(done) == 2 and all(r["error"] is None and r["commit"] for r in done)

    memory = Path(hook_env["DUALTRACE_MEMORY_DIR"])
    run_dualtrace("encode", str(t.path), "--memory-dir", str(tmp_path / "one"), cwd=project)
    hooked = _record_file(memory).read_text()
    assert _comparable(hooked) == _comparable(_record_file(tmp_path / "one").read_text())
    assert parse_record(hooked, "x").parts == 2
    (incident,) = _incidents(memory)
    assert incident.status == "resolved", incident.body
