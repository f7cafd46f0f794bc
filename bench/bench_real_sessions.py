"""Score an encoder on real sessions against the labelled set in bench/real_sessions.py (issue 12).

Sessions of one project are encoded in order into one fresh memory directory. After
each session, the files it created or changed are its *written memories*: a fact file
(decisions/, incidents/, patterns/, learning/) is one memory, each new bullet of
system/human.md or system/<project>/conventions.md is one memory. Mechanical checks:

- captured in full: a memory written by the session has one of the expected types and
  every expected word (case-insensitive, word boundaries) in its description or body;
  in part: a memory has at least half of the words (or all words, wrong type);
- useful: a written memory that captures (in full or in part) an expectation of its
  session and has a clean description (one line, <= 200 chars, no markup or dump);
- dumps: a description or an update sentence shaped like raw tool output (markup, a
  struct or map dump, a stack frame, long hex, mostly punctuation, over 200 chars);
- wrong type: an expectation whose words are all in a memory of the session, but no such
  memory has an allowed type;
- duplicate: a memory that captures an expectation another live memory of the same type
  and project already captured (of its own session: in full or in part; of an earlier
  session: in full; superseded memories do not count), or a bullet written twice;
- grounding violation: a file path, backticked token (verbatim), error name or commit sha in the
  text a session added that does not occur in that session's transcript (or subagents);
- resolved: an expected incident fixed in its session whose memory says status resolved;
- superseded: a revision whose earlier decision got ``superseded_by``.

Usage:
  python bench/bench_real_sessions.py [--part dev|held-out|all|new|fresh9|...|fresh16] [--backend offline]
         [--fake-server] [--json out.json] [--verbose] [--held-out-rows]

``--part new`` encodes only the session-7 held-out part (``NEW_HELD_OUT``; sessions of a
host with no reader are listed as unread). ``--part dev`` (default) encodes and reports only the development sessions (``exposed``:
the former held-out ones among them, also summed on their own line); held-out
sessions are encoded and reported only with ``--part held-out`` or ``--part all``.
``--part fresh9`` encodes only the session-9 fresh held-out part (``fresh_sessions.FRESH9``),
read from ``$DUALTRACE_FRESH_CORPUS`` (outside the project; skipped when unset or absent);
``--part fresh11`` and ``--part fresh13`` likewise encode the session-13 parts
(``fresh_sessions.FRESH11``, ``FRESH13``); ``--part fresh14`` the session-14 one, ``--part fresh15`` the session-15 one.
``--backend anthropic --fake-server`` runs the model backend against the local fake
Messages API (tests/fake_anthropic.py): it checks the plumbing, not the model.
"""

from __future__ import annotations

import argparse
import difflib
import json
import math
import os
import re
import sys
import tempfile
from collections import defaultdict
from pathlib import Path
from typing import Any

import yaml

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(ROOT))
CORPUS = Path(os.environ.get("DUALTRACE_CORPUS") or ROOT.parent / "shared" / "corpus")
# --part fresh9 (bench/fresh_sessions.py): transcripts kept outside the project, skipped when absent
FRESH_CORPUS = os.environ.get("DUALTRACE_FRESH_CORPUS")

FACT_DIRS = ("decisions/", "incidents/", "patterns/", "learning/")
_PATH = re.compile(r"(?<![\w/.@-])(?:[\w.-]+/)+[\w.-]*\w|(?<![\w/.@-])[\w-]+\.(?:py|js|ts|tsx|jsx|ex|exs|"
                   r"heex|go|rs|rb|java|c|h|sql|yml|yaml|json|toml|md|sh|html|css|lock|txt)\b")
_TICK = re.compile(r"`([^`\n]{2,120})`")
_ERROR = re.compile(r"\b[A-Z]\w*(?:Error|Exception)\b")
_SHA = re.compile(r"\b(?=[0-9a-f]*\d)(?=[0-9a-f]*[a-f])[0-9a-f]{7,40}\b")


def word_in(word: str, text: str) -> bool:
    return re.search(r"(?<![\w])" + re.escape(word.lower()) + r"(?![\w])", text) is not None


