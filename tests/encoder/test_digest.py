"""Digest: budget, determinism, what is kept and dropped, artifacts, the CLI."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from dualtrace.encoder.digest import build_digest, estimate_tokens
from dualtrace.hooks.transcripts import read_transcript
from dualtrace.pipeline import prepare
from tests.conftest import DATA


def test_estimate_tokens_is_chars_over_four():
    assert estimate_tokens("") == 0
    assert estimate_tokens("abcd") == 1
    assert estimate_tokens("abcde") == 2
    assert estimate_tokens("x" * 4000) == 1000


def test_claude_digest_content():
    s = read_transcript(DATA / "claude_session.jsonl")
    d = build_digest(s)
    text = d.text
    # Every user message, the failure and its resolution, files, commit, compaction.
    assert "USER: The auth middleware is throwing 401s intermittently" in text
    assert "USER: Thanks. From now on always run the auth tests" in text
    assert "TEST FAIL: $ pytest tests/test_auth.py -q -> FAILED tests/test_auth.py::" \
           "test_concurrent_refresh - AssertionError: 401 != 200" in text
    assert "TEST PASS: $ pytest tests/test_auth.py -q (failed at 10:05, now passes)" in text
    assert "- src/auth/lock.py (create)" in text and "- src/auth/refresh.py (modify)" in text
    assert "COMMIT: fix: serialize token refresh 9f3c2ab" in text
    assert "COMPACTED" in text and "[a11ce01] EDIT api/user_session.py" in text
    # Timestamps kept for Timeline markers: a day header and HH:MM per line.
    assert "### 2026-03-02" in text and "[10:05] TEST FAIL" in text
    # The Read is a lookup: dropped and counted.
    assert "refresh.py\n    ..." not in text and d.stats["noise_dropped"] == {"tool": 1}
    assert "(dropped: 1 lookup tools" in text
    assert d.stats["raw_bytes"] == (DATA / "claude_session.jsonl").stat().st_size
    assert d.token_estimate == estimate_tokens(text) == d.stats["digest_tokens"]


def test_deterministic():
    s = read_transcript(DATA / "claude_session.jsonl")
    assert build_digest(s, 300).text == build_digest(s, 300).text
    assert build_digest(s).text == build_digest(read_transcript(DATA / "claude_session.jsonl")).text


def _big_plain(path: Path, turns: int) -> None:
    with path.open("w") as fh:
        for i in range(turns):
            ts = f"2026-03-04T{10 + i // 60:02d}:{i % 60:02d}:00Z"
            fh.write(json.dumps({"role": "user", "content": f"question {i}: " + "why " * 60,
                                 "timestamp": ts}) + "\n")
            fh.write(json.dumps({"role": "assistant", "content": f"answer {i}: " + "because " * 200,
                                 "timestamp": ts}) + "\n")
            fh.write(json.dumps({"role": "tool", "name": "Read", "content": "x" * 3000,
                                 "timestamp": ts}) + "\n")


@pytest.mark.parametrize("budget", [400, 1500, 8000])
def test_budget_respected_and_drops_counted(tmp_path: Path, budget: int):
    path = tmp_path / "big.jsonl"
    _big_plain(path, 120)
    d = build_digest(read_transcript(path), budget)
    assert d.token_estimate <= budget
    assert d.stats["noise_dropped"] == {"tool": 120}
    # User messages outrank assistant text: under pressure assistant text goes first.
    kept, dropped = d.stats["kept_by_kind"], d.stats["dropped_by_kind"]
    if budget == 8000:
        # The middle of the tightest level is cut (hard_truncated): a line the cut took is
        # dropped, not kept (it counted 120 kept before, with 2 of them cut away).
        assert kept.get("user", 0) + dropped.get("user", 0) == 120
        assert kept.get("user", 0) >= 115
    assert kept.get("user", 0) >= kept.get("assistant", 0) or dropped == {}
    assert d.stats["raw_tokens"] / d.token_estimate > 10


def test_retries_folded(tmp_path: Path):
    path = tmp_path / "t.jsonl"
    lines = []
    for i in range(4):
        lines.append({"type": "assistant", "uuid": f"a{i}", "sessionId": "s", "timestamp":
                      f"2026-03-04T10:0{i}:00Z", "message": {"id": f"m{i}", "content": [
                          {"type": "tool_use", "id": f"t{i}", "name": "Bash",
                           "input": {"command": "npm run build"}}]}})
        lines.append({"type": "user", "uuid": f"r{i}", "sessionId": "s", "timestamp":
                      f"2026-03-04T10:0{i}:30Z", "message": {"content": [
                          {"type": "tool_result", "tool_use_id": f"t{i}", "is_error": True,
                           "content": "Exit code 2\nerror TS2304: Cannot find name 'foo'"}]}})
    path.write_text("\n".join(json.dumps(x) for x in lines) + "\n")
    d = build_digest(read_transcript(path))
    assert d.text.count("FAILED (exit 2): $ npm run build") == 1
    assert "(x4)" in d.text and d.stats["folded"] == 3


def test_artifacts_from_redacted_session():
    got = prepare(str(DATA / "claude_session.jsonl"))
    arts = got.digest.artifacts
    for expected in ("~/proj/src/auth/refresh.py", "src/auth/refresh.py", "9f3c2ab",
                     "pytest tests/test_auth.py -q", "refresh_token", "2026-03-02", "401",
                     "test_concurrent_refresh", "feature/auth"):
        assert expected in arts, expected
    assert "AssertionError: 401 != 200" in " ".join(arts)
    assert "datadog" not in {a.lower() for a in arts}  # not in this session: not invented


def test_pilot_text_plain(tmp_path: Path):
    path = tmp_path / "pilot.jsonl"
    msg = ("We're switching to JSON structured logging instead of plain text. The main driver "
           "was that our Datadog pipeline couldn't parse free-form strings reliably.")
    path.write_text(json.dumps({"role": "user", "content": msg}) + "\n")
    got = prepare(str(path))
    assert msg in got.digest.text
    assert "Datadog" in got.digest.artifacts
    assert got.verdict.signal and not got.verdict.skip_backend


def test_cli_digest_subprocess_json():
    proc = subprocess.run([sys.executable, "-m", "dualtrace.cli", "digest", "--json", "--budget",
                           "2000", str(DATA / "codex_session.jsonl")],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert data["stats"]["budget"] == 2000 and data["stats"]["skipped_lines"] == 0
    assert data["gates"]["min_tier"] == "FULL" and data["gates"]["skip_backend"] is False
    assert "TEST PASS" in data["digest"] and data["stats"]["redactions"] == {}


def test_cli_digest_text_and_error(tmp_path: Path):
    from click.testing import CliRunner

    from dualtrace.cli import cli, main

    out = CliRunner().invoke(cli, ["digest", str(DATA / "claude_session.jsonl")])
    assert out.exit_code == 0
    assert "--- stats" in out.output and "gates: min tier FULL" in out.output
    assert "skipped lines: 1" in out.output
    proc = subprocess.run([sys.executable, "-c", "from dualtrace.cli import main; main()",
                           "digest", str(tmp_path / "missing.jsonl")],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 1
    assert proc.stderr.strip().startswith("Error: transcript not found")
    assert main  # the console entry point exists


def _explained(path: Path, turns: int) -> None:
    """Each turn: a short request, the agent's long explanation (tier 1), a test run."""
    lines = []
    for i in range(turns):
        ts = f"2026-03-04T{10 + i // 60:02d}:{i % 60:02d}:00Z"
        lines.append({"role": "user", "content": f"step {i}: fix the parser case {i}", "timestamp": ts})
        lines.append({"role": "assistant", "timestamp": ts, "content":
                      f"Case {i} failed because the tokenizer drops the trailing quote when the "
                      f"line ends in a backslash; the fix {i} keeps it and the test covers it. "
                      + "More detail follows here. " * 12})
    path.write_text("\n".join(json.dumps(x) for x in lines) + "\n")


