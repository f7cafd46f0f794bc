"""``dualtrace mcp`` through a real stdio MCP session (subprocess + the SDK's client)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from dualtrace.pipeline import encode_session
from tests.conftest import EXAMPLES
from tests.dualtrace.mcp_helpers import ask_line, server_params, text_of, with_session

READ_TOOLS = {"recall", "search", "show", "recent_sessions"}


def _commits(memdir: Path) -> int:
    out = subprocess.run(["git", "-C", str(memdir), "rev-list", "--count", "HEAD"],
                         capture_output=True, text=True)
    return int(out.stdout.strip()) if out.returncode == 0 else 0


@pytest.fixture
def stocked(memdir, tmp_path):
    """A memory dir with a FULL decision (fact + scene) from a shipped example."""
    report = encode_session(EXAMPLES / "pilot-5-session-storage.jsonl", memory_dir=memdir,
                            backend="offline")
    assert report.commit
    return memdir


def test_tools_are_listed_with_read_only_annotations(memdir, tmp_path):
    async def body(client):
        return (await client.list_tools()).tools

    tools = {t.name: t for t in with_session(server_params(memdir, tmp_path), body)}
    assert set(tools) == READ_TOOLS | {"remember"}
    for name in READ_TOOLS:
        assert tools[name].annotations.read_only_hint is True, name
        assert tools[name].annotations.destructive_hint is False
    assert tools["remember"].annotations.read_only_hint is False
    assert tools["remember"].annotations.destructive_hint is False
    assert tools["recall"].input_schema["required"] == ["question"]


def test_recall_states_match_the_cli(stocked, tmp_path, run_cli):
    question = "why did we move session storage from redis to postgres"

    async def body(client):
        a = await client.call_tool("recall", {"question": question})
        c = await client.call_tool("recall", {"question": "kubernetes helm chart ingress"})
        return a, c

    a, c = with_session(server_params(stocked, tmp_path), body)
    assert not a.is_error and not c.is_error
    answer = text_of(a)
    assert answer.startswith("(STATE A retrieval: fact + scene, high confidence)")
    assert "decisions/move-session-storage-redis-postgres.md" in answer
    assert "(STATE C retrieval: no fact found, abstaining)" in text_of(c)
    cli = run_cli("recall", "--memory-dir", str(stocked), question)
    assert cli.exit_code == 0 and cli.output == answer


def test_search_show_and_recent_sessions(stocked, tmp_path):
    async def body(client):
        s = await client.call_tool("search", {"query": "postgres sessions"})
        sh = await client.call_tool("show", {"target": "move-session-storage-redis-postgres"})
        r = await client.call_tool("recent_sessions", {"limit": 5})
        return s, sh, r

    s, sh, r = with_session(server_params(stocked, tmp_path), body)
    lines = text_of(s).splitlines()
    assert lines[0].startswith("path | type")
    assert lines[1].startswith("decisions/move-session-storage-redis-postgres.md | decision |")
    shown = text_of(sh)
    fact_at = shown.index("==> decisions/move-session-storage-redis-postgres.md")
    scene_at = shown.index("==> scenes/decisions/move-session-storage-redis-postgres.md")
    assert fact_at < scene_at  # the fact, then its moment
    recent = text_of(r).splitlines()
    # From the session record (memfs/sessions.py), not the git log.
    assert recent[0].startswith("2026-04-02 10:01  session 50000000-0000-4000-8000-000000000005"
                                "  (claude-code, 1 turn)")
    assert "    outcome: 1 commit; pytest -q tests/test_sessions.py passed" in recent
    assert "    stored decisions/move-session-storage-redis-postgres.md" in recent
    assert "    record: sessions/2026-04/2026-04-02-50000000.md" in recent


def test_show_reads_a_session_record_by_id_prefix_or_path(stocked, tmp_path):
    async def body(client):
        return (await client.call_tool("show", {"target": "50000000"}),
                await client.call_tool("show", {"target": "sessions/2026-04/2026-04-02-50000000.md"}),
                await client.call_tool("show", {"target": "no-such-anchor"}))

    by_id, by_path, missing = with_session(server_params(stocked, tmp_path), body)
    for result in (by_id, by_path):
        assert not result.is_error, text_of(result)
        text = text_of(result)
        assert text.startswith("==> sessions/2026-04/2026-04-02-50000000.md\n---\ntype: session\n")
        assert "session: 50000000-0000-4000-8000-000000000005" in text
    # Neither a memory nor a record: the memory error, not a record one.
    assert missing.is_error and "no memory with anchor or path 'no-such-anchor'" in text_of(missing)


def test_recent_sessions_without_records_falls_back_to_the_git_log(memdir, tmp_path):
    import dataclasses

    from dualtrace import config

    settings = dataclasses.replace(config.load_settings(None), session_records="off")
    report = encode_session(EXAMPLES / "pilot-5-session-storage.jsonl", memory_dir=memdir,
                            backend="offline", settings=settings)
    assert report.commit and not (memdir / "sessions").exists()

    async def body(client):
        return await client.call_tool("recent_sessions", {"limit": 5})

    text = text_of(with_session(server_params(memdir, tmp_path), body))
    assert text.startswith("(no session records in this memory dir: sessions from its git log)")
    assert "session 50000000-0000-4000-8000-000000000005  (offline)" in text
    assert "store decisions/move-session-storage-redis-postgres" in text


def test_remember_is_validated_scored_and_one_commit(memdir, tmp_path):
    async def body(client):
        first = await client.call_tool("remember", {
            "type": "preference", "description": "The user wants answers in British English"})
        second = await client.call_tool("remember", {
            "type": "decision", "description": "Deploy with blue-green switches on Fridays",
            "why": "rollbacks are instant", "anchor": "blue-green-deploys"})
        again = await client.call_tool("remember", {
            "type": "decision", "description": "Deploy with blue-green switches on Fridays",
            "body": "Confirmed again in review.", "anchor": "blue-green-deploys"})
        found = await client.call_tool("recall", {"question": "how do we deploy blue green"})
        return first, second, again, found

    first, second, again, found = with_session(server_params(memdir, tmp_path), body)
    assert not first.is_error and "system/human.md" in text_of(first)
    assert not second.is_error, text_of(second)
    assert text_of(second).startswith("store decisions/blue-green-deploys.md [RECORD")
    # A restatement updates in place: one file, one more commit, never a duplicate.
    assert not again.is_error and text_of(again).startswith("update decisions/blue-green-deploys.md")
    assert sorted(p.name for p in (memdir / "decisions").iterdir()) == ["blue-green-deploys.md"]
    assert "Why: rollbacks are instant" in (memdir / "decisions/blue-green-deploys.md").read_text()
    assert _commits(memdir) == 4  # init + one commit per remember
    log = subprocess.run(["git", "-C", str(memdir), "log", "-1", "--format=%B"],
                         capture_output=True, text=True).stdout
    assert "Dualtrace-Backend: remember" in log
    assert text_of(found).startswith("(STATE B retrieval")


def test_bad_inputs_are_clear_tool_errors_and_write_nothing(stocked, tmp_path):
    before = _commits(stocked)
    calls = [
        ("recall", {"question": "   "}, "'question' is required"),
        ("recall", {"question": "x", "limit": 0}, "'limit' must be an integer from 1 to 100"),
        ("recall", {"question": "x", "limit": "5"}, "'limit' must be an integer from 1 to 100"),
        ("search", {"query": "x", "colour": "red"}, "unknown argument 'colour' for search"),
        ("recall", {}, "missing required argument 'question' for recall"),
        ("show", {}, "missing required argument 'target' for show"),
        ("search", {"query": "x", "type": "secret"}, "'type' must be one of decision"),
        ("show", {"target": "../../etc/passwd"}, "must be a path inside the memory directory"),
        ("show", {"target": "/etc/passwd"}, "must be a path inside the memory directory"),
        ("show", {"target": "decisions/nope.md"}, "no memory file decisions/nope.md"),
        ("remember", {"type": "rumour", "description": "x"}, "'type' must be one of"),
        ("remember", {"type": "decision", "description": "ok thing", "anchor": "Bad/Anchor"},
         "must be lowercase ASCII words"),
        # No content word: nothing to store, recall or inject (review 7 F20).
        ("remember", {"type": "decision", "description": "x"},
         "'description' must say what was decided in words, got 'x'"),
        ("remember", {"type": "convention", "description": "ok, thanks!"},
         "'description' must say what the rule is in words"),
        ("remember", {"type": "preference", "description": "? - 1 ..."},
         "'description' must say what the user prefers in words"),
        ("delete", {"target": "decisions/move-session-storage-redis-postgres.md"}, "delete"),
    ]

    async def body(client):
        return [await client.call_tool(name, args) for name, args, _ in calls]

    results = with_session(server_params(stocked, tmp_path), body)
    for (name, _args, expected), result in zip(calls, results, strict=True):
        assert result.is_error, name
        assert expected in text_of(result), (name, text_of(result))
        assert "\n" not in text_of(result).strip(), (name, text_of(result))
    assert _commits(stocked) == before
    assert (stocked / "decisions/move-session-storage-redis-postgres.md").exists()


def test_missing_memory_dir_abstains_and_creates_nothing(tmp_path):
    memdir = tmp_path / "none"

    async def body(client):
        return (await client.call_tool("recall", {"question": "anything"}),
                await client.call_tool("search", {"query": "anything"}),
                await client.call_tool("recent_sessions", {}))

    recall, search, recent = with_session(server_params(memdir, tmp_path), body)
    assert "(STATE C retrieval" in text_of(recall)
    assert text_of(search) == "no memories stored yet"
    assert text_of(recent) == "no encoded sessions yet"
    assert not memdir.exists()


def test_encoder_server_refuses_to_start_without_its_broker(tmp_path):
    from tests.dualtrace.mcp_helpers import dualtrace_argv

    proc = subprocess.run(dualtrace_argv("mcp", "--encoder"), capture_output=True, text=True,
                          cwd=tmp_path, stdin=subprocess.DEVNULL, timeout=60)
    assert proc.returncode == 1
    assert proc.stderr.startswith("Error: dualtrace mcp --encoder needs DUALTRACE_BROKER")


# ------------------------------------------------------------------ start-up

HEAVY = ("dualtrace.memfs.recall", "dualtrace.memfs.index", "dualtrace.encoder.redact",
         "kingfisher_sdk", "numpy", "dualtrace.memfs.embed", "dualtrace.memfs.store")


def _host(memdir: Path, cwd: Path, env: dict[str, str] | None = None) -> subprocess.Popen:
    from tests.dualtrace.mcp_helpers import dualtrace_argv

    return subprocess.Popen(dualtrace_argv("mcp", "--memory-dir", str(memdir)), cwd=cwd,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env={**os.environ, **(env or {})})


INIT = {"protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "test-host", "version": "0"}}


def test_handshake_loads_nothing_but_the_sdk_and_the_schemas(stocked, tmp_path):
    """What the host waits for (initialize, initialized) imports none of the recall
    stack, the index or the redactor: those load after tools/list, off the host's path."""
    proc = _host(stocked, tmp_path, {"PYTHONPROFILEIMPORTTIME": "1"})
    answer = ask_line(proc, 1, "initialize", INIT)
    ask_line(proc, None, "notifications/initialized", {})
    proc.stdin.close()
    stderr = proc.stderr.read()
    assert proc.wait(timeout=60) == 0, stderr
    assert answer["result"]["serverInfo"]["name"] == "dualtrace"
    assert "recall" in answer["result"]["instructions"]
    imported = {line.rsplit("|", 1)[1].strip() for line in stderr.splitlines()
                if line.startswith("import time:") and "|" in line}
    assert "mcp.server.lowlevel" in imported and "dualtrace.agent_tools" in imported
    assert not imported & set(HEAVY), sorted(imported & set(HEAVY))
    assert "warm-up" not in stderr


