"""Paths and settings, resolved in one place.

Nothing here imports git, jinja2 or anthropic: the hook fast path uses this module.

Memory directory precedence: --memory-dir > DUALTRACE_MEMORY_DIR > ``memory_dir`` in
the project's ``dualtrace.toml`` > ``<state>/memory/<project-key>``.
State directory (queue, cursors, logs, user config): DUALTRACE_HOME > the platform's
user data directory.
"""

from __future__ import annotations

import os
import re
import sys
import unicodedata
from dataclasses import dataclass, field, fields, replace
from pathlib import Path

from dualtrace.errors import DualtraceError

TYPE_CHECKING = False  # typing: ~2-5 ms of every command's imports (recall's too)
if TYPE_CHECKING:
    from typing import Any


def _tomllib() -> Any:
    """The TOML parser, imported when a file is there to parse: ~2-3 ms of every CLI
    command's imports (its regexes), and most commands find no config file."""
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover
        import tomli as tomllib
    return tomllib

PROJECT_FILE = "dualtrace.toml"
USER_CONFIG = "config.toml"
SESSION_RECORD_MODES = ("commit", "local", "off")
SYNC_MODES = ("off", "after-encode")
# The encoder backends by name -> "module:Class" (encoder/backends imports a class only
# when it is chosen). Kept here so a misspelt ``backend = "ofline"`` is an error when
# the config loads, for every command, not first at an encode.
BACKENDS: dict[str, str] = {
    "offline": "dualtrace.encoder.backends.offline:OfflineBackend",
    "anthropic": "dualtrace.encoder.backends.anthropic:AnthropicBackend",
    "claude": "dualtrace.encoder.backends.claude_cli:ClaudeCliBackend",
}


def state_dir() -> Path:
    """Queue, cursors, run log, error log and user config live here."""
    from dualtrace.paths import state_dir as resolve

    return Path(resolve())


def slugify(text: str, max_len: int = 64) -> str:
    """Lowercase ASCII, hyphen-separated; used for anchors and project keys."""
    norm = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode("ascii")
    slug = re.sub(r"[^a-z0-9]+", "-", norm.lower()).strip("-")
    if len(slug) > max_len:
        slug = slug[:max_len].rstrip("-")
    return slug


def _gitdir_of(path: Path) -> Path | None:
    dot = path / ".git"
    if dot.is_dir():
        return dot
    if dot.is_file():
        # A worktree or submodule: ".git" is a file "gitdir: <path>".
        try:
            text = dot.read_text(encoding="utf-8", errors="replace").strip()
        except OSError:
            return None
        if text.startswith("gitdir:"):
            target = Path(text[len("gitdir:"):].strip())
            if not target.is_absolute():
                target = (path / target).resolve()
            return target
    return None


def project_root(cwd: str | os.PathLike[str] | None = None) -> Path:
    """The project's identity: the top level of the *main* worktree, else the cwd.

    All worktrees of one repository share one memory, so a linked worktree
    (``.git`` file pointing at ``<main>/.git/worktrees/<name>``) resolves through
    its ``commondir`` back to the main worktree. Pure file reads: no git process.
    """
    start = Path(cwd or os.getcwd()).expanduser().resolve()
    for candidate in (start, *start.parents):
        gitdir = _gitdir_of(candidate)
        if gitdir is None:
            continue
        common = gitdir / "commondir"
        if common.is_file():
            try:
                rel = common.read_text(encoding="utf-8").strip()
            except OSError:
                return candidate
            main_git = (gitdir / rel).resolve()
            if main_git.name == ".git":
                return main_git.parent
        return candidate
    return start


def project_key(root: Path) -> str:
    """Slug of the folder name plus a short hash of the full path (never the name alone)."""
    import hashlib  # lazily: loading OpenSSL costs ~15 ms on the recall/hook paths

    digest = hashlib.sha256(str(root).encode("utf-8")).hexdigest()[:8]
    return f"{slugify(root.name, 40) or 'root'}-{digest}"


def project_slug(root: Path) -> str:
    """``<project>`` in system/<project>/conventions.md."""
    return slugify(root.name, 64) or "project"


