"""The ``dualtrace`` command line: a thin click layer over plain library functions.

Heavy modules (git, jinja2, anthropic, the pipeline) are imported inside the
commands that need them, so ``dualtrace hook ...`` stays fast.
"""

from __future__ import annotations

import re
import sys
from datetime import date
from pathlib import Path
from typing import TYPE_CHECKING

import click

from dualtrace import __version__, config, recallcmd
from dualtrace.cmdline import log_error, report, warn_settings  # noqa: F401 - log_error: cli.log_error callers
from dualtrace.errors import DualtraceError
from dualtrace.hooks import registry
from dualtrace.memfs.types import MEMORY_TYPES

if TYPE_CHECKING:
    from dualtrace.memfs.gitrepo import LogEntry

TYPES = [t.name for t in MEMORY_TYPES]
FACT_FOLDER_TYPES = [t.name for t in MEMORY_TYPES if t.bullet_file is None]

memory_dir_option = click.option(
    "--memory-dir",
    # No file_okay/dir_okay checks on paths: click would answer with a usage text and
    # exit 2; the library raises the one-line `Error: ...` (exit 1) every command promises.
    type=click.Path(path_type=Path),
    default=None,
    help="Memory directory (default: resolved from env, dualtrace.toml, or the project).",
)


def workspace_for(memory_dir: Path | None) -> config.Workspace:
    """This invocation's Workspace: project root, settings, memory dir, project name.

    The one place the CLI resolves them (by ``config.workspace``'s one rule), once per
    invocation and ``--memory-dir``, cached on the click group's context; commands
    pass the Workspace down. Lazy, so `hook`, `mcp` and `worker` never read a config.
    """
    ctx = click.get_current_context(silent=True)
    if ctx is None:
        ws = config.workspace(memory_dir=memory_dir)
        warn_settings(ws.settings)
        return ws
    cache: dict[Path | None, config.Workspace] = ctx.find_root().meta.setdefault(
        "dualtrace.workspaces", {})
    if memory_dir not in cache:
        cache[memory_dir] = config.workspace(memory_dir=memory_dir)
        warn_settings(cache[memory_dir].settings)
    return cache[memory_dir]


def resolve_store(ws: config.Workspace, *, create: bool = True):
    """The memory store for a command that writes (sync, remote add): created when
    missing unless ``create`` is False."""
    from dualtrace.memfs.store import MemoryStore

    return MemoryStore(
        ws.memory_dir,
        author=(ws.settings.author_name, ws.settings.author_email),
        project=ws.project,
        create=create and not (ws.memory_dir / ".git").exists(),
    )


def warn_unreadable(root: Path) -> None:
    """One stderr line per memory file the index could not parse: a hand edit that breaks a
    file's YAML drops that memory from list, recall and injection, so say so."""
    import sqlite3

    from dualtrace.memfs.index import Index

    try:
        with Index.open(root) as index:
            broken = index.unreadable()
    except (OSError, sqlite3.Error):
        return
    for rel, why in sorted(broken.items())[:10]:
        click.echo(f"warning: {rel} does not parse, so it is left out ({why})", err=True)
    if len(broken) > 10:
        click.echo(f"warning: and {len(broken) - 10} more; `dualtrace status --check` lists them",
                   err=True)


def read_store(ws: config.Workspace):
    """The memory store for a command that only reads (status, log, show).

    Nothing is created: no directory, no repository, no .gitignore, no lock or state
    folder (so these also work on a read-only memory directory). A missing directory
    is one line that says so and what to run.
    """
    from dualtrace.memfs.store import MemoryStore

    _require_memory_dir(ws.memory_dir, "(nothing stored yet: `dualtrace encode TRANSCRIPT` or "
                                       "the agent hooks create it)")
    return MemoryStore(
        ws.memory_dir,
        author=(ws.settings.author_name, ws.settings.author_email),
        project=ws.project,
        read_only=True,
    )


# The tier column is what was stored; the evidence is what the scores asked for. They
# differ when the session's gate raised the tier (a failure fixed in the session is
# always FULL), when a routing rule of the protocol moved it (plan.PlanBuilder.routed:
# the line's note names the rule), when a FULL had no grounded moment to keep (stored as
# RECORD), or when an update adds to a memory stored at another tier: the legend says
# so, since a user reads "FULL (5)" against it (new-user review).
SCORE_LEGEND = ("scores: d/s/r/l = durability/scope/rationale/retrieval likelihood, 0-3 each; "
                "(n) = their sum, the evidence: 8-12 asks for FULL (fact + moment), 5-7 for "
                "RECORD (fact); the tier shown is what was stored (the session's gate can "
                "raise it; a routing rule can move it: a decision or learning with its why, a "
                "high-stakes incident or an irreversible decision is FULL from 5, a pattern's "
                "first sighting RECORD, and the line's note says which; a FULL without a "
                "grounded moment is kept as RECORD; an update keeps the memory's tier); "
                "BULLET = a line in a preferences or conventions file")
# After each encode a line, not the whole legend (review 10: ~600 characters after every
# encode); `explain`, where a person asks why a tier, prints it in full.
SCORE_LEGEND_SHORT = ("scores: d/s/r/l = durability/scope/rationale/retrieval likelihood, 0-3 "
                      "each; (n) their sum: 8-12 FULL, 5-7 RECORD; why a tier: dualtrace explain")


def _tier_label(op: dict) -> str:
    """The tier column: what was (or would be) stored, never SKIP for something stored."""
    tier = op.get("tier") or "-"
    if tier == "SKIP" and op.get("action") not in (None, "skip"):
        return "BULLET" if op.get("action") == "bullet" else "NOTE"
    return tier


