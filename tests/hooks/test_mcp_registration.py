"""Registering `dualtrace mcp` in Claude Code's and Codex's MCP configuration files."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib  # type: ignore[no-redef]

from dualtrace.errors import DualtraceError
from dualtrace.hooks import mcp_registration as reg
from dualtrace.hooks.install import module_argv
from tests import hook_helpers

hook_env = hook_helpers.hook_env  # the fixture, shared with the other hook tests


@pytest.fixture
def root(tmp_path) -> Path:
    project = tmp_path / "proj"
    project.mkdir()
    return project


def _home() -> Path:
    return Path(os.path.expanduser("~"))


def test_claude_user_scope_keeps_everything_else_and_is_idempotent(root):
    path = _home() / ".claude.json"
    before = {"numStartups": 7, "mcpServers": {"other": {"command": "x"}},
              "projects": {"/a": {"allowedTools": []}}}
    path.write_text(json.dumps(before))
    lines = reg.register("claude-code", "user", root)
    assert "added MCP server dualtrace" in lines[1]
    data = json.loads(path.read_text())
    assert data["numStartups"] == 7 and data["projects"] == before["projects"]
    assert data["mcpServers"]["other"] == {"command": "x"}
    entry = data["mcpServers"]["dualtrace"]
    assert entry["type"] == "stdio" and entry["args"][-1] == "mcp"
    assert Path(entry["command"]).name.startswith(("dualtrace", "python"))
    assert reg.register("claude-code", "user", root)[0].endswith("nothing changed")
    assert (path.with_name(".claude.json.dualtrace.bak")).exists()
    assert reg.registered() == [{"host": "claude-code", "scope": "user", "root": ""}]
    reg.unregister("claude-code", "user", root)
    assert json.loads(path.read_text()) == before
    assert reg.registered() == []
    # The pre-install copy survives uninstall (which keeps its own copy of the file as
    # installed): it used to be overwritten with the installed version.
    assert json.loads(path.with_name(".claude.json.dualtrace.bak").read_text()) == before
    assert "dualtrace" in json.loads(
        path.with_name(".claude.json.dualtrace-uninstall.bak").read_text())["mcpServers"]


def test_claude_local_scope_is_per_project_in_claude_json(root):
    reg.register("claude-code", "local", root)
    data = json.loads((_home() / ".claude.json").read_text())
    assert list(data["projects"][str(root)]["mcpServers"]) == ["dualtrace"]
    assert "mcpServers" not in data


def test_claude_local_uninstall_leaves_no_empty_objects_it_made(root):
    # Claude Code's own ~/.claude.json, with this project already known to it.
    path = _home() / ".claude.json"
    before = {"numStartups": 2, "projects": {str(root): {"allowedTools": []}}}
    path.write_text(json.dumps(before))
    reg.register("claude-code", "local", root)
    reg.unregister("claude-code", "local", root)
    assert json.loads(path.read_text()) == before  # no "mcpServers": {} left behind

    # A project Claude Code has not seen: "projects" and its entry were ours too.
    path.write_text(json.dumps({"numStartups": 2}))
    reg.register("claude-code", "local", root)
    reg.unregister("claude-code", "local", root)
    assert json.loads(path.read_text()) == {"numStartups": 2}

    # No ~/.claude.json at all: install made the file, uninstall deletes it.
    path.unlink()
    reg.register("claude-code", "local", root)
    reg.unregister("claude-code", "local", root)
    assert not path.exists()


def test_uninstall_keeps_the_persons_own_empty_objects(root):
    path = _home() / ".claude.json"
    before = {"mcpServers": {}, "projects": {str(root): {"mcpServers": {}}}}
    path.write_text(json.dumps(before))
    for scope in ("user", "local"):
        reg.register("claude-code", scope, root)
        reg.unregister("claude-code", scope, root)
        assert json.loads(path.read_text()) == before, scope
    # An object install made, that the person has put a server of their own in since.
    path.write_text("{}")
    reg.register("claude-code", "local", root)
    data = json.loads(path.read_text())
    data["projects"][str(root)]["mcpServers"]["mine"] = {"command": "x"}
    path.write_text(json.dumps(data))
    reg.unregister("claude-code", "local", root)
    assert json.loads(path.read_text()) == {
        "projects": {str(root): {"mcpServers": {"mine": {"command": "x"}}}}}


def test_claude_config_dir_relocates_claude_json(root, tmp_path, monkeypatch):
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(tmp_path / "cfg"))
    reg.register("claude-code", "user", root)
    assert (tmp_path / "cfg" / ".claude.json").is_file()
    assert not (_home() / ".claude.json").exists()


def test_claude_project_scope_is_shareable_and_removed_again(root):
    reg.register("claude-code", "project", root)
    data = json.loads((root / ".mcp.json").read_text())
    assert data == {"mcpServers": {"dualtrace": {"type": "stdio", "command": "dualtrace",
                                                 "args": ["mcp"], "env": {}}}}
    lines = reg.unregister("claude-code", "project", root)
    assert "  deleted the file (install had created it)" in lines
    assert not (root / ".mcp.json").exists()


def test_codex_toml_table_added_and_removed_with_comments_kept(root):
    path = _home() / ".codex" / "config.toml"
    path.parent.mkdir()
    before = ('# my codex config\nmodel = "o4"\n\n[mcp_servers.docs]\ncommand = "docs-mcp"\n'
              '\n[profiles.fast]\nmodel = "o4-mini"  # cheap\n')
    path.write_text(before)
    reg.register("codex", "user", root)
    text = path.read_text()
    assert text.startswith(before)
    parsed = tomllib.loads(text)
    assert parsed["mcp_servers"]["docs"] == {"command": "docs-mcp"}
    assert parsed["mcp_servers"]["dualtrace"]["args"][-1] == "mcp"
    assert reg.register("codex", "user", root)[0].endswith("nothing changed")
    # A stale entry of ours (with a sub-table) is replaced, not duplicated.
    path.write_text(before + '\n[mcp_servers.dualtrace]\ncommand = "/old/dualtrace"\n'
                    'args = ["mcp"]\n\n[mcp_servers.dualtrace.env]\nX = "1"\n\n[tail]\nk = 1\n')
    assert "updated" in reg.register("codex", "user", root)[1]
    parsed = tomllib.loads(path.read_text())
    assert parsed["mcp_servers"]["dualtrace"]["command"] != "/old/dualtrace"
    assert "env" not in parsed["mcp_servers"]["dualtrace"] and parsed["tail"] == {"k": 1}
    reg.unregister("codex", "user", root)
    parsed = tomllib.loads(path.read_text())
    assert "dualtrace" not in parsed["mcp_servers"] and parsed["tail"] == {"k": 1}
    assert parsed["profiles"]["fast"]["model"] == "o4-mini"


def test_codex_broken_toml_is_left_alone(root):
    path = _home() / ".codex" / "config.toml"
    path.parent.mkdir()
    path.write_text("model = [unclosed\n")
    with pytest.raises(DualtraceError, match="is not valid TOML"):
        reg.register("codex", "user", root)
    assert path.read_text() == "model = [unclosed\n"


def test_codex_created_file_is_deleted_on_uninstall(root):
    reg.register("codex", "project", root)
    path = root / ".codex" / "config.toml"
    assert tomllib.loads(path.read_text())["mcp_servers"]["dualtrace"] == {
        "command": "dualtrace", "args": ["mcp"]}
    reg.unregister("codex", "project", root)
    assert not path.exists()


def test_dry_run_writes_nothing(root):
    lines = reg.register("claude-code", "user", root, dry_run=True)
    assert "dry run" in lines[0] and not (_home() / ".claude.json").exists()
    assert reg.register("letta", "user", root) == []  # no MCP client config to write


def _cli(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "dualtrace.cli", *args], capture_output=True,
                          text=True, cwd=cwd, env=dict(os.environ), timeout=120)


def test_install_registers_the_server_and_uninstall_removes_it(root):
    proc = _cli("install", "--agent", "claude-code", "--scope", "user", cwd=root)
    assert proc.returncode == 0, proc.stderr
    assert "added MCP server dualtrace" in proc.stdout
    claude_json = json.loads((_home() / ".claude.json").read_text())
    assert "dualtrace" in claude_json["mcpServers"]
    assert "Stop" in json.loads((_home() / ".claude" / "settings.json").read_text())["hooks"]
    proc = _cli("install", "--agent", "codex", "--scope", "user", cwd=root)
    assert proc.returncode == 0, proc.stderr
    toml = tomllib.loads((_home() / ".codex" / "config.toml").read_text())
    assert toml["mcp_servers"]["dualtrace"]["args"][-1] == "mcp"
    proc = _cli("uninstall", "--agent", "claude-code", "--scope", "user", cwd=root)
    assert proc.returncode == 0 and "removed MCP server dualtrace" in proc.stdout
    assert not (_home() / ".claude.json").exists()  # install had created it
    proc = _cli("uninstall", "--agent", "codex", "--scope", "user", cwd=root)
    assert not (_home() / ".codex" / "config.toml").exists()  # install had created it


def test_no_mcp_leaves_mcp_config_alone(root):
    """Registered by default (the test above); --no-mcp is for headless scripts."""
    proc = _cli("install", "--agent", "claude-code", "--scope", "project", "--no-mcp",
                cwd=root)
    assert proc.returncode == 0, proc.stderr
    assert (root / ".claude" / "settings.json").exists() and not (root / ".mcp.json").exists()
    assert "MCP server not registered (--no-mcp;" in proc.stdout
    assert not json.loads((_home() / ".claude.json").read_text() if (
        _home() / ".claude.json").exists() else "{}").get("mcpServers")


def test_session_start_says_the_tools_are_there_only_when_registered(hook_env, tmp_path, root):
    from dualtrace.pipeline import encode_session
    from tests.conftest import EXAMPLES
    from tests.hook_helpers import claude_payload, run_hook

    memdir = Path(hook_env["DUALTRACE_MEMORY_DIR"])
    assert encode_session(EXAMPLES / "pilot-5-session-storage.jsonl", memory_dir=memdir,
                          backend="offline").commit
    transcript = tmp_path / "t.jsonl"
    transcript.write_text("")
    payload = claude_payload("SessionStart", "s-mcp", transcript, str(root), source="startup")

    def context() -> str:
        proc = run_hook("session-start", payload, env=hook_env)
        assert proc.returncode == 0
        return json.loads(proc.stdout)["hookSpecificOutput"]["additionalContext"]

    before = context()
    assert 'dualtrace recall "<question>"' in before and "MCP server" not in before
    reg.register("claude-code", "local", root)
    after = context()
    assert "The dualtrace MCP server is connected in this session." in after
    reg.register("codex", "user", root)  # another host's registration says nothing here
    reg.unregister("claude-code", "local", root)
    assert "MCP server" not in context()


def test_the_plugin_brings_the_mcp_server():
    from tests.conftest import REPO_ROOT

    manifest = json.loads((REPO_ROOT / ".claude-plugin" / "plugin.json").read_text())
    assert manifest["mcpServers"] == {"dualtrace": {"command": "dualtrace", "args": ["mcp"]}}


def _python_without_the_script(tmp_path: Path) -> Path:
    """An interpreter that imports this dualtrace but has no ``dualtrace`` script beside it
    (a venv whose site-packages adds ours): install must fall back to the interpreter."""
    import sysconfig

    env = tmp_path / "bare-env"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(env)], check=True,
                   capture_output=True, timeout=120)
    python = env / "bin" / "python"
    site = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()"
                           "['purelib'])"], capture_output=True, text=True, check=True).stdout
    ours = sysconfig.get_paths()["purelib"]
    (Path(site.strip()) / "dualtrace-test.pth").write_text(
        f"import site; site.addsitedir({ours!r})\n")
    assert not (env / "bin" / "dualtrace").exists()
    return python


def test_the_fallback_registration_starts_a_working_server(tmp_path, root):
    """No ``dualtrace`` script to point at: the entry is ``python -m dualtrace mcp`` (the
    package's __main__, not click's module), and that exact command, run by a host from
    a project holding a folder named ``dualtrace`` (a checkout of it, say), serves the
    installed code: list the tools, recall a stored memory."""
    import shutil

    from tests.conftest import EXAMPLES
    from tests.dualtrace.mcp_helpers import text_of, with_session

    python = _python_without_the_script(tmp_path)
    path = os.pathsep.join(d for d in os.environ["PATH"].split(os.pathsep)
                           if d and not (Path(d) / "dualtrace").exists())
    memdir = tmp_path / "memory"
    env = dict(os.environ, PATH=path, DUALTRACE_MEMORY_DIR=str(memdir),
               DUALTRACE_EMBEDDER="off")
    assert shutil.which("dualtrace", path=path) is None
    proc = subprocess.run([str(python), "-m", "dualtrace", "install", "--agent", "claude-code",
                           "--scope", "user"], cwd=root, env=env, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    entry = json.loads((_home() / ".claude.json").read_text())["mcpServers"]["dualtrace"]
    assert entry["command"] == python.as_posix()
    assert entry["args"] == [*module_argv()[1:], "mcp"]  # (module_argv: of this interpreter)
    hooks = (_home() / ".claude" / "settings.json").read_text()
    assert " ".join([python.as_posix(), *module_argv()[1:], "hook", "stop"]) in hooks
    proc = subprocess.run([str(python), "-m", "dualtrace", "encode", "--backend", "offline",
                           str(EXAMPLES / "pilot-5-session-storage.jsonl")], cwd=root, env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    if "-P" in module_argv():  # (Python 3.10 has no -P: a checkout there would shadow us)
        (root / "dualtrace").mkdir()
        (root / "dualtrace" / "__init__.py").write_text("raise SystemExit('the checkout')\n")

    from mcp.client.stdio import StdioServerParameters

    params = StdioServerParameters(command=entry["command"], args=entry["args"],
                                   env={**env, **entry["env"]}, cwd=str(root))

    async def body(client):
        tools = [t.name for t in (await client.list_tools()).tools]
        answer = await client.call_tool("recall", {"question": "why postgres for sessions"})
        return tools, answer

    tools, answer = with_session(params, body)
    assert {"recall", "search", "show", "remember"} <= set(tools)
    assert not answer.is_error
    assert text_of(answer).startswith("(STATE A retrieval"), text_of(answer)
