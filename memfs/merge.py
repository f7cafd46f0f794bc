"""Structural three-way merge of memory files: the logic behind ``dualtrace merge-file``.

Two people's sessions update the same incident on two machines; git sees two edits
of one markdown file, and a line merge would leave ``<<<<<<<`` markers in a memory.
This module merges what the files *mean*, using the memfs parsers:

- fact frontmatter: ``sessions`` and ``related`` as unions, ``confidence`` the higher,
  ``stored`` the earlier, ``updated`` the later, ``tier``/``evidence_score`` the higher;
  any other field (``description``, ``status``, ``superseded_by``...) takes a one-sided
  change, and is a *conflict* when both sides changed it differently;
- bodies (fact bodies, moment narratives, anything else): paragraphs as a union, in
  order, no duplicates; paragraphs both sides appended at one place go by date;
- moments: Timeline entries as a union ordered by date; Prior/After keep both sides' lines;
- system files (preferences, conventions): bullets as a union (equivalent bullets once).

What cannot be merged is never dropped: the file keeps this side's value, and a
section headed ``## Merge conflict ...`` states both (or holds the other side's whole
file, quoted, when that side could not be parsed). The caller records an open
conflict for the next session start. A result never contains a conflict marker.

Pure functions over text: no git, no files, no clock (the date is passed in).
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, fields, replace
from typing import Any, TypeVar

from dualtrace.errors import FormatError
from dualtrace.memfs import formats
from dualtrace.memfs.formats import CONFIDENCE, Fact, Memory, Moment, SystemFile

T = TypeVar("T")

CONFLICT_TITLE = "Merge conflict"
_TIER_RANK = {"SKIP": 0, "RECORD": 1, "FULL": 2}
_DATE = re.compile(r"\d{4}-\d{2}-\d{2}")
_PARA_SPLIT = re.compile(r"\n[ \t]*\n")


class _NoBase:
    """No common ancestor (both sides added the file)."""

    def __repr__(self) -> str:  # pragma: no cover - debugging aid
        return "NOBASE"


NOBASE = _NoBase()


@dataclass(frozen=True)
class MergeResult:
    text: str
    # One human line per thing that could not be merged; empty when the merge was clean.
    conflicts: tuple[str, ...] = ()

    @property
    def clean(self) -> bool:
        return not self.conflicts


def conflict_heading(date: str) -> str:
    return f"## {CONFLICT_TITLE} {date} (dualtrace kept both versions)"


def is_memory_path(path: str) -> bool:
    """Paths whose format memfs knows: system/, scenes/ and the fact folders."""
    top = path.split("/", 1)[0]
    return path.endswith(".md") and "/" in path and (
        top in ("system", "scenes") or formats.canonical_folder(top) is not None)


def has_conflict_markers(text: str) -> bool:
    return any(line.startswith(("<<<<<<< ", ">>>>>>> ")) or line == "=======" or
               line.startswith("<<<<<<<") or line.startswith(">>>>>>>")
               for line in text.splitlines())


# ------------------------------------------------------------------ entry point


def merge_text(base: str | None, ours: str, theirs: str, path: str, *, date: str) -> MergeResult:
    """Merge two versions of the file at ``path`` (``base``: their common ancestor, if any)."""
    if ours == theirs:
        return MergeResult(ours)
    if base is not None and base == ours:
        return MergeResult(theirs)
    if base is not None and base == theirs:
        return MergeResult(ours)
    if is_memory_path(path):
        return _merge_memory(base, ours, theirs, path, date)
    if path.endswith(".md"):
        return _merge_frontmatter_doc(base, ours, theirs, path, date)
    return MergeResult(_join_lines(union(_lines(ours), _lines(theirs), key=_line_key)))


def _merge_memory(base: str | None, ours: str, theirs: str, path: str, date: str) -> MergeResult:
    mine = _try_parse(ours, path)
    other = _try_parse(theirs, path)
    old = _try_parse(base, path) if base is not None else None
    if isinstance(mine, FormatError) or isinstance(other, FormatError):
        return _raw_fallback(ours, theirs, path, date, mine, other)
    conflicts: list[tuple[str, str, str]] = []
    merged: Memory
    if isinstance(mine, Fact) and isinstance(other, Fact):
        merged = _merge_fact(old if isinstance(old, Fact) else NOBASE, mine, other, conflicts)
    elif isinstance(mine, Moment) and isinstance(other, Moment):
        merged = _merge_moment(old if isinstance(old, Moment) else NOBASE, mine, other, conflicts)
    elif isinstance(mine, SystemFile) and isinstance(other, SystemFile):
        merged = _merge_system(old if isinstance(old, SystemFile) else NOBASE, mine, other,
                               conflicts)
    else:  # pragma: no cover - parse() picks the kind by path, so both sides agree
        return _raw_fallback(ours, theirs, path, date, mine, other)
    lines = tuple(f"{name}: this side {a!r}, other side {b!r}" for name, a, b in conflicts)
    if lines:
        merged = _with_section(merged, _field_section(date, conflicts))
    text = formats.render_memory(merged)
    try:
        formats.parse(text, path)
    except FormatError as exc:  # never expected; keep both files rather than a broken one
        return _raw_fallback(ours, theirs, path, date, mine, exc)
    return MergeResult(text, lines)


def _try_parse(text: str | None, path: str) -> Memory | FormatError:
    try:
        return formats.parse(text or "", path)
    except FormatError as exc:
        return exc


# ------------------------------------------------------------------ fields


def _empty(value: object) -> bool:
    return value is None or value == "" or value == ()


def pick(name: str, base: object, ours: T, theirs: T,
         conflicts: list[tuple[str, str, str]]) -> T:
    """Three-way choice for one value: a one-sided change wins; two different changes conflict."""
    if ours == theirs:
        return ours
    if base is NOBASE:
        if _empty(ours):
            return theirs
        if _empty(theirs):
            return ours
    elif base == ours:
        return theirs
    elif base == theirs:
        return ours
    conflicts.append((name, _show(ours), _show(theirs)))
    return ours


def _show(value: object) -> str:
    if value is None:
        return "(none)"
    if isinstance(value, tuple):
        return ", ".join(str(v) for v in value)
    return str(value)


def _base_attr(base: object, name: str) -> object:
    return NOBASE if base is NOBASE else getattr(base, name)


def _higher_confidence(a: str, b: str) -> str:
    return max(a, b, key=lambda c: CONFIDENCE.index(c) if c in CONFIDENCE else -1)


def _earlier(a: str, b: str) -> str:
    dates = [d for d in (a, b) if d]
    return min(dates) if dates else a


def _later(a: str | None, b: str | None) -> str | None:
    dates = [d for d in (a, b) if d]
    return max(dates) if dates else a


def _max_opt(a: int | None, b: int | None) -> int | None:
    values = [v for v in (a, b) if v is not None]
    return max(values) if values else None


def _higher_tier(a: str | None, b: str | None) -> str | None:
    if a is None or b is None:
        return a or b
    return max(a, b, key=lambda t: _TIER_RANK.get(t.upper(), -1))


def _merge_extra(base: object, ours: tuple[str, ...], theirs: tuple[str, ...],
                 conflicts: list[tuple[str, str, str]]) -> tuple[str, ...]:
    """Unknown frontmatter keys (kept verbatim): per key, a three-way choice."""

    def by_key(raw: tuple[str, ...]) -> dict[str, str]:
        return {r.split(":", 1)[0].strip(): r for r in raw}

    mine, other = by_key(ours), by_key(theirs)
    old = by_key(base) if isinstance(base, tuple) else None
    out: list[str] = []
    for key in list(mine) + [k for k in other if k not in mine]:
        a_list, b_list = _flow_list(mine.get(key)), _flow_list(other.get(key))
        if a_list is not None and b_list is not None and a_list != b_list:
            out.append(f"{key}: [{', '.join(union(a_list, b_list))}]")
            continue
        b: object = NOBASE if old is None else old.get(key)
        value = pick(key, b, mine.get(key), other.get(key), conflicts)
        if value is not None:
            out.append(value)
    return tuple(out)


def _generic_fields(base: object, ours: Memory, theirs: Memory, named: tuple[str, ...],
                    conflicts: list[tuple[str, str, str]]) -> dict[str, Any]:
    """Every field a merge below does not name: tuples as unions, the rest three-way.

    So a field added to a format later is merged, never silently taken from one side.
    """
    out: dict[str, object] = {}
    for f in fields(ours):
        if f.name in ("path", "extra_raw") or f.name in named:
            continue
        a, b = getattr(ours, f.name), getattr(theirs, f.name)
        if isinstance(a, tuple) and isinstance(b, tuple):
            out[f.name] = tuple(union(list(a), list(b)))
        else:
            out[f.name] = pick(f.name, _base_attr(base, f.name), a, b, conflicts)
    return out


def _merge_fact(base: Fact | _NoBase, ours: Fact, theirs: Fact,
                conflicts: list[tuple[str, str, str]]) -> Fact:
    named = ("body", "confidence", "stored", "evidence_score", "linked_scene", "schema",
             "scores", "tier", "updated")
    generic = _generic_fields(base, ours, theirs, named, conflicts)
    scores = ours.scores
    if ours.scores != theirs.scores:
        b_scores = _base_attr(base, "scores")
        if b_scores == ours.scores or ours.scores is None:
            scores = theirs.scores
        elif b_scores != theirs.scores and theirs.scores is not None:
            # Both re-scored: derived numbers, not worth a conflict; the stronger evidence.
            scores = max(ours.scores, theirs.scores, key=lambda s: s.total)
    linked = ours.linked_scene or theirs.linked_scene
    if ours.linked_scene and theirs.linked_scene:
        linked = _opt(pick("linked_scene", _base_attr(base, "linked_scene"), ours.linked_scene,
                           theirs.linked_scene, conflicts))
    return replace(
        ours,
        **generic,
        body=_merge_paragraphs(ours.body, theirs.body),
        confidence=_higher_confidence(ours.confidence, theirs.confidence),
        stored=_earlier(ours.stored, theirs.stored),
        evidence_score=_max_opt(ours.evidence_score, theirs.evidence_score),
        linked_scene=linked,
        schema=_max_opt(ours.schema, theirs.schema),
        scores=scores,
        tier=_higher_tier(ours.tier, theirs.tier),
        updated=_later(ours.updated, theirs.updated),
        extra_raw=_merge_extra(_base_attr(base, "extra_raw"), ours.extra_raw, theirs.extra_raw,
                               conflicts),
    )


def _opt(value: object) -> str | None:
    return None if value is None else str(value)


def _merge_moment(base: Moment | _NoBase, ours: Moment, theirs: Moment,
                  conflicts: list[tuple[str, str, str]]) -> Moment:
    named = ("narrative", "timeline", "prior", "after", "confidence", "stored", "schema",
             "updated")
    generic = _generic_fields(base, ours, theirs, named, conflicts)
    return replace(
        ours,
        **generic,
        narrative=_merge_paragraphs(ours.narrative, theirs.narrative),
        timeline=merge_timeline(ours.timeline, theirs.timeline),
        prior=_join_lines(union(_lines(ours.prior), _lines(theirs.prior), key=_line_key)),
        after=_join_lines(union(_lines(ours.after), _lines(theirs.after), key=_line_key)),
        confidence=_higher_confidence(ours.confidence, theirs.confidence),
        stored=_earlier(ours.stored, theirs.stored),
        schema=_max_opt(ours.schema, theirs.schema),
        updated=_later(ours.updated, theirs.updated),
        extra_raw=_merge_extra(_base_attr(base, "extra_raw"), ours.extra_raw, theirs.extra_raw,
                               conflicts),
    )


def _merge_system(base: SystemFile | _NoBase, ours: SystemFile, theirs: SystemFile,
                  conflicts: list[tuple[str, str, str]]) -> SystemFile:
    generic = _generic_fields(base, ours, theirs, ("body",), conflicts)
    return replace(
        ours,
        **generic,
        body=_join_lines(union(_lines(ours.body), _lines(theirs.body), key=_bullet_line_key)),
        extra_raw=_merge_extra(_base_attr(base, "extra_raw"), ours.extra_raw, theirs.extra_raw,
                               conflicts),
    )


# ------------------------------------------------------------------ sequences


def union(ours: Sequence[T], theirs: Sequence[T], key: Callable[[T], str] = str,
          order: Callable[[list[T]], list[T]] | None = None) -> list[T]:
    """Every item of both sides once, in order: ours' order, theirs' items where they sit.

    Items whose key is "" (blank lines) are never deduplicated. Where the sides differ
    at one place, ours' items come first, then theirs', unless ``order`` sorts them.
    """
    ok = [key(x) for x in ours]
    tk = [key(x) for x in theirs]
    out: list[T] = []
    seen: set[str] = set()

    def emit(items: Sequence[T]) -> None:
        for item in items:
            k = key(item)
            if k and k in seen:
                continue
            seen.add(k)
            out.append(item)

    matcher = difflib.SequenceMatcher(None, ok, tk, autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            emit(ours[i1:i2])
        else:
            block = list(ours[i1:i2]) + list(theirs[j1:j2])
            emit(order(block) if order else block)
    return out


def _first_date(text: str) -> str | None:
    match = _DATE.search(text)
    return match.group(0) if match else None


def _by_date_if_all_dated(block: list[str]) -> list[str]:
    """Paragraphs both sides appended at one place (``**Update <date>...``) go by date."""
    dates = [_first_date(p[:80]) for p in block]
    if len(block) < 2 or any(d is None for d in dates):
        return block
    return [p for _, p in sorted(zip(dates, block, strict=True), key=lambda pair: pair[0] or "")]


def _paragraphs(text: str) -> list[str]:
    text = text.strip("\n")
    if not text.strip():
        return []
    return [p.rstrip() for p in _PARA_SPLIT.split(text) if p.strip()]


def _para_key(paragraph: str) -> str:
    return " ".join(paragraph.split())


def _merge_paragraphs(ours: str, theirs: str) -> str:
    paras = union(_paragraphs(ours), _paragraphs(theirs), key=_para_key,
                  order=_by_date_if_all_dated)
    return "\n\n".join(paras)


def merge_timeline(ours: Sequence[str], theirs: Sequence[str]) -> tuple[str, ...]:
    """Both sides' entries once, ordered by the date in each (undated ones stay after
    the entry they followed)."""
    merged = union(list(ours), list(theirs), key=_para_key)
    keyed: list[tuple[str, int, str]] = []
    last = ""
    for i, entry in enumerate(merged):
        last = _first_date(entry) or last
        keyed.append((last, i, entry))
    return tuple(entry for _, _, entry in sorted(keyed))


def _lines(text: str) -> list[str]:
    return text.strip("\n").split("\n") if text.strip() else []


def _line_key(line: str) -> str:
    return " ".join(line.split())


def _bullet_line_key(line: str) -> str:
    stripped = line.strip()
    if stripped.startswith(("- ", "* ")):
        return "bullet:" + (re.sub(r"[^a-z0-9]+", " ", stripped[2:].lower()).strip()
                            or stripped)
    return _line_key(line)


def _join_lines(lines: list[str]) -> str:
    out: list[str] = []
    for line in lines:
        if not line.strip() and (not out or not out[-1].strip()):
            continue  # no doubled or leading blank lines
        out.append(line)
    while out and not out[-1].strip():
        out.pop()
    return "\n".join(out)


# ------------------------------------------------------------------ conflicts


def _field_section(date: str, conflicts: list[tuple[str, str, str]]) -> list[str]:
    paras = [conflict_heading(date),
             "Both sides changed these fields differently. The frontmatter keeps this "
             "side's value; settle it by editing the file, then delete this section."]
    for name, a, b in conflicts:
        paras.append(f"{name}: this side: {a}\n{name}: other side: {b}")
    return paras


def _with_section(memory: Memory, paras: list[str]) -> Memory:
    if isinstance(memory, Moment):
        return replace(memory, narrative=_merge_paragraphs(memory.narrative, "\n\n".join(paras)))
    return replace(memory, body=_merge_paragraphs(memory.body, "\n\n".join(paras)))


def _quoted(text: str) -> str:
    """The other version as a blockquote: its lines can no longer read as frontmatter,
    bullets, Timeline/Prior/After lines or a [MOMENT:] tag when the file is parsed."""
    return "\n".join(f"> {line}" if line.strip() else ">" for line in text.strip("\n").split("\n"))


def _raw_fallback(ours: str, theirs: str, path: str, date: str,
                  mine: Memory | FormatError, other: Memory | FormatError) -> MergeResult:
    """One side could not be parsed: keep the readable side as the file, the other
    side's whole text quoted under the conflict heading."""
    keep: Memory | FormatError
    why: FormatError | None
    if isinstance(mine, FormatError) and not isinstance(other, FormatError):
        keep, keep_text, kept_text, why = other, theirs, ours, mine
        side = "this side"
    else:
        keep, keep_text, kept_text = mine, ours, theirs
        why = other if isinstance(other, FormatError) else None
        side = "the other side"
    reason = f" ({why.args[0] if why.args else why})" if why is not None else ""
    paras = [conflict_heading(date),
             f"The version from {side} could not be merged{reason}; it is kept below "
             "as it was. Settle it by editing the file, then delete this section.",
             _quoted(kept_text)]
    line = f"{path}: the version from {side} could not be parsed{reason}; both kept"
    if isinstance(keep, FormatError):
        # Neither side parses: a plain union of the two texts, still without markers.
        body = _join_lines(union(_lines(ours), _lines(theirs), key=_line_key))
        return MergeResult(body + "\n", (f"{path}: neither version could be parsed; "
                                         "both kept line by line",))
    merged = _with_section(keep, paras)
    text = formats.render_memory(merged)
    try:
        formats.parse(text, path)
    except FormatError:
        text = keep_text.rstrip("\n") + "\n\n" + "\n\n".join(paras) + "\n"
    return MergeResult(text, (line,))