def _echo_operations(operations: list[dict], legend: str = SCORE_LEGEND_SHORT) -> None:
    """One line per operation of an encode report, then the legend for the scores."""
    for op in operations:
        scores = op.get("scores")
        dims = "d/s/r/l={durability}/{scope}/{rationale}/{retrieval}".format(**scores) if scores else ""
        total = f"({op['evidence']})" if op.get("evidence") is not None else ""
        line = f"{_tier_label(op):<6} {dims:<15} {total:<5} {op['action']:<8} {op['path'] or '-'}"
        if op.get("confidence"):
            line += f"  {op['confidence']}"
        click.echo(line.rstrip())
        if op.get("note"):
            click.echo(f"       {op['note']}")
    if any(op.get("scores") for op in operations):
        click.echo(legend)


def hint_command(*args: str, memory_dir: Path | None = None) -> str:
    """The exact command a person should run next, with the --memory-dir they used.

    A hint without the directory would send them to the default memory directory,
    which is not where this command just wrote.
    """
    import shlex

    words = ["dualtrace", *args]
    if memory_dir is not None:
        words += ["--memory-dir", str(Path(memory_dir).expanduser().resolve())]
    return " ".join(shlex.quote(w) for w in words)


_require_memory_dir = recallcmd.require_memory_dir


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="dualtrace")
def cli() -> None:
    """dualtrace: durable, git-versioned dual-trace memory for coding agents."""


@cli.command()
@memory_dir_option
@click.option("--check", is_flag=True, help="Parse every memory file fully and list broken ones.")
def status(memory_dir: Path | None, check: bool) -> None:
    """Show the memory directory, counts per type and tier, the last commit, and the
    hooks' queue and last runs for this memory directory."""
    from dualtrace import queue
    from dualtrace.memfs.summary import store_summary

    ws = workspace_for(memory_dir)
    root, settings = ws.memory_dir, ws.settings
    problems: list[str] = []
    if root.exists() and not root.is_dir():
        raise DualtraceError(f"memory directory {root} is not a directory")
    if not root.is_dir():
        # Status is where a person looks when nothing seems to happen: say so in one
        # line and still show the queue, creating nothing.
        click.echo(f"memory dir: {root} (does not exist yet: nothing stored)")
    else:
        store = read_store(ws)
        info = store_summary(store, full=check)
        problems = info["problems"]
        click.echo(f"memory dir: {store.root}")
        click.echo(f"project:    {store.project}")
        # The same count as `dualtrace list`: a memory is a fact; its moment (a scene)
        # is part of it, and the system files' bullets are counted apart.
        click.echo(f"memories:   {info['facts']} (facts, the rows of `dualtrace list`)")
        for kind, count in sorted(info["types"].items()):
            click.echo(f"  {kind:<11} {count}")
        click.echo(f"moments:    {info['moments']} (scenes: the episode a FULL fact was learned in)")
        if info["bullets"]:
            click.echo(f"bullets:    {sum(info['bullets'].values())} ("
                       + ", ".join(f"{k} {v}" for k, v in sorted(info["bullets"].items())) + ")")
        if info["tiers"]:
            click.echo("tiers:      "
                       + ", ".join(f"{k} {v}" for k, v in sorted(info["tiers"].items())))
        if not check:  # the index knows which files failed, without parsing them all
            warn_unreadable(store.root)
        if problems:
            click.echo(f"unreadable: {len(problems)}")
            for problem in problems[:10]:
                click.echo(f"  {problem}")
        elif check:
            click.echo(f"checked:    every file parses ({info['facts']} facts, "
                       f"{info['moments']} moments)")
        if info["stray"]:
            click.echo(f"not read:   {len(info['stray'])} file(s) deeper than memory files live "
                       "(fact folders are flat; system/ and scenes/ have one level of folders)")
            for rel in info["stray"][:10]:
                click.echo(f"  {rel}")
        click.echo(f"last commit: {info['last_commit'] or '(none)'}")
    from dualtrace.worker import Worker

    summary = queue.status_summary(config.state_dir(), memory_dir=str(root),
                                   memory_dir_of=Worker(config.state_dir()).memory_dir_for)
    # A run's "N ops" are its commit's operations, as `dualtrace log` lists them: the
    # candidates it skipped are not (they made "2 ops" of a one-line commit).
    summary["runs"] = [{**run, "operations": [op for op in run.get("operations") or []
                                              if not (isinstance(op, dict)
                                                      and op.get("action") == "skip")]}
                       for run in summary["runs"]]
    for line in queue.format_status(summary):
        click.echo(line)
    for line in _hooks_lines(ws.root):
        click.echo(line)
    click.echo(_sync_line(root, settings))
    for line in _spend_lines(settings):
        click.echo(line)
    if check and problems:
        raise DualtraceError(f"{len(problems)} memory file(s) do not parse (listed above)")


def _hooks_lines(root: Path) -> list[str]:
    """What really records sessions for this project: the hooks found in each host's
    settings files (per scope) or an enabled plugin, and the switch that turns them off.
    With none installed, the first step (install, or an encode by hand)."""
    import os

    from dualtrace.hooks.install import installed_hooks

    off = config.disabled_by(root)
    found = installed_hooks(root)
    home = os.path.expanduser("~")

    def where(agent: str, scope: str, path: Path) -> str:
        shown = str(path)
        if shown.startswith(home + os.sep):
            shown = "~" + shown[len(home):]
        if scope == "plugin":
            return f"{agent} plugin (enabled in {shown})"
        return f"{agent} at {scope} scope ({shown})"

    if not found:
        state = f"disabled ({off}); none installed" if off else "none installed"
        return [f"hooks:      {state}: no session is recorded by itself; start with "
                f"`dualtrace install --agent {registry.DEFAULT}` (or "
                + ", ".join(a for a in registry.names() if a != registry.DEFAULT)
                + "), or encode one by hand: `dualtrace encode TRANSCRIPT`"]
    head = f"disabled ({off}); installed: " if off else "enabled: "
    lines = [f"hooks:      {head}{where(*found[0])}"]
    lines += [f"            {where(*item)}" for item in found[1:]]
    return lines