def test_a_tight_budget_keeps_what_fits_of_the_agents_explanations(tmp_path: Path):
    """Review 8 F19: when a whole tier did not fit, the digest fell to the user's requests
    alone, using a fraction of its budget. What still fits of the tier comes back, the
    agent's explanations first, the latest first, within the budget."""
    path = tmp_path / "explained.jsonl"
    _explained(path, 40)
    session = read_transcript(path)
    requests_only = build_digest(session, 700)
    assert requests_only.stats["kept_by_kind"].get("user") == 40
    d = build_digest(session, 1500)
    kept = d.stats["kept_by_kind"]
    assert d.token_estimate <= 1500 and kept.get("user") == 40
    assert 0 < kept.get("assistant", 0) < 40, kept
    assert d.token_estimate > 0.8 * 1500  # the budget is used, not a fifth of it
    assert "Case 39 failed because" in d.text  # the latest conclusion is among them
    assert d.text.index("step 38") < d.text.index("Case 39 failed")  # in time order


def test_a_tight_budget_keeps_the_failed_runs_and_the_pass_that_ended_them(tmp_path: Path):
    """Review 10: at budget 1,500 a session's 8 failed commands all went while its
    explanations stayed, and the gate still cited "error -> fix -> pass". The latest failed
    runs and the run that passed after them come back first when a tier is refilled."""
    from tests.encoder.test_offline import claude
    from tests.encoder.test_pasted_failures import bash, edit, said, user

    records = []
    for i in range(20):
        records += [user(f"step {i}: the parser case {i} still fails, look again"),
                    said(10 * i, f"Case {i} failed because the tokenizer drops the trailing quote "
                                 f"when the line ends in a backslash; attempt {i} keeps it. "
                         + "More detail follows here. " * 14),
                    *bash(10 * i + 1, "pytest tests/test_parser.py",
                          f"FAILED tests/test_parser.py::test_case_{i} - AssertionError\n"
                          "1 failed, 9 passed in 0.3s", failed=True)]
    records += [*edit(99, "parser/tokenize.py"),
                *bash(100, "pytest tests/test_parser.py", "10 passed in 0.3s"),
                said(101, "All parser cases pass now.")]
    session = read_transcript(claude(tmp_path / "arc.jsonl", records))
    d = build_digest(session, 800)
    assert d.token_estimate <= 800
    assert "TEST FAIL: $ pytest tests/test_parser.py" in d.text, d.text
    assert "now passes" in d.text, d.text


def test_a_hard_cut_counts_the_lines_it_removed_as_dropped(tmp_path: Path):
    """Review 10: when even the tightest level was over budget and the middle was cut, the
    stats still counted every user line as kept."""
    path = tmp_path / "many.jsonl"
    path.write_text("\n".join(json.dumps({
        "role": "user", "timestamp": f"2026-03-04T10:{i % 60:02d}:00Z",
        "content": f"request {i}: please rename the helper number {i} in the parser module"})
        for i in range(120)) + "\n")
    d = build_digest(read_transcript(path), 300)
    assert d.stats.get("hard_truncated")
    kept, dropped = d.stats["kept_by_kind"].get("user", 0), d.stats["dropped_by_kind"].get("user", 0)
    assert kept + dropped == 120 and 0 < kept < 120, d.stats
    whole = sum(f"request {i}: please rename the helper number {i} in the parser module"
                in d.text for i in range(120))
    assert kept == whole, d.stats
