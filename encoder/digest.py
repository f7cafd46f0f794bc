"""Condense a (redacted) session into a chronological digest under a token budget.

The digest is what an encoder backend reads instead of the raw transcript, so it is
the main cost lever: it keeps every user message, the assistant's reasoning, errors
and how they were resolved, test fail -> pass transitions, files changed, commands
and their outcomes, commits and PRs, each with its timestamp; it drops reads,
searches, listings and repeated retries first, and counts what it dropped.

Token estimate: ``ceil(chars / 4)``, the usual rule of thumb for English and code
with Claude/GPT tokenizers (it over-counts dense code slightly, which is the safe
side for a budget). No tokenizer dependency, deterministic, O(1) per string.

Deterministic: same session and budget -> byte-identical digest.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from dualtrace.encoder.backends.pricing import CHARS_PER_TOKEN, estimate_tokens
from dualtrace.encoder.cues import TEST_COMMAND, run_key
from dualtrace.encoder.session import Event, Session, truncate_middle

DEFAULT_BUDGET = 8000


# Tools whose calls only look things up: dropped as noise (still counted).
_NOISE_TOOLS = frozenset({"Read", "Grep", "Glob", "LS", "TodoWrite", "TodoRead", "WebSearch",
                          "WebFetch", "NotebookRead", "TaskOutput", "BashOutput", "ToolSearch",
                          "view_image", "update_plan", "read_file", "list_dir", "grep"})
_NOISE_CMD = re.compile(
    r"^\s*(?:cd\s+\S+\s*&&\s*)?(?:ls|ll|cat|head|tail|less|grep|rg|ag|find|fd|pwd|echo|wc|tree|"
    r"which|type|file|stat|du|df|env|printenv|sed\s+-n|nl|bd\s+(?:show|ready|list)|"
    r"git\s+(?:status|diff|log|show|branch|remote|rev-parse|ls-files|blame|stash\s+list))\b"
)
# An assistant message that explains (a cause, a fix, a choice) rather than narrates
# ("Let me check ..."): kept as long as failures and first edits are.
_EXPLAINS = re.compile(r"(?i)\b(?:because|the (?:issue|problem|bug|cause|reason|fix) (?:is|was)|root cause"
                       r"|caused by|fails? because|failing because|that'?s why|which is why|so that"
                       r"|instead of|i(?:'ve| have) (?:fixed|changed|added|updated|replaced))\b")
# "Let me check ...", "Now I'll ...": the agent narrating its next step.
_NARRATION = re.compile(r"(?i)\W*(?:let me|let's|now(?: let me| i'?ll|,)?|i'?ll|i will|i need to|first|next"
                        r"|good|great|perfect|excellent|done|ok(?:ay)?|all \d+|the (?:tests?|build) pass)\b")
_ERROR_LINE = re.compile(r"(?i)(error|exception|failed|failure|fatal|traceback|panic|"
                         r"assert|undefined|cannot|not found|denied)")

# Per-level character caps, loosened or tightened as the budget requires.
_CAPS = (
    {"user": 1500, "assistant": 700, "thinking": 300, "compaction": 2000, "result": 400,
     "subagent": 600, "command": 200, "edit": 1},
    {"user": 900, "assistant": 400, "thinking": 200, "compaction": 1200, "result": 240,
     "subagent": 360, "command": 160, "edit": 1},
    {"user": 500, "assistant": 220, "thinking": 0, "compaction": 700, "result": 160,
     "subagent": 220, "command": 120, "edit": 1},
    # the tightest level: edit lines go (the files section lists every file with its
    # count) before the agent's explanations do
    {"user": 300, "assistant": 140, "thinking": 0, "compaction": 400, "result": 120,
     "subagent": 140, "command": 100, "edit": 0},
)
# (caps index, highest priority kept): tried in order until the digest fits.
_LEVELS = ((0, 3), (0, 2), (1, 2), (2, 2), (2, 1), (3, 1), (3, 0))


@dataclass(frozen=True)
class _Item:
    ts: str | None
    priority: int  # 0 always kept ... 3 first dropped
    kind: str  # event kind (for kept/dropped stats)
    render: Any  # callable(caps) -> str
    count: int = 1  # events folded into this line
    telling: bool = False  # a failed run, or the run that passed after one (a fix's ends)


@dataclass(frozen=True)
class Digest:
    text: str
    token_estimate: int
    stats: dict[str, Any] = field(hash=False)
    session: Session = field(repr=False, compare=False, hash=False)

    @property
    def artifacts(self) -> frozenset[str]:
        """Concrete specifics present in the session (computed on first use, cached)."""
        cached = self.__dict__.get("_artifacts")
        if cached is None:
            cached = extract_artifacts(self.session)
            object.__setattr__(self, "_artifacts", cached)
        return cached


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _short(text: str | None, cap: int) -> str:
    if not text or cap <= 0:
        return ""
    flat = _one_line(text)
    if len(flat) <= cap:
        return flat
    return truncate_middle(flat, cap).replace("\n", " ")


def _error_excerpt(result: str | None, cap: int) -> str:
    """The lines of a failure that say what failed (tail-biased: errors come last)."""
    if not result or cap <= 0:
        return ""
    lines = [ln.strip() for ln in result.splitlines() if ln.strip()]
    hits = [ln for ln in lines if _ERROR_LINE.search(ln)]
    picked = (hits[:2] + hits[-2:]) if len(hits) > 4 else hits
    text = " | ".join(dict.fromkeys(picked)) if picked else " | ".join(lines[-3:])
    return _short(text, cap)


class _Relativizer:
    """Paths under the session cwd are shown relative: shorter and still unambiguous."""

    def __init__(self, cwd: str | None) -> None:
        self.prefix = cwd.rstrip("/") + "/" if cwd and len(cwd) > 1 else None

    def __call__(self, text: str | None) -> str:
        if not text:
            return ""
        return text.replace(self.prefix, "") if self.prefix else text


def _hhmm(ts: str | None) -> str:
    return ts[11:16] if ts and len(ts) >= 16 and ts[10] in "T " else "--:--"


def _turn_finals(events: Sequence[Event]) -> set[int]:
    """The agent's last word before the user speaks again: what it reports it did."""
    turn_final: set[int] = set()
    pending: int | None = None
    for i, e in enumerate(events):
        if e.agent is not None:
            continue
        if e.kind == "assistant" and e.detail != "thinking":
            pending = i
        elif e.kind == "user" and pending is not None:
            turn_final.add(pending)
            pending = None
    return turn_final