def split_frontmatter(text: str) -> tuple[dict[str, str], str]:
    meta: dict[str, str] = {}
    if not text.startswith("---\n"):
        return meta, text
    end = text.find("\n---", 4)
    if end < 0:
        return meta, text
    try:
        parsed = yaml.safe_load(text[4:end])
    except yaml.YAMLError:
        parsed = None
    if isinstance(parsed, dict):
        # YAML quoting undone ('didn''t' is "didn't"); lists and dates as their text
        return ({str(k): v if isinstance(v, str) else "" if v is None else str(v)
                 for k, v in parsed.items()}, text[end + 4:].lstrip("\n"))
    for line in text[4:end].splitlines():
        if ":" in line and not line.startswith(" "):
            key, _, value = line.partition(":")
            meta[key.strip()] = value.strip().strip("'\"")
    return meta, text[end + 4:].lstrip("\n")


def snapshot(root: Path) -> dict[str, str]:
    out = {}
    if not root.is_dir():
        return out
    for path in root.rglob("*.md"):
        rel = path.relative_to(root).as_posix()
        if rel.startswith(".dualtrace/") or "/.git/" in rel:
            continue
        out[rel] = path.read_text(encoding="utf-8", errors="replace")
    return out


def added_text(before: str | None, after: str) -> str:
    if before is None:
        return after
    new = []
    for line in difflib.ndiff(before.splitlines(), after.splitlines()):
        if line.startswith("+ "):
            new.append(line[2:])
    return "\n".join(new)


def written_memories(before: dict[str, str], after: dict[str, str]) -> tuple[list[dict], list[str]]:
    """(memories, texts of changed scene files) a session wrote."""
    memories: list[dict] = []
    scenes: list[str] = []
    for rel, text in sorted(after.items()):
        old = before.get(rel)
        if old == text:
            continue
        if rel.startswith("scenes/"):
            scenes.append(added_text(None if old is None else split_frontmatter(old)[1],
                                     split_frontmatter(text)[1]))
            continue
        if rel.startswith(FACT_DIRS):
            meta, body = split_frontmatter(text)
            # what the session added: description and body, never the bookkeeping keys
            # (sessions:, linked_scene:) of the frontmatter
            old_view = None
            if old is not None:
                old_meta, old_body = split_frontmatter(old)
                old_view = old_meta.get("description", "") + "\n" + old_body
                if old_view == meta.get("description", "") + "\n" + body:
                    continue  # bookkeeping only (superseded_by:, sessions:): nothing said
            memories.append({"path": rel, "type": meta.get("type", rel.split("/")[0].rstrip("s")),
                             "description": meta.get("description", ""), "body": body,
                             "status": meta.get("status"), "superseded_by": meta.get("superseded_by"),
                             "added": added_text(old_view, meta.get("description", "") + "\n" + body),
                             "new": old is None})
        elif rel.startswith("system/"):
            kind = "preference" if rel.endswith("human.md") else "convention"
            old_lines = set((old or "").splitlines())
            for line in text.splitlines():
                if line.startswith("- ") and line not in old_lines:
                    bullet = line[2:].strip()
                    memories.append({"path": rel, "type": kind, "description": bullet, "body": "",
                                     "status": None, "superseded_by": None, "added": bullet,
                                     "new": True})
    return memories, scenes


def match_level(memory: dict, exp: dict) -> str | None:
    """'full', 'part' or None: how well ``memory`` captures the expectation ``exp``."""
    text = (memory["description"] + "\n" + memory["body"]).lower()
    words = exp["words"]
    hits = sum(word_in(w, text) for w in words)
    if hits == len(words) and memory["type"] in exp["types"]:
        return "full"
    if hits >= math.ceil(len(words) / 2) and hits > 0:
        return "part"
    return None


def clean_description(desc: str) -> bool:
    return bool(desc) and len(desc) <= 200 and "\n" not in desc and not dump_marks(desc)


