"""``dualtrace backfill``: encode past transcripts, oldest first, resumably.

Live mode runs ``pipeline.encode_session`` per transcript; the per-transcript
cursors make it resumable (an interrupted run re-encodes nothing that was
committed) and a failing transcript does not stop the others (its cursor stays,
so the next run retries it).

Batch mode (``--batch``) sends turn 1 of every session through the Message
Batches API at half price:
1. prepare: each transcript runs through the pipeline in dry-run with a capture
   backend, which records the exact first request (system, tools, digest, index);
   gate-skipped or already-encoded sessions drop out here;
2. budget: each session's whole run is estimated (the ``--dry-run`` figures) and only
   what today's budget left covers is submitted; the rest goes the way ``over_budget``
   says (offline now, or left for a run after midnight);
3. submit: one batch; its id, items and their request bodies are saved in
   ``<state>/backfill/`` *before* anything else, so an interrupted run resumes
   polling the same batch instead of paying twice;
4. poll until the batch has ended (``--max-wait`` bounds a run; re-run to resume);
5. apply: each succeeded item continues through the normal tool loop from the
   batch reply (validator, is_error corrections at live price) and commits as one
   session; errored/expired/canceled items are reported and left for the next run.

``--dry-run`` estimates prompt tokens and cost from the same captured requests.
"""

from __future__ import annotations

import hashlib
import json
import re
import time
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from dualtrace import config, cursors
from dualtrace.config import Settings
from dualtrace.encoder.backends import EncodeRequest, Usage
from dualtrace.encoder.backends.anthropic import AnthropicBackend, build_params
from dualtrace.encoder.backends.pricing import cost_usd, estimate_request_tokens
from dualtrace.errors import BackendError, DualtraceError
from dualtrace.memfs.ids import short_id

CAPTURE = "batch-capture"
BATCH_RESULT = "anthropic-batch"
# Planning figures for --dry-run: a typical run is turn 1, a short turn on tool
# results, and finish; each later turn re-reads the prefix from the cache.
EST_TURNS = 3
EST_OUTPUT_TOKENS = 1500
EST_FRESH_TOKENS_PER_TURN = 400


# ------------------------------------------------------------------ discovery


def _jsonl_under(folder: Path) -> list[Path]:
    from dualtrace.hooks.transcripts import transcripts_under

    return transcripts_under(folder)


def discover(paths: Iterable[Path] = (), root: Path | None = None) -> list[Path]:
    """Transcripts to backfill, oldest first. No paths: this project's sessions of
    every host (Claude Code's project folder, Codex rollouts with this cwd, the
    conversations of the Letta Code agents this project's .letta settings name)."""
    found: list[Path] = []
    for p in paths:
        p = Path(p).expanduser().resolve()
        if p.is_dir():
            found.extend(_jsonl_under(p))
        elif p.is_file():
            found.append(p)
        else:
            raise DualtraceError(f"no such transcript or folder: {p}")
    if not paths:
        root = root or config.project_root()
        from dualtrace.hooks import registry

        for name in registry.names():
            found.extend(registry.get(name).project_transcripts(root))
    unique = list(dict.fromkeys(p.resolve() for p in found))
    return sorted(unique, key=lambda p: (started_at(p), str(p)))


def nothing_found(paths: tuple[Path, ...], root: Path | None) -> str:
    """What backfill says when it found no transcript: where it looked (review 10: a
    bare "No transcripts to backfill." left a person guessing which folder was read)."""
    if paths:
        from dualtrace.hooks.transcripts import DOCUMENT_FILE_NAMES

        return "No transcripts to backfill in " + ", ".join(str(p) for p in paths) + \
            " (a folder is searched for *.jsonl files and " + \
            ", ".join(sorted(DOCUMENT_FILE_NAMES)) + ")."
    root = root or config.project_root()
    from dualtrace.hooks import registry

    lines = [f"No transcripts to backfill for {root}. Looked in:"]
    lines += [f"  {name}: {registry.get(name).transcripts_place(root)}"
              for name in registry.names()]
    lines.append("Name other transcripts or folders to backfill them: dualtrace backfill PATH...")
    return "\n".join(lines)


# "timestamp": Claude Code, Codex, the plain format; "captured_at": Letta Code.
_TS = re.compile(rb'"(?:timestamp|captured_at)"\s*:\s*"([0-9T:.+Z-]{10,40})"')


_META = re.compile(rb'"isMeta"\s*:\s*true')