@dataclass(frozen=True)
class Settings:
    """Every tunable, with its default. Unknown keys in a config file are kept in
    ``extra``, never applied, and named in ``warnings`` (with the nearest known key)."""

    enabled: bool = True
    memory_dir: str | None = None
    backend: str = "auto"
    fallback: str | None = None
    model: str = "claude-sonnet-5-5"
    cheap_model: str = "claude-haiku-5-5"
    api_key: str | None = None
    base_url: str | None = None
    max_turns: int = 12
    max_output_tokens: int = 4096
    timeout_seconds: float = 180.0
    digest_budget: int = 8000
    debounce_minutes: float = 10.0
    max_attempts: int = 4
    redact_patterns: tuple[str, ...] = ()
    author_name: str = "dualtrace"
    author_email: str = "dualtrace@localhost"
    stale_days: int = 180
    session_start_chars: int = 6000
    prompt_chars: int = 2000
    claude_cli: str = "claude"
    # `dualtrace mcp` through a warm server that keeps the SDK imported and forks one
    # server per host session (dualtrace/mcp_warm.py). Read from the user config only,
    # by mcp_warm itself (it runs before this module is imported).
    mcp_warm: bool = True
    # Session records (issue 11): "commit" keeps one per session in sessions/ and commits
    # it with the session's facts; "local" keeps it in the gitignored state (indexed,
    # never pushed); "off" writes none. The budget is the record file's size in bytes.
    session_records: str = "commit"
    session_record_budget: int = 12000
    # The Anthropic backend's HTTP policy and its turn-1 prompt ceiling (estimated
    # tokens of tools + system + index + digest; the digest is rebuilt smaller to fit).
    api_retries: int = 4
    retry_base_seconds: float = 1.0
    retry_max_seconds: float = 30.0
    request_timeout_seconds: float = 90.0
    prompt_budget: int = 9500
    # The spending guard (encoder/backends/spend.py): what every model backend together
    # may spend a day, from the usage the API reports; 0 turns a limit off. Over it,
    # "offline" encodes offline, "wait" keeps the job queued until midnight.
    daily_budget_usd: float = 1.0
    daily_budget_tokens: int = 1_000_000
    over_budget: str = "offline"
    # Team memory over git (memfs/sync.py): "off" (sync by hand with `dualtrace sync`)
    # or "after-encode" (the worker syncs after each commit, backing off when offline);
    # sync_remote: the remote's name (default origin, else the only one).
    sync: str = "off"
    sync_remote: str | None = None
    # Preferences follow the person: a preference bullet (system/human.md) also goes to
    # the user's own memory directory, which SessionStart injects in every project.
    # "both" (default): project memory and your own; "user": only your own (never in a
    # shared project memory); "project": only the project's. user_memory_dir: where
    # your own memory lives (default <state>/user-memory).
    preferences: str = "both"
    user_memory_dir: str | None = None
    # Keys this version does not know (kept, never applied).
    extra: dict[str, Any] = field(default_factory=dict)
    # One line per such key, with its file and the nearest known key: what the CLI
    # prints as a warning and the SessionStart hook logs (a typo must not wait until
    # an encode, or for ever, to be noticed).
    warnings: tuple[str, ...] = ()


def _read_toml(path: Path) -> dict[str, Any]:
    try:
        fh = path.open("rb")
    except FileNotFoundError:
        return {}
    except OSError as exc:
        raise DualtraceError(f"cannot read {path}: {exc}") from exc
    toml = _tomllib()
    try:
        with fh:
            data = toml.load(fh)
    except (OSError, toml.TOMLDecodeError) as exc:
        raise DualtraceError(f"cannot read {path}: {exc}") from exc
    # A [dualtrace] table and top-level keys are both accepted.
    table = data.get("dualtrace")
    return {**data, **table} if isinstance(table, dict) else data


_NUMBER_FIELDS = {f.name: f.type for f in fields(Settings) if f.type in ("int", "float")}
_BOOL_FIELDS = {f.name for f in fields(Settings) if f.type == "bool"}


_NOT_KEYS = ("extra", "warnings")
# Table names a config file may use for settings ([dualtrace], the older [extra]).
_TABLES = ("dualtrace", "extra")


def _unknown(key: str, source: Path, known: set[str]) -> str:
    """The warning for a key no setting has: the file, the key, the nearest known key."""
    import difflib  # only when a file has an unknown key

    near = difflib.get_close_matches(key, sorted(known), n=1, cutoff=0.6)
    hint = f" (did you mean {near[0]!r}?)" if near else ""
    return f"{source}: unknown setting {key!r}{hint}; it is ignored"


def _bad_backend(value: object, source: Path | None) -> str:
    import difflib  # only for a misspelt name

    names = ["auto", *sorted(BACKENDS)]
    near = difflib.get_close_matches(str(value), names, n=1, cutoff=0.6)
    hint = f" (did you mean {near[0]!r}?)" if near else ""
    where = f" in {source}" if source is not None else ""
    return f"unknown backend {value!r}{where}{hint}; choose one of {', '.join(names)}"


