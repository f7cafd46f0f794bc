"""Register ``dualtrace mcp`` with the hosts that speak MCP, and take it out again.

Where each host reads its MCP servers (checked against Claude Code 2.1.x's own
``claude mcp add --scope ...`` and Codex's config reference):
- Claude Code, scope ``user``: top-level ``mcpServers`` of ``~/.claude.json``
  (``$CLAUDE_CONFIG_DIR/.claude.json`` when that is set);
- Claude Code, scope ``local``: ``projects["<project root>"].mcpServers`` of that file;
- Claude Code, scope ``project``: ``.mcp.json`` at the project root (shared through
  git: the command is the bare ``dualtrace`` on PATH, not this machine's path; Claude
  Code asks each person to approve it once);
- Codex: a ``[mcp_servers.dualtrace]`` table in ``$CODEX_HOME/config.toml`` (user) or
  the project's ``.codex/config.toml``.
The plugin ships its own ``.mcp.json`` at the plugin root.

Rules as for the hooks: only our entry (the name ``dualtrace``) is touched, everything
else in the file stays as it was; a second run changes nothing; each write is atomic
after a backup (``<file>.dualtrace.bak``). A TOML file is edited as text (its comments
and layout kept) and re-parsed before it is written: if the result would not parse,
nothing is written.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import sys
from pathlib import Path
from typing import Any

from dualtrace import config
from dualtrace.atomic import write_json, write_text
from dualtrace.errors import DualtraceError
from dualtrace.hooks.install import module_argv, read_json_object, write_backup

NAME = "dualtrace"
BACKUP_SUFFIX = ".dualtrace.bak"  # the file as it was before install
UNINSTALL_BACKUP_SUFFIX = ".dualtrace-uninstall.bak"  # as it was before uninstall
REGISTRY = "mcp-registrations.json"  # read by SessionStart: does the agent have the tools?


def server_argv(scope: str) -> list[str]:
    """The command a host runs: this installation's script, or ``dualtrace`` for a file
    shared with other people (project scope)."""
    if scope == "project":
        return ["dualtrace", "mcp"]
    script = Path(sys.executable).parent / ("dualtrace.exe" if os.name == "nt" else "dualtrace")
    found = str(script) if script.is_file() else shutil.which("dualtrace")
    if found:
        return [Path(found).as_posix(), "mcp"]
    return [*module_argv(), "mcp"]


# ------------------------------------------------------------------ Claude Code (JSON)

def claude_json_path() -> Path:
    base = os.environ.get("CLAUDE_CONFIG_DIR")
    return (Path(base).expanduser() if base else Path(os.path.expanduser("~"))) / ".claude.json"


def _claude_target(scope: str, root: Path) -> tuple[Path, list[str]]:
    if scope == "project":
        return root / ".mcp.json", ["mcpServers"]
    if scope == "local":
        return claude_json_path(), ["projects", str(root), "mcpServers"]
    return claude_json_path(), ["mcpServers"]


def _table(data: dict[str, Any], keys: list[str], create: bool,
           made: list[list[str]] | None = None) -> dict[str, Any] | None:
    """The object at ``keys`` in ``data``; with ``create``, the missing levels are made
    (and their key paths appended to ``made``)."""
    node = data
    for depth, key in enumerate(keys):
        nxt = node.get(key)
        if nxt is None:
            if not create:
                return None
            nxt = node[key] = {}
            if made is not None:
                made.append(keys[:depth + 1])
        if not isinstance(nxt, dict):
            raise DualtraceError(f"\"{key}\" is not an object; not touching it")
        node = nxt
    return node


def _prune(data: dict[str, Any], path: Path, keys: list[str]) -> None:
    """Drop the objects along ``keys`` that register created and that are empty now,
    deepest first; an object that was there before install is the person's (or the
    host's) and stays, empty or not."""
    for depth in range(len(keys), 0, -1):
        parent = _table(data, keys[:depth - 1], create=False)
        mark = _container_mark(path, keys[:depth])
        if parent is None or parent.get(keys[depth - 1]) != {} or not _created(mark):
            break
        del parent[keys[depth - 1]]
        _created(mark, False)


def _container_mark(path: Path, keys: list[str]) -> str:
    """How a created object is remembered in the installs registry (beside whole files)."""
    return json.dumps([str(path), *keys])


def claude_entry(scope: str) -> dict[str, Any]:
    argv = server_argv(scope)
    return {"type": "stdio", "command": argv[0], "args": argv[1:], "env": {}}