# Raw tool output where a person's sentence belongs: what a description or an update
# sentence must never be. Each mark names one shape of dump.
_DUMP_MARKS = (
    ("markup", re.compile(r"</?[a-zA-Z][\w:-]*(?:\s[^<>]*)?/?>|&(?:lt|gt|amp|quot|nbsp);|<!--")),
    ("struct", re.compile(r"%[A-Z][\w.]*\{|%\{|#[A-Z][\w.]*<|#\{|\b[A-Z]\w*\(\w+=[^)]*,\s*\w+=")),
    ("map", re.compile(r"(?:\"[^\"\n]{1,60}\"|:\w+)\s*=>|\{\s*\"[\w-]+\"\s*:|\b\w+: \[\{")),
    ("frame", re.compile(r"\bat [\w.$<>]+ \(|File \"[^\"]+\", line \d+|\(\w[\w-]* \d+\.\d+[\w.-]*\) [\w/.-]+:\d+"
                         r"|[\w/.-]+\.\w{1,5}:\d+:\d*:? (?:in )?[\w.]+[./]\w+|^\s*\d+:\s+0x[0-9a-f]+")),
    ("hex", re.compile(r"\b0x[0-9a-f]{8,}\b|\b[0-9a-f]{32,}\b")),
)


def dump_marks(text: str) -> list[str]:
    """The dump shapes in ``text`` (a description or an update sentence): markup, struct or
    map dumps, stack frames, long hex; plus a line that is mostly punctuation."""
    marks = [name for name, rx in _DUMP_MARKS if rx.search(text)]
    for line in text.splitlines():
        body = line.strip()
        if len(body) >= 40 and sum(ch in "{}[]<>=%#|\\\"" for ch in body) > 0.08 * len(body):
            marks.append("punctuation")
            break
    return marks


def update_sentences(m: dict) -> list[str]:
    """The sentences an update added to an existing memory (its description included)."""
    if m["new"] or m["path"].startswith("system/"):
        return []
    return [ln.strip() for ln in m["added"].splitlines() if ln.strip()]


def artifacts(text: str) -> set[str]:
    found = set()
    for m in _PATH.finditer(text):
        token = m.group(0).rstrip(".,:;")
        if token.count("/") == 1 and token.split("/")[0].isalpha() and token.split("/")[1].isalpha() \
                and "." not in token:
            continue  # "and/or", "hooks/Phoenix": prose, not a path
        found.add(("file", token))
    for m in _TICK.finditer(text):
        found.add(("code", m.group(1).strip()))
    for m in _ERROR.finditer(text):
        found.add(("error", m.group(0)))
    for m in _SHA.finditer(text):
        found.add(("commit", m.group(0)))
    return found


def transcript_haystack(path: Path) -> str:
    texts = [path.read_text(encoding="utf-8", errors="replace")]
    sub = path.with_suffix("") / "subagents"
    if sub.is_dir():
        texts += [p.read_text(encoding="utf-8", errors="replace") for p in sorted(sub.glob("*.jsonl"))]
    raw = "\n".join(texts)
    # JSON escapes: compare against the decoded characters too, two levels deep (Codex
    # keeps a tool call's arguments as a JSON string inside the JSON line, so a quote in
    # a command is escaped twice there).
    decoded = raw
    for _ in range(2):
        decoded = decoded.replace("\\n", "\n").replace('\\"', '"').replace("\\/", "/") \
            .replace("\\\\", "\\")
    return (raw + "\n" + decoded).lower()


def grounded(kind: str, token: str, hay: str) -> bool:
    t = token.lower()
    if t.endswith(("...", "\u2026")):  # a cut-off quote: its head must occur
        t = t.rstrip(".\u2026").rstrip()
    if t in hay:
        return True
    if "~/" in t:
        # the redactor writes a home directory as ~ (encoder/redact.py): ~/x is
        # /home/<name>/x or /Users/<name>/x of the transcript, also inside a command
        # (`ls ~/.claude/projects` for `ls /Users/ali/.claude/projects`)
        home = r"(?:~|/(?:home|users)/[^/\s\"]+)/"
        pattern = home.join(re.escape(part) for part in t.split("~/"))
        return re.search(pattern, hay) is not None
    if kind == "file":
        # a project-relative path of an absolute path in the transcript, or a basename
        return t.rsplit("/", 1)[-1] in hay and any(part in hay for part in t.split("/") if part)
    # A backticked token (a command, a code name) is quoted: it must occur verbatim, as
    # the reviewer's checker asks; a paraphrase of a command that never ran as written is
    # a violation even when each of its words occurs somewhere.
    return False