def test_tools_list_starts_the_warm_up_and_the_first_call_uses_it(stocked, tmp_path):
    proc = _host(stocked, tmp_path)
    ask_line(proc, 1, "initialize", INIT)
    ask_line(proc, None, "notifications/initialized", {})
    listed = ask_line(proc, 2, "tools/list", {})["result"]["tools"]
    assert {t["name"] for t in listed} == READ_TOOLS | {"remember"}
    recall = ask_line(proc, 3, "tools/call", {"name": "recall",
                                         "arguments": {"question": "why postgres for sessions"}})
    proc.stdin.close()
    stderr = proc.stderr.read()
    assert proc.wait(timeout=60) == 0, stderr
    assert not recall["result"].get("isError"), recall
    assert recall["result"]["content"][0]["text"].startswith("(STATE A retrieval"), recall
    # Printed under the lock the first call waits on: the warm-up ran before it.
    assert re.search(r"^dualtrace mcp: warm-up done in \d+ ms", stderr, re.M), stderr


# What a stdio server never uses and the SDK's package __init__ files would import
# (dualtrace/mcp_sdk.py): its client, its HTTP client library and the high-level server.
SDK_UNUSED = ("mcp.client.client", "mcp.client.stdio", "httpx2", "mcp.server.mcpserver")