def _sync_line(root: Path, settings: config.Settings) -> str:
    from dualtrace import queue
    from dualtrace.memfs.sync import status_line
    from dualtrace.worker import sync_key

    jid = queue.job_id("dualtrace-sync", sync_key(str(root)))
    job = queue.read_json(queue.job_path(str(config.state_dir()), jid))
    return status_line(root, settings.sync, job if job and not job.get("_corrupt") else None)


def _spend_lines(settings: config.Settings) -> list[str]:
    """Today's model spend per backend, from the usage the APIs reported."""
    from dualtrace.encoder.backends import spend

    usd, tokens = spend.limits(settings)
    limit = " and ".join(x for x in (f"${usd:.2f}" if usd > 0 else "",
                                      f"{tokens:,} tokens" if tokens > 0 else "") if x)
    cost, used = spend.totals()
    head = f"spend today: ${cost:.4f}, {used:,} tokens"
    head += f" (budget {limit} a day; over it: {spend.action(settings)})" if limit else \
        " (no daily budget)"
    lines = [head]
    for backend, entry in sorted(spend.spent().items()):
        tok = sum(int(entry.get(k) or 0) for k in spend.FIELDS[1:5])
        lines.append(f"  {backend:<11} ${float(entry.get('cost_usd') or 0):.4f}  "
                     f"{int(entry.get('requests') or 0)} request(s), {tok:,} tokens")
    return lines


def _session_workspace(transcript: Path, memory_dir: Path | None) -> config.Workspace:
    """The Workspace of a hand-run encode: the project the session ran in.

    The same rule as a hook-started job (the agent's cwd): a past session encoded from
    any directory is filed under its own project, with that project's settings. When
    the transcript names no directory that exists here (a copy from another machine,
    the shipped examples), the current directory's project, as for every command.
    """
    from dualtrace.hooks.transcripts import working_directory

    ran_in = working_directory(transcript.expanduser())
    if ran_in and Path(ran_in).is_dir():
        ws = config.workspace(cwd=ran_in, memory_dir=memory_dir)
        warn_settings(ws.settings)
        return ws
    return workspace_for(memory_dir)


def _say_rules_compile() -> None:
    """The first encode on a machine compiles ~490 secret rules (~5 s CPU, then cached):
    said to a person at a terminal, so a new user's first command does not look hung."""
    import sys

    from dualtrace.encoder.redact import rules_ready

    if sys.stderr.isatty() and not rules_ready():
        click.echo("dualtrace: preparing the secret-detection rules (once on this machine, "
                   "a few seconds)", err=True)


@cli.command()
@memory_dir_option
@click.argument("transcript", type=click.Path(path_type=Path))
@click.option("--backend", default=None,
              help="auto (the default: offline, no model), offline, anthropic, claude.")
@click.option("--dry-run", is_flag=True, help="Print the files it would write as a diff; write nothing.")
@click.option("--json", "as_json", is_flag=True, help="Print the run report as JSON.")
@click.option("--budget", type=click.IntRange(200, 1_000_000), default=None,
              help="Digest token budget (default 8000).")
@click.option("--force", is_flag=True,
              help="Encode the whole transcript again, even if it was encoded before.")
def encode(memory_dir: Path | None, transcript: Path, backend: str | None, dry_run: bool,
           as_json: bool, budget: int | None, force: bool) -> None:
    """Encode a finished TRANSCRIPT (JSONL) into the memory directory: one commit."""
    import json

    from dualtrace.pipeline import encode_session

    ws = _session_workspace(transcript, memory_dir)
    _say_rules_compile()
    report = encode_session(transcript, workspace=ws, backend=backend or ws.settings.backend,
                            dry_run=dry_run, budget=budget, force=force)
    if as_json:
        click.echo(json.dumps(report.to_dict(), indent=2, default=str))
        return
    click.echo(f"session {report.session_id or '-'} ({report.host}) -> {report.memory_dir}")
    if ws.root != workspace_for(memory_dir).root:
        click.echo(f"project: {ws.project} (where the session ran: {ws.root})")
    if report.skipped and not report.operations:
        click.echo(f"SKIP  {report.skipped}" + ("; kept in the session record" if report.commit
                                                 and report.record else ""))
        if report.skipped.startswith(("nothing new", "already committed")):
            click.echo("To encode it again: "
                       + hint_command("encode", str(transcript), "--force", memory_dir=memory_dir))
    _echo_operations(report.operations)
    for note in report.notes + report.usage.get("notes", []):
        click.echo(f"note: {note}")
    if dry_run:
        click.echo(report.diff or "(no changes)", nl=False)
        click.echo("\n(dry run: nothing written)")
    elif report.commit:
        click.echo(f"commit {report.commit[:10]} {(report.message or '').splitlines()[0]}")
        click.echo(f"See it with `{hint_command('log', memory_dir=memory_dir)}` and ask it with "
                   f"`{hint_command('recall', 'your question', memory_dir=memory_dir)}` "
                   "(or `git log -p` in the memory directory).")
        from dualtrace.worker import sync_after_hand_commit

        synced = sync_after_hand_commit(report.memory_dir, str(ws.root), ws.settings)
        if synced:
            click.echo(synced)
    elif not report.skipped or report.operations:
        click.echo("nothing to commit" + (f" ({report.skipped})" if report.skipped else ""))


@cli.command()
@memory_dir_option
@click.argument("paths", nargs=-1, type=click.Path(path_type=Path))
@click.option("--backend", default=None, help="auto, anthropic, claude or offline (live mode).")
@click.option("--batch", is_flag=True, help="Send turn 1 through the Message Batches API (half price).")
@click.option("--dry-run", is_flag=True, help="Estimate prompt tokens and cost; write nothing.")
@click.option("--model", default=None, help="Model id (default: the configured model).")
@click.option("--cheap", is_flag=True, help="Use the configured cheap (Haiku-class) model.")
@click.option("--limit", type=click.IntRange(1, None), default=None, help="At most N transcripts (oldest first).")
@click.option("--poll-interval", type=float, default=30.0, show_default=True, help="Batch poll seconds.")
@click.option("--max-wait", type=float, default=3600.0, show_default=True,
              help="Stop polling after this many seconds (re-run to resume the batch).")
