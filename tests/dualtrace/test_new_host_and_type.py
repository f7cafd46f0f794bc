"""Issue 10's report, checked for real: a new host is one module plus one registry line,
a new memory type is one table row. Each runs in a fresh interpreter (the derived
tables are built at import), with a throwaway host or type added the way a developer
would add one, and every consumer is asked whether it sees it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

from tests.conftest import REPO_ROOT

# A host module: what it knows is only its own (detection, settings file, events,
# transcript format); everything else comes from the registry's callers.
ACME = '''
from pathlib import Path

from dualtrace.hooks import claude_code as _cc

NAME = "acme"
TRANSCRIPT_FORMAT = "claude-code"  # it writes Claude Code's JSONL
EVENTS = {"AfterTurn": ("stop", 30, None), "Begin": ("session-start", 10, None)}
TIMEOUT_UNIT = 1
SCOPES = ("user",)
REQUIRES_TRANSCRIPT = True
SWEEP_ON_START = False
SWEEP_FOLDER = False
KEEPS_OWN_TRANSCRIPT = False
BACKGROUND_EVENTS = frozenset()
FAST_EVENTS = frozenset()


def detect(payload):
    return "acme_turn" in payload


def normalize(payload, event, state):
    return {"session_id": payload.get("acme_session"), "transcript": payload.get("log"),
            "cwd": payload.get("cwd"), "agent_id": None, "ignore": None}


def settings_path(scope, root, home):
    return Path(home) / ".acme" / "hooks.json"


def project_transcripts(root):
    folder = Path(root) / ".acme-logs"
    return sorted(folder.glob("*.jsonl")) if folder.is_dir() else []


def transcripts_place(root):
    return f"{Path(root) / '.acme-logs'}/*.jsonl"


keep = _cc.keep
context_output = _cc.context_output
find_transcript = _cc.find_transcript
sibling_transcripts = _cc.sibling_transcripts
session_of = _cc.session_of
memory_dir = _cc.memory_dir
'''


def _run(code: str, tmp_path, **env: str) -> dict:
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    full = {**os.environ, "HOME": str(home), "XDG_STATE_HOME": str(tmp_path / "state"),
            "PYTHONPATH": os.pathsep.join([str(tmp_path), str(REPO_ROOT)]), **env}
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True,
                          text=True, cwd=tmp_path, env=full, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_a_new_host_is_one_module_and_one_registry_line(tmp_path):
    (tmp_path / "acme_host.py").write_text(ACME)
    project = tmp_path / "project"
    (project / ".acme-logs").mkdir(parents=True)
    log = project / ".acme-logs" / "s1.jsonl"
    log.write_text("")
    seen = _run(f'''
        from dualtrace.hooks import registry
        registry.HOSTS["acme"] = "acme_host"  # the one registry line
        import json
        from pathlib import Path
        from dualtrace import backfill, hookcmd
        from dualtrace.cli import cli
        from dualtrace.hooks import install, transcripts
        from dualtrace.hooks.host import Host
        import acme_host
        members = [m for m in dir(Host) if not m.startswith("_")] + list(Host.__annotations__)
        choices = {{c: next(p for p in cli.commands[c].params if p.name == "agent").type.choices
                   for c in ("install", "uninstall")}}
        lines = install.install("acme", "user", mcp=False)
        written = json.loads((Path.home() / ".acme" / "hooks.json").read_text())
        print(json.dumps({{
            "missing": sorted(m for m in set(members) if not hasattr(acme_host, m)),
            "install_agents": "acme" in install.AGENTS,
            "cli_choices": all("acme" in c for c in choices.values()),
            "detected": registry.detect({{"acme_turn": 1, "acme_session": "s1"}}),
            "hook_events": sorted(set(hookcmd.EVENTS) & {{"stop", "session-start"}}),
            "format": transcripts.format_for_host("acme"),
            "installed_events": sorted(written.get("hooks", {{}})),
            "install_lines": lines,
            "backfill": [str(p) for p in backfill.discover(root=Path({str(project)!r}))],
        }}))
    ''', tmp_path)
    assert seen["missing"] == []  # the throwaway module is a whole Host
    assert seen["install_agents"] and seen["cli_choices"]
    assert seen["detected"] == "acme"
    assert seen["hook_events"] == ["session-start", "stop"]
    assert seen["format"] == "claude-code"
    assert seen["installed_events"] == ["AfterTurn", "Begin"], seen["install_lines"]
    assert str(log) in seen["backfill"]


def test_a_new_memory_type_is_one_table_row(tmp_path):
    seen = _run(f'''
        from dualtrace.memfs import types
        runbook = types.MemoryType("runbook", "runbooks", ("runbook",), None,
                                   "an operational procedure, step by step.")
        types.MEMORY_TYPES = (*types.MEMORY_TYPES, runbook)  # the one table row
        import json
        from pathlib import Path
        from dualtrace.agent_tools import TYPES as TOOL_TYPES
        from dualtrace.cli import cli
        from dualtrace.encoder.backends import anthropic
        from dualtrace.memfs import formats, index, layout
        from dualtrace.memfs.formats import Fact
        from dualtrace.memfs.recall import recall
        from dualtrace.memfs.store import MemoryStore
        from dualtrace.memfs.summary import store_summary
        mem = Path({str(tmp_path / "memory")!r})
        store = MemoryStore(mem, project="demo")
        rel = formats.fact_path("runbook", "rotate-signing-keys")
        store.write(Fact(path=rel, type="runbook", confidence="HIGH", stored="2026-06-01",
                         description="Runbook: rotate the JWT signing keys with kms rotate-key",
                         body="Run kms rotate-key, then restart the auth service."))
        store.commit([rel], "mem: store " + rel + "\\n")
        store_tool = next(t for t in anthropic.TOOLS if t["name"] == "store_memory")
        kind = next(p for p in cli.commands["recall"].params if p.name == "kind")
        result = recall(mem, "how do we rotate the JWT signing keys?")
        print(json.dumps({{
            "path": rel,
            "types": "runbook" in formats.TYPES and "runbook" in index.CURATED_TYPES,
            "folder": "runbooks" in layout.FACT_FOLDERS and formats.canonical_folder("runbook"),
            "listed": store.iter_files(),
            "scanned": [m.type for m in store.scan().memories],
            "status": store_summary(store)["types"],
            "schema_enum": "runbook" in store_tool["input_schema"]["properties"]["type"]["enum"],
            "mcp_types": "runbook" in TOOL_TYPES,
            "cli_kind": "runbook" in kind.type.choices,
            "prompt": "- runbook: an operational procedure" in anthropic.system_text("tools"),
            "recalled": [m.path for m in result.memories], "state": result.state,
        }}))
    ''', tmp_path)
    assert seen["path"] == "runbooks/rotate-signing-keys.md"
    assert seen["types"] and seen["folder"] == "runbooks"
    assert seen["listed"] == ["runbooks/rotate-signing-keys.md"]
    assert seen["scanned"] == ["runbook"] and seen["status"] == {"runbook": 1}
    assert seen["schema_enum"] and seen["mcp_types"] and seen["cli_kind"] and seen["prompt"]
    assert seen["recalled"][:1] == ["runbooks/rotate-signing-keys.md"] and seen["state"] in "AB"