# ------------------------------------------------------------------ other markdown


def _split_doc(text: str) -> tuple[dict[str, str], str] | None:
    try:
        front, body, _line = formats.split_frontmatter(text, "")
    except FormatError:
        return None
    return formats.raw_segments(front), body


def _flow_list(raw: str | None) -> list[str] | None:
    if raw is None:
        return None
    value = raw.split(":", 1)[1].strip()
    if not (value.startswith("[") and value.endswith("]")) or "\n" in value:
        return None
    inner = value[1:-1].strip()
    return [i.strip() for i in inner.split(",")] if inner else []


def _block_list(raw: str | None) -> list[str] | None:
    """Items of a block-style YAML list (``key:`` then ``- item`` lines), or None."""
    if raw is None:
        return None
    head, _, rest = raw.partition("\n")
    value = head.split(":", 1)[1].strip()
    if value == "[]" and not rest:
        return []
    items = [line for line in rest.split("\n") if line.strip()]
    if value or not items or not all(line.lstrip().startswith("- ") for line in items):
        return None
    return items


def _number(raw: str | None) -> int | None:
    if raw is None or "\n" in raw:
        return None
    value = raw.split(":", 1)[1].strip()
    return int(value) if value.isdigit() else None


def _merge_frontmatter_doc(base: str | None, ours: str, theirs: str, path: str,
                           date: str) -> MergeResult:
    """Markdown dualtrace does not parse itself (e.g. session records): frontmatter key
    by key (flow lists as unions), body paragraphs as a union."""
    mine, other = _split_doc(ours), _split_doc(theirs)
    old = _split_doc(base) if base is not None else None
    if mine is None or other is None:
        body = _merge_paragraphs(ours, theirs)
        return MergeResult(body + "\n")
    conflicts: list[tuple[str, str, str]] = []
    front: list[str] = []
    for key in list(mine[0]) + [k for k in other[0] if k not in mine[0]]:
        a, b = mine[0].get(key), other[0].get(key)
        la, lb = _flow_list(a), _flow_list(b)
        if a != b and la is not None and lb is not None:
            front.append(f"{key}: [{', '.join(union(la, lb))}]")
            continue
        ba, bb = _block_list(a), _block_list(b)
        if a != b and ba is not None and bb is not None:
            items = union(ba, bb, key=_line_key)
            front.append(f"{key}:" + "".join(f"\n{item}" for item in items) if items
                         else f"{key}: []")
            continue
        na, nb = _number(a), _number(b)
        if a != b and na is not None and nb is not None:
            front.append(f"{key}: {max(na, nb)}")  # counts (turns, parts): the larger
            continue
        base_value: object = NOBASE if old is None else old[0].get(key)
        value = pick(key, base_value, a, b, conflicts)
        if value is not None:
            front.append(value)
    body = _merge_paragraphs(mine[1], other[1])
    if conflicts:
        body = _merge_paragraphs(body, "\n\n".join(_field_section(date, conflicts)))
    lines = tuple(f"{name}: this side {a!r}, other side {b!r}" for name, a, b in conflicts)
    return MergeResult("---\n" + "\n".join(front) + "\n---\n\n" + body.strip("\n") + "\n", lines)