def _settings(backend: str, fake_url: str | None):
    from dualtrace.config import Settings

    if backend == "offline" or fake_url is None:
        return None
    return Settings(api_key="sk-ant-bench-dummy", base_url=fake_url,
                    extra={"retry_base_seconds": 0.01, "retry_max_seconds": 0.05})


class Scorer:
    """What the sessions of a run wrote so far, for the duplicate and supersede checks."""

    def __init__(self, sessions: list[dict]) -> None:
        self.sessions = sessions
        self.by_key = {e["key"]: e for e in sessions}
        self.captured_by: dict[str, dict[tuple[str, int], list[str]]] = defaultdict(lambda: defaultdict(list))
        self.expectation_path: dict[tuple[str, int], str] = {}
        self.seen_bullets: dict[str, set[str]] = defaultdict(set)
        self.types: dict[str, str] = {}

    def expectations(self, row: dict[str, Any], s: dict, memories: list[dict], after: dict[str, str]) -> None:
        """Captured in full / in part, wrong types, resolved and superseded for ``s``."""
        for i, exp in enumerate(s["expect"]):
            levels = [(match_level(m, exp), m) for m in memories]
            best = "full" if any(lv == "full" for lv, _ in levels) else \
                "part" if any(lv == "part" for lv, _ in levels) else None
            if best:
                row[best] += 1
            text_all = [(m["description"] + "\n" + m["body"]).lower() for m in memories]
            if best != "full" and any(all(word_in(w, t) for w in exp["words"]) for t in text_all):
                row["wrong_types"] += 1  # the memory is there, under a type that is wrong
            winner = next((m for lv, m in levels if lv == best), None) if best else None
            if winner:
                self.expectation_path[(s["key"], i)] = winner["path"]
            if exp.get("status") == "resolved":
                row["resolved"][1] += 1
                if winner and winner["status"] == "resolved":
                    row["resolved"][0] += 1
            if exp.get("supersedes"):
                row["superseded"][1] += 1
                earlier = next((e for e in self.sessions if e["key"] == exp["supersedes"]), None)
                old = [self.expectation_path.get((exp["supersedes"], j))
                       for j in range(len(earlier["expect"]) if earlier else 0)]
                if winner and any(o and o != winner["path"] and "superseded_by:" in after.get(o, "")
                                  for o in old):
                    row["superseded"][0] += 1

    def memory(self, row: dict[str, Any], s: dict, m: dict, live: set[str], hay: str) -> None:
        """Useful, duplicate and grounding checks of one written memory."""
        matched = [(i, match_level(m, exp)) for i, exp in enumerate(s["expect"])]
        matched = [(i, lv) for i, lv in matched if lv]
        clean = clean_description(m["description"])
        useful = bool(matched) and clean
        dumps = [(m["description"], dump_marks(m["description"]))] + [
            (line, dump_marks(line)) for line in update_sentences(m)]
        dumps += [(m["description"], ["long"])] if len(m["description"]) > 200 else []
        row["dumps"] += [f"{m['path']}: {','.join(marks)}: {text[:160]}" for text, marks in dumps if marks]
        row["useful"] += useful
        row["duplicates"] += self._duplicate(s, m, live, matched)
        bad = sorted(f"{k}:{t}" for k, t in artifacts(m["added"]) if not grounded(k, t, hay))
        row["grounding"] += bad
        row["memories"].append({"path": m["path"], "type": m["type"], "new": m["new"],
                                "description": m["description"][:240], "status": m["status"],
                                "useful": useful, "clean": clean, "ungrounded": bad})

    def _duplicate(self, s: dict, m: dict, live: set[str], matched: list[tuple[int, str]]) -> bool:
        dup = False
        if m["path"].startswith("system/"):
            norm = " ".join(m["description"].lower().split())
            dup = norm in self.seen_bullets[s["project"]]
            self.seen_bullets[s["project"]].add(norm)
        elif m["path"] in live:
            # another live file of the project already holds what this one says:
            # an expectation of this session it also captures, or one of an
            # earlier session it captures in full (a revision supersedes instead)
            for (key, i), paths in self.captured_by[s["project"]].items():
                exp = self.by_key[key]["expect"][i]
                level = match_level(m, exp)
                mine = key == s["key"]
                if not level or (not mine and level != "full"):
                    continue
                # same subject, same kind of memory: a broader memory that only
                # mentions the subject (another type) is not a second copy
                if any(p != m["path"] and p in live and self.types.get(p) == m["type"]
                       for p in paths):
                    dup = True
            for i, _lv in matched:
                self.captured_by[s["project"]][(s["key"], i)].append(m["path"])
            self.types[m["path"]] = m["type"]
        return dup