def register_claude(scope: str, root: Path, *, dry_run: bool = False) -> list[str]:
    path, keys = _claude_target(scope, root)
    data, old = read_json_object(path)
    made: list[list[str]] = []
    servers = _table(data, keys, create=True, made=made)
    assert servers is not None
    want = claude_entry(scope)
    if servers.get(NAME) == want:
        return [f"{path}: MCP server {NAME!r} already registered; nothing changed"]
    verb = "updated" if NAME in servers else "added"
    servers[NAME] = want
    lines = [f"{path}:" + (" (dry run, nothing written)" if dry_run else ""),
             f"  {verb} MCP server {NAME}: {want['command']} {' '.join(want['args'])}"]
    if not dry_run:
        lines += _write(path, json.dumps(data, indent=2, ensure_ascii=False) + "\n", old)
        for created in made:  # uninstall takes these out again once they are empty
            _created(_container_mark(path, created), True)
        _remember("claude-code", scope, root, True)
    return lines


def unregister_claude(scope: str, root: Path, *, dry_run: bool = False) -> list[str]:
    path, keys = _claude_target(scope, root)
    data, old = read_json_object(path)
    servers = _table(data, keys, create=False)
    if not servers or NAME not in servers:
        return [f"{path}: no {NAME} MCP server registered; nothing changed"]
    del servers[NAME]
    lines = [f"{path}:" + (" (dry run, nothing written)" if dry_run else ""),
             f"  removed MCP server {NAME}"]
    if dry_run:
        return lines
    _prune(data, path, keys)
    # (``{"mcpServers": {}}``: a .mcp.json an older install created, before the marks)
    if (not data or (scope == "project" and data == {"mcpServers": {}})) and _created(path):
        path.unlink()
        _created(path, False)
        lines.append("  deleted the file (install had created it)")
    else:
        lines += _write(path, json.dumps(data, indent=2, ensure_ascii=False) + "\n", old, suffix=UNINSTALL_BACKUP_SUFFIX)
    _remember("claude-code", scope, root, False)
    return lines


# ------------------------------------------------------------------ Codex (TOML)

def codex_config_path(scope: str, root: Path) -> Path:
    if scope == "project":
        return root / ".codex" / "config.toml"
    return Path(os.environ.get("CODEX_HOME") or os.path.expanduser("~/.codex")).expanduser() \
        / "config.toml"


_HEADER = re.compile(r"^\s*\[\[?\s*([^\]]+?)\s*\]\]?\s*(#.*)?$")


def _our_table(name: str) -> bool:
    parts = [p.strip().strip('"').strip("'") for p in name.split(".")]
    return parts[:2] == ["mcp_servers", NAME]


def _strip_ours(text: str) -> tuple[str, bool]:
    """The TOML text without our [mcp_servers.dualtrace] table (and its sub-tables)."""
    out: list[str] = []
    skipping = found = False
    for line in text.splitlines(keepends=True):
        header = _HEADER.match(line)
        if header:
            skipping = _our_table(header.group(1))
            found = found or skipping
        if not skipping:
            out.append(line)
    return "".join(out), found


def _toml_str(value: str) -> str:
    return json.dumps(value)  # a JSON string of plain text is a valid TOML basic string


def codex_table(scope: str) -> str:
    argv = server_argv(scope)
    args = ", ".join(_toml_str(a) for a in argv[1:])
    return f"[mcp_servers.{NAME}]\ncommand = {_toml_str(argv[0])}\nargs = [{args}]\n"


def _parse_toml(text: str, path: Path) -> dict[str, Any]:
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10
        import tomli as tomllib  # type: ignore[no-redef]
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise DualtraceError(f"{path} is not valid TOML ({exc}); fix it or move it away") from exc


def register_codex(scope: str, root: Path, *, dry_run: bool = False) -> list[str]:
    path = codex_config_path(scope, root)
    try:
        old: str | None = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        old = None
    except OSError as exc:
        raise DualtraceError(f"cannot read {path}: {exc}") from exc
    text = old or ""
    _parse_toml(text, path)  # refuse to edit a file that is already broken
    stripped, found = _strip_ours(text)
    block = codex_table(scope)
    if found and _parse_toml(text, path).get("mcp_servers", {}).get(NAME) == \
            _parse_toml(block, path)["mcp_servers"][NAME]:
        return [f"{path}: MCP server {NAME!r} already registered; nothing changed"]
    sep = "" if not stripped or stripped.endswith("\n\n") else ("\n" if stripped.endswith("\n")
                                                              else "\n\n")
    new = stripped + sep + block
    parsed = _parse_toml(new, path)
    if NAME not in parsed.get("mcp_servers", {}):
        raise DualtraceError(f"could not add [mcp_servers.{NAME}] to {path}")
    lines = [f"{path}:" + (" (dry run, nothing written)" if dry_run else ""),
             f"  {'updated' if found else 'added'} [mcp_servers.{NAME}]: "
             f"{' '.join(server_argv(scope))}"]
    if not dry_run:
        lines += _write(path, new, old)
        _remember("codex", scope, root, True)
    return lines