@click.option("--json", "as_json", is_flag=True, help="Print the summary as JSON.")
@click.option("--records", "records_only", is_flag=True,
              help="Only write session records for past sessions (no model call, no new "
                   "memories; sessions that already have one are skipped).")
def backfill(memory_dir: Path | None, paths: tuple[Path, ...], backend: str | None, batch: bool,
             dry_run: bool, model: str | None, cheap: bool, limit: int | None,
             poll_interval: float, max_wait: float, as_json: bool, records_only: bool) -> None:
    """Encode past transcripts (default: this project's Claude Code and Codex sessions),
    oldest first; resumable through the cursors."""
    from dualtrace.backfill import cli_run

    _say_rules_compile()
    cli_run(workspace=workspace_for(memory_dir), paths=paths, backend=backend, batch=batch, dry_run=dry_run,
            model=model, cheap=cheap, limit=limit, poll_interval=poll_interval,
            max_wait=max_wait, as_json=as_json, records_only=records_only)


def since_date(value: str | None, today: date | None = None) -> str | None:
    """--since as an ISO date (YYYY-MM-DD, today, yesterday, Nd); a bad one is a usage
    error, never silently "everything" (a string comparison against any text)."""
    from datetime import timedelta

    if value is None:
        return None
    text = value.strip().lower()
    today = today or date.today()
    days = {"today": 0, "yesterday": 1}.get(text)
    if days is None and re.fullmatch(r"\d{1,5}d", text):
        days = int(text[:-1])
    if days is not None:
        return (today - timedelta(days=days)).isoformat()
    try:
        return date.fromisoformat(text).isoformat()
    except ValueError:
        raise click.BadParameter(f"{value!r} is not a date: use YYYY-MM-DD, today, "
                                 "yesterday or Nd (days ago)") from None


_TYPES = list(FACT_FOLDER_TYPES)


@cli.command("list")
@memory_dir_option
@click.option("--type", "kind", default=None, type=click.Choice(_TYPES), help="Only this type.")
@click.option("--grep", "contains", default=None, help="Only memories whose anchor or "
              "description contains this text.")
@click.option("--since", default=None, callback=lambda _c, _p, v: since_date(v),
              help="Only memories stored on or after this date: YYYY-MM-DD, today, "
                   "yesterday, or N days ago as Nd (e.g. 7d).")
@click.option("--current", is_flag=True, help="Leave out decisions superseded by a later one.")
@click.option("--json", "as_json", is_flag=True, help="Print the rows as JSON.")
def list_cmd(memory_dir: Path | None, kind: str | None, contains: str | None, since: str | None,
             current: bool, as_json: bool) -> None:
    """List the stored facts, newest first: type, anchor, stored, confidence, description."""
    import json

    from dualtrace.memfs.archive import list_memories

    store = read_store(workspace_for(memory_dir))
    rows = list_memories(store, kind=kind, contains=contains, since=since,
                         include_superseded=not current)
    warn_unreadable(store.root)
    if as_json:
        click.echo(json.dumps([r.to_dict() for r in rows], indent=2, ensure_ascii=False))
        return
    if not rows:
        click.echo("No memories match." if (kind or contains or since or current)
                   else "No memories stored yet.")
        return
    for r in rows:
        flags = "".join((" +moment" if r.moment else "",
                         f" superseded by {r.superseded_by}" if r.superseded_by else "",
                         f" [{r.status}]" if r.status else ""))
        click.echo(f"{r.type:<9} {r.anchor:<40} {r.stored or '-':<10} {r.confidence:<6} "
                   f"{r.description[:90]}{flags}")
    if kind or contains or since or current:
        counted = f"{len(rows)} {'memory' if len(rows) == 1 else 'memories'}"
    else:
        from dualtrace.memfs.summary import memories_phrase, store_summary

        counted = f"{memories_phrase(store_summary(store))}, as `dualtrace status` counts them"
    click.echo(f"({counted}; `dualtrace show ANCHOR` prints one)")


@cli.command()
@memory_dir_option
@click.argument("session")
@click.option("--json", "as_json", is_flag=True, help="Print the explanation as JSON.")
def explain(memory_dir: Path | None, session: str, as_json: bool) -> None:
    """Why SESSION (an id, a prefix of one, or a transcript path) stored what it stored,
    or nothing: what was committed, the gate verdict, every candidate and its scores."""
    import json

    from dualtrace.explain import explain as do_explain

    ws = workspace_for(memory_dir)
    got = do_explain(session, ws)
    if as_json:
        click.echo(json.dumps(got.to_dict(), indent=2, default=str, ensure_ascii=False))
        return
    click.echo(f"session {got.session}" + (f"  ({got.transcript})" if got.transcript else ""))
    if got.committed:
        click.echo("committed:")
        for entry in got.committed:
            click.echo(f"  {entry['date']}  {entry['sha'][:10]}  {entry['backend'] or ''}")
            for line in entry["operations"]:
                click.echo(f"      {line}")
    else:
        click.echo(f"committed: nothing for this session in {ws.memory_dir}")
    if got.unavailable:
        click.echo(got.unavailable)
        return
    report = got.report or {}
    gates = report.get("gates") or {}
    if got.against is None:
        on = "today's memory"
    elif got.against:
        on = f"the memory as it was before this session's commit (at {got.against[:10]})"
    else:
        on = "the memory as it was before this session's commit (empty)"
    click.echo(f"why (the offline encoder, re-run now as a dry run on {on}: nothing written "
               "or sent):")
    if gates:
        click.echo(f"  gates: min tier {gates.get('min_tier') or '-'}; "
                   f"{gates.get('file_edits', 0)} edits, {gates.get('commands', 0)} commands "
                   f"({gates.get('failed_commands', 0)} failed), {gates.get('commits', 0)} commits")
        for reason in gates.get("reasons") or []:
            click.echo(f"    - {reason}")
    if report.get("skipped"):
        click.echo(f"  nothing stored: {report['skipped']}")
    elif not report.get("operations"):
        click.echo("  nothing stored: no candidate passed the encoder's cues")
    else:
        click.echo("  candidates:")
        _echo_operations(report["operations"], SCORE_LEGEND)