def _fake_server():
    try:
        from tests.fake_anthropic import FakeAnthropic, message, tool_use
    except ImportError:  # tests mirrored to the package
        from tests.encoder.fake_anthropic import FakeAnthropic, message, tool_use  # type: ignore
    fake = FakeAnthropic().start()
    fake.default = lambda body: message(tool_use("finish", {"summary": "bench plumbing"}))
    return fake


def run(part: str, backend: str, fake_server: bool, verbose: bool) -> dict[str, Any]:
    from fresh_sessions import PARTS
    from real_sessions import NEW_HELD_OUT, SESSIONS

    from dualtrace.errors import DualtraceError
    from dualtrace.pipeline import encode_session

    corpus = CORPUS
    if part == "new":
        chosen = NEW_HELD_OUT
    elif part in PARTS:
        chosen = PARTS[part]
        corpus = Path(FRESH_CORPUS or "")
        if not FRESH_CORPUS or not corpus.is_dir():
            return {"part": part, "skipped": "DUALTRACE_FRESH_CORPUS unset or absent", "sessions": []}
    else:
        chosen = [s for s in SESSIONS if part == "all" or (s["held_out"] == (part == "held-out"))]
    missing = [s["key"] for s in chosen if not (corpus / s["path"]).is_file()]
    if missing:
        raise SystemExit(f"Error: corpus files missing under {corpus}: {', '.join(missing)}")
    fake = _fake_server() if fake_server else None
    per_session: list[dict] = []
    with tempfile.TemporaryDirectory() as tmp:
        os.environ["DUALTRACE_HOME"] = str(Path(tmp) / "state")
        scorer = Scorer(SESSIONS + NEW_HELD_OUT + [s for part in PARTS.values() for s in part])
        for s in chosen:
            memdir = Path(tmp) / "mem" / s["project"]
            transcript = corpus / s["path"]
            before = snapshot(memdir)
            try:
                report = encode_session(transcript, memory_dir=memdir, backend=backend,
                                        settings=_settings(backend, fake.url if fake else None))
            except DualtraceError as exc:
                if part != "new" and part not in PARTS:
                    raise
                # a host dualtrace has no reader for: reported, scored as nothing captured
                per_session.append({"key": s["key"], "held_out": True, "exposed": False,
                                    "expected": len(s["expect"]), "full": 0, "part": 0, "written": 0,
                                    "useful": 0, "duplicates": 0, "wrong_types": 0, "grounding": [],
                                    "dumps": [], "resolved": [0, 0], "superseded": [0, 0],
                                    "memories": [], "unread": f"{s.get('format')}: {exc}"})
                continue
            after = snapshot(memdir)
            memories, scenes = written_memories(before, after)
            hay = transcript_haystack(transcript)
            row: dict[str, Any] = {"key": s["key"], "held_out": s["held_out"],
                                   "exposed": bool(s.get("exposed")),
                                   "expected": len(s["expect"]), "full": 0, "part": 0,
                                   "written": len(memories), "useful": 0, "duplicates": 0,
                                   "wrong_types": 0, "grounding": [], "dumps": [], "resolved": [0, 0],
                                   "superseded": [0, 0], "memories": []}
            live = {p for p, t in after.items() if "superseded_by:" not in t}
            scorer.expectations(row, s, memories, after)
            for m in memories:
                scorer.memory(row, s, m, live, hay)
            for text in scenes:
                row["grounding"] += sorted(f"scene {k}:{t}" for k, t in artifacts(text)
                                           if not grounded(k, t, hay))
            row["ops"] = [f"{op['action']} {op.get('path')}" for op in report.operations
                          if op["action"] != "skip" or op.get("path")]
            per_session.append(row)
            if verbose:
                print(json.dumps(row, indent=1), file=sys.stderr)
    requests = None
    if fake is not None:
        requests = len(fake.message_requests())
        fake.stop()
    return {"part": part, "backend": backend, "fake_server_requests": requests, "sessions": per_session,
            "dev": summarize([r for r in per_session if not r["held_out"]]),
            "held_out": summarize([r for r in per_session if r["held_out"]]),
            # the dev sessions that were held out until a failure seen on them informed a change
            "exposed": summarize([r for r in per_session if r["exposed"]])}