# ------------------------------------------------------------------ git merge driver


def run_driver(argv: list[str]) -> int:
    """``dualtrace merge-file BASE OURS THEIRS PATH`` (git's %O %A %B %P).

    Writes the merge into OURS, records what it could not merge as an open conflict
    in the memory directory (git runs drivers at the top of the work tree), and exits
    0: the file holds both versions, so git has nothing left to resolve. Any internal
    error still leaves both versions in the file (quoted) and exits 0.
    """
    import datetime as _dt
    import os
    import sys
    from pathlib import Path

    if len(argv) != 4:
        sys.stderr.write("usage: dualtrace merge-file BASE OURS THEIRS PATH\n")
        return 2
    base_file, ours_file, theirs_file, path = argv

    def read(name: str) -> str:
        return Path(name).read_text(encoding="utf-8", errors="replace")

    date = _dt.date.today().isoformat()
    ours, theirs = read(ours_file), read(theirs_file)
    try:
        base = read(base_file)
        result = merge_text(base if base else None, ours, theirs, path, date=date)
    except Exception as exc:  # noqa: BLE001 - a merge driver must leave a usable file
        result = MergeResult(
            ours.rstrip("\n") + "\n\n" + conflict_heading(date) + "\n\n"
            + f"dualtrace could not merge this file ({type(exc).__name__}); the other "
            "version is kept below as it was.\n\n" + _quoted(theirs) + "\n",
            (f"{path}: internal merge error {type(exc).__name__}: {exc}",))
    from dualtrace.atomic import write_text as atomic_write_text

    atomic_write_text(Path(ours_file), result.text)
    if result.conflicts:
        try:
            from dualtrace.memfs.conflicts import record_merge_conflict

            state = Path(os.getcwd()) / ".dualtrace"
            for line in result.conflicts:
                record_merge_conflict(state, path, line, date)
        except Exception as exc:  # noqa: BLE001 - the file already holds both versions
            sys.stderr.write(f"dualtrace merge-file: cannot record the conflict: {exc}\n")
    return 0