def test_handshake_skips_the_sdks_client_and_high_level_server(memdir, tmp_path):
    proc = _host(memdir, tmp_path, {"PYTHONPROFILEIMPORTTIME": "1"})
    answer = ask_line(proc, 1, "initialize", INIT)
    ask_line(proc, None, "notifications/initialized", {})
    listed = ask_line(proc, 2, "tools/list", {})["result"]["tools"]
    called = ask_line(proc, 3, "tools/call", {"name": "recall",
                                             "arguments": {"question": "why postgres"}})
    proc.stdin.close()
    stderr = proc.stderr.read()
    assert proc.wait(timeout=60) == 0, stderr
    assert answer["result"]["protocolVersion"] == "2025-06-18"
    assert len(listed) == 5 and "(STATE C retrieval" in called["result"]["content"][0]["text"]
    imported = {line.rsplit("|", 1)[1].strip() for line in stderr.splitlines()
                if line.startswith("import time:") and "|" in line}
    assert "mcp.server.lowlevel.server" in imported and "mcp_types._v2025_11_25" in imported
    assert not imported & set(SDK_UNUSED), sorted(imported & set(SDK_UNUSED))


def test_the_sdk_still_imports_whole_where_its_package_names_are_used(tmp_path):
    """After the lazy load, ``from mcp import Client`` and ``MCPServer`` still work (the
    package __init__ runs on first use), and deferred wire models still validate."""
    code = ("from dualtrace import mcp_sdk; mcp_sdk.load(); import dualtrace.mcp_server, sys; "
            "assert 'mcp.client.client' not in sys.modules; "
            "from mcp import Client; from mcp.server import MCPServer; import mcp; "
            "assert mcp.Client is Client and mcp.types.Tool; "
            "from mcp_types.methods import parse_client_request as p; "
            "r = p('initialize', '2025-06-18', {'protocolVersion': '2025-06-18', 'capabilities': {}, "
            "'clientInfo': {'name': 'x', 'version': '0'}}); print(type(r).__name__)\n"
            "try:\n    p('initialize', '2025-06-18', {'protocolVersion': 5})\n"
            "except ValueError:\n    print('rejected')")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=tmp_path, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["InitializeRequest", "rejected"]


