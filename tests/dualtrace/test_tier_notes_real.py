"""The encode output's tier column against its legend, on real sessions of other people
(claude-code-log, spotter): a tier outside its evidence range always says why."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from dualtrace.memfs.formats import tier_for
from tests.conftest import corpus_path

CCL = ("claude-code", "claude-code-log", "-Users-dain-workspace-claude-code-log-sample")
DUALTRACE = Path(sys.executable).with_name("dualtrace")


def test_the_encode_line_says_which_rule_set_a_tier_the_legend_range_does_not_give(tmp_path):
    # 0d3a8e6f: the user's reasoned correction of a timeline-filter refactor, a decision
    # with its why scored 7 - FULL by the protocol's rule, not by the 8-12 range
    transcript = next(corpus_path(*CCL).glob("0d3a8e6f-*.jsonl"))
    env = {**os.environ, "DUALTRACE_HOME": str(tmp_path / "state")}
    out = subprocess.run([str(DUALTRACE), "encode", str(transcript), "--memory-dir", str(tmp_path / "mem"),
                          "--backend", "offline"], capture_output=True, text=True, env=env, timeout=120)
    assert out.returncode == 0, out.stdout + out.stderr
    lines = out.stdout.splitlines()
    at = next(i for i, ln in enumerate(lines) if ln.startswith("FULL") and "(7)" in ln and "decisions/" in ln)
    assert lines[at + 1].strip() == "FULL at evidence 7: a decision with its why (rationale 2)"
    # The legend after an encode is one line; the note on the row says which rule, and
    # `explain` gives the whole legend (review 10: ~600 characters after every encode).
    assert "8-12 FULL, 5-7 RECORD; why a tier: dualtrace explain" in out.stdout
    explained = subprocess.run([str(DUALTRACE), "explain", str(transcript), "--memory-dir",
                                str(tmp_path / "mem")], capture_output=True, text=True, env=env,
                               timeout=120)
    assert explained.returncode == 0, explained.stderr
    assert "a routing rule can move it" in explained.stdout
    assert "the line's note says which" in explained.stdout


@pytest.mark.parametrize("name", ["0d3a8e6f-*.jsonl", "37f83ec9-*.jsonl", "fe869ecb-*.jsonl"])
def test_every_stored_tier_is_its_evidence_range_or_a_note_says_why(tmp_path, monkeypatch, name):
    from dualtrace.pipeline import encode_session

    monkeypatch.setenv("DUALTRACE_HOME", str(tmp_path / "state"))
    report = encode_session(next(corpus_path(*CCL).glob(name)), memory_dir=tmp_path / "mem", backend="offline")
    stored = [op for op in report.operations if op.get("action") == "store" and op.get("evidence") is not None]
    assert stored
    for op in stored:
        if op["tier"] != tier_for(op["evidence"]):
            assert op.get("note", "").startswith(f"{op['tier']} at evidence {op['evidence']}: ") or \
                "no moment proposed" in op.get("note", ""), op
