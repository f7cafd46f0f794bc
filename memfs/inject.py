"""Text injected into the agent's context: at session start and for each prompt.

Host-agnostic: this module returns plain text; the hook wraps it in the host's JSON.
Every block is wrapped in ``INJECT_OPEN``/``INJECT_CLOSE`` so the ingestion redactor
strips it and recalled memories are never encoded again as if they were new.
"""

from __future__ import annotations

import re
from pathlib import Path

from dualtrace import words
from dualtrace.logfile import LazyLogger
from dualtrace.memfs.ids import short_id
from dualtrace.memfs.index import Doc, Index
from dualtrace.memfs.recall import PROMPT_RECORD_GATE, RecalledMemory, recall, render_memory
from dualtrace.memfs.recall import _cut as recall_cut

TYPE_CHECKING = False  # typing and logging: ~11 ms of every prompt hook's imports
if TYPE_CHECKING:
    from typing import Any

log = LazyLogger(__name__)

HOST_CAP = 10_000  # hosts drop anything beyond this many characters
INDEX_LINES = 40
# Written as plain statements of fact: hosts warn that injected text phrased as
# instructions to the model can trip their prompt-injection defences.
HOW_TO_ASK = (
    'More is stored than this index shows. `dualtrace recall "<question>"` answers from it: '
    "the stored fact with the moment it was learned (STATE A), the fact only (STATE B), or "
    "\"I don't have that stored in my memory.\" (STATE C, nothing stored on the question)."
)
MCP_TOOLS = (
    "The dualtrace MCP server is connected in this session. Its recall tool gives the same "
    "labelled answers as `dualtrace recall`; search lists matching memories, show prints "
    "one memory with its moment, recent_sessions lists what recent sessions stored, and "
    "remember stores something the user asks to keep."
)
_CONFIDENCE_RANK = {"HIGH": 2, "MEDIUM": 1, "LOW": 0}


def markers() -> tuple[str, str]:
    """The markers the ingestion redactor strips (see dualtrace.markers)."""
    from dualtrace.markers import INJECT_CLOSE, INJECT_OPEN

    return INJECT_OPEN, INJECT_CLOSE


def _wrap(body: str, cap: int) -> str:
    """``body`` between our markers. Anything in it that looks like a marker (a memory
    that quotes ``</dualtrace-memory>``) is escaped first, so the block closes only where
    we close it and the redactor strips exactly this block when the text comes back."""
    from dualtrace.sanitize import escape_markers

    body = escape_markers(body)
    opening, closing = markers()
    room = max(cap - len(opening) - len(closing) - 2, 0)
    if len(body) > room:
        body = _cut(body, room)
    return f"{opening}\n{body}\n{closing}"


def _cut(text: str, limit: int) -> str:
    return recall_cut(text, limit, "\n[... truncated]")


def _cap(settings: Any, name: str, default: int) -> int:
    value = int(getattr(settings, name, default) or default)
    return max(200, min(value, HOST_CAP))


# ------------------------------------------------------------------ session start


def session_start_context(store: Any, settings: Any, *, mark_shown: bool = True,
                          mcp_tools: bool = False, user_memory: Path | None = None,
                          command: str = "dualtrace", related: bool = False) -> str:
    """Pinned system files, open conflicts, an index of decisions/incidents, how to ask
    (and, when the host has dualtrace's MCP server, that its tools are there).

    ``user_memory``: the person's own memory directory; its preferences are injected
    in every project, ahead of the project's own files. ``command``: how the agent runs
    dualtrace (the hooks' own absolute path: a bare name may not be on its PATH).
    ``related``: also recall (hybrid, with the installed embedder) the memories related
    to the last session's request and open end. The worker builds the stored text with
    it after each commit; the hook never does (numpy and the model cost it ~100 ms).
    """
    cap = _cap(settings, "session_start_chars", 6000)
    with Index.open(store.root) as index:
        bullets = _bullets(index)
        facts = [d for d in index.docs_of_type(("decision", "incident")) if d.kind == "fact"]
    conflicts = _open_conflicts(store)
    sections: list[str] = [f"# dualtrace memory for project {store.project}"]
    own = _own_preferences(user_memory, store.root)
    if own:
        shown = {b for path, (_d, items) in bullets.items() if path.endswith("human.md")
                 for b in items}
        items = [b for b in own if b not in shown]
        if items:
            sections.append("## Your preferences (from your own memory, every project)\n"
                            + "\n".join(f"- {b}" for b in items))
    for path, (description, items) in bullets.items():
        title = "Preferences" if path.endswith("human.md") else "Conventions"
        lines = [f"## {title} ({path})"]
        if description:
            lines.append(description)
        lines += [f"- {b}" for b in items]
        sections.append("\n".join(lines))
    if conflicts:
        from dualtrace.memfs.conflicts import describe

        lines = ["## Open conflicts (a new decision superseded a stored one, or a sync merge "
                 "kept two versions; the developer has not yet confirmed which holds)"]
        for item in conflicts:
            lines.append(f"- {describe(item)}")
        sections.append("\n".join(lines))
    infos = _recent_records(store)
    recent = _recent_sessions(infos)
    if recent:
        sections.append("\n".join(
            ["## Recent sessions in this project (`dualtrace show <session>` prints one)",
             *recent]))
    shown, near = _related_to_last_session(store, infos[0], settings) \
        if related and infos else (set(), [])
    if near:
        sections.append("\n".join(
            [f"## Related to the last session's request ({infos[0].date or 'undated'} "
             f"{short_id(infos[0].session)})", *near]))
        facts = [d for d in facts if d.path not in shown]
    ranked = sorted(facts, key=_usefulness, reverse=True)
    if ranked:
        lines = ["## Stored decisions and incidents (most useful first; "
                 "`dualtrace show <anchor>` prints one)"]
        for doc in ranked[:INDEX_LINES]:
            lines.append(_index_line(doc))
        sections.append("\n".join(lines))
    elif not bullets and not recent:
        sections.append("No memories are stored for this project yet.")
    note = "## Asking\n" + (MCP_TOOLS + "\n" if mcp_tools else "") + HOW_TO_ASK.replace(
        "`dualtrace recall", f"`{command} recall")
    opening, closing = markers()
    room = cap - len(opening) - len(closing) - 4 - len(note)
    body = "\n\n".join(sections)
    if len(body) > room:
        body = _cut(body, max(room, 0))
    text = _wrap(body + "\n\n" + note, cap)
    if conflicts and mark_shown:
        _mark_conflicts(store)
    return text