@cli.command()
@memory_dir_option
@click.argument("target")
@click.option("--reason", default="", help="Why, for the commit message.")
@click.option("--records", "with_records", is_flag=True,
              help="Also retire the session records of the memory's sessions (each the whole "
                   "session's own words, which recall can still quote).")
@click.option("--yes", "-y", is_flag=True, help="Do not ask for confirmation.")
def forget(memory_dir: Path | None, target: str, reason: str, with_records: bool,
           yes: bool) -> None:
    """Retire the memory TARGET (anchor or path) and its moment into archive/, in one
    commit: recall and injection stop using it; `git revert` brings it back. TARGET may
    also be a session record (path or session id): the whole record is retired."""
    from dualtrace.memfs.archive import records_of, retire, retire_record
    from dualtrace.memfs.sessions import read_record

    store = resolve_store(workspace_for(memory_dir), create=False)
    held: list[str] = []
    try:
        if _is_record_ref(store, target):
            rel = read_record(store.root, target).path
            if not yes and not _confirmed(f"Retire the session record {rel} (all of that "
                                          "session's own words) to archive/?"):
                return
            done = retire_record(store, rel, reason=reason)
        else:
            memory, moment = store.lookup(target)
            held = records_of(store, memory, moment)
            names = [memory.path] + ([moment.path] if moment is not None else [])
            if with_records:
                names, held = names + held, []
            if not yes and not _confirmed(f"Retire {', '.join(names)} to archive/?"):
                return
            done = retire(store, target, reason=reason, records=with_records)
    finally:
        store.close()
    if done.kept and done.kept_commit:
        click.echo(f"committed {', '.join(done.kept)} as written by hand first (commit "
                   f"{done.kept_commit[:10]}): it was not committed yet")
    for src, dest in done.moved:
        click.echo(f"retired {src} -> {dest}")
    click.echo(f"commit {done.commit[:10]}; undo with `{_revert_hint(store, done.commit[:10])}`")
    for rel in held:
        click.echo(f"note: the session record {rel} still holds that session's own words, and "
                   f"`dualtrace recall` can quote them; `dualtrace forget {rel}` retires it too "
                   "(the whole session's record)")


def _confirmed(question: str) -> bool:
    """Ask; "no" is an answer, not a failure (nothing retired, exit 0). No answer at all
    (a script, stdin closed) is bad input: say how to run it without asking."""
    try:
        answer = click.confirm(question)
    except click.exceptions.Abort:
        raise click.ClickException(
            "forget asks for confirmation and got no answer; pass --yes to retire "
            "without asking") from None
    if not answer:
        click.echo("nothing retired")
    return answer


def _revert_hint(store, sha: str) -> str:
    """The git command that undoes ``sha``, as it will work on this machine: dualtrace
    commits under its own author, so a person with no git identity set up would get
    "Author identity unknown" from a plain ``git revert``."""
    import shlex
    import subprocess

    root = shlex.quote(str(store.root))
    has_identity = subprocess.run(["git", "-C", str(store.root), "config", "user.email"],
                                  capture_output=True).returncode == 0
    if has_identity:
        return f"git -C {root} revert {sha}"
    name, email = store.author
    return (f"git -C {root} -c user.name={shlex.quote(name)} -c user.email={shlex.quote(email)} "
            f"revert {sha}")


def _by_hand(entry: LogEntry) -> bool:
    """A commit a person asked for (forget), as its operation lines say."""
    return any(line.startswith("mem: forget ") for line in entry.operations)


@cli.command("log")
@memory_dir_option
@click.option("-n", "limit", type=click.IntRange(1, None), default=20, show_default=True, help="Sessions to show.")
def log_cmd(memory_dir: Path | None, limit: int) -> None:
    """One entry per encoded session, newest commit first: when the session ran, its id,
    the commit and when it was encoded, each operation."""
    from dualtrace.memfs.ids import short_id
    from dualtrace.memfs.sessions import list_records

    store = read_store(workspace_for(memory_dir))
    entries = store.git.session_log(limit)
    if not entries:
        click.echo("No encoded sessions yet.")
        return
    # The date a session ran, as `dualtrace sessions` and recall give it (from its
    # record); the commit's date is when it was encoded, said apart.
    ran: dict[str, str] = {}
    for info in list_records(store.root):
        if info.date and info.started and len(info.started) >= 16:
            when = f"{info.date} {info.started[11:16]}"
            ran[info.session] = min(ran.get(info.session, when), when)
    for entry in entries:
        if entry.session:
            # A session's row: when it ran, its short id (as `sessions` names it), the
            # backend ("-" when the gate let none run: a record-only commit).
            when = ran.get(entry.session, "undated")
            click.echo(f"{when:<16}  {short_id(entry.session):<8}  {entry.backend or '-':<8}  "
                       f"{entry.sha[:10]}  encoded {entry.date}")
        else:
            # Not a session's encode (forget, a merge from sync): it ran when it was
            # committed, so that date is the row's, not "undated".
            click.echo(f"{entry.date:<16}  {'-':<8}  {'by hand' if _by_hand(entry) else '-':<8}  "
                       f"{entry.sha[:10]}  committed")
        for line in entry.operations:
            click.echo(f"    {line}")


@cli.command()
@memory_dir_option
@click.option("--limit", "-n", type=click.IntRange(1, None), default=None,
              help="At most N sessions (newest first).")
