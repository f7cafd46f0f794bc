"""The memory file formats of docs/PROTOCOL.md §4-5: fact, moment (scene) and system files.

Parsing is tolerant: unknown frontmatter keys are kept verbatim (their raw YAML text)
and written back unchanged; a file that cannot be parsed raises FormatError with its
path and line. Rendering goes through the jinja2 templates in prompts/, so
``render(parse(render(x))) == render(x)`` byte for byte.
"""

from __future__ import annotations

import datetime as _dt
import re
from dataclasses import dataclass, field, replace

from dualtrace.errors import FormatError
from dualtrace.memfs.types import BY_NAME, MEMORY_TYPES

TYPE_CHECKING = False  # typing: ~3 ms of every prompt hook that renders a memory
if TYPE_CHECKING:
    from typing import Any

# Derived from the one table of memory types (memfs/types.py).
TYPES = tuple(t.name for t in MEMORY_TYPES)
CATEGORY = {t.name: t.folder for t in MEMORY_TYPES}
TYPE_OF_CATEGORY = {t.folder: t.name for t in MEMORY_TYPES}
# Types whose fact is a file of its own; the others are bullets in a system/ file.
FACT_FOLDER_TYPES = tuple(t.name for t in MEMORY_TYPES if t.bullet_file is None)
BULLET_TYPES = tuple(t.name for t in MEMORY_TYPES if t.bullet_file is not None)
# Other folder spellings (the pilot's singulars), accepted when reading.
FOLDER_ALIASES = {alias: t.folder for t in MEMORY_TYPES for alias in t.aliases}
CONFIDENCE = ("LOW", "MEDIUM", "HIGH")
SCHEMA = 1
MOMENT_FOOTER = "(Mnemonic reconstruction only. Not a code specification.)"
SCORE_KEYS = ("durability", "scope", "rationale", "retrieval")

_FACT_KEYS = (
    "description", "type", "linked_scene", "related", "confidence", "evidence_score",
    "stored", "schema", "scores", "tier", "updated", "status", "sessions", "supersedes",
    "superseded_by", "records",
)
_MOMENT_KEYS = ("description", "type", "linked_fact", "confidence", "stored", "schema", "updated",
                "records")
_SYSTEM_KEYS = ("description",)
_KEY_LINE = re.compile(r"^([A-Za-z_][A-Za-z0-9_.-]*)\s*:")
_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")


@dataclass(frozen=True)
class Scores:
    """The four evidence dimensions of docs/PROTOCOL.md §6, each 0-3."""

    durability: int
    scope: int
    rationale: int
    retrieval: int

    @property
    def total(self) -> int:
        return self.durability + self.scope + self.rationale + self.retrieval

    def as_dict(self) -> dict[str, int]:
        return {k: getattr(self, k) for k in SCORE_KEYS}

    def short(self) -> str:
        return f"{self.durability}/{self.scope}/{self.rationale}/{self.retrieval}"

    @classmethod
    def from_any(cls, value: Any) -> Scores | None:
        if not isinstance(value, dict):
            return None
        try:
            return cls(**{k: int(value[k]) for k in SCORE_KEYS})
        except (KeyError, TypeError, ValueError):
            return None


def tier_for(total: int) -> str:
    """Routing by total score: 0-4 SKIP, 5-7 RECORD, 8-12 FULL."""
    if total >= 8:
        return "FULL"
    if total >= 5:
        return "RECORD"
    return "SKIP"


@dataclass(frozen=True)
class Fact:
    path: str
    type: str
    description: str
    body: str
    confidence: str = "MEDIUM"
    stored: str = ""
    evidence_score: int | None = None
    linked_scene: str | None = None
    related: tuple[str, ...] = ()
    schema: int | None = SCHEMA
    scores: Scores | None = None
    tier: str | None = None
    updated: str | None = None
    status: str | None = None
    sessions: tuple[str, ...] = ()
    supersedes: str | None = None
    superseded_by: str | None = None
    records: tuple[str, ...] = ()  # session records (sessions/...) of the sessions above
    extra_raw: tuple[str, ...] = field(default=(), compare=False)

    @property
    def anchor(self) -> str:
        return self.path.rsplit("/", 1)[-1].removesuffix(".md")

    @property
    def kind(self) -> str:
        return "fact"


