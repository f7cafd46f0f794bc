"""``dualtrace recall QUESTION``: the read path a person (or a script) runs, without click.

A new process that answers one question pays for every import on its way: click and the
CLI module cost ~15-25 ms of the CLI's 150 ms budget. The console script routes a plain
``recall`` here (``dualtrace.hookcmd.entry``), before click is imported; anything this
parser does not take as-is (``--help``, an unknown option, a bad ``--limit``, no question)
goes to the click command instead, so usage errors and help stay click's, word for word.
The click command (``dualtrace.cli.recall``) runs the same :func:`run`.
"""

from __future__ import annotations

import os
import sys

# Nothing heavier at module level (no dataclasses, typing, pathlib or config): when a warm
# server answers, this process only parses argv and hands itself over (~20 ms of imports
# saved there, measured in bench/bench_recall_cli.py --warm).
TYPE_CHECKING = False
if TYPE_CHECKING:
    from pathlib import Path
    from typing import TextIO

    from dualtrace import config
    from dualtrace.memfs.recall import RecalledMemory, RecallResult

LIMIT_RANGE = (1, 100)


class Args:
    """``recall``'s arguments. A plain class with slots, not a dataclass: importing
    dataclasses (and inspect with it) is ~5 ms this command's warm path does without."""

    __slots__ = ("question", "memory_dir", "as_json", "limit", "kind")

    def __init__(self, question: tuple[str, ...], memory_dir: Path | None = None,
                 as_json: bool = False, limit: int = 5, kind: str | None = None) -> None:
        self.question = question
        self.memory_dir = memory_dir
        self.as_json = as_json
        self.limit = limit
        self.kind = kind

    def _fields(self) -> tuple[object, ...]:
        return (self.question, self.memory_dir, self.as_json, self.limit, self.kind)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Args) and self._fields() == other._fields()

    def __hash__(self) -> int:
        return hash(self._fields())

    def __repr__(self) -> str:
        return f"Args{self._fields()!r}"


def kinds() -> list[str]:
    """What ``--type`` takes: every memory type, and ``session`` (records only)."""
    from dualtrace.memfs.types import MEMORY_TYPES

    return [*(t.name for t in MEMORY_TYPES), "session"]


def parse(argv: list[str]) -> Args | None:
    """``recall``'s arguments when they are plainly valid, else None (click decides)."""
    found = _scan(argv)
    if found is None:
        return None
    words, memdir, as_json, limit, kind = found
    if memdir is None:
        return Args(words, None, as_json, limit, kind)
    from pathlib import Path

    return Args(words, Path(memdir), as_json, limit, kind)


def _scan(argv: list[str]) -> tuple[tuple[str, ...], str | None, bool, int, str | None] | None:
    """``parse`` without building anything: (words, memory dir, json, limit, type)."""
    words: list[str] = []
    values: dict[str, str] = {}
    as_json = False
    it = iter(argv)
    for arg in it:
        if arg == "--":
            words.extend(it)
            break
        if not arg.startswith("-") or arg == "-":
            words.append(arg)
            continue
        name, eq, value = arg.partition("=")
        if name == "--json" and not eq:
            as_json = True
        elif name in ("--memory-dir", "--limit", "--type"):
            if not eq:
                value = next(it, None)  # type: ignore[assignment]
                if value is None:
                    return None
            values[name] = value
        else:
            return None  # --help, -h, an unknown option: click's to answer
    if not " ".join(words).strip():
        return None  # no question, or a blank one: a usage error, click's
    limit = values.get("--limit", "5")
    kind = values.get("--type")
    if not limit.isdigit() or not LIMIT_RANGE[0] <= int(limit) <= LIMIT_RANGE[1]:
        return None
    if kind is not None and kind not in kinds():
        return None
    return tuple(words), values.get("--memory-dir"), as_json, int(limit), kind


def require_memory_dir(memdir: Path, hint: str = "") -> None:
    from dualtrace.errors import DualtraceError

    if memdir.exists() and not memdir.is_dir():
        raise DualtraceError(f"memory directory {memdir} is not a directory")
    if not memdir.is_dir():
        raise DualtraceError(f"no memory directory at {memdir} {hint}".rstrip())