def started_at(path: Path) -> str:
    """The first timestamp in the file (ISO, sortable), else its mtime.

    Claude Code's ``isMeta`` lines are passed over: after /clear the new file starts
    with a copy of the old conversation's "Caveat" line, old timestamp included.
    """
    try:
        with path.open("rb") as fh:
            head = fh.read(64 * 1024)
        for line in head.splitlines():
            m = None if _META.search(line) else _TS.search(line)
            if m:
                return m.group(1).decode()
        from datetime import datetime, timezone

        return datetime.fromtimestamp(path.stat().st_mtime, timezone.utc).isoformat()
    except OSError:
        return ""


# ------------------------------------------------------------------ helper backends


class CaptureBackend:
    """Records the first request the Anthropic backend would send; proposes nothing."""

    name = CAPTURE

    def __init__(self, settings: Settings, sink: dict[str, Any]) -> None:
        self.sink = sink

    def encode(self, request: EncodeRequest, builder: Any) -> Usage:
        self.sink["params"] = build_params(request, mode=self.sink.get("mode", "tools"))
        self.sink["session_id"] = request.ctx.session_id
        return Usage(model=request.settings.model)


class BatchResultBackend(AnthropicBackend):
    """The tool loop, continuing from a turn 1 answered by the Message Batches API."""

    name = BATCH_RESULT

    def __init__(self, settings: Settings, prefetched: tuple[dict[str, Any], Any]) -> None:
        super().__init__(settings, prefetched=prefetched)


def capture(path: Path, memory_dir: Path, settings: Settings, mode: str = "tools") -> dict[str, Any]:
    """Run the pipeline up to the backend, writing nothing; returns {params?, skipped?}."""
    from dualtrace.pipeline import encode_session

    sink: dict[str, Any] = {"mode": mode}
    # The backend is handed over as an object: nothing is registered, Settings stay values.
    report = encode_session(path, memory_dir=memory_dir, backend=CaptureBackend(settings, sink),
                            settings=settings, dry_run=True)
    sink["report"] = report
    return sink


# ------------------------------------------------------------------ results


@dataclass
class Item:
    path: str
    session_id: str | None = None
    status: str = "pending"  # encoded | nothing | skipped | failed | estimated
    stored: int = 0
    updated: int = 0
    prompt_tokens: int = 0
    cost_usd: float = 0.0
    note: str = ""


@dataclass
class Summary:
    items: list[Item] = field(default_factory=list)
    mode: str = "live"
    batch_id: str | None = None

    def count(self, status: str) -> int:
        return sum(1 for i in self.items if i.status == status)

    @property
    def cost_usd(self) -> float:
        return round(sum(i.cost_usd for i in self.items), 6)

    def table(self) -> str:
        # A note every row shares (e.g. "the session ran in DIR, which is not on this
        # machine") is said once under the table; the column keeps what differs.
        parts = [[p for p in item.note.split("; ") if p] for item in self.items]
        shared = ([p for p in parts[0] if all(p in other for other in parts[1:])]
                  if len(parts) > 1 else [])
        rows = [("#", "session", "status", "stored", "updated", "tokens", "cost $", "note")]
        for n, (item, own) in enumerate(zip(self.items, parts, strict=True), 1):
            note = "; ".join(p for p in own if p not in shared)
            rows.append((str(n), short_id(item.session_id) if item.session_id
                         else Path(item.path).stem[:16], item.status,
                         str(item.stored), str(item.updated), str(item.prompt_tokens),
                         f"{item.cost_usd:.4f}", _clip(note, 60)))
        widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]) - 1)]
        lines = ["  ".join(c.ljust(w) for c, w in zip(r[:-1], widths, strict=True)) + "  " + r[-1]
                 for r in rows]
        totals = (f"{len(self.items)} transcript(s): {self.count('encoded')} encoded, "
                  f"{self.count('nothing') + self.count('skipped')} skipped, "
                  f"{self.count('failed')} failed; prompt tokens "
                  f"{sum(i.prompt_tokens for i in self.items)}, cost ${self.cost_usd:.4f}")
        if self.mode == "dry-run":
            totals += " (estimate)"
        return "\n".join(lines + [totals] + [f"every session: {p}" for p in shared])


def _clip(text: str, limit: int) -> str:
    """At most ``limit`` characters, cut at a word with an ellipsis, never mid-word."""
    if len(text) <= limit:
        return text
    cut = text[:limit - 1].rsplit(" ", 1)[0].rstrip(",;:")
    return cut + "…"