@dataclass(frozen=True)
class Moment:
    path: str
    anchor: str
    description: str
    linked_fact: str
    narrative: str
    timeline: tuple[str, ...] = ()
    prior: str = ""
    after: str = ""
    confidence: str = "MEDIUM"
    stored: str = ""
    schema: int | None = SCHEMA
    updated: str | None = None
    records: tuple[str, ...] = ()  # session records the moment was drawn from
    extra_raw: tuple[str, ...] = field(default=(), compare=False)

    @property
    def kind(self) -> str:
        return "moment"


@dataclass(frozen=True)
class SystemFile:
    """system/human.md or system/<project>/conventions.md: description + bullets."""

    path: str
    description: str
    body: str = ""
    extra_raw: tuple[str, ...] = field(default=(), compare=False)

    @property
    def kind(self) -> str:
        return "system"

    @property
    def bullets(self) -> tuple[str, ...]:
        return tuple(
            line[2:].strip() for line in self.body.splitlines() if line.startswith(("- ", "* "))
        )

    def with_bullet(self, text: str) -> SystemFile:
        """Append a bullet unless an equivalent one is there (case/space/punctuation-insensitive)."""
        text = " ".join(text.split())
        key = _bullet_key(text)
        if not key or any(_bullet_key(b) == key for b in self.bullets):
            return self
        body = self.body.rstrip("\n")
        body = f"{body}\n- {text}" if body else f"- {text}"
        return replace(self, body=body)


def _bullet_key(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", " ", text.lower()).strip()


Memory = Fact | Moment | SystemFile


# ---------------------------------------------------------------- parsing


def split_frontmatter(text: str, path: str) -> tuple[str, str, int]:
    """(frontmatter text, body, line number where the body starts) of a markdown file
    that opens with a ``---`` line and closes its frontmatter with another: the one
    frontmatter splitter (memory files, session records, status, the merge driver)."""
    if text.startswith("\ufeff"):
        text = text[1:]
    if not text.startswith("---"):
        raise FormatError(path, 1, "missing frontmatter (file must start with '---')")
    first_end = text.find("\n")
    if first_end == -1 or text[:first_end].strip() != "---":
        raise FormatError(path, 1, "frontmatter opener must be '---' alone on the line")
    pos = first_end
    while True:
        close = text.find("\n---", pos)
        if close == -1:
            raise FormatError(path, 1, "frontmatter is not closed by a '---' line")
        line_end = text.find("\n", close + 1)
        line_end = len(text) if line_end == -1 else line_end
        if text[close + 1:line_end].rstrip() == "---":
            front = text[first_end + 1:close]
            body = text[line_end + 1:]
            return front, body, front.count("\n") + 4
        pos = close + 1


def raw_segments(front: str) -> dict[str, str]:
    """Top-level key -> its raw text (key line plus indented continuation lines)."""
    segments: dict[str, str] = {}
    current: str | None = None
    for line in front.split("\n"):
        match = _KEY_LINE.match(line)
        if match and not line[:1].isspace():
            current = match.group(1)
            segments[current] = line
        elif current is not None:
            segments[current] += "\n" + line
    return {k: v.rstrip("\n") for k, v in segments.items()}


_SIMPLE_LINE = re.compile(r"^([A-Za-z_][A-Za-z0-9_.-]*):(?: (.*))?$")
# YAML's white space is the space and the tab only (str.strip() also strips U+00A0 ...).
_YAML_SPACE = " \t"
_PLAIN = re.compile(r"^[^\[\]{}'\"&*!|>%@`#,?:\s-][^#]*$|^-?\d+$")
_FLOW_ITEM = re.compile(r"^[A-Za-z0-9_./@+-]+$")
_NUMERIC_START = frozenset("0123456789+-.")
_INT = re.compile(r"-?(?:0|[1-9][0-9]*)\Z")
_DATE = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}\Z")
# Plain words YAML 1.1 gives a meaning of its own ("=" and "<<" are its value and merge keys).
_YAML_WORDS = frozenset({"yes", "no", "true", "false", "null", "~", "on", "off", "y", "n",
                         "=", "<<"})


