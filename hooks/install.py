"""``dualtrace install`` / ``uninstall``: merge our hook entries into a host's settings.

Rules: other tools' hooks and keys are never touched; the file's indentation is
kept; a second install changes nothing; every write is atomic and preceded by a
backup (``<file>.dualtrace.bak``, in the state directory for a file inside a git work
tree: ``backup_path``); uninstall removes only our handlers (recognised
by their ``dualtrace ... hook`` command) and deletes the file again if install
created it. Timeouts use each host's unit (Claude Code and Codex: seconds, Letta:
milliseconds).
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import sys
from pathlib import Path

from dualtrace import config
from dualtrace.atomic import write_text
from dualtrace.errors import DualtraceError
from dualtrace.hooks import registry

AGENTS = registry.names()
SCOPES = ("user", "project", "local")
# Our handler, however it was installed: ".../dualtrace hook x", "dualtrace.exe" hook,
# "python -m dualtrace.cli hook x" (older installs), "python -P -m dualtrace hook x".
_OURS = re.compile(r"""(?:^|[\s/\\"'])dualtrace(?:\.exe)?["']?\s+hook\s|-m\s+dualtrace\.cli\s+hook\s""")
BACKUP_SUFFIX = ".dualtrace.bak"  # the file as it was before install
UNINSTALL_BACKUP_SUFFIX = ".dualtrace-uninstall.bak"  # as it was before uninstall
SHARED_COMMAND = "dualtrace"  # project scope: what each teammate's PATH resolves
_CREATED_MARK = "installs.json"


def backup_path(path: Path, suffix: str = BACKUP_SUFFIX) -> Path:
    """Where the copy of ``path`` taken before install (``suffix`` BACKUP_SUFFIX) or
    uninstall goes: beside a file of the person's own (``~/.claude/settings.json``); in
    the state directory for a file inside a git work tree (project and local scope:
    ``.claude/``, ``.mcp.json``, ``.codex/``), where a backup would be committed with the
    next ``git add -A``: ``<state>/backups/<repo>-<hash>/<path in the repo><suffix>``."""
    top = _work_tree(path.parent)
    if top is None:
        return path.with_name(path.name + suffix)
    import hashlib

    key = hashlib.sha256(str(top).encode("utf-8")).hexdigest()[:8]
    return config.state_dir() / "backups" / f"{top.name}-{key}" / \
        (path.relative_to(top).as_posix() + suffix)


def _work_tree(folder: Path) -> Path | None:
    """The git work tree ``folder`` is in (the nearest parent with a ``.git``), or None."""
    folder = folder.absolute()
    for candidate in (folder, *folder.parents):
        if (candidate / ".git").exists():
            return candidate
    return None


def write_backup(path: Path, suffix: str = BACKUP_SUFFIX) -> Path:
    """Copy ``path`` to its backup (``backup_path``), creating the folder; the path."""
    backup = backup_path(path, suffix)
    backup.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy2(path, backup)
    return backup


def settings_path(agent: str, scope: str, cwd: str | os.PathLike[str] | None = None) -> Path:
    if agent not in AGENTS:
        raise DualtraceError(f"unknown agent {agent!r} (choose from {', '.join(AGENTS)})")
    if scope not in SCOPES:
        raise DualtraceError(f"unknown scope {scope!r} (choose from {', '.join(SCOPES)})")
    host = registry.get(agent)
    if scope not in host.SCOPES:
        raise DualtraceError(f"{agent} has no {scope} scope; use --scope "
                             + " or ".join(host.SCOPES))
    return host.settings_path(scope, config.project_root(cwd), Path(os.path.expanduser("~")))


def dualtrace_command() -> str:
    """The installed script's absolute path, so hooks work outside the virtualenv."""
    script = Path(sys.executable).parent / ("dualtrace.exe" if os.name == "nt" else "dualtrace")
    found = str(script) if script.is_file() else shutil.which("dualtrace")
    if found:
        return _quote(Path(found).as_posix())
    return " ".join(_quote(arg) for arg in module_argv())


def module_argv() -> list[str]:
    """This interpreter running the package's ``__main__`` (``python -m dualtrace``): the
    command when no ``dualtrace`` script can be found. With ``-P`` where Python has it
    (3.11+): ``-m`` puts the host's working directory first on sys.path, and a project
    holding a folder named ``dualtrace`` (a checkout of it) would shadow this install."""
    flags = ["-P"] if sys.version_info >= (3, 11) else []
    return [Path(sys.executable).as_posix(), *flags, "-m", "dualtrace"]


def _quote(path: str) -> str:
    return shlex.quote(path) if re.search(r"[^\w@%+=:,./-]", path) else path


def in_background(command: str) -> str:
    """``command`` started in the background of the host's POSIX shell, with the hook
    payload as its stdin: the shell exits at once, so the host's turn does not wait for
    Python to start. The payload pipe is saved on fd 3 first: sh (dash) gives a
    background command /dev/null as stdin, and redirects only after that."""
    return f"exec 3<&0; {command} <&3 3<&- >/dev/null 2>&1 &"


def fast_launcher(command: str) -> str | None:
    """``PYTHON -S .../dualtrace/fasthook.py`` for this install's ``command`` (what the
    hooks a turn waits for start with: dualtrace.hookcmd.fast_main), or None when the
    command is not this interpreter's own script (a bare or shared ``dualtrace``, a
    ``python -m`` form, Windows): those keep the plain command."""
    if os.name == "nt" or command != dualtrace_command() or " " in command:
        return None
    launcher = Path(config.__file__).with_name("fasthook.py")  # beside dualtrace/config.py
    if not launcher.is_file():
        return None
    return f"{_quote(Path(sys.executable).as_posix())} -S {_quote(launcher.as_posix())}"


def wanted_entries(agent: str, command: str) -> dict[str, dict]:
    """Event -> the hook group we want in that agent's settings."""
    host = registry.get(agent)
    host_flag = "" if agent == registry.DEFAULT else f" --host {agent}"
    fast = fast_launcher(command) if host.FAST_EVENTS else None
    out = {}
    for name, (ours, seconds, matcher) in host.EVENTS.items():
        timeout = seconds * host.TIMEOUT_UNIT
        line = f"{command} hook {ours}{host_flag}"
        if fast and name in host.FAST_EVENTS:
            line = f"{fast} {command} hook {ours} --host {agent}"
        if name in host.BACKGROUND_EVENTS and os.name != "nt":
            line = in_background(line)  # (Windows hosts may run cmd or PowerShell)
        handler = {"type": "command", "command": line, "timeout": timeout}
        group: dict = {"matcher": matcher} if matcher else {}
        group["hooks"] = [handler]
        out[name] = group
    return out


def is_ours(handler: object) -> bool:
    return isinstance(handler, dict) and isinstance(handler.get("command"), str) \
        and bool(_OURS.search(handler["command"]))


def merge(data: dict, wanted: dict[str, dict]) -> tuple[dict, list[str]]:
    """``data`` with our groups added or updated in place; and what changed."""
    data = json.loads(json.dumps(data))  # deep copy; the input stays the "before"
    hooks = data.setdefault("hooks", {})
    if not isinstance(hooks, dict):
        raise DualtraceError("the settings file's \"hooks\" is not an object; not touching it")
    changes = []
    for event, group in wanted.items():
        groups = hooks.setdefault(event, [])
        if not isinstance(groups, list):
            raise DualtraceError(f"hooks.{event} is not a list; not touching it")
        want = group["hooks"][0]
        found = False
        for existing in groups:
            handlers = existing.get("hooks") if isinstance(existing, dict) else None
            if not isinstance(handlers, list):
                continue
            for i, handler in enumerate(handlers):
                if is_ours(handler):
                    found = True
                    if handler != want:
                        handlers[i] = want
                        changes.append(f"updated {event}: {want['command']}")
        if not found:
            groups.append(group)
            changes.append(f"added {event}: {want['command']} (timeout {want['timeout']})")
    return data, changes


def remove(data: dict) -> tuple[dict, list[str]]:
    """``data`` without our handlers; groups/events/"hooks" left empty by that go too."""
    data = json.loads(json.dumps(data))
    hooks = data.get("hooks")
    changes: list[str] = []
    if not isinstance(hooks, dict):
        return data, changes
    for event in list(hooks):
        groups = hooks[event]
        if not isinstance(groups, list):
            continue
        kept_groups = []
        for group in groups:
            handlers = group.get("hooks") if isinstance(group, dict) else None
            if not isinstance(handlers, list):
                kept_groups.append(group)
                continue
            kept = [h for h in handlers if not is_ours(h)]
            if len(kept) != len(handlers):
                changes.append(f"removed {event}")
                if not kept:
                    continue
                group = {**group, "hooks": kept}
            kept_groups.append(group)
        if kept_groups or len(kept_groups) == len(groups):
            hooks[event] = kept_groups
        else:  # we emptied it; an event list the user left empty stays
            del hooks[event]
    if not hooks and changes:
        del data["hooks"]
    return data, changes


# ------------------------------------------------------------------ file handling

def read_json_object(path: Path) -> tuple[dict, str | None]:
    """A JSON settings file parsed (it must hold an object) and its raw text (None when
    missing); one clear error for an unreadable or broken file."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return {}, None
    except OSError as exc:
        raise DualtraceError(f"cannot read {path}: {exc}") from exc
    if not text.strip():
        return {}, text
    try:
        data = json.loads(text.lstrip("\ufeff"))
    except ValueError as exc:
        raise DualtraceError(f"{path} is not valid JSON ({exc}); fix it or move it away") from exc
    if not isinstance(data, dict):
        raise DualtraceError(f"{path} does not hold a JSON object; not touching it")
    return data, text


def _indent(text: str | None) -> int | str:
    """Keep the file's indentation (first indented line), default 2."""
    for line in (text or "").splitlines()[1:]:
        stripped = line.lstrip(" \t")
        if stripped and len(stripped) != len(line):
            lead = line[: len(line) - len(stripped)]
            return "\t" if lead.startswith("\t") else len(lead)
    return 2


def _dump(data: dict, old_text: str | None) -> str:
    text = json.dumps(data, indent=_indent(old_text), ensure_ascii=False)
    return text + "\n" if old_text is None or old_text.endswith("\n") else text


def _write(path: Path, text: str) -> None:
    # The agent's own settings file: it keeps its permissions (it used to get the umask's).
    write_text(path, text, fsync=False, keep_mode=True)


def _created_registry() -> Path:
    return config.state_dir() / _CREATED_MARK


def _created(path: Path, value: bool | None = None) -> bool:
    """Remember files that install created, so uninstall can delete them again."""
    reg = _created_registry()
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


def install(agent: str = "claude-code", scope: str = "user", *, dry_run: bool = False,
            cwd: str | os.PathLike[str] | None = None, command: str | None = None,
            mcp: bool = True, allow_recall: bool = False) -> list[str]:
    """Merge our hooks into the settings file and, for a host that speaks MCP (unless
    ``mcp`` is False), register ``dualtrace mcp`` in the same scope; return human lines
    describing it. Registered by default: the agent's own memory tools are the point of
    it (issue 14), and an interactive session starts the server once. A headless
    `claude -p` starts it every run and waits (+0.8 s with the warm server, ~2.9 s
    without, docs/BENCHMARKS.md): scripts install with --no-mcp.

    Project scope is committed and shared, so its hooks run the bare ``dualtrace`` each
    teammate has on their PATH instead of this machine's absolute path.
    """
    lines: list[str] = []
    if command is None and scope == "project":
        command = SHARED_COMMAND
        lines.append(f"note: project scope is shared with the repository, so the hooks run "
                     f"`{SHARED_COMMAND}` from each teammate's PATH (not {dualtrace_command()}); "
                     "everyone needs the CLI installed (`pipx install .` or `uv tool install .` "
                     "in a clone of dualtrace)")
    lines += _install_hooks(agent, scope, dry_run=dry_run, cwd=cwd, command=command,
                            allow_recall=allow_recall)
    lines += _installed_elsewhere(agent, scope, cwd)
    from dualtrace.hooks import mcp_registration

    if mcp:
        lines += mcp_registration.register(agent, scope, config.project_root(cwd),
                                           dry_run=dry_run)
    elif mcp_registration.supports(agent):
        lines.append("MCP server not registered (--no-mcp; `dualtrace install` without it "
                     "adds the agent's memory tools)")
    return lines


def installed_hooks(root: Path) -> list[tuple[str, str, Path]]:
    """(host, scope, settings file) for every settings file of every host that holds our
    hooks for the project at ``root`` (already resolved: the Workspace's, so a command
    resolves its project once), plus (claude-code, "plugin", file) for a settings file
    that enables the dualtrace plugin. Read only; an unreadable file counts as none
    (``install`` names its problem)."""
    found: list[tuple[str, str, Path]] = []
    home = Path(os.path.expanduser("~"))
    for agent in AGENTS:
        host = registry.get(agent)
        for scope in host.SCOPES:
            path = host.settings_path(scope, root, home)
            try:
                data, _text = read_json_object(path)
            except (DualtraceError, OSError):
                continue
            if remove(data)[1]:
                found.append((agent, scope, path))
        finder = getattr(host, "enabled_plugin_files", None)
        for path in finder(root, home) if finder else []:
            found.append((agent, "plugin", path))
    return found


def _installed_elsewhere(agent: str, scope: str,
                         cwd: str | os.PathLike[str] | None) -> list[str]:
    """A warning for each other scope of this host whose settings already hold our hooks.

    The host runs the hooks of every scope, and the commands differ between scopes
    (project scope runs the bare ``dualtrace``), so it cannot merge them: each session
    would be injected into and queued twice.
    """
    out = []
    for other in registry.get(agent).SCOPES:
        if other == scope:
            continue
        try:
            path = settings_path(agent, other, cwd)
            data, _text = read_json_object(path)
        except (DualtraceError, OSError):
            continue
        if remove(data)[1]:
            out.append(f"warning: dualtrace hooks are also installed at {other} scope ({path}): "
                       f"{agent} runs both, so every session gets its memory and is queued "
                       f"twice; keep one (`dualtrace uninstall --agent {agent} --scope {other}`)")
    return out


def _install_hooks(agent: str, scope: str, *, dry_run: bool,
                   cwd: str | os.PathLike[str] | None, command: str | None,
                   allow_recall: bool = False) -> list[str]:
    path = settings_path(agent, scope, cwd)
    data, old_text = read_json_object(path)
    command = command or dualtrace_command()
    new, changes = merge(data, wanted_entries(agent, command))
    if allow_recall:
        rule_of = getattr(registry.get(agent), "recall_permission", None)
        if rule_of is None:
            raise DualtraceError(f"{agent} has no permission rules; --allow-recall is for "
                                 "claude-code")
        new, added = _allow(new, rule_of(command))
        changes += added
    if not changes:
        return [f"{path}: dualtrace hooks already installed; nothing changed"]
    lines = [f"{path}:" + (" (dry run, nothing written)" if dry_run else "")]
    lines += [f"  {c}" for c in changes]
    if dry_run:
        return lines
    if old_text is not None:
        lines.append(f"  backup: {write_backup(path)}")
    else:
        _created(path, True)
    _write(path, _dump(new, old_text))
    return lines


def uninstall(agent: str = "claude-code", scope: str = "user", *, dry_run: bool = False,
              cwd: str | os.PathLike[str] | None = None) -> list[str]:
    """Remove our hooks, and our MCP server registration of that scope."""
    from dualtrace.hooks import mcp_registration

    lines = _uninstall_hooks(agent, scope, dry_run=dry_run, cwd=cwd)
    return lines + mcp_registration.unregister(agent, scope, config.project_root(cwd),
                                               dry_run=dry_run)


def _uninstall_hooks(agent: str, scope: str, *, dry_run: bool,
                     cwd: str | os.PathLike[str] | None) -> list[str]:
    path = settings_path(agent, scope, cwd)
    data, old_text = read_json_object(path)
    new, changes = remove(data)
    new, dropped = _disallow(new)
    changes += dropped
    if not changes:
        return [f"{path}: no dualtrace hooks found; nothing changed"]
    lines = [f"{path}:" + (" (dry run, nothing written)" if dry_run else "")]
    lines += [f"  {c}" for c in changes]
    if dry_run:
        return lines
    if not new and _created(path):
        path.unlink()
        _created(path, False)
        lines.append("  deleted the file (install had created it)")
        return lines
    # The pre-install backup stays as it is (it holds the person's original file); the
    # state before this uninstall gets its own. When what is left is exactly the
    # original's content, the original text comes back byte for byte (its formatting).
    lines.append(f"  backup: {write_backup(path, UNINSTALL_BACKUP_SUFFIX)}")
    original = _original_text(backup_path(path), new)
    legacy = path.with_name(path.name + BACKUP_SUFFIX)  # where older installs kept it
    if original is None and backup_path(path) != legacy:
        original = _original_text(legacy, new)
    if original is not None:
        lines.append("  restored the file's original text (from its pre-install backup)")
    _write(path, original if original is not None else _dump(new, old_text))
    return lines


def _original_text(backup: Path, data: dict) -> str | None:
    """The pre-install backup's text when it holds exactly ``data``, else None."""
    try:
        text = backup.read_text(encoding="utf-8")
        return text if json.loads(text.lstrip("\ufeff") or "{}") == data else None
    except (OSError, ValueError):
        return None


def _allow(data: dict, rule: str) -> tuple[dict, list[str]]:
    """``data`` with ``rule`` in permissions.allow (added once)."""
    found = data.get("permissions")
    perms: dict = found if isinstance(found, dict) else {}
    allow = list(perms["allow"]) if isinstance(perms.get("allow"), list) else []
    if rule in allow:
        return data, []
    return {**data, "permissions": {**perms, "allow": allow + [rule]}}, \
        [f"permissions.allow: + {rule}"]


def _disallow(data: dict) -> tuple[dict, list[str]]:
    """``data`` without the recall permissions install added."""
    perms = data.get("permissions")
    if not isinstance(perms, dict) or not isinstance(perms.get("allow"), list):
        return data, []
    ours = [r for r in perms["allow"] if isinstance(r, str) and r.startswith("Bash(")
            and r.endswith(" recall:*)") and "dualtrace" in r]
    if not ours:
        return data, []
    allow = [r for r in perms["allow"] if r not in ours]
    rest = {k: v for k, v in perms.items() if k != "allow"}
    if allow:
        rest["allow"] = allow
    out = {k: v for k, v in data.items() if k != "permissions"}
    if rest:
        out["permissions"] = rest
    return out, [f"permissions.allow: - {r}" for r in ours]
