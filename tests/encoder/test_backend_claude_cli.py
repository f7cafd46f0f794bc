"""Headless Claude Code backend, driven through a fake `claude` executable (a real process)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from dualtrace.config import Settings
from dualtrace.encoder.backends import EncodeRequest
from dualtrace.encoder.backends.claude_cli import ClaudeCliBackend, extract_plan
from dualtrace.encoder.plan import Context, Grounding, PlanBuilder
from dualtrace.errors import BackendError
from dualtrace.memfs.store import MemoryStore
from tests.conftest import EXAMPLES
from tests.encoder.test_backend_anthropic import DECISION, DIGEST

DATE = "2026-03-10"

# The fake records argv, env and stdin, then prints what the test put in reply.json.
FAKE = r'''#!{python}
import json, os, sys, time
here = os.path.dirname(os.path.abspath(__file__))
record = {{"argv": sys.argv[1:], "cwd": os.getcwd(), "stdin": sys.stdin.read(),
          "env": {{k: os.environ.get(k) for k in ("DUALTRACE_CHILD", "CLAUDE_CODE_SESSION_ID")}}}}
with open(os.path.join(here, "calls.jsonl"), "a") as fh:
    fh.write(json.dumps(record) + "\n")
spec = json.load(open(os.path.join(here, "reply.json")))
time.sleep(spec.get("sleep", 0))
sys.stderr.write(spec.get("stderr", ""))
sys.stdout.write(spec["stdout"] if isinstance(spec["stdout"], str) else json.dumps(spec["stdout"]))
sys.exit(spec.get("exit", 0))
'''


@pytest.fixture
def fake_claude(tmp_path):
    bindir = tmp_path / "bin"
    bindir.mkdir()
    exe = bindir / "claude"
    exe.write_text(FAKE.format(python=sys.executable))
    exe.chmod(0o755)
    return bindir


def reply(bindir: Path, stdout, **kw) -> None:
    (bindir / "reply.json").write_text(json.dumps({"stdout": stdout, **kw}))


def calls(bindir: Path) -> list[dict]:
    path = bindir / "calls.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def result(plan, **kw) -> dict:
    text = plan if isinstance(plan, str) else json.dumps(plan)
    return {"type": "result", "subtype": "success", "is_error": False, "result": text,
            "usage": {"input_tokens": 4000, "output_tokens": 600,
                      "cache_read_input_tokens": 0, "cache_creation_input_tokens": 0},
            "total_cost_usd": 0.021, **kw}


def run(tmp_path, claude: str, **settings_kw):
    store = MemoryStore(tmp_path / "memory", project="demo")
    ctx = Context("c1a0de00-0000", "claude", DATE, Grounding(DIGEST, DATE), project="demo")
    builder = PlanBuilder(store, ctx)
    settings = Settings(claude_cli=claude, **settings_kw)
    request = EncodeRequest(None, DIGEST, None, (), settings, ctx)
    usage = ClaudeCliBackend(settings).encode(request, builder)
    return usage, builder, store


def test_plan_is_validated_and_child_cannot_recurse(tmp_path, fake_claude, monkeypatch):
    monkeypatch.setenv("CLAUDE_CODE_SESSION_ID", "parent-session")
    plan = {"operations": [
        {"op": "store", **DECISION},
        {"op": "store", **{**DECISION, "anchor": "../../etc/passwd"}},
        {"op": "delete", "target": "decisions/x.md"},
        {"op": "skip", "reason": "routine rename"},
    ], "summary": "one decision"}
    reply(fake_claude, result("Here is the plan:\n```json\n" + json.dumps(plan) + "\n```"))
    usage, builder, store = run(tmp_path, str(fake_claude / "claude"))
    assert "decisions/session-storage-postgres.md" in builder.pending
    assert builder.apply()
    notes = " ".join(usage.notes)
    assert "operation 2 rejected" in notes and "operation 3 rejected" in notes
    assert "nothing can be deleted" in notes and "2 of 4 operation(s) rejected" in notes
    assert usage.input_tokens == 4000 and usage.cost_usd == 0.021
    (call,) = calls(fake_claude)
    argv = call["argv"]
    assert argv[0] == "-p" and "--no-session-persistence" in argv
    assert json.loads(argv[argv.index("--settings") + 1]) == {"disableAllHooks": True}
    assert argv[argv.index("--tools") + 1] == "" and argv[argv.index("--max-turns") + 1] == "1"
    assert argv[argv.index("--output-format") + 1] == "json"
    assert "You have no tools" in argv[argv.index("--system-prompt") + 1]
    assert call["env"] == {"DUALTRACE_CHILD": "1", "CLAUDE_CODE_SESSION_ID": None}
    assert "refresh_token()" in call["stdin"] and "<session_digest>" in call["stdin"]
    assert Path(call["cwd"]) != Path.cwd() and "dualtrace-claude-" in call["cwd"]


def test_found_on_path(tmp_path, fake_claude, monkeypatch):
    monkeypatch.setenv("PATH", f"{fake_claude}{os.pathsep}{os.environ['PATH']}")
    reply(fake_claude, result({"operations": []}))
    usage, builder, store = run(tmp_path, "claude")
    assert builder.pending == {} and len(calls(fake_claude)) == 1


def test_timeout_kills_child(tmp_path, fake_claude):
    reply(fake_claude, result({"operations": []}), sleep=30)
    with pytest.raises(BackendError, match="timed out after 1s"):
        run(tmp_path, str(fake_claude / "claude"), timeout_seconds=1.0)


@pytest.mark.parametrize("stdout, kw, match", [
    ("not json at all", {}, "no JSON result"),
    (result("I think we should store something."), {}, "did not return a JSON plan"),
    (result({"ops": []}), {}, "no 'operations' list"),
    (result("Credit balance is too low", is_error=True), {}, "reported an error: Credit"),
    ("", {"exit": 1, "stderr": "Not logged in"}, "exited with 1: Not logged in"),
])
def test_failures_raise_backend_error(tmp_path, fake_claude, stdout, kw, match):
    reply(fake_claude, stdout, **kw)
    with pytest.raises(BackendError, match=match):
        run(tmp_path, str(fake_claude / "claude"))


def test_missing_cli(tmp_path):
    with pytest.raises(BackendError, match="claude CLI not found"):
        run(tmp_path, str(tmp_path / "no-such-claude"))


def test_extract_plan_variants():
    assert extract_plan('{"operations": []}') == {"operations": []}
    assert extract_plan('ok ```json\n{"operations": [1]}\n``` done') == {"operations": [1]}
    assert extract_plan('Plan: {"operations": [2]} -- end') == {"operations": [2]}


def test_cli_encode_with_claude_backend(tmp_path, fake_claude):
    """`dualtrace encode --backend claude` end to end, claude_cli from the config."""
    from dualtrace import config

    (config.state_dir() / "config.toml").write_text(f'claude_cli = "{fake_claude / "claude"}"\n')
    decision = {"op": "store", "type": "decision", "anchor": "structured-logging-json",
                "description": "JSON structured logging because Datadog could not parse free-form strings",
                "body": "Switched src/shop/logging_config.py to JSON; a log shipper was rejected.",
                "scores": {"durability": 3, "scope": 3, "rationale": 3, "retrieval": 2},
                "confidence": "HIGH"}
    reply(fake_claude, result({"operations": [decision]}))
    examples = EXAMPLES
    proc = subprocess.run([sys.executable, "-m", "dualtrace.cli", "encode", "--backend", "claude",
                           "--memory-dir", str(tmp_path / "mem"),
                           str(examples / "pilot-1b-structured-logging.jsonl")],
                          cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "mem/decisions/structured-logging-json.md").is_file()
    log = subprocess.run(["git", "log", "--format=%B"], cwd=tmp_path / "mem", capture_output=True,
                         text=True).stdout
    assert "Dualtrace-Backend: claude" in log