class _Items:
    """The digest's items, one event at a time.

    A handler returns True to keep the fold state (the previous edit and command), so
    that a repeat right after it folds into it; otherwise the state is reset.
    """

    def __init__(self, session: Session, stats: dict[str, Any]) -> None:
        self.rel = _Relativizer(session.cwd)
        self.stats = stats
        self.items: list[_Item] = []
        self.noise: Counter[str] = Counter()
        self.files: dict[str, list[str]] = {}
        self.commits: list[str] = []
        self.failing: dict[str, str] = {}  # command key -> first failing hh:mm
        self.seen_paths: set[str] = set()
        self.prev_edit: tuple[str, int] | None = None  # (path, item index) to fold repeats
        self.prev_cmd: tuple[str, bool, int] | None = None
        events = session.events
        self.last_assistant = max((i for i, e in enumerate(events)
                                   if e.kind == "assistant" and e.detail != "thinking"), default=-1)
        self.turn_final = _turn_finals(events)

    def add(self, i: int, e: Event) -> None:
        sub = f"[{e.agent}] " if e.agent and e.kind != "subagent" else ""
        handler = _ITEM_HANDLERS.get(e.kind)
        if handler is None or not handler(self, i, e, sub):
            self.prev_edit = None
            self.prev_cmd = None

    def file_lines(self) -> list[str]:
        out = []
        for path, kinds in self.files.items():
            counts = Counter(kinds)
            desc = ", ".join(f"{k}" + (f" x{n}" if n > 1 else "") for k, n in counts.items())
            out.append(f"{path} ({desc})")
        return out

    def _fold_into_last(self) -> None:
        old = self.items[-1]
        self.items[-1] = replace(old, count=old.count + 1)
        self.stats["folded"] += 1

    def _user(self, i: int, e: Event, sub: str) -> bool:
        rel = self.rel
        self.items.append(_Item(e.ts, 0, "user", lambda c, e=e, s=sub: f"{s}USER: "
                                f"{_short(rel(e.text), c['user'])}"))
        return False

    def _assistant(self, i: int, e: Event, sub: str) -> bool:
        rel = self.rel
        thinking = e.detail == "thinking"
        explains = not thinking and e.agent is None and (
            i in self.turn_final or bool(_EXPLAINS.search(e.text[:2000]))
            or (len(e.text) >= 120 and not _NARRATION.match(e.text)))
        prio = 1 if i == self.last_assistant or explains else (3 if thinking else 2)
        label = "THINKING" if thinking else "ASSISTANT"
        cap = "thinking" if thinking else "assistant"
        self.items.append(_Item(e.ts, prio, "assistant", lambda c, e=e, s=sub, lab=label, k=cap:
                                f"{s}{lab}: {_short(rel(e.text), c[k])}"
                                if c[k] else ""))
        return False

    def _compaction(self, i: int, e: Event, sub: str) -> bool:
        rel = self.rel
        self.items.append(_Item(e.ts, 1, "compaction", lambda c, e=e: "COMPACTED (summary of "
                                f"earlier context): {_short(rel(e.text), c['compaction'])}"))
        return False

    def _commit(self, i: int, e: Event, sub: str) -> bool:
        ref = f" {e.detail}" if e.detail else ""
        line = f"{e.text or 'commit'}{ref}".strip()
        self.commits.append(f"{_hhmm(e.ts)} {line}")
        self.items.append(_Item(e.ts, 0, "commit", lambda c, s=sub, ln=line: f"{s}COMMIT: {ln}"))
        return False

    def _error(self, i: int, e: Event, sub: str) -> bool:
        self.items.append(_Item(e.ts, 1, "error", lambda c, e=e, s=sub:
                                f"{s}ERROR: {_short(e.text, c['result'])}"))
        return False

    def _edit(self, i: int, e: Event, sub: str) -> bool:
        path = self.rel(e.path) or "?"
        items = self.items
        if e.is_error:
            items.append(_Item(e.ts, 3, "edit", lambda c, p=path, e=e, s=sub:
                               f"{s}EDIT FAILED {p}: {_error_excerpt(e.result, c['result'])}"))
            return True
        self.files.setdefault(path, []).append(e.edit_kind or "modify")
        if self.prev_edit and self.prev_edit[0] == path and items \
                and self.prev_edit[1] == len(items) - 1:
            self._fold_into_last()
            return True
        # The files section lists every file with its edit count: a later edit of a
        # file already shown says little and goes before the agent's explanations.
        items.append(_Item(e.ts, 3 if path in self.seen_paths else 1, "edit",
                           lambda c, p=path, e=e, s=sub: f"{s}EDIT {p} ({e.edit_kind or 'modify'})"
                           if c["edit"] else ""))
        self.seen_paths.add(path)
        self.prev_edit = (path, len(items) - 1)
        return True

    def _command(self, i: int, e: Event, sub: str) -> bool:
        cmd = self.rel(e.command) or e.text
        failed = e.failed
        is_test = bool(TEST_COMMAND.search(cmd))
        key = run_key(cmd)
        if not failed and not is_test and _NOISE_CMD.match(cmd):
            self.noise["command"] += 1
            return True
        if self.prev_cmd and self.prev_cmd[0] == cmd and self.prev_cmd[1] == failed and \
                self.prev_cmd[2] == len(self.items) - 1:
            self._fold_into_last()  # a retry with the same outcome
            return True
        if failed:
            self.failing.setdefault(key, _hhmm(e.ts))
            label = "TEST FAIL" if is_test else f"FAILED (exit {e.exit_code})"
            self.items.append(_Item(e.ts, 1, "command", lambda c, cmd=cmd, e=e, s=sub, lab=label:
                                    f"{s}{lab}: $ {_short(cmd, c['command'])} -> "
                                    f"{_error_excerpt(e.result, c['result'])}", telling=True))
        else:
            before = self.failing.pop(key, None)
            if before is not None:
                label = "TEST PASS" if is_test else "OK"
                note = f" (failed at {before}, now passes)"
                prio = 1
            else:
                label, note = ("TEST PASS" if is_test else "RAN"), ""
                prio = 1 if is_test else 2
            self.items.append(_Item(e.ts, prio, "command", lambda c, cmd=cmd, s=sub, lab=label,
                                    n=note: f"{s}{lab}: $ {_short(cmd, c['command'])}{n}",
                                    telling=before is not None))
        self.prev_cmd = (cmd, failed, len(self.items) - 1)
        self.prev_edit = None
        return True

    def _subagent(self, i: int, e: Event, sub: str) -> bool:
        rel = self.rel
        self.items.append(_Item(e.ts, 1, "subagent", lambda c, e=e: (
            f"SUBAGENT{' ' + e.detail.splitlines()[0] if e.detail and ' tool calls' not in e.detail.splitlines()[0] else ''}"
            f": {_short(rel(e.text), c['subagent'] // 3)} -> "
            f"{_short(rel(_subagent_result(e)), c['subagent'])}")))
        return False

    def _tool(self, i: int, e: Event, sub: str) -> bool:
        rel = self.rel
        name = e.tool or "tool"
        if e.is_error:
            self.items.append(_Item(e.ts, 2, "tool", lambda c, e=e, n=name, s=sub:
                                    f"{s}TOOL FAILED {n} {_short(rel(e.text), c['command'])}: "
                                    f"{_error_excerpt(e.result, c['result'])}"))
        elif name in _NOISE_TOOLS:
            self.noise["tool"] += 1
            return True
        elif name == "AskUserQuestion":
            self.items.append(_Item(e.ts, 0, "tool", lambda c, e=e, s=sub:
                                    f"{s}ASKED USER -> {_short(rel(e.result), c['user'])}"))
        else:
            self.items.append(_Item(e.ts, 3, "tool", lambda c, e=e, n=name, s=sub:
                                    f"{s}TOOL {n}: {_short(rel(e.text), c['command'])}"))
        return False