def _item_from_report(path: Path, report: Any) -> Item:
    usage = report.usage or {}
    item = Item(str(path), report.session_id)
    item.stored, item.updated = report.stored, report.updated
    item.prompt_tokens = int(usage.get("input_tokens", 0) + usage.get("cache_read_tokens", 0)
                             + usage.get("cache_write_tokens", 0))
    item.cost_usd = float(usage.get("cost_usd") or 0.0)
    if report.commit:
        item.status = "encoded"
    else:
        item.status = "skipped" if report.skipped and "nothing new" not in report.skipped else "nothing"
        item.note = report.skipped or ""
    notes = list(report.notes) + list(usage.get("notes") or [])
    if notes and not item.note:
        item.note = "; ".join(notes)
    return item


Progress = Callable[[str], None]


def _quiet(_label: str) -> None:
    pass


# ------------------------------------------------------------------ live and dry-run


def run_live(paths: list[Path], memory_dir: Path, settings: Settings, backend: str,
             progress: Progress = _quiet) -> Summary:
    from dualtrace.pipeline import encode_session

    summary = Summary(mode="live")
    for path in paths:
        progress(path.name)
        try:
            report = encode_session(path, memory_dir=memory_dir, backend=backend,
                                    settings=settings)
        except DualtraceError as exc:  # cursor untouched: the next run retries it
            summary.items.append(Item(str(path), status="failed", note=str(exc)))
            continue
        summary.items.append(_item_from_report(path, report))
    return summary