def unregister_codex(scope: str, root: Path, *, dry_run: bool = False) -> list[str]:
    path = codex_config_path(scope, root)
    try:
        old = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return [f"{path}: no {NAME} MCP server registered; nothing changed"]
    stripped, found = _strip_ours(old)
    if not found:
        return [f"{path}: no {NAME} MCP server registered; nothing changed"]
    stripped = stripped.rstrip("\n") + "\n" if stripped.strip() else ""
    _parse_toml(stripped, path)
    lines = [f"{path}:" + (" (dry run, nothing written)" if dry_run else ""),
             f"  removed [mcp_servers.{NAME}]"]
    if dry_run:
        return lines
    if not stripped and _created(path):
        path.unlink()
        _created(path, False)
        lines.append("  deleted the file (install had created it)")
    else:
        lines += _write(path, stripped, old, suffix=UNINSTALL_BACKUP_SUFFIX)
    _remember("codex", scope, root, False)
    return lines


# ------------------------------------------------------------------ dispatch

SUPPORTED = ("claude-code", "codex")  # Letta Code has no MCP client config to register in


def supports(agent: str) -> bool:
    """Whether ``register`` knows where this host keeps its MCP servers."""
    return agent in ("claude-code", "codex")


def register(agent: str, scope: str, root: Path, *, dry_run: bool = False) -> list[str]:
    if agent == "claude-code":
        return register_claude(scope, root, dry_run=dry_run)
    if agent == "codex":
        return register_codex(scope, root, dry_run=dry_run)
    return []


def unregister(agent: str, scope: str, root: Path, *, dry_run: bool = False) -> list[str]:
    if agent == "claude-code":
        return unregister_claude(scope, root, dry_run=dry_run)
    if agent == "codex":
        return unregister_codex(scope, root, dry_run=dry_run)
    return []


def registered(state: str | os.PathLike[str] | None = None) -> list[dict[str, str]]:
    """What install registered (host, scope, root); cheap enough for SessionStart."""
    path = Path(state or config.state_dir()) / REGISTRY
    try:
        items = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return []
    return [i for i in items if isinstance(i, dict)] if isinstance(items, list) else []


def available(host: str, root: Path) -> bool:
    """Whether ``install`` registered our server where ``host`` sees it for ``root``."""
    for item in registered():
        if item.get("host") == host and (item.get("scope") == "user"
                                         or item.get("root") == str(root)):
            return True
    return False


def _remember(agent: str, scope: str, root: Path, on: bool) -> None:
    path = config.state_dir() / REGISTRY
    item = {"host": agent, "scope": scope, "root": str(root) if scope != "user" else ""}
    items = [i for i in registered() if i != item] + ([item] if on else [])
    write_json(path, items, fsync=False, indent=1, ensure_ascii=True)


# ------------------------------------------------------------------ files

def _write(path: Path, text: str, old: str | None, suffix: str = BACKUP_SUFFIX) -> list[str]:
    """Write ``path`` after a copy of its old text (install.backup_path: in the state
    directory for a file in a git work tree): ``.dualtrace.bak`` before install,
    ``.dualtrace-uninstall.bak`` before uninstall (which must not overwrite the
    pre-install copy with the installed file, as hooks/install.py keeps them apart)."""
    lines = []
    if old is not None:
        lines.append(f"  backup: {write_backup(path, suffix)}")
    else:
        _created(path, True)
    write_text(path, text, fsync=False, keep_mode=True)
    return lines


def _created(path: Path | str, value: bool | None = None) -> bool:
    """Files install created (so uninstall can delete them again): shared with the hooks;
    also the objects it created inside a file (``_container_mark``)."""
    reg = config.state_dir() / "installs.json"
    try:
        items = set(json.loads(reg.read_text(encoding="utf-8")))
    except (OSError, ValueError, TypeError):
        items = set()
    key = str(path)
    if value is None:
        return key in items
    (items.add if value else items.discard)(key)
    reg.parent.mkdir(parents=True, exist_ok=True)
    reg.write_text(json.dumps(sorted(items)), encoding="utf-8")
    return value