def _merge(settings: Settings, data: dict[str, Any], base: Path | None,
           source: Path | None = None) -> Settings:
    known = {f.name for f in fields(Settings)} - set(_NOT_KEYS)
    # Older docs put the backend tunables in an [extra] table: its keys apply as if
    # they were written at the top level (a top-level key of the same name wins).
    table = data.get("extra")
    if isinstance(table, dict):
        data = {**table, **{k: v for k, v in data.items() if k != "extra"}}
    updates: dict[str, Any] = {}
    extra = dict(settings.extra)
    warnings = list(settings.warnings)
    for key, value in data.items():
        if key not in known:
            extra[key] = value
            if source is not None and not (key in _TABLES and isinstance(value, dict)):
                warnings.append(_unknown(key, source, known))
            continue
        if key == "backend" and (not isinstance(value, str) or (
                value != "auto" and value not in BACKENDS)):
            raise DualtraceError(_bad_backend(value, source))
        if key == "sync" and value not in SYNC_MODES:
            raise DualtraceError(f"setting sync must be one of {', '.join(SYNC_MODES)}, not {value!r}")
        if key == "session_records" and value not in SESSION_RECORD_MODES:
            raise DualtraceError(
                f"session_records must be one of {', '.join(SESSION_RECORD_MODES)}, not {value!r}")
        if key == "session_record_budget" and (
                not isinstance(value, int) or isinstance(value, bool) or value < 1000):
            raise DualtraceError(f"session_record_budget must be a number of bytes >= 1000, not {value!r}")
        if key in _BOOL_FIELDS and not isinstance(value, bool):
            # enabled = "false" is a non-empty string: taken as on, it left dualtrace running.
            raise DualtraceError(f"setting {key} must be true or false (no quotes), not {value!r}")
        kind = _NUMBER_FIELDS.get(key)
        if kind is not None:
            if isinstance(value, bool) or not isinstance(value, (int, float)) or (
                    kind == "int" and not isinstance(value, int)):
                raise DualtraceError(f"setting {key} must be {'an integer' if kind == 'int' else 'a number'}, "
                                     f"not {value!r}")
            value = float(value) if kind == "float" else value
        if key == "redact_patterns" and isinstance(value, list):
            value = tuple(str(v) for v in value)
        if key == "memory_dir" and isinstance(value, str) and base is not None:
            path = Path(value).expanduser()
            value = str(path if path.is_absolute() else (base / path).resolve())
        updates[key] = value
    return replace(settings, extra=extra, warnings=tuple(warnings), **updates)


def load_settings(root: Path | None = None) -> Settings:
    """User config (``<state>/config.toml``), then the project's ``dualtrace.toml``."""
    settings = Settings()
    user_file = state_dir() / USER_CONFIG
    settings = _merge(settings, _read_toml(user_file), None, user_file)
    if root is not None:
        user = settings
        settings = _merge(settings, _read_toml(root / PROJECT_FILE), root, root / PROJECT_FILE)
        # A repository's file may lower the user's spending limits, never raise them
        # (a cloned project must not be able to spend the user's money).
        settings = replace(
            settings,
            daily_budget_usd=_lower_limit(user.daily_budget_usd, settings.daily_budget_usd),
            daily_budget_tokens=int(_lower_limit(user.daily_budget_tokens,
                                                 settings.daily_budget_tokens)))
    if settings.preferences not in PREFERENCES:
        raise DualtraceError(f"setting preferences must be one of {', '.join(PREFERENCES)}, "
                             f"not {settings.preferences!r}")
    if settings.over_budget not in ("offline", "wait"):
        raise DualtraceError(f"setting over_budget must be \"offline\" or \"wait\", not "
                             f"{settings.over_budget!r}")
    return settings


PREFERENCES = ("both", "user", "project")


def user_memory_dir(settings: Settings) -> Path:
    """The person's own memory directory (preferences that follow them everywhere)."""
    if settings.user_memory_dir:
        return Path(settings.user_memory_dir).expanduser().resolve()
    return state_dir() / "user-memory"


def _lower_limit(user: float, project: float) -> float:
    """The stricter of two limits, where 0 means no limit."""
    if user <= 0:
        return project
    if project <= 0:
        return user
    return min(user, project)