@click.option("--json", "as_json", is_flag=True, help="Print the records' frontmatter as JSON.")
def sessions(memory_dir: Path | None, limit: int | None, as_json: bool) -> None:
    """List session records, newest first: date, host, what it was about, memories stored."""
    import json

    from dualtrace.memfs.ids import short_id
    from dualtrace.memfs.sessions import list_records

    memdir = workspace_for(memory_dir).memory_dir
    _require_memory_dir(memdir, "(nothing stored yet)")
    infos = list_records(memdir, limit=limit)
    if as_json:
        click.echo(json.dumps([i.to_dict() for i in infos], indent=2, ensure_ascii=False))
        return
    if not infos:
        click.echo("No session records yet (they are written by `dualtrace encode`; "
                   "`dualtrace backfill --records` adds them for past sessions).")
        return
    for i in infos:
        stored = sum(1 for _p, a in i.memories if a == "stored")
        updated = len(i.memories) - stored
        mem = f"{stored} stored, {updated} updated" if i.memories else "no memories"
        when = f"{i.date} {i.started[11:16]}" if i.date and i.started and len(i.started) >= 16 \
            else (i.date or "undated")
        local = " (local)" if i.local else ""
        click.echo(f"{when:<16}  {short_id(i.session):<8}  {i.host:<11}  {mem:<22}  "
                   f"{i.description or '-'}{local}")


@cli.command()
@memory_dir_option
@click.argument("target")
def show(memory_dir: Path | None, target: str) -> None:
    """Show a memory by ANCHOR or PATH (the fact, then its moment), or a SESSION record
    by session id, id prefix or sessions/... path."""
    from dualtrace.memfs import sessions as records

    store = read_store(workspace_for(memory_dir))
    if _is_record_ref(store, target):
        record = records.read_record(store.root, target)
        click.echo(f"==> {record.path}")
        path = store.root / record.path
        click.echo(path.read_text(encoding="utf-8"), nl=False)
        return
    try:
        fact, moment = store.lookup(target)
    except DualtraceError as missing:
        # A session as another command names it ("ses_450b70e6", a Cline task's id): its
        # record, when one answers to it; else the anchor's own error.
        try:
            record = records.read_record(store.root, target)
        except DualtraceError:
            raise missing from None
        click.echo(f"==> {record.path}")
        click.echo((store.root / record.path).read_text(encoding="utf-8"), nl=False)
        return
    click.echo(f"==> {fact.path}")
    click.echo(store.read_text(fact.path), nl=False)
    if moment is not None:
        click.echo(f"\n==> {moment.path}")
        click.echo(store.read_text(moment.path), nl=False)


def _looks_like_session(target: str) -> bool:
    """A session id or prefix: hex/uuid-ish, or the name of a plain transcript's record."""
    import re

    return bool(re.fullmatch(r"[0-9a-fA-F][0-9a-fA-F-]{3,}", target))


def _is_record_ref(store, target: str) -> bool:
    """TARGET names a session record: its path, or a session id (or prefix) that no
    memory anchor claims. A plain transcript's id is its file name ("chat"), not hex:
    an exact id with a record counts too."""
    from dualtrace.memfs.sessions import find_record, is_record_path

    if is_record_path(target):
        return True
    if not (_looks_like_session(target) or find_record(store.root, target) is not None):
        return False
    return not _is_memory_ref(store, target)


def _is_memory_ref(store, target: str) -> bool:
    try:
        store.lookup(target)
        return True
    except DualtraceError:
        return False


@cli.command()
@memory_dir_option
@click.argument("question", nargs=-1, required=True)
@click.option("--json", "as_json", is_flag=True, help="Print state, label and memories as JSON.")
@click.option("--limit", type=click.IntRange(1, 100), default=5, show_default=True,
              help="Most memories to return (aggregation questions return every match).")
@click.option("--type", "kind", default=None, type=click.Choice([*TYPES, "session"]),
              help="Only memories of this type; session: only session records (the "
                   "sessions' own words).")
def recall(memory_dir: Path | None, question: tuple[str, ...], as_json: bool, limit: int,
           kind: str | None) -> None:
    """Answer QUESTION from memory: STATE A (fact + moment), B (fact) or C (abstain)."""
    # The console script answers a plain `recall` without click (dualtrace.recallcmd);
    # this command runs the same code for `--help`, bad input and in-process callers.
    if not " ".join(question).strip():
        raise click.BadParameter("the question is empty: ask what you want to know, "
                                 "e.g. dualtrace recall 'why did we switch to JSON logs?'",
                                 param_hint="QUESTION")
    recallcmd.run(workspace_for(memory_dir),
                  recallcmd.Args(question, memory_dir, as_json, limit, kind), sys.stdout)


@cli.command()
@memory_dir_option
def reindex(memory_dir: Path | None) -> None:
    """Rebuild the search index of the memory directory from its files."""
    import time

    from dualtrace.memfs.index import index_path
    from dualtrace.memfs.index import reindex as do_reindex
    from dualtrace.memfs.summary import memories_phrase, store_summary

    ws = workspace_for(memory_dir)
    memdir = ws.memory_dir
    _require_memory_dir(memdir)
    start = time.perf_counter()
    do_reindex(memdir)
    took = time.perf_counter() - start
    # Counted as status and list count them (the index's own unit count takes a
    # preferences file for one memory).
    counted = memories_phrase(store_summary(read_store(ws)))
    click.echo(f"indexed {counted} in {took:.2f}s -> {index_path(memdir)}")
    warn_unreadable(memdir)


@cli.command()
@memory_dir_option
@click.option("--remote", default=None, help="Remote name (default: origin, else the only one).")
@click.option("--json", "as_json", is_flag=True, help="Print the sync report as JSON.")
@click.option("--allow-unrelated", "--allow-unrelated-histories", "allow_unrelated",
              is_flag=True, help="Join a memory repository started elsewhere (no common "
              "history): merge both memories, nothing lost. Never for a repository that is "
              "not a dualtrace memory.")