# Event kind -> its handler; any other kind adds nothing.
_ITEM_HANDLERS = {"user": _Items._user, "assistant": _Items._assistant,
                  "compaction": _Items._compaction, "commit": _Items._commit,
                  "error": _Items._error, "edit": _Items._edit, "command": _Items._command,
                  "subagent": _Items._subagent, "tool": _Items._tool}


def _items(session: Session, stats: dict[str, Any]) -> tuple[list[_Item], list[str], list[str]]:
    collected = _Items(session, stats)
    for i, e in enumerate(session.events):
        collected.add(i, e)
    stats["noise_dropped"] = dict(collected.noise)
    return collected.items, collected.file_lines(), collected.commits


def _subagent_result(e: Event) -> str:
    if e.detail and "\nresult: " in e.detail:
        return e.detail.split("\nresult: ", 1)[1]
    head = e.detail.splitlines()[0] if e.detail else ""
    return (e.result or "") if not head else f"{head}; {e.result or ''}"


def _timeline(items: list[_Item], caps: dict[str, int], max_prio: int,
              admitted: frozenset[int] = frozenset(),
              shown: list[tuple[str, str, int]] | None = None
              ) -> tuple[list[str], Counter[str], Counter[str]]:
    """The timeline's lines and the events kept and dropped by kind; ``shown`` (when
    given) receives each kept line with its kind and count."""
    lines: list[str] = []
    kept: Counter[str] = Counter()
    dropped: Counter[str] = Counter()
    day = None
    for n, it in enumerate(items):
        if it.priority > max_prio and n not in admitted:
            dropped[it.kind] += it.count
            continue
        body = it.render(caps)
        if not body:
            dropped[it.kind] += it.count
            continue
        if it.ts and len(it.ts) >= 10 and it.ts[:10] != day:
            day = it.ts[:10]
            lines.append(f"### {day}")
        times = f" (x{it.count})" if it.count > 1 else ""
        lines.append(f"[{_hhmm(it.ts)}] {body}{times}")
        kept[it.kind] += it.count
        if shown is not None:
            shown.append((lines[-1], it.kind, it.count))
    return lines, kept, dropped