RECENT_SESSIONS = 3
RELATED_MEMORIES = 3


def _recent_records(store: Any) -> list[Any]:
    """The newest session records of this project (memfs.sessions.RecordInfo), of
    sessions that did something: "question, OK." sessions never push out the work."""
    try:
        from dualtrace.memfs.sessions import recent_records

        return recent_records(store.root, RECENT_SESSIONS, project=store.project)
    except Exception as exc:  # noqa: BLE001 - a notice, never a failure of the hook
        log.warning("cannot list session records: %s", exc)
        return []


def _related_to_last_session(store: Any, info: Any,
                             settings: Any) -> tuple[set[str], list[str]]:
    """(paths, lines) of the curated memories recall finds for the last session's
    request and open end: STATE A/B only, nothing when none passes the gates."""
    question = " ".join(f"{info.description} {info.open_end or ''}".split())[:4000]
    if not info.description:
        return set(), []
    try:
        result = recall(store.root, question, limit=RELATED_MEMORIES, records=False,
                        stale_days=int(getattr(settings, "stale_days", 180)))
    except Exception as exc:  # noqa: BLE001 - a bonus section, never a failure
        log.warning("related memories for the last session: %s", exc)
        return set(), []
    paths: set[str] = set()
    lines: list[str] = []
    for memory in result.memories if result.state != "C" else ():
        if memory.record is not None:
            continue
        paths.add(memory.path)
        if memory.bullet:
            lines.append(f"- [{memory.type}] {memory.bullet} ({memory.path})")
            continue
        description = " ".join(str(getattr(memory.fact, "description", "")).split())
        if len(description) > 160:
            description = description[:157] + "..."
        anchor = memory.path.rsplit("/", 1)[-1].removesuffix(".md")
        lines.append(f"- [{memory.type}] {anchor}: {description} (STATE {memory.state}, "
                     f"{memory.confidence or 'unrated'})")
    return paths, lines


def _recent_sessions(infos: list[Any]) -> list[str]:
    """One line per recent session record: date, id, what, outcome, first open end."""
    lines = []
    for info in infos:
        what = info.description or "(no request recorded)"
        if len(what) > 140:
            what = what[:137] + "..."
        outcome = info.outcome
        if info.open_end:
            # The outcome counts the open ends ("...; open end", "...; 2 open ends"): the
            # first one's words take the count's place instead of repeating the label.
            end = " ".join(info.open_end.split())
            end = end[:160] + "..." if len(end) > 160 else end
            head, _, last = outcome.rpartition("; ")
            count = _OPEN_ENDS.fullmatch(last)
            n = int(count.group(1) or 1) if count else 1
            label = "open end" if n == 1 else f"{n} open ends, the first"
            outcome = "; ".join(p for p in ((head if count else outcome), f"{label}: {end}") if p)
        lines.append(f"- {info.date or 'undated'} {short_id(info.session)}: {what} -> {outcome}")
    return lines


_OPEN_ENDS = re.compile(r"(?:(\d+) )?open ends?")