def estimate(params: dict[str, Any], model: str, *, batch: bool = False) -> tuple[int, float]:
    """(prompt tokens of turn 1, estimated cost of the whole run for this session)."""
    prompt = estimate_request_tokens(params)
    later = EST_TURNS - 1
    fresh = EST_FRESH_TOKENS_PER_TURN * later
    turn1 = cost_usd(model, cache_write_tokens=prompt, output_tokens=EST_OUTPUT_TOKENS // EST_TURNS,
                     batch=batch)
    rest = cost_usd(model, cache_read_tokens=prompt * later, input_tokens=fresh,
                    output_tokens=EST_OUTPUT_TOKENS - EST_OUTPUT_TOKENS // EST_TURNS)
    return prompt, round(turn1 + rest, 6)


def estimate_tokens(prompt: int) -> int:
    """Tokens a session's whole run is expected to count against the daily token budget
    (the ledger counts cache reads and writes too): the planning figures above."""
    later = EST_TURNS - 1
    return prompt * EST_TURNS + EST_FRESH_TOKENS_PER_TURN * later + EST_OUTPUT_TOKENS


def _fit_budget(items: dict[str, Any], settings: Settings) -> tuple[dict[str, Any], list[Any], str]:
    """Split the prepared items into those today's budget covers (in discovery order, by
    each session's estimated whole run) and the rest, with one line saying so.

    The batch is paid when its results come back, so the guard (encoder/backends/spend.py)
    is applied here, before anything is submitted; the live turns after turn 1 are still
    checked one by one by the tool loop.
    """
    from dualtrace.encoder.backends import spend

    usd, tokens = spend.limits(settings)
    if usd <= 0 and tokens <= 0:
        return items, [], ""
    cost, used = spend.totals()
    left_usd = usd - cost if usd > 0 else float("inf")
    left_tokens = tokens - used if tokens > 0 else float("inf")
    fits: dict[str, Any] = {}
    over: list[Any] = []
    planned_usd = 0.0
    for cid, it in items.items():
        prompt = estimate_request_tokens(it["params"])
        est_usd = estimate(it["params"], settings.model, batch=True)[1]
        est_tokens = estimate_tokens(prompt)
        if est_usd <= left_usd and est_tokens <= left_tokens:
            fits[cid] = it
            left_usd -= est_usd
            left_tokens -= est_tokens
            planned_usd += est_usd
        else:
            over.append(it)
    if not over:
        return fits, over, ""
    limit = f"${usd:.2f}" if usd > 0 else f"{tokens:,} tokens"
    line = (f"daily model budget ({limit}; ${cost:.2f} and {used:,} tokens spent today): "
            f"{len(fits)} of {len(items)} session(s) fit (estimated ${planned_usd:.4f}); "
            f"{len(over)} over budget")
    return fits, over, line


def _over_budget(over: list[Any], memory_dir: Path, settings: Settings, summary: Summary,
                 progress: Progress) -> None:
    """Sessions the budget does not cover: what ``over_budget`` says, as for hooks: encoded
    offline now ("offline"), or left untouched for a run after midnight ("wait")."""
    from dualtrace.encoder.backends import spend
    from dualtrace.pipeline import encode_session

    wait = spend.action(settings) == "wait"
    for it in over:
        path = Path(it["path"])
        if wait:
            summary.items.append(Item(str(path), it.get("session_id"), "skipped",
                                      note="over today's model budget: not submitted "
                                           "(over_budget = wait); run again after midnight"))
            continue
        progress(f"offline {path.name}")
        try:
            report = encode_session(path, memory_dir=memory_dir, settings=settings,
                                    backend="offline")
        except DualtraceError as exc:
            summary.items.append(Item(str(path), it.get("session_id"), "failed", note=str(exc)))
            continue
        item = _item_from_report(path, report)
        item.note = "over today's model budget: encoded offline" + (
            f"; {item.note}" if item.note else "")
        summary.items.append(item)


def run_dry(paths: list[Path], memory_dir: Path, settings: Settings, *, batch: bool = False,
            progress: Progress = _quiet) -> Summary:
    summary = Summary(mode="dry-run")
    for path in paths:
        progress(path.name)
        try:
            sink = capture(path, memory_dir, settings, "batch" if batch else "tools")
        except DualtraceError as exc:
            summary.items.append(Item(str(path), status="failed", note=str(exc)))
            continue
        report = sink["report"]
        item = Item(str(path), report.session_id)
        if "params" in sink:
            item.status = "estimated"
            item.prompt_tokens, item.cost_usd = estimate(sink["params"], settings.model, batch=batch)
        else:
            item.status = "skipped"
            item.note = report.skipped or ""
        summary.items.append(item)
    return summary


# ------------------------------------------------------------------ batch


def state_file(memory_dir: Path) -> Path:
    key = hashlib.sha256(str(memory_dir).encode()).hexdigest()[:16]
    return config.state_dir() / "backfill" / f"batch-{key}.json"


def _save(path: Path, state: dict[str, Any]) -> None:
    from dualtrace.atomic import write_text as atomic_write_text

    atomic_write_text(path, json.dumps(state, indent=1) + "\n")


def custom_id(path: Path, offset: int) -> str:
    return f"t{hashlib.sha256(str(path).encode()).hexdigest()[:24]}-{offset}"


def _retrying(call: Callable[[], Any], backend: AnthropicBackend, what: str) -> Any:
    """Batch-API calls get the same retry policy as the tool loop."""
    import anthropic

    for attempt in range(backend.retries + 1):
        try:
            return call()
        except anthropic.APIStatusError as exc:
            from dualtrace.encoder.backends.anthropic import RETRYABLE_STATUS, _retry_after

            if exc.status_code not in RETRYABLE_STATUS or attempt == backend.retries:
                raise BackendError(f"{what} failed (HTTP {exc.status_code})") from None
            backend._sleep(backend.backoff(attempt, _retry_after(exc.response.headers)))
        except anthropic.APIConnectionError as exc:
            if attempt == backend.retries:
                raise BackendError(f"{what} failed ({exc})") from None
            backend._sleep(backend.backoff(attempt, None))
    raise BackendError(f"{what} failed")  # pragma: no cover


def run_batch(paths: list[Path], memory_dir: Path, settings: Settings, *,
              poll_interval: float = 30.0, max_wait: float = 24 * 3600.0,
              progress: Progress = _quiet, echo: Callable[[str], None] = _quiet,
              sleep: Callable[[float], None] = time.sleep) -> Summary:
    """Encode past sessions through the Message Batches API: submit the sessions (or
    resume the batch a state file names), wait until it ends, then apply each result
    through the pipeline. Failed items are retried by the next run (cursor unchanged)."""
    backend = AnthropicBackend(settings, sleep=sleep)
    sfile = state_file(memory_dir)
    state = _load_state(sfile)
    summary = Summary(mode="batch")
    client = None

    if state is None or not state.get("batch_id"):
        items, over, line = _fit_budget(_prepare(paths, memory_dir, settings, summary, progress),
                                        settings)
        if line:
            echo(line)
        _over_budget(over, memory_dir, settings, summary, progress)
        if not items:
            return summary
        client = backend.client()
        state = _submit(client, backend, items, memory_dir, settings, sfile)
        echo(f"submitted batch {state['batch_id']} with {len(items)} session(s)")
    else:
        echo(f"resuming batch {state['batch_id']} ({len(state['items'])} session(s))")
    summary.batch_id = state["batch_id"]
    client = client or backend.client()

    _wait_until_ended(client, backend, state["batch_id"], poll_interval=poll_interval,
                      max_wait=max_wait, progress=progress, sleep=sleep)
    results = _retrying(lambda: list(client.messages.batches.results(state["batch_id"])),
                        backend, "batch results")
    for entry in results:
        _apply_result(entry, state, sfile, memory_dir, settings, summary, progress)
    for it in state["items"].values():
        if it["status"] == "submitted":
            summary.items.append(Item(it["path"], it.get("session_id"), "failed",
                                      note="no result returned for this item"))
    sfile.unlink(missing_ok=True)  # failed items are retried by the next run (cursor unchanged)
    return summary


def _load_state(sfile: Path) -> dict[str, Any] | None:
    """The state of a batch an earlier run submitted (None: none, or unreadable)."""
    if not sfile.is_file():
        return None
    try:
        state: dict[str, Any] = json.loads(sfile.read_text(encoding="utf-8"))
    except ValueError:
        return None
    return state


def _prepare(paths: list[Path], memory_dir: Path, settings: Settings, summary: Summary,
             progress: Progress) -> dict[str, Any]:
    """The batch's items (custom id -> path, cursor offset, request params), one per
    session that has something to encode; the others go into ``summary``."""
    items: dict[str, Any] = {}
    for path in paths:
        progress(f"prepare {path.name}")
        try:
            sink = capture(path, memory_dir, settings, "batch")
        except DualtraceError as exc:
            summary.items.append(Item(str(path), status="failed", note=str(exc)))
            continue
        if "params" not in sink:
            report = sink["report"]
            summary.items.append(Item(str(path), report.session_id, "skipped",
                                      note=report.skipped or ""))
            continue
        offset = cursors.load(path, str(Path(memory_dir).resolve())).offset or 0
        items[custom_id(path, offset)] = {"path": str(path), "offset": offset,
                                          "session_id": sink.get("session_id"),
                                          "params": sink["params"], "status": "submitted"}
    return items


def _submit(client: Any, backend: AnthropicBackend, items: dict[str, Any], memory_dir: Path,
            settings: Settings, sfile: Path) -> dict[str, Any]:
    """Save the items, submit them as one batch, save its id; the state to resume from."""
    state: dict[str, Any] = {"memory_dir": str(memory_dir), "model": settings.model,
                             "batch_id": None, "created": time.time(), "items": items}
    _save(sfile, state)
    requests = [{"custom_id": cid, "params": it["params"]} for cid, it in items.items()]
    batch = _retrying(lambda: client.messages.batches.create(requests=requests), backend,
                      "batch submit")
    state["batch_id"] = batch.id
    _save(sfile, state)
    return state


def _wait_until_ended(client: Any, backend: AnthropicBackend, batch_id: str, *,
                      poll_interval: float, max_wait: float, progress: Progress,
                      sleep: Callable[[float], None]) -> None:
    deadline = time.monotonic() + max_wait
    while True:
        batch = _retrying(lambda: client.messages.batches.retrieve(batch_id), backend,
                          "batch poll")
        if batch.processing_status == "ended":
            return
        progress(f"batch {batch.processing_status}")
        if time.monotonic() + poll_interval > deadline:
            raise DualtraceError(
                f"batch {batch_id} is still {batch.processing_status}; run "
                "`dualtrace backfill --batch` again later to resume")
        sleep(poll_interval)


def _apply_result(entry: Any, state: dict[str, Any], sfile: Path, memory_dir: Path,
                  settings: Settings, summary: Summary, progress: Progress) -> None:
    """Encode one batch result into the memory dir (once), and save its status."""
    from dualtrace.encoder.backends.anthropic import message_dict
    from dualtrace.pipeline import encode_session

    it = state["items"].get(entry.custom_id)
    if it is None or it["status"] in ("done", "failed"):
        return
    path = Path(it["path"])
    progress(f"apply {path.name}")
    result = entry.result
    if result.type != "succeeded":
        detail = getattr(getattr(getattr(result, "error", None), "error", None), "message", "")
        it["status"] = "failed"
        summary.items.append(Item(str(path), it.get("session_id"), "failed",
                                  note=f"batch item {result.type}" + (f": {detail}" if detail else "")))
    elif (cursors.load(path, str(Path(memory_dir).resolve())).offset or 0) != it["offset"]:
        it["status"] = "done"
        summary.items.append(Item(str(path), it.get("session_id"), "skipped",
                                  note="encoded by another run since submission"))
    else:
        prefetched = (it["params"], message_dict(result.message))
        try:
            report = encode_session(path, memory_dir=memory_dir, settings=settings,
                                    backend=BatchResultBackend(settings, prefetched))
        except DualtraceError as exc:
            it["status"] = "failed"
            summary.items.append(Item(str(path), it.get("session_id"), "failed", note=str(exc)))
        else:
            it["status"] = "done"
            summary.items.append(_item_from_report(path, report))
    _save(sfile, state)


def run_records(paths: list[Path], memory_dir: Path, settings: Settings,
                progress: Progress = _quiet) -> Summary:
    """Session records for past transcripts: no model call, no new fact, cursors untouched."""
    from dualtrace.pipeline import record_past_session

    summary = Summary(mode="records")
    facts: list[Any] | None = None
    for path in paths:
        progress(path.name)
        if facts is None and Path(memory_dir).is_dir():
            from dualtrace.memfs.store import MemoryStore

            store = MemoryStore(Path(memory_dir), create=False)
            try:
                facts = store.scan().facts()  # once: which facts name which session
            finally:
                store.close()
        try:
            report = record_past_session(path, memory_dir=memory_dir, settings=settings,
                                         facts=facts)
        except DualtraceError as exc:
            summary.items.append(Item(str(path), status="failed", note=str(exc)))
            continue
        item = Item(str(path), report.session_id)
        if report.record and (report.commit or settings.session_records == "local"):
            item.status, item.note = "encoded", report.record
        else:
            item.status, item.note = "skipped", report.skipped or ""
        summary.items.append(item)
    return summary


def summary_dict(summary: Summary) -> dict[str, Any]:
    return {"mode": summary.mode, "batch_id": summary.batch_id, "cost_usd": summary.cost_usd,
            "items": [asdict(i) for i in summary.items]}


# ------------------------------------------------------------------ command line


def cli_run(*, workspace: config.Workspace, paths: Iterable[Path], backend: str | None,
            batch: bool, dry_run: bool, model: str | None, cheap: bool, limit: int | None,
            poll_interval: float, max_wait: float, as_json: bool,
            records_only: bool = False) -> None:
    import sys

    import click

    root, settings, target = workspace.root, workspace.settings, workspace.memory_dir
    if cheap:
        settings = replace(settings, model=settings.cheap_model)
    if model:
        settings = replace(settings, model=model)
    found = discover(tuple(paths), root)
    if limit:
        found = found[:limit]
    pending_batch = batch and state_file(target).is_file()
    if not found and not pending_batch:
        click.echo(nothing_found(tuple(paths), root))
        return
    if batch and not dry_run and not config.api_key(settings):
        raise DualtraceError("--batch needs an Anthropic API key (ANTHROPIC_API_KEY or api_key)")
    err = sys.stderr  # click 8.5 deprecates get_text_stream
    total = len(found)
    with click.progressbar(length=max(total, 1), label="backfill", file=err,
                           show_pos=True, item_show_func=lambda s: s) as bar:
        seen: set[str] = set()

        def progress(label: str) -> None:
            name = label.split(" ", 1)[-1]
            if name not in seen and len(seen) < total:
                seen.add(name)
                bar.update(1, label)
            else:
                bar.update(0, label)

        if records_only:
            summary = run_records(found, target, settings, progress=progress)
        elif dry_run:
            summary = run_dry(found, target, settings, batch=batch, progress=progress)
        elif batch:
            summary = run_batch(found, target, settings, poll_interval=poll_interval,
                                max_wait=max_wait, progress=progress,
                                echo=lambda m: click.echo(m, err=True))
        else:
            summary = run_live(found, target, settings, backend or settings.backend,
                               progress=progress)
    if as_json:
        click.echo(json.dumps(summary_dict(summary), indent=2))
    else:
        click.echo(summary.table())
        if dry_run:
            click.echo(f"(dry run with {settings.model}{', batch pricing for turn 1' if batch else ''}: "
                       "nothing sent, nothing written)")
    if not dry_run and summary.count("encoded"):
        from dualtrace.worker import sync_after_hand_commit

        synced = sync_after_hand_commit(str(target), str(root) if root else None, settings)
        if synced:
            click.echo(synced, err=as_json)
    if summary.count("failed"):
        sys.exit(1)