# Which items of a tier come back first when only part of it fits: what the agent
# explained or concluded, then failures and checks, then the rest; the latest first.
_FILL_RANK = {"assistant": 0, "compaction": 0, "subagent": 1, "error": 1, "command": 1,
              "commit": 1, "edit": 2, "tool": 3}


# The latest failed runs and the runs that passed after one come back before the agent's
# words: a gate that cites "error -> fix -> pass" must find them (review 10: at budget
# 1,500 all 8 failed commands of a session went, its explanations stayed).
_FILL_ARC = 4


def _fill(items: list[_Item], caps: dict[str, int], prio: int, room: int) -> list[int]:
    """Indices of ``prio`` items that fit in ``room`` estimated tokens, most telling first
    (the list is in that order: the caller trims from its end)."""
    ranked = sorted((n for n, it in enumerate(items) if it.priority == prio),
                    key=lambda n: (_FILL_RANK.get(items[n].kind, 3), -n))
    arc = [n for n in ranked if items[n].telling][:_FILL_ARC]
    ranked = arc + [n for n in ranked if n not in set(arc)]
    out: list[int] = []
    for n in ranked:
        cost = estimate_tokens(items[n].render(caps)) + 4  # its time stamp, a day line
        if cost <= room:
            out.append(n)
            room -= cost
    return out