def sync(memory_dir: Path | None, remote: str | None, as_json: bool,
         allow_unrelated: bool) -> None:
    """Fetch, merge (structurally, never with conflict markers) and push the memory."""
    import json

    from dualtrace.memfs.sync import sync as do_sync

    store = resolve_store(workspace_for(memory_dir), create=False)
    try:
        report = do_sync(store, remote, allow_unrelated=allow_unrelated)
    finally:
        store.close()
    if as_json:
        click.echo(json.dumps(report.to_dict(), indent=2))
        return
    if report.recovered:
        click.echo(f"recovered: {report.recovered}")
    click.echo(f"synced with {report.remote}/{report.remote_branch}: {report.incoming} commits in, "
               f"{report.outgoing if report.pushed else 0} out, {len(report.merged)} files "
               f"merged ({report.took_ms / 1000:.2f}s)")
    for line in report.conflicts:
        click.echo(f"conflict kept in the file: {line}")


@cli.group(invoke_without_command=True)
@memory_dir_option
@click.pass_context
def remote(ctx: click.Context, memory_dir: Path | None) -> None:
    """List the memory repository's git remotes (`remote add URL` adds one)."""
    ctx.obj = memory_dir
    if ctx.invoked_subcommand is None:
        from dualtrace.memfs.sync import remotes

        store = resolve_store(workspace_for(memory_dir), create=False)
        found = remotes(store.root)
        if not found:
            click.echo("No remotes. Add one with `dualtrace remote add URL`.")
        for name, url in found:
            click.echo(f"{name}\t{url}")


@remote.command("add")
@memory_dir_option
@click.argument("url")
@click.option("--name", default="origin", show_default=True, help="Remote name.")
@click.pass_obj
def remote_add(group_memory_dir: Path | None, memory_dir: Path | None, url: str,
               name: str) -> None:
    """Add a git remote to the memory repository (and register the merge driver)."""
    from dualtrace.memfs.sync import (
        add_remote,
        check_remote_name,
        check_remote_url,
        probe_remote,
    )

    ws = workspace_for(memory_dir or group_memory_dir)
    # Checked before the store exists: a bad URL must not create a memory directory.
    url = check_remote_url(url, ws.memory_dir)
    check_remote_name(name)
    # Asked once: a local repository git cannot read is refused; a URL that does not
    # answer now is added with a warning (a remote can be added offline).
    unreadable = probe_remote(url)
    local = Path(url).is_absolute()
    if unreadable and local:
        raise DualtraceError(f"git cannot read the repository at {url} ({unreadable}); "
                             "nothing was added")
    store = resolve_store(ws)
    try:
        add_remote(store, url, name)
    finally:
        store.close()
    click.echo(f"added remote {name} {url}; run `dualtrace sync` to share the memory")
    if unreadable:
        click.echo(f"warning: git could not read {url} just now ({unreadable}); if that is "
                   f"not a network outage, fix it with `git -C {ws.memory_dir} remote set-url "
                   f"{name} URL`; `dualtrace sync` says what it finds")


@cli.command("merge-file", hidden=True)
@click.argument("files", nargs=4)
def merge_file(files: tuple[str, str, str, str]) -> None:
    """git merge driver: BASE OURS THEIRS PATH (%O %A %B %P); writes the merge into OURS."""
    from dualtrace.memfs.merge import run_driver

    sys.exit(run_driver(list(files)))


@cli.command(context_settings={"ignore_unknown_options": True, "allow_extra_args": True})
@click.argument("event")
@click.option("--host", "--agent", "host", default=None, help=", ".join(registry.names()) + ".")
@click.argument("extra", nargs=-1, type=click.UNPROCESSED)
def hook(event: str, host: str | None, extra: tuple[str, ...]) -> None:
    """Hook entry for the agent (stdin: the host's JSON). Always exits 0."""
    from dualtrace import hookcmd

    args = [event, *extra] + (["--host", host] if host else [])
    sys.exit(hookcmd.run(args))


@cli.command("mcp")
@memory_dir_option
@click.option("--encoder", is_flag=True, hidden=True)  # the claude backend's sub-agent server
def mcp_cmd(memory_dir: Path | None, encoder: bool) -> None:
    """Serve this project's memory to the agent over MCP (stdio): recall, search, show,
    recent_sessions, remember. Hosts start it; `dualtrace install` registers it."""
    # A host's start never comes here: hookcmd.entry routes `mcp` past click to
    # mcp_warm.main, which sends only --help and bad options on to this command.
    from dualtrace.mcp_server import serve

    serve(str(memory_dir) if memory_dir is not None else None, encoder=encoder)


@cli.command(hidden=True)
def worker() -> None:
    """Drain the job queue in the foreground, then exit (normally started by hooks)."""
    from dualtrace.worker import main as worker_main

    sys.exit(worker_main())


@cli.command()
@click.argument("session", required=False)
def retry(session: str | None) -> None:
    """Re-queue failed (parked) jobs, all or one SESSION, and start the worker."""
    from dualtrace import hookcmd, queue

    workspace_for(None)  # a config that does not load would fail the jobs again: say so now
    state = str(config.state_dir())
    ids = queue.retry(state, session)
    if not ids:
        click.echo("Nothing to retry." if not session else f"No failed job for {session}.")
        return
    for jid in ids:
        click.echo(f"re-queued {jid}")
    hookcmd.ensure_worker(state)


_agent_option = click.option("--agent", "agent", default="claude-code", show_default=True,
                             type=click.Choice(registry.names()))
_scope_option = click.option("--scope", default="user", show_default=True,
                             type=click.Choice(["user", "project", "local"]))


@cli.command()
@_agent_option
@_scope_option
@click.option("--dry-run", is_flag=True, help="Print what would change; write nothing.")
@click.option("--backend", default=None,
              type=click.Choice(["auto", "offline", "anthropic", "claude"]),
              help="Encoder the hooks use, saved in dualtrace's user config "
                   "(default: keep it; auto and offline send nothing to a model).")
@click.option("--mcp/--no-mcp", "mcp", default=True, show_default=True,
              help="Also register `dualtrace mcp` (the agent's memory tools) with a host that "
                   "supports MCP (Claude Code, Codex). An interactive session starts it once; "
                   "headless `claude -p` scripts start it every run and wait for it "
                   "(about 0.8-3 s, docs/BENCHMARKS.md): install those with --no-mcp.")
