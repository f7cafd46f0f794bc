"""The whole corpus through a real encode: no secret reaches the model request, the
memory files, git history, the search index or the state dir; look-alikes survive.

A real `dualtrace encode` subprocess, the real anthropic SDK over HTTP against the
local fake Messages API. The fake model also tries to *write* raw secrets (a model can
echo or invent one) and reads a memory file a person edited with a token in it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests.fake_anthropic import FakeAnthropic, message, tool_use
from tests.secret_corpus_helpers import corpus, write_transcript

SC = corpus()


@pytest.fixture
def api():
    with FakeAnthropic() as server:
        yield server


def _strings(obj) -> list[str]:
    if isinstance(obj, str):
        return [obj]
    if isinstance(obj, dict):
        return [s for v in obj.values() for s in _strings(v)]
    if isinstance(obj, list):
        return [s for v in obj for s in _strings(v)]
    return []


def test_corpus_leaks_nowhere_end_to_end(api, tmp_path, state_dir):
    secrets, benign = SC.secret_samples(), SC.benign_samples()
    transcript = tmp_path / "t.jsonl"
    write_transcript(transcript, [*secrets, *benign], tail=(
        "We decided to keep the deploy credentials in the vault instead of .env files, because "
        "the audit flagged plaintext secrets; the tradeoff is one more network hop at boot.",))
    mem = tmp_path / "mem"
    (mem / "decisions").mkdir(parents=True)
    hand_token = "ghp_" + "Hd9Kq2Lm4Np6Rs8Tu0Vw2Xy4Za6Bc8De0Fg2"
    raw = [s.value for s in secrets[:6] if "\n" not in s.value]
    api.enqueue(
        message(tool_use("read_memory", {"path": "decisions/hand-edited"})),
        message(tool_use("store_memory", {
            "type": "decision", "anchor": "deploy-credentials-in-vault",
            "description": "Deploy credentials live in the vault, not in .env files " + raw[0],
            "body": "The audit flagged plaintext secrets in .env; credentials moved to the vault. "
                    "Old values: " + ", ".join(raw) + ". Repo: /home/jdoe/shop.",
            "scores": {"durability": 3, "scope": 3, "rationale": 3, "retrieval": 2},
            "confidence": "HIGH"})),
        message(tool_use("finish", {"summary": "stored " + raw[1]})))
    (state_dir / "config.toml").write_text(f'base_url = "{api.url}"\nmax_turns = 6\n')
    subprocess.run(["git", "init", "-q", str(mem)], check=True)
    (mem / "decisions" / "hand-edited.md").write_text(
        "---\ntype: decision\n---\nA person pasted " + hand_token + " here by hand.\n")
    env = dict(os.environ, ANTHROPIC_API_KEY="sk-ant-test-dummy")
    proc = subprocess.run([sys.executable, "-m", "dualtrace.cli", "encode", "--backend", "anthropic",
                           "--memory-dir", str(mem), str(transcript)], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr + proc.stdout
    requests = [r.raw.decode() for r in api.requests]
    assert len(api.message_requests()) == 3
    sent = "\n".join(s for r in api.message_requests() for s in _strings(r))
    assert "[REDACTED:" in sent

    files = {p: p.read_bytes().decode(errors="replace") for p in mem.rglob("*")
             if p.is_file() and ".git" not in p.relative_to(mem).parts}
    memory_text = "\n".join(t for p, t in files.items() if p.suffix == ".md"
                            and p.name != "hand-edited.md")
    assert any("deploy-credentials-in-vault" in p.name for p in files) and "[REDACTED:" in memory_text
    history = subprocess.run(["git", "log", "-p", "--all", "--format=%B"], cwd=mem,
                             capture_output=True, text=True, check=True).stdout
    assert "deploy-credentials-in-vault" in history
    state = "\n".join(p.read_bytes().decode(errors="replace") for p in state_dir.rglob("*")
                      if p.is_file() and "kingfisher" not in str(p))
    index = "\n".join(p.read_bytes().decode(errors="replace") for p in mem.rglob("*")
                      if p.is_file() and p.suffix in (".db", ".sqlite", ".sqlite3"))
    where = {"request": sent, "request-raw": "\n".join(requests), "memory": memory_text,
             "git": history, "state": state, "index": index, "stdout": proc.stdout}
    leaks = [(s.kind, name) for s in secrets for name, text in where.items()
             if SC.survives(s.value, text) or SC.survives(json.dumps(s.value)[1:-1], text)]
    assert leaks == [], leaks
    assert hand_token not in sent, "a hand-edited memory was read back to the model unredacted"
    for text in (memory_text, history, sent):
        assert "/home/jdoe" not in text
    # The look-alikes that reached the model are intact (the digest keeps a budget).
    kept_out = [b.kind for b in benign if b.keep in "\n".join(requests) and b.keep not in sent]
    assert kept_out == []