def resolve_memory_dir(
    option: str | os.PathLike[str] | None = None,
    cwd: str | os.PathLike[str] | None = None,
    settings: Settings | None = None,
) -> Path:
    """The one resolver for the memory directory (see module docstring)."""
    return _memory_dir(option, None, cwd, settings)


def _memory_dir(option: str | os.PathLike[str] | None, root: Path | None,
                cwd: str | os.PathLike[str] | None, settings: Settings | None) -> Path:
    if option:
        return Path(option).expanduser().resolve()
    env = os.environ.get("DUALTRACE_MEMORY_DIR")
    if env:
        return Path(env).expanduser().resolve()
    if root is None:
        root = project_root(cwd)
    if settings is None:
        settings = load_settings(root)
    if settings.memory_dir:
        return Path(settings.memory_dir).expanduser().resolve()
    return state_dir() / "memory" / project_key(root)


@dataclass(frozen=True)
class Workspace:
    """Where one command or job works, resolved once at the top and passed down.

    One rule for "the project": the main worktree of the directory the command runs
    in (for a hook-started job, the agent's cwd from the hook payload; for a hand-run
    ``encode T``, the directory the transcript says the session ran in, when it exists
    here), else that directory. Its ``dualtrace.toml`` gives the settings; the memory directory follows
    the module docstring; ``project`` names ``system/<project>/conventions.md``.
    """

    root: Path
    settings: Settings
    memory_dir: Path
    project: str


def workspace(
    cwd: str | os.PathLike[str] | None = None,
    memory_dir: str | os.PathLike[str] | None = None,
    settings: Settings | None = None,
) -> Workspace:
    """Resolve the Workspace of ``cwd`` (default: the current directory)."""
    root = project_root(cwd)
    if settings is None:
        settings = load_settings(root)
    return Workspace(root, settings, _memory_dir(memory_dir, root, None, settings),
                     project_slug(root))


def set_user_setting(key: str, value: str) -> Path:
    """Set one top-level string ``key`` in the user config, keeping the rest of the file
    (comments, other keys, tables) as it is. Returns the file's path."""
    import json

    path = state_dir() / USER_CONFIG
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        text = ""
    except OSError as exc:
        raise DualtraceError(f"cannot read {path}: {exc}") from exc
    line = f"{key} = {json.dumps(value)}"  # a JSON string of plain text is a TOML string
    lines = text.splitlines()
    table: str | None = None
    first_header: int | None = None
    for i, raw in enumerate(lines):
        stripped = raw.strip()
        if stripped.startswith("["):
            table = stripped.strip("[] ")
            first_header = i if first_header is None else first_header
            continue
        if table in (None, "dualtrace") and re.match(rf"{re.escape(key)}\s*=", stripped):
            lines[i] = line
            break
    else:
        lines.insert(len(lines) if first_header is None else first_header, line)
    new = "\n".join(lines) + "\n"
    toml = _tomllib()
    try:
        parsed = toml.loads(new)
    except toml.TOMLDecodeError as exc:
        raise DualtraceError(f"{path} is not valid TOML ({exc}); fix it first") from exc
    table_value = parsed.get("dualtrace")
    if isinstance(table_value, dict) and key in table_value:
        parsed = table_value
    if parsed.get(key) != value:
        raise DualtraceError(f"cannot set {key} in {path}; edit it by hand")
    from dualtrace.atomic import write_text

    write_text(path, new, fsync=False, keep_mode=True)
    return path


def api_key(settings: Settings) -> str | None:
    """ANTHROPIC_API_KEY wins over the config file (keys stay out of repos)."""
    return os.environ.get("ANTHROPIC_API_KEY") or settings.api_key or None


def disabled_by(root: Path | None) -> str | None:
    """What turns dualtrace off for the project at ``root`` (for ``dualtrace status``):
    the DUALTRACE_DISABLE variable or the file whose ``enabled = false`` wins; None: on."""
    if is_disabled():
        return "DUALTRACE_DISABLE is set"
    # The project's file is read last, so its word wins; extra-table keys apply too.
    for path in ((root / PROJECT_FILE) if root is not None else None, state_dir() / USER_CONFIG):
        if path is None:
            continue
        data = _read_toml(path)
        table = data.get("extra")
        data = {**table, **data} if isinstance(table, dict) else data
        if "enabled" in data:
            return f"enabled = false in {path}" if data["enabled"] is False else None
    return None


def is_disabled(settings: Settings | None = None) -> bool:
    if os.environ.get("DUALTRACE_DISABLE", "").strip() not in ("", "0", "false", "no"):
        return True
    return settings is not None and not settings.enabled