def build_digest(session: Session, budget: int = DEFAULT_BUDGET) -> Digest:
    """The digest of ``session`` (redact it first) within ``budget`` estimated tokens."""
    from dualtrace.prompts import render

    budget = max(int(budget), 200)
    stats: dict[str, Any] = {"folded": 0}
    items, files, commits = _items(session, stats)
    head = {
        "session_id": session.session_id or "?", "host": session.host,
        "branch": session.git_branch or "?", "cwd": session.cwd or "?",
        "started": session.started or "?", "ended": session.ended or "?",
    }

    shown: list[tuple[str, str, int]] = []

    def compose(caps_i: int, max_prio: int, admitted: frozenset[int] = frozenset()
                ) -> tuple[str, Counter[str], Counter[str]]:
        shown.clear()
        lines, kept, dropped = _timeline(items, _CAPS[caps_i], max_prio, admitted, shown)
        shown_files = files if caps_i < 2 else files[:40]
        return (render("digest.j2", **head, files=shown_files, commits=commits, lines=lines,
                       dropped=_dropped_note(stats["noise_dropped"], dropped)), kept, dropped)

    text = ""
    level = 0
    kept: Counter[str] = Counter()
    dropped: Counter[str] = Counter()
    for level, (caps_i, max_prio) in enumerate(_LEVELS):  # noqa: B007 (reported below)
        text, kept, dropped = compose(caps_i, max_prio)
        if estimate_tokens(text) <= budget:
            prev = _LEVELS[level - 1] if level else None
            if prev is not None and prev[0] == caps_i and prev[1] > max_prio:
                # A whole tier went for budget: as many of its items as still fit come
                # back, the agent's explanations first (a 1 MB session at 2,000 tokens
                # kept only its 6 requests, in ~335 tokens).
                order = _fill(items, _CAPS[caps_i], max_prio + 1, budget - estimate_tokens(text))
                while order:
                    filled = compose(caps_i, max_prio, frozenset(order))
                    if estimate_tokens(filled[0]) <= budget:
                        text, kept, dropped = filled
                        stats["filled"] = len(order)
                        break
                    order = order[:len(order) - max(1, len(order) // 8)]
            break
    else:
        # Even the tightest level is over budget: keep the head and the tail.
        text = truncate_middle(text, budget * CHARS_PER_TOKEN)
        stats["hard_truncated"] = True
        # What the cut took is dropped, not kept (review 10: the stats counted it kept).
        for line, kind, count in shown:
            if line not in text:
                kept[kind] -= count
                dropped[kind] += count
        kept = +kept
    raw_tokens = (session.raw_bytes + CHARS_PER_TOKEN - 1) // CHARS_PER_TOKEN
    digest_tokens = estimate_tokens(text)
    stats.update({
        "raw_bytes": session.raw_bytes,
        "raw_tokens": raw_tokens,
        "digest_tokens": digest_tokens,
        "budget": budget,
        "compression": round(raw_tokens / digest_tokens, 1) if digest_tokens else None,
        "level": level,
        "events": len(session.events),
        "events_by_kind": dict(Counter(e.kind for e in session.events)),
        "kept_by_kind": dict(kept),
        "dropped_by_kind": dict(dropped),
        "files_changed": len(files),
        "commits": len(commits),
        "skipped_lines": session.skipped_lines,
        "noise_records": dict(session.noise),
    })
    return Digest(text=text, token_estimate=digest_tokens, stats=stats, session=session)


def _dropped_note(noise: dict[str, int], dropped: Counter[str]) -> str:
    parts = [f"{n} lookup {k}s (reads/searches/listings)" for k, n in sorted(noise.items()) if n]
    if dropped:
        parts.append("for budget: " + ", ".join(f"{n} {k}" for k, n in sorted(dropped.items())))
    return "; ".join(parts)


# --- artifacts: concrete specifics a later validator checks moments against ------

_A_PATH = re.compile(r"(?:~|\.{1,2})?/?(?:[\w.@\-]+/)+[\w.@\-]+|\b[\w\-]+\.(?:py|pyi|js|jsx|ts|tsx|"
                     r"ex|exs|heex|rb|go|rs|java|kt|c|h|cc|cpp|hpp|cs|php|swift|md|json|ya?ml|"
                     r"toml|ini|cfg|sql|sh|html|css|scss|vue|svelte|lock|txt|env|j2)\b")
_A_IDENT = re.compile(r"`([^`\n]{2,80})`|\b([A-Z][a-z0-9]+(?:[A-Z][A-Za-z0-9]*)+)\b|"
                      r"\b([a-z][a-z0-9]*(?:_[a-z0-9]+)+)\b|\b([A-Za-z_][\w]*(?:\.[A-Za-z_]\w*)+)"
                      r"|\b([A-Za-z_]\w{2,})\(")
# Proper nouns and acronyms (Datadog, Redis, JSON, HTTP): products and services are
# exactly the specifics a model likes to invent. Sentence-initial function words are
# not specifics, so a small stoplist keeps them out.
_A_NAME = re.compile(r"\b[A-Z][A-Za-z0-9]{2,}\b")
_A_STOP = frozenset("""the this that then there these they their when what why how let now but and
for yes not also all any are was were will with from into our your its it's here have has had
can could should would may might must just only some such than very well good great perfect
done okay sure please thanks thank first next finally note see check found added updated
created removed fixed using use run running looks look let's i'll i'm we're we'll you're
""".split())
_A_SHA = re.compile(r"\b(?=[0-9a-f]*[a-f])(?=[0-9a-f]*[0-9])[0-9a-f]{7,40}\b")
_A_PR = re.compile(r"(?:PR\s*)?#\d+\b|/pull/\d+")
_A_DATE = re.compile(r"\b\d{4}-\d{2}-\d{2}\b")
_A_NUM = re.compile(r"(?<![\w.])\d+(?:\.\d+)*%?(?![\w.])")
_A_ERR = re.compile(r"^.*(?:[A-Z]\w*(?:Error|Exception)|error:|Error:|FAILED|failed).*$", re.M)


_ERR_CUES = ("Error", "Exception", "error:", "FAILED", "failed")


def extract_artifacts(session: Session) -> frozenset[str]:
    """File paths, identifiers, error messages, commands, numbers, SHAs, PR refs, dates."""
    found: set[str] = set()
    seen_values: set[int] = set()
    for e in session.events:
        if e.path:
            found.add(e.path)
            if session.cwd and e.path.startswith(session.cwd.rstrip("/") + "/"):
                found.add(e.path[len(session.cwd.rstrip("/")) + 1:])
        if e.command:
            found.add(e.command.strip().splitlines()[0][:300] if e.command.strip() else "")
        if e.kind == "commit" and e.detail:
            found.add(e.detail)
        for value in (e.text, e.command, e.result, e.detail):
            if not value:
                continue
            key = hash(value)
            if key in seen_values:  # repeated outputs (retries, re-reads) add nothing new
                continue
            seen_values.add(key)
            found.update(m.group(0) for m in _A_PATH.finditer(value))
            for m in _A_IDENT.finditer(value):
                found.add(next(g for g in m.groups() if g))
            found.update(w for w in _A_NAME.findall(value) if w.lower() not in _A_STOP)
            found.update(_A_SHA.findall(value))
            found.update(_A_PR.findall(value))
            found.update(_A_DATE.findall(value))
            found.update(_A_NUM.findall(value))
            if any(cue in value for cue in _ERR_CUES):  # the line regex is the slow one
                found.update(m.group(0).strip()[:200] for m in _A_ERR.finditer(value))
    for value in (session.git_branch, session.session_id, session.date):
        if value:
            found.add(value)
    found.discard("")
    return frozenset(found)