def own_preferences_context(user_memory: Path, settings: Any) -> str | None:
    """SessionStart text for a project with no memory yet: the person's own preferences."""
    own = _own_preferences(user_memory, Path("/nonexistent-project-memory"))
    if not own:
        return None
    body = ("# dualtrace memory\n\n## Your preferences (from your own memory, every project)\n"
            + "\n".join(f"- {b}" for b in own)
            + "\n\nNo memories are stored for this project yet.")
    return _wrap(body, _cap(settings, "session_start_chars", 6000))


def _own_preferences(user_memory: Path | None, project_root: Path) -> list[str]:
    """The bullets of the person's own system/human.md (one small file, no index)."""
    if user_memory is None or Path(user_memory).resolve() == Path(project_root).resolve():
        return []
    from dualtrace.errors import DualtraceError
    from dualtrace.memfs import formats
    from dualtrace.memfs.formats import SystemFile

    path = Path(user_memory) / formats.human_path()
    try:
        if path.is_symlink():
            return []  # never follow a link out of the memory directory
        memory = formats.parse(path.read_text(encoding="utf-8"), formats.human_path())
    except (OSError, ValueError, DualtraceError):
        return []
    return list(memory.bullets) if isinstance(memory, SystemFile) else []


def _bullets(index: Index) -> dict[str, tuple[str, list[str]]]:
    out: dict[str, tuple[str, list[str]]] = {}
    docs = [d for d in index.docs_of_type(("preference", "convention")) if d.kind == "bullet"]
    # human.md first: the person's own preferences are the most general context.
    docs.sort(key=lambda d: (not d.path.endswith("human.md"), d.path, d.data.get("index", 0)))
    for doc in docs:
        entry = out.setdefault(doc.path, (doc.data.get("description", ""), []))
        entry[1].append(doc.data.get("bullet", ""))
    return out


def _usefulness(doc: Doc) -> tuple[int, int, int, str]:
    data = doc.data
    current = 0 if data.get("superseded_by") else 1
    evidence = data.get("evidence_score") or 0
    confidence = _CONFIDENCE_RANK.get(data.get("confidence", ""), 0)
    return (current, int(evidence), confidence, doc.stored or "")


def _index_line(doc: Doc) -> str:
    data = doc.data
    extra = [data.get("confidence", "")]
    if data.get("status"):
        extra.append(str(data["status"]))
    if data.get("superseded_by"):
        extra.append(f"superseded by {data['superseded_by']}")
    if doc.stored:
        extra.append(doc.stored)
    description = " ".join(str(data.get("description", "")).split())
    if len(description) > 160:
        description = description[:157] + "..."
    return f"- [{doc.type}] {doc.anchor}: {description} ({', '.join(e for e in extra if e)})"


def _open_conflicts(store: Any) -> list[dict[str, Any]]:
    try:
        from dualtrace.memfs.conflicts import open_conflicts

        return open_conflicts(store)
    except Exception as exc:  # noqa: BLE001 - conflicts are a notice, never a failure
        log.warning("cannot read open conflicts: %s", exc)
        return []


def _mark_conflicts(store: Any) -> None:
    try:
        from dualtrace.memfs.conflicts import mark_shown

        mark_shown(store)
    except Exception as exc:  # noqa: BLE001
        log.warning("cannot mark conflicts shown: %s", exc)


# ------------------------------------------------------------------ per prompt


# A prompt that only says what to do ("run the tests", "continue") gets nothing: the rule
# is dualtrace.words.names_a_subject, which the prompt hook's fast path applies too.
ACTION_ONLY = words.ACTION_ONLY
names_a_subject = words.names_a_subject


def prompt_context(store: Any, prompt: str, settings: Any, *, limit: int = 3) -> str | None:
    """State A/B memories relevant to ``prompt`` within the budget, or None."""
    if not prompt or not prompt.strip() or not names_a_subject(prompt):
        return None
    opening, closing = markers()
    if opening in prompt:
        prompt = prompt.split(opening, 1)[0]
    cap = _cap(settings, "prompt_chars", 2000)
    # Lexical only (the hook's 200 ms budget has no room for numpy and a model), and a
    # session-record passage only above the stricter prompt gate.
    result = recall(store, prompt[:4000], limit=limit,
                    stale_days=int(getattr(settings, "stale_days", 180)), embedder=None,
                    record_gate=PROMPT_RECORD_GATE)
    if result.state == "C" or not result.memories:
        return None
    head = f"dualtrace recalled memories that may be relevant to this prompt {result.label}:"
    parts = [head]
    used = len(head) + len(opening) + len(closing) + 4
    for n, memory in enumerate(result.memories, 1):
        block = _memory_block(memory, n)
        if used + len(block) + 2 > cap:
            if n == 1:  # the best memory always goes in, shortened
                parts.append(_cut(block, max(cap - used - 2, 0)))
            break
        parts.append(block)
        used += len(block) + 2
    return _wrap("\n\n".join(parts), cap)


def _memory_block(memory: RecalledMemory, n: int) -> str:
    return render_memory(memory, n)