def _fast_value(raw: str) -> tuple[bool, Any]:
    """Parse the simple values dualtrace itself writes; (False, None) means 'ask YAML'."""
    raw = raw.strip(_YAML_SPACE)
    if raw == "":
        return True, None
    if raw.lower() in _YAML_WORDS:
        return False, None
    if raw[0] == "'" and raw[-1] == "'" and len(raw) >= 2:
        inner = raw[1:-1]
        if "'" in inner.replace("''", ""):
            return False, None
        return True, inner.replace("''", "'")
    if raw[0] == "[" and raw[-1] == "]":
        items = [i.strip(_YAML_SPACE) for i in raw[1:-1].split(",")] \
            if raw[1:-1].strip(_YAML_SPACE) else []
        if all(_FLOW_ITEM.match(i) and i[0] not in _NUMERIC_START
               and i.lower() not in _YAML_WORDS for i in items):
            return True, items
        return False, None
    if raw[0] == "{" and raw[-1] == "}":
        out: dict[str, Any] = {}
        for item in raw[1:-1].split(","):
            key, sep, value = item.partition(":")
            key, value = key.strip(_YAML_SPACE), value.strip(_YAML_SPACE)
            if not sep or not _FLOW_ITEM.match(key) or not _INT.match(value) \
                    or key[0] in _NUMERIC_START or key.lower() in _YAML_WORDS:
                return False, None
            out[key] = int(value)
        return True, out
    if ": " in raw or raw.endswith(":") or " #" in raw or not _PLAIN.match(raw):
        return False, None
    if raw[0] in _NUMERIC_START:
        # YAML 1.1 reads many of these as something else (octal 007, 1_000, 1:20 as
        # base 60, .nan, 1e3, timestamps): only plain integers and dates are ours.
        if _INT.match(raw):
            return True, int(raw)
        if _DATE.match(raw):
            try:
                return True, _dt.date(int(raw[:4]), int(raw[5:7]), int(raw[8:10]))
            except ValueError:
                return False, None
        return False, None
    if not raw.isprintable():
        return False, None  # YAML has line breaks and characters of its own there
    return True, raw


def _fast_front(front: str) -> dict[str, Any] | None:
    """Line parser for the flat frontmatter dualtrace writes (10x faster than YAML).

    Returns None as soon as anything is not in that simple subset (indented
    continuation lines, quotes with escapes, anchors, multi-line values...), and
    the caller falls back to the YAML parser, so results are identical.
    """
    data: dict[str, Any] = {}
    for line in front.split("\n"):
        if not line.strip(_YAML_SPACE):
            continue
        match = _SIMPLE_LINE.match(line)
        if not match or match.group(1) in data:
            return None
        ok, value = _fast_value(match.group(2) or "")
        if not ok:
            return None
        data[match.group(1)] = value
    return data


def _load_front(front: str, path: str) -> dict[str, Any]:
    fast = _fast_front(front)
    if fast is not None:
        return fast
    # YAML only for frontmatter outside the simple subset: importing it costs ~35 ms,
    # which recall and the prompt hook should not pay for files dualtrace wrote.
    import yaml

    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    try:
        data = yaml.load(front, Loader=loader) if front.strip() else {}
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = (mark.line + 2) if mark is not None else 1
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise FormatError(path, line, f"invalid YAML frontmatter: {problem}") from None
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise FormatError(path, 2, "frontmatter must be a mapping of keys to values")
    return data




def _as_str(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, (_dt.date, _dt.datetime)):
        return value.isoformat()[:10]
    return str(value)


def _as_opt(value: Any) -> str | None:
    text = _as_str(value).strip()
    return text or None


def _as_tuple(value: Any) -> tuple[str, ...]:
    if value is None or value == "":
        return ()
    if isinstance(value, (list, tuple)):
        return tuple(_as_str(v) for v in value if v is not None)
    return (_as_str(value),)