@click.option("--allow-recall", is_flag=True,
              help="Claude Code: let the agent run `dualtrace recall` without a permission "
                   "prompt (adds a Bash permission rule).")
def install(agent: str, scope: str, dry_run: bool, backend: str | None, mcp: bool,
            allow_recall: bool) -> None:
    """Add dualtrace's hooks to the agent's settings file (idempotent, with a backup) and
    register its MCP server (unless --no-mcp)."""
    import os

    from dualtrace.encoder.backends import disclosure
    from dualtrace.hooks.install import install as do_install

    # Settings first: hooks installed over a config that does not load would be silent.
    ws = workspace_for(None)
    for line in do_install(agent, scope, dry_run=dry_run, mcp=mcp, allow_recall=allow_recall):
        click.echo(line)
    host = registry.get(agent)
    finder = getattr(host, "enabled_plugin_files", None)
    for path in finder(ws.root, Path(os.path.expanduser("~"))) if finder else []:
        click.echo(f"warning: {path} also enables the dualtrace plugin: its hooks and these "
                   "would both run. Keep one: `claude plugin uninstall dualtrace@dualtrace`, "
                   f"or `dualtrace uninstall --agent {agent} --scope {scope}`.")
    if agent == "codex":
        click.echo("Codex runs a new or changed hook only once you trust it: start `codex` "
                   "and review dualtrace's hooks in /hooks.")
    if backend is not None and not dry_run:
        click.echo(f"{config.set_user_setting('backend', backend)}: backend = \"{backend}\"")
    settings = ws.settings
    chosen = backend or settings.backend
    click.echo(disclosure(chosen, settings) + "." + (
        "" if chosen not in ("auto", "offline")
        else " (A model encoder: dualtrace install --backend anthropic|claude.)"))
    if dry_run:
        return
    after = getattr(host, "AFTER_INSTALL", "")
    if after:
        click.echo(after)
    click.echo(f"Memory for this project: {ws.memory_dir} "
               "(`dualtrace status` shows it and what the hooks did).")
    click.echo("Past sessions: `dualtrace backfill` encodes them. Turn it off: "
               f"DUALTRACE_DISABLE=1, `enabled = false` in dualtrace.toml, or "
               f"`dualtrace uninstall --agent {agent} --scope {scope}`.")


@cli.command()
@_agent_option
@_scope_option
@click.option("--dry-run", is_flag=True, help="Print what would change; write nothing.")
def uninstall(agent: str, scope: str, dry_run: bool) -> None:
    """Remove dualtrace's hooks from the agent's settings file, leaving others untouched."""
    from dualtrace.hooks.install import uninstall as do_uninstall

    for line in do_uninstall(agent, scope, dry_run=dry_run):
        click.echo(line)


@cli.command()
@click.argument("transcript", type=click.Path(path_type=Path))
@click.option("--budget", type=click.IntRange(200, 1_000_000), default=None,
              help="Token budget (default: digest_budget setting, 8000).")
@click.option("--json", "as_json", is_flag=True, help="Print digest, stats and gates as JSON.")
def digest(transcript: Path, budget: int | None, as_json: bool) -> None:
    """Print the redacted digest of a transcript, with its stats and gate verdict."""
    import json
    from dataclasses import asdict

    from dualtrace.pipeline import prepare

    settings = workspace_for(None).settings
    got = prepare(str(transcript), budget=budget or settings.digest_budget,
                  extra_patterns=tuple(settings.redact_patterns))
    verdict = asdict(got.verdict)
    verdict["skip_backend"] = got.verdict.skip_backend
    if as_json:
        click.echo(json.dumps({"digest": got.digest.text, "stats": got.digest.stats,
                               "gates": verdict}, indent=2, sort_keys=True))
        return
    click.echo(got.digest.text, nl=False)
    s = got.digest.stats
    click.echo("\n--- stats")
    click.echo(f"raw: {s['raw_bytes']} bytes, ~{s['raw_tokens']} tokens; digest: "
               f"~{s['digest_tokens']} tokens (budget {s['budget']}, {s['compression']}x smaller)")
    click.echo(f"events: {s['events']} {s['events_by_kind']}")
    click.echo(f"kept: {s['kept_by_kind']}; dropped for budget: {s['dropped_by_kind']}; "
               f"lookups dropped: {s['noise_dropped']}")
    click.echo(f"redactions: {s['redactions'] or 'none'}; skipped lines: {s['skipped_lines']}")
    click.echo(f"gates: min tier {got.verdict.min_tier or '-'}, skip backend "
               f"{'yes' if got.verdict.skip_backend else 'no'}")
    for reason in got.verdict.reasons:
        click.echo(f"  - {reason}")


def main(argv: list[str] | None = None) -> None:
    """Console entry point: expected errors are one line, bugs get a logged report."""
    try:
        code = cli.main(args=argv, prog_name="dualtrace", standalone_mode=False)
        if isinstance(code, int) and code:
            sys.exit(code)
    except click.exceptions.Abort:
        click.echo("Aborted!", err=True)
        sys.exit(1)
    except click.UsageError as exc:
        # A wrong flag or a missing argument is bad input like any other: one line and
        # exit 1, with the command's --help named instead of click's usage block.
        hint = f" (see '{exc.ctx.command_path} --help')" if exc.ctx is not None else ""
        click.echo(f"Error: {exc.format_message().rstrip('.')}{hint}", err=True)
        sys.exit(1)
    except click.ClickException as exc:
        click.echo(f"Error: {exc.format_message()}", err=True)
        sys.exit(1)
    except KeyboardInterrupt:
        sys.exit(130)
    except Exception as exc:  # noqa: BLE001 - expected errors one line, bugs also logged
        sys.exit(report(exc))
    sys.exit(0)


if __name__ == "__main__":
    main()