def _raw(proc: subprocess.Popen, line: str) -> dict:
    proc.stdin.write(line + "\n")
    proc.stdin.flush()
    answer = proc.stdout.readline()
    assert answer, proc.stderr.read()
    return json.loads(answer)


def test_a_line_that_is_not_a_json_rpc_message_gets_an_error_answer(memdir, tmp_path):
    """JSON-RPC 2.0: invalid JSON -> -32700, JSON that is no message -> -32600, both with
    id null; the session goes on (the SDK's transport alone dropped such lines)."""
    proc = _host(memdir, tmp_path)
    ask_line(proc, 1, "initialize", INIT)
    ask_line(proc, None, "notifications/initialized", {})
    bad = _raw(proc, "recall why postgres")
    assert bad == {"jsonrpc": "2.0", "id": None,
                   "error": {"code": -32700, "message": "Parse error: the line is not JSON"}}
    invalid = _raw(proc, json.dumps({"question": "why postgres"}))
    assert invalid["id"] is None and invalid["error"]["code"] == -32600, invalid
    proc.stdin.write("\n")  # a blank line is no message: no answer, nothing broken
    listed = ask_line(proc, 2, "tools/list", {})
    assert len(listed["result"]["tools"]) == 5
    proc.stdin.close()
    assert proc.wait(timeout=60) == 0


def test_mcp_help_and_bad_options_are_the_clis(tmp_path):
    from tests.dualtrace.mcp_helpers import dualtrace_argv

    helped = subprocess.run(dualtrace_argv("mcp", "--help"), capture_output=True, text=True,
                            cwd=tmp_path, stdin=subprocess.DEVNULL, timeout=120)
    assert helped.returncode == 0, helped.stderr
    assert helped.stdout.startswith("Usage: dualtrace mcp [OPTIONS]"), helped.stdout
    assert "--memory-dir PATH" in helped.stdout and "--encoder" not in helped.stdout
    bad = subprocess.run(dualtrace_argv("mcp", "--memory"), capture_output=True, text=True,
                         cwd=tmp_path, stdin=subprocess.DEVNULL, timeout=120)
    assert bad.returncode == 1 and bad.stdout == ""
    assert bad.stderr.startswith("Error: No such option '--memory'. Did you mean '--memory-dir'?"
                                 ), bad.stderr
    assert bad.stderr.strip().endswith("(see 'dualtrace mcp --help')"), bad.stderr
    assert len(bad.stderr.strip().splitlines()) == 1