def _extra(front: str, data: dict[str, Any], known: tuple[str, ...]) -> tuple[str, ...]:
    raw = raw_segments(front)
    return tuple(raw[k] for k in raw if k not in known and k in data)


def _confidence(value: Any, path: str) -> str:
    text = _as_str(value).strip().upper() or "MEDIUM"
    if text not in CONFIDENCE:
        raise FormatError(path, 2, f"confidence must be HIGH, MEDIUM or LOW, not {value!r}")
    return text


def _int_or_none(value: Any, path: str, key: str) -> int | None:
    if value is None or value == "":
        return None
    try:
        return int(value)
    except (TypeError, ValueError):
        raise FormatError(path, 2, f"{key} must be a whole number, not {value!r}") from None


def parse_fact(text: str, path: str) -> Fact:
    front, body, _ = split_frontmatter(text, path)
    data = _load_front(front, path)
    kind = _as_str(data.get("type")).strip().lower()
    if kind not in TYPES:
        raise FormatError(path, 2, f"unknown type {data.get('type')!r} (expected one of {', '.join(TYPES)})")
    return Fact(
        path=path,
        type=kind,
        description=_as_str(data.get("description")).strip(),
        body=body.strip("\n"),
        confidence=_confidence(data.get("confidence"), path),
        stored=_as_str(data.get("stored")),
        evidence_score=_int_or_none(data.get("evidence_score"), path, "evidence_score"),
        linked_scene=_as_opt(data.get("linked_scene")),
        related=_as_tuple(data.get("related")),
        schema=_int_or_none(data.get("schema"), path, "schema"),
        scores=Scores.from_any(data.get("scores")),
        tier=_as_opt(data.get("tier")),
        updated=_as_opt(data.get("updated")),
        status=_as_opt(data.get("status")),
        sessions=_as_tuple(data.get("sessions")),
        supersedes=_as_opt(data.get("supersedes")),
        superseded_by=_as_opt(data.get("superseded_by")),
        records=_as_tuple(data.get("records")),
        extra_raw=_extra(front, data, _FACT_KEYS),
    )


_MOMENT_TAG = re.compile(r"^\[MOMENT:([^\]]*)\]\s*$")


def parse_moment(text: str, path: str) -> Moment:
    front, body, body_line = split_frontmatter(text, path)
    data = _load_front(front, path)
    anchor = path.rsplit("/", 1)[-1].removesuffix(".md")
    narrative: list[str] = []
    timeline: list[str] = []
    prior: list[str] = []
    after: list[str] = []
    current: list[str] | None = None
    for line in body.split("\n"):
        stripped = line.strip()
        tag = _MOMENT_TAG.match(stripped)
        if tag:
            anchor = tag.group(1).strip() or anchor
            current = None
        elif stripped == MOMENT_FOOTER:
            current = None
        elif stripped.startswith("Moment:"):
            current = narrative
            current.append(stripped[len("Moment:"):].strip())
        elif stripped.startswith("Timeline:"):
            timeline.append(stripped[len("Timeline:"):].strip())
            current = None
        elif stripped.startswith("Prior:"):
            current = prior
            current.append(stripped[len("Prior:"):].strip())
        elif stripped.startswith("After:"):
            current = after
            current.append(stripped[len("After:"):].strip())
        elif not stripped:
            if current is narrative:
                narrative.append("")  # a paragraph break inside the narrative
            else:
                current = None
        elif current is not None:
            current.append(stripped)
        else:
            # Free text a person added outside the known sections stays with the narrative.
            narrative.append(stripped)
    return Moment(
        path=path,
        anchor=anchor,
        description=_as_str(data.get("description")).strip(),
        linked_fact=_as_str(data.get("linked_fact")).strip(),
        narrative=_join(narrative),
        timeline=tuple(timeline),
        prior=_join(prior),
        after=_join(after),
        confidence=_confidence(data.get("confidence"), path),
        stored=_as_str(data.get("stored")),
        schema=_int_or_none(data.get("schema"), path, "schema"),
        updated=_as_opt(data.get("updated")),
        records=_as_tuple(data.get("records")),
        extra_raw=_extra(front, data, _MOMENT_KEYS),
    )