def summarize(rows: list[dict]) -> dict[str, Any]:
    if not rows:
        return {}
    exp = sum(r["expected"] for r in rows)
    full = sum(r["full"] for r in rows)
    part = sum(r["part"] for r in rows)
    written = sum(r["written"] for r in rows)
    useful = sum(r["useful"] for r in rows)
    res = [sum(r["resolved"][i] for r in rows) for i in (0, 1)]
    sup = [sum(r["superseded"][i] for r in rows) for i in (0, 1)]
    return {"sessions": len(rows), "expected": exp, "full": full, "part": part,
            "captured_rate": round((full + part) / exp, 3) if exp else None,
            "written": written, "useful": useful,
            "useful_rate": round(useful / written, 3) if written else None,
            "duplicates": sum(r["duplicates"] for r in rows),
            "wrong_types": sum(r["wrong_types"] for r in rows),
            "grounding_violations": sum(len(r["grounding"]) for r in rows),
            "dumps": sum(len(r["dumps"]) for r in rows),
            "unread": sum(1 for r in rows if r.get("unread")),
            "resolved": f"{res[0]}/{res[1]}", "superseded": f"{sup[0]}/{sup[1]}"}


def table(result: dict[str, Any], held_out_rows: bool = False) -> str:
    """Per-session rows; held-out sessions only with ``held_out_rows`` (their part is read
    as totals, so that nobody tunes on it by looking)."""
    lines = ["| session | part | expected | full | part | written | useful | dup | wrong type | ungrounded |",
             "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in result["sessions"]:
        if r["held_out"] and not held_out_rows:
            continue
        lines.append(f"| {r['key']} | {'held-out' if r['held_out'] else 'dev (exposed)' if r['exposed'] else 'dev'} | {r['expected']} | "
                     f"{r['full']} | {r['part']} | {r['written']} | {r['useful']} | {r['duplicates']} | "
                     f"{r['wrong_types']} | {len(r['grounding'])} |")
    return "\n".join(lines)


def main() -> None:
    from fresh_sessions import PARTS

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--part", choices=("dev", "held-out", "all", "new", *PARTS), default="dev",
                    help="new: the session-7 held-out part (real_sessions.NEW_HELD_OUT), on its own; "
                         "fresh9, fresh11, ...: the parts of fresh_sessions.PARTS, read from "
                         "$DUALTRACE_FRESH_CORPUS")
    ap.add_argument("--backend", default="offline", help="offline | anthropic | claude-cli | auto")
    ap.add_argument("--fake-server", action="store_true",
                    help="point the anthropic backend at the local fake Messages API (plumbing only)")
    ap.add_argument("--json", type=Path, help="write the full result here")
    ap.add_argument("--verbose", action="store_true", help="print every session's memories to stderr")
    ap.add_argument("--held-out-rows", action="store_true",
                    help="also print the held-out sessions' rows (default: their totals only)")
    args = ap.parse_args()
    result = run(args.part, args.backend, args.fake_server, args.verbose)
    if result.get("skipped"):
        print(f"skipped --part {args.part}: {result['skipped']}")
        return
    print(table(result, args.held_out_rows))
    if result["fake_server_requests"] is not None:
        print(f"fake server: {result['fake_server_requests']} Messages API requests")
    if args.part == "new" or args.part in PARTS:
        result["new_held_out" if args.part == "new" else args.part] = result.pop("held_out")
    if args.json:
        args.json.write_text(json.dumps(result, indent=1))
    for name in ("dev", "exposed", "held_out", "new_held_out", *PARTS):
        if result.get(name):
            print(f"{name}: {json.dumps(result[name])}")
    for r in result["sessions"]:
        if not r["held_out"] or args.held_out_rows:
            for line in r["dumps"]:
                print(f"dump {r['key']}: {line}")
        if r.get("unread"):
            print(f"unread {r['key']}: {r['unread']}")


if __name__ == "__main__":
    main()
