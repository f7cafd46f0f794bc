"""A command a memory puts in backticks is the command as it ran: flags, redirections and
paths kept, shortened only by cutting whole trailing arguments ("..."); a cut text never
splits a backtick pair (review 8 F12; issue 12's grounding rule)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from dualtrace.encoder.backends.offline import _short_command, one_line
from dualtrace.memfs.store import MemoryStore
from dualtrace.pipeline import encode_session
from tests.conftest import corpus_path
from tests.encoder.test_offline import claude
from tests.encoder.test_pasted_failures import bash, edit, said, user

_TICK = re.compile(r"`([^`\n]+)`")

FAILING = """FAILED tests/unit/test_invoice.py::test_vat_rounding - ZeroDivisionError: division by zero
1 failed, 14 passed in 0.21s"""


def _strings(path: Path) -> str:
    """Every string of the transcript, JSON-unescaped (what the session really holds)."""
    found: list[str] = []

    def walk(o: object) -> None:
        if isinstance(o, str):
            found.append(o)
        elif isinstance(o, dict):
            for v in o.values():
                walk(v)
        elif isinstance(o, list):
            for v in o:
                walk(v)

    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        try:
            walk(json.loads(line))
        except ValueError:
            pass
    return "\n".join(found)


def _ungrounded(transcript: Path, memdir: Path) -> list[str]:
    raw = _strings(transcript)
    bad = []
    for f in memdir.rglob("*.md"):
        if {".git", "sessions", ".dualtrace"} & set(f.parts):
            continue
        for tok in _TICK.findall(f.read_text(encoding="utf-8")):
            t = tok.strip()
            if t.endswith("..."):
                t = t[:-3].rstrip()  # a cut command: its head must have run
            if t and "[REDACTED" not in t and t not in raw:
                bad.append(f"{f.name}: {t}")
    return bad


@pytest.mark.parametrize("command", [
    "uv run python -m pytest -q tests/unit/test_invoice.py -k vat 2>&1",
    "cd services/billing && npx vitest run src/invoice.test.ts --reporter=dot",
])
def test_an_incident_names_the_check_as_it_ran(tmp_path: Path, command: str) -> None:
    transcript = claude(tmp_path / "s.jsonl", [
        user("the VAT rounding test crashes, please fix it"),
        *bash(1, command, f"Exit code 1\n{FAILING}", failed=True),
        said(2, "The rate table is empty for zero-rated items, so the division fails."),
        *edit(3, "billing/invoice.py"),
        *bash(4, command, "15 passed in 0.20s"),
    ])
    encode_session(transcript, memory_dir=tmp_path / "mem", backend="offline")
    incidents = [f for f in MemoryStore(tmp_path / "mem").scan().facts() if f.type == "incident"]
    assert incidents
    named = re.match(r"`([^`]+)` failed", incidents[0].description)
    assert named, incidents[0].description
    shown = named.group(1)
    # as run, or cut at whole trailing arguments so the stated cause fits
    assert shown == command or (shown.endswith(" ...") and command.startswith(shown[:-4] + " ")), shown
    assert _ungrounded(transcript, tmp_path / "mem") == []


def test_a_long_or_multiline_command_loses_whole_trailing_arguments() -> None:
    long = ("python -m pytest -q tests/integration/test_payments_reconciliation.py "
            "-k 'refund and not slow' --maxfail=1 -p no:cacheprovider")
    short = _short_command(long)
    assert short.endswith(" ...")
    head = short[:-4]
    assert long.startswith(head + " ") and len(head) <= 80
    assert _short_command("bash -c 'set -e\nmake test'") == "bash -c 'set -e ..."
    assert _short_command("  pytest -q  ") == "pytest -q"


def test_a_cut_never_splits_a_backtick_pair() -> None:
    text = "Use `mix ash.codegen` for migrations; prefer `Phoenix.LiveViewTest` helpers in tests"
    for limit in range(20, len(text)):
        cut = one_line(text, limit)
        assert len(cut) <= limit
        assert cut.count("`") % 2 == 0, cut
    assert one_line(text, 60) == "Use `mix ash.codegen` for migrations; prefer..."


def test_real_session_incident_names_the_mix_test_as_run(tmp_path: Path) -> None:
    transcript = corpus_path("claude-code", "spotter", "fa812bfe-b295-4cca-9c2f-fdf01028cb46.jsonl")
    encode_session(transcript, memory_dir=tmp_path / "mem", backend="offline")
    descriptions = [f.description for f in MemoryStore(tmp_path / "mem").scan().facts()
                    if f.type == "incident"]
    assert any(d.startswith("`mix test test/spotter/transcripts/jobs/sync_transcripts_test.exs")
               for d in descriptions), descriptions
    assert _ungrounded(transcript, tmp_path / "mem") == []