def _join(parts: list[str]) -> str:
    text = "\n".join(parts).strip()
    return re.sub(r"\n{3,}", "\n\n", text)


def parse_system(text: str, path: str) -> SystemFile:
    front, body, _ = split_frontmatter(text, path)
    data = _load_front(front, path)
    return SystemFile(
        path=path,
        description=_as_str(data.get("description")).strip(),
        body=body.strip("\n"),
        extra_raw=_extra(front, data, _SYSTEM_KEYS),
    )


def parse(text: str, path: str) -> Memory:
    """Parse any memory file by where it lives."""
    if path.startswith("system/"):
        return parse_system(text, path)
    if path.startswith("scenes/"):
        return parse_moment(text, path)
    return parse_fact(text, path)


# ---------------------------------------------------------------- rendering


def _check_date(value: str, what: str) -> str:
    if value and not _DATE.match(value):
        raise ValueError(f"{what} must be YYYY-MM-DD, not {value!r}")
    return value


def render_fact(fact: Fact) -> str:
    from dualtrace.prompts import render

    return render(
        "fact.md.j2",
        description=fact.description,
        type=fact.type,
        linked_scene=fact.linked_scene,
        related=list(fact.related),
        confidence=fact.confidence,
        evidence_score=fact.evidence_score,
        stored=_check_date(fact.stored, "stored"),
        schema=fact.schema,
        scores=fact.scores.as_dict() if fact.scores else None,
        tier=fact.tier,
        updated=_check_date(fact.updated or "", "updated") or None,
        status=fact.status,
        sessions=list(fact.sessions),
        supersedes=fact.supersedes,
        superseded_by=fact.superseded_by,
        records=list(fact.records),
        extra_raw=list(fact.extra_raw),
        body=fact.body.strip("\n"),
    )


def render_moment(moment: Moment) -> str:
    from dualtrace.prompts import render

    return render(
        "moment.md.j2",
        description=moment.description,
        linked_fact=moment.linked_fact,
        confidence=moment.confidence,
        stored=_check_date(moment.stored, "stored"),
        schema=moment.schema,
        updated=_check_date(moment.updated or "", "updated") or None,
        records=list(moment.records),
        extra_raw=list(moment.extra_raw),
        anchor=moment.anchor,
        narrative=moment.narrative.strip(),
        timeline=list(moment.timeline),
        prior=moment.prior.strip(),
        after=moment.after.strip(),
    )


def render_system(system: SystemFile) -> str:
    from dualtrace.prompts import render

    return render(
        "system.md.j2",
        description=system.description,
        extra_raw=list(system.extra_raw),
        body=system.body.strip("\n"),
    )


def render_memory(memory: Memory) -> str:
    if isinstance(memory, Fact):
        return render_fact(memory)
    if isinstance(memory, Moment):
        return render_moment(memory)
    return render_system(memory)


# ---------------------------------------------------------------- paths


def fact_path(kind: str, anchor: str) -> str:
    if kind not in FACT_FOLDER_TYPES:
        raise ValueError(f"{kind} facts live in system files, not {CATEGORY.get(kind)}/")
    return f"{CATEGORY[kind]}/{anchor}.md"


def scene_path(kind: str, anchor: str) -> str:
    return f"scenes/{CATEGORY[kind]}/{anchor}.md"


def human_path() -> str:
    return "system/human.md"


def conventions_path(project: str) -> str:
    return f"system/{project}/conventions.md"


def bullet_path(kind: str, project: str) -> str:
    """The system file a bullet type's facts live in."""
    return human_path() if BY_NAME[kind].bullet_file == "human" else conventions_path(project)


def type_of_system_file(rel: str) -> str:
    """The bullet type of a system file: human.md holds preferences, the rest conventions."""
    which = "human" if rel.endswith("human.md") else "conventions"
    return next(t.name for t in MEMORY_TYPES if t.bullet_file == which)


def canonical_folder(folder: str) -> str | None:
    """Plural category for a folder name, accepting the pilot's singular spellings."""
    if folder in TYPE_OF_CATEGORY:
        return folder
    return FOLDER_ALIASES.get(folder)


def today() -> str:
    return _dt.date.today().isoformat()