def run(ws: config.Workspace, args: Args, out: TextIO) -> None:
    """Answer the question from the workspace's memory (and the person's own, for
    preferences); print it as text or JSON to ``out``."""
    # Light imports only (no click, git, jinja2, yaml or anthropic): timed in bench/.
    import json

    from dualtrace.memfs.recall import recall as do_recall

    require_memory_dir(ws.memory_dir, "(nothing stored yet)")
    question = " ".join(args.question)
    result = do_recall(ws.memory_dir, question, limit=args.limit, type=args.kind,
                       stale_days=ws.settings.stale_days, project_root=ws.root)
    own = own_preferences(ws, question, args.limit, args.kind, result)
    if args.as_json:
        data = result.to_dict()
        data["own_preferences"] = [m.to_dict() for m in own]
        out.write(json.dumps(data, indent=2, ensure_ascii=False) + "\n")
        return
    from dualtrace.memfs.recall import OFFER_PERSON

    out.write(result.render(offer=OFFER_PERSON))
    if own:
        from dualtrace.memfs.recall import render_memory

        out.write("\nYour own preferences (from your own memory, every project):\n\n")
        for n, memory in enumerate(own, 1):
            out.write(render_memory(memory, n) + "\n")


def own_preferences(ws: config.Workspace, question: str, limit: int, kind: str | None,
                    project: RecallResult) -> list[RecalledMemory]:
    """The person's own memory (<state>/user-memory) answers preference questions too.

    The same recall, limited to preferences, over the user-level memory the SessionStart
    hook injects from; a bullet the project memory already returned is not repeated.
    """
    if kind not in (None, "preference") or ws.settings.preferences == "project":
        return []
    from dualtrace import config
    from dualtrace.memfs.recall import recall as do_recall

    own_dir = config.user_memory_dir(ws.settings)
    if not (own_dir / ".git").is_dir() or own_dir.resolve() == ws.memory_dir.resolve():
        return []
    found = do_recall(own_dir, question, limit=limit, type="preference",
                      stale_days=ws.settings.stale_days)
    if found.state == "C":
        return []
    seen = {m.bullet for m in project.memories if m.bullet}
    return [m for m in found.memories if not (m.bullet and m.bullet in seen)]


def main(argv: list[str], *, warm: bool = True) -> int | None:
    """The fast path's exit code, or None when click should take ``argv`` instead.

    ``warm``: a warm server that is already running (dualtrace/mcp_warm.py: the one MCP
    host sessions are forked from) answers in a fork of itself, where numpy, the
    embedder and the read path are loaded already; without one (or when it refuses, is
    stale or does not answer within ``mcp_warm.READY_WAIT``) this process answers.
    """
    if _scan(argv) is None:
        return None
    if warm:
        code = _in_warm_server(argv)
        if code is not None:
            return code
    args = parse(argv)
    assert args is not None
    from dualtrace import config
    from dualtrace.cmdline import report, warn_settings

    # One question, one process: numpy's BLAS thread pool (started at import, one thread
    # per core) costs ~15 ms CPU here and a single matrix-vector product gains nothing
    # from it. A value the person set is kept.
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

    try:
        ws = config.workspace(memory_dir=args.memory_dir)
        warn_settings(ws.settings)
        run(ws, args, sys.stdout)
    except Exception as exc:  # noqa: BLE001 - the CLI's one handler decides
        return report(exc)
    except KeyboardInterrupt:
        return 130
    return 0


def _in_warm_server(argv: list[str]) -> int | None:
    """The exit status of this recall answered by a running warm server, or None."""
    from dualtrace import mcp_warm
    from dualtrace.paths import state_dir

    try:
        state = state_dir()
    except OSError:
        return None
    if not mcp_warm.may_be_listening(state):  # no server around: no further cost
        return None
    if not mcp_warm.enabled([], state):  # DUALTRACE_MCP_WARM=0, mcp_warm = false
        return None
    return mcp_warm.forward("recall", argv, state)
