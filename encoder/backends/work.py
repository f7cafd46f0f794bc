"""What the agent found and did, read from a session's structure (offline encoder).

Real prompts are "work on X" or "continue": the knowledge of an agentic session is in
what the agent changed at the user's request, what the user corrected along the way,
what broke and what fixed it. Three readers, each using only the session's own text:

* :func:`tasks` - a user's request, the corrections that followed it (including a
  rejected tool call's reason), the files the work really changed (not rejected, not
  failed, not deleted again), its commits and the agent's closing report;
* :func:`fix_arcs` - a failing check (test run, type check, linter), the edits made
  after it, and the same check passing: one arc per failure signature, with the cause
  the agent stated and the fix's files;
* :func:`compaction_notes` - the request and the hard-won constraints of a compacted
  summary (Claude Code's "Primary Request and Intent" / "Key Technical Concepts").

Pasted material (logs, diffs, HTML, test output) is context here, never the user's
statement: :func:`prose` keeps only the lines a person wrote.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Sequence
from dataclasses import dataclass, field

from dualtrace.encoder.cues import TEST_COMMAND, check_command, is_dump, stuck_run
from dualtrace.encoder.matching import GENERIC_ERRORS
from dualtrace.encoder.session import Event, Session, commit_body

_I = re.I
# ---------------------------------------------------------------- pasted material

_PASTE_LINE = re.compile(
    r"^\s*(?:[+\-@]{1,3}(?:\s|$)|@@|diff --git|index [0-9a-f]+|---\s|\+\+\+\s|<[/!a-zA-Z][^>]*>|"
    r"E\s{2,}|={3,}|_{3,}|-{3,}|\[\.\.\.|>>>|\$ |#\s*\d|File \"|at \S+\(|Traceback|\d+ (?:passed|failed)|"
    r"(?:PASSED|FAILED|ERROR)\b|\S+::\S+|\d{4}-\d\d-\d\d[T ]\d\d:\d\d|\s{4,}\S|\|.*\||[{}\[\]();,]+$|"
    r"[\w/.-]+\.\w+:\d+|error\[|warning\[|\s*\d+\s*[|│→]|.*\S {5,}\S)")
_TAG = re.compile(r"</?[a-zA-Z][\w:-]*(?:\s[^<>]*)?/?>")
_FENCE = re.compile(r"```.*?(?:```|\Z)", re.S)


def prose(text: str) -> str:
    """The lines of a user message that a person wrote: pasted logs, diffs, HTML and
    test output dropped (they stay in the digest as context)."""
    text = _FENCE.sub("\n", text)
    text = re.sub(r"\[image(?: ?#?\d+)?\]", " ", text, flags=_I)
    kept: list[str] = []
    in_diff = False
    for raw in text.replace("\\\n", "\n").splitlines():
        line = raw.rstrip("\\").strip()
        if re.match(r"(?:diff --git|--- a/|\+\+\+ b/|@@ )", line):
            in_diff = True  # a pasted patch runs to the end of the message
        if not line or in_diff:
            continue
        if _PASTE_LINE.match(raw) or _PASTE_LINE.match(line):
            continue
        letters = sum(ch.isalpha() or ch == " " for ch in line)
        if letters < 0.7 * len(line) or (len(line) > 400 and line.count(" ") < len(line) / 12):
            continue
        kept.append(_TAG.sub("", line))
    return " ".join(" ".join(kept).split())


# ---------------------------------------------------------------- requests

_TRIVIAL = re.compile(
    r"^\W*(?:continue|go on|go ahead|keep going|proceed|yes|yep|yeah|no|ok(?:ay)?|sure|thanks?(?: you)?"
    r"|commit(?: (?:it|this|that))?|push(?: it)?|commit and push|did you (?:push|commit)\??"
    r"|looks good|lgtm|great|perfect|nice|done\??|next)\W*$", _I)
_POLITE = re.compile(
    r"^(?:(?:hey|hi|hello|ok(?:ay)?|so|alright|now|great|thanks!?|thank you!?)[, !.]+(?:claude[, !.]+)?)*"
    r"(?:claude[, ]+)?(?:(?:can|could|would) you (?:please )?|please |i'?d like (?:your help with |you to )?"
    r"|i want you to |would you mind |let'?s )?", _I)
# Fillers around a request that a description never needs: a slash command's name, an
# opening "oh," / "hmm,", "help me to", "and continue until all are done", an aside that
# only carries a link.
_SLASH_CMD = re.compile(r"^/[\w:.-]+\s+(?=\S)")
_INTERJECTION = re.compile(r"^(?:(?:oh(?: no| well)?|hmm+|ah|well|actually|ok(?:ay)?|so|hey|hi|hello|alright"
                           r"|now|great|cool|nice|thanks!?|thank you!?|claude)\s*[,!.:]+\s*)+", _I)
# "<why>, can you please <request>": the why leads, the request follows it
_ASK_AFTER = re.compile(r"^(?P<why>[^?]{12,200}?)[,;.]\s+(?:so\s+)?(?:(?:can|could|would) you (?:please )?"
                        r"|please )(?P<ask>.{8,})$", _I)
_HELP = re.compile(r"^(?:help(?: me)?(?: to)?|i need (?:your )?help (?:to|with)|(?:can|could|should|shall) we)\s+",
                   _I)
_UNTIL_DONE = re.compile(r",?\s+and (?:continue|keep going)(?: until (?:all (?:are|is)|everything is|it'?s"
                         r"|they'?re|they are|you'?re) (?:done|finished))?(?=[\s:.,;]|$)", _I)
_URL_ASIDE = re.compile(r"\s*\([^()]*https?://[^()]*\)(\s+(?=[A-Z]))?")
_EMOTICON = re.compile(r"\s*(?::-?[()DPp/]|;-?\))(?=\s|$)")


def unpolite(text: str) -> str:
    """A request or statement without its politeness and fillers, same words otherwise:
    "oh, I didn't find those links helpful, can you please replace them with ..." ->
    "I didn't find those links helpful: replace them with ..."."""
    t = " ".join(text.split())
    t = _SLASH_CMD.sub("", t)
    t = _INTERJECTION.sub("", t)
    m = _ASK_AFTER.match(t)
    if m:
        t = f"{m.group('why').rstrip(' ,;.')}: {m.group('ask')}"
    else:
        t = _POLITE.sub("", t, count=1)
    t = _HELP.sub("", t)
    t = _UNTIL_DONE.sub("", t)
    t = _URL_ASIDE.sub(lambda u: ". " if u.group(1) else "", t)
    t = _EMOTICON.sub("", t).strip()
    return t[0].upper() + t[1:] if t[:1].islower() else t


_SENT_SPLIT = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9`\"'(@])")
_CONTENT = re.compile(r"[A-Za-z][A-Za-z0-9_.+#/-]{2,}")
_FILLER = frozenset("""the and for with that this from into onto have has had was were are
    you your please can could would should will shall just also then than them they its it's
    about there here what which when where who how why does did done make made need needs want
    like some more most very really actually maybe think look have let lets let's sure okay yes
    work working hey claude thanks thank help all are not but our out now get got""".split())


def content_words(text: str) -> list[str]:
    words = (w.rstrip(".-/") for w in _CONTENT.findall(text))
    return [w for w in words if len(w) > 2 and w.lower() not in _FILLER]


def looks_pasted(text: str) -> bool:
    """A message that carries pasted output, a diff or markup (not only prose)."""
    lines = [ln for ln in text.splitlines() if ln.strip()]
    pasted = sum(1 for ln in lines if _PASTE_LINE.match(ln) or _PASTE_LINE.match(ln.strip()))
    return pasted >= 3 or bool(_TAG.search(text) and len(_TAG.findall(text)) >= 3)


def is_trivial(text: str) -> bool:
    return bool(_TRIVIAL.match(text.strip())) or len(content_words(text)) < 2


def sentences(text: str) -> list[str]:
    """The sentences of ``text``; a backticked command is never cut (`go test ./... 2>&1`)."""
    out: list[str] = []
    for part in _SENT_SPLIT.split(" ".join(text.split())):
        if out and out[-1].count("`") % 2 and "`" in part and len(out[-1]) < 300:
            out[-1] = f"{out[-1]} {part}"  # the split fell inside a backticked span
        else:
            out.append(part)
    return [s.strip() for s in out if len(s.strip()) > 2]


_ITEM = re.compile(r"^\s*(?:[-*+\u2022]|\d{1,2}[.)])\s+")


def block_sentences(text: str) -> list[str]:
    """The sentences of ``text`` read by block: a paragraph (its wrapped lines joined) or
    a list item is never run into the next one ("... `update()`" then "5. Updated ...");
    the item's marker is left out."""
    blocks: list[list[str]] = []
    for line in text.splitlines():
        if not line.strip():
            blocks.append([])
        elif _ITEM.match(line) or not blocks:
            blocks.append([_ITEM.sub("", line)])
        else:
            blocks[-1].append(line)
    return [x for b in blocks if b for x in sentences(" ".join(b))]


# A person types the next sentence in lower case too ("... rather than regenerating it.
# also we don't need to check ..."): a period after a plain word, then a plain lower-case
# word, ends a sentence, unless the period closes an abbreviation.
_LOWER_NEXT = re.compile(r"(?<=[a-z]{2}[.!?])\s+(?=[a-z]+[\s,'\u2019])")
_ABBREVIATION = re.compile(r"\b(?:etc|vs|cf|al|approx|incl|resp|esp|ca|viz|fig|no|ch|sec|ver|vol)[.]$", _I)


def first_sentence(text: str) -> str:
    """The first sentence of ``text``, a lower-case next sentence included (see above)."""
    text = " ".join(text.split())
    first = sentences(text)[:1]
    text = first[0] if first else text
    for m in _LOWER_NEXT.finditer(text):
        if not _ABBREVIATION.search(text[: m.start()]):
            return text[: m.start()]
    return text


def clean_sentence(text: str, limit: int = 200) -> str:
    """One clean sentence of at most ``limit`` chars, cut at a clause or word boundary."""
    text = " ".join(text.replace("**", "").replace("__", "").split())
    text = re.sub(r"^[#>*\-\d.)\s]+", "", text)
    text = re.sub(r"[\u2600-\u27bf\U0001f300-\U0001faff]\ufe0f?\s*", "", text).strip()
    text = unpolite(text)
    if text[:1].islower():
        text = text[0].upper() + text[1:]
    text = first_sentence(text)
    if len(text) > limit:
        cut = text[:limit]
        for sep in ("; ", ": ", ", ", " - ", " ("):
            at = cut.rfind(sep)
            if at >= limit // 2:
                cut = cut[:at]
                break
        else:
            cut = cut.rsplit(" ", 1)[0]
        # never end on a dangling little word ("... both try to")
        cut = re.sub(r"(?:\s+(?:a|an|the|to|of|for|with|in|on|at|by|or|and|but|is|are|was|that|which|"
                     r"from|into|as|so|if|when|then))+\s*$", "", cut, flags=_I)
        text = cut.rstrip(" ,;:-(")
    text = text.rstrip("?!").rstrip()
    if text and text[-1] not in ".)`'\"":
        text += "."
    return text


def _outcome(text: str, limit: int = 4) -> list[str]:
    """The substantive sentences and bullets of the agent's closing report."""
    out: list[str] = []
    for raw in _FENCE.sub("\n", text).splitlines():
        if raw.lstrip().startswith(">"):
            continue  # a quote (a file, a page, the user): not the agent's report
        line = " ".join(raw.replace("**", "").split()).strip()
        line = re.sub(r"^[#\s]+", "", line)
        line = re.sub(r"[\u2600-\u27bf\U0001f300-\U0001faff]\ufe0f?\s*", "", line).strip()
        if len(line) < 12 or line.endswith(":") and len(line) < 60:
            continue
        for sent in sentences(line):
            if re.match(r"^(?:done|perfect|great|excellent|all done|summary|here'?s|now|let me|i'?ll|"
                        r"i will|the (?:changes|fixes) (?:i made|are))\b", sent, _I) and len(sent) < 80:
                continue
            out.append(sent if len(sent) <= 300 else clean_sentence(sent, 300))
            if len(out) >= limit:
                return out
    return out


# ---------------------------------------------------------------- files


def relative(path: str, cwd: str | None) -> str | None:
    """A project-relative path, or None for a file outside the project."""
    prefix = (cwd or "").rstrip("/") + "/"
    if prefix != "/" and path.startswith(("/", "~")):  # ~ : a redacted home path
        if not path.startswith(prefix):
            return None
        return path[len(prefix):]
    return path


def _removed(command: str, cwd: str | None) -> list[str]:
    """Paths a shell command deletes (``rm`` / ``git rm``)."""
    out: list[str] = []
    for part in re.split(r"&&|;|\|\|", command):
        try:
            words = shlex.split(part)
        except ValueError:
            continue
        if words[:2] == ["git", "rm"]:
            words = words[1:]
        if not words or words[0] != "rm":
            continue
        for w in words[1:]:
            if not w.startswith("-"):
                rel = relative(w, cwd)
                if rel:
                    out.append(rel.rstrip("/"))
    return out


# ---------------------------------------------------------------- tasks


@dataclass
class Task:
    request: Event
    followups: list[str] = field(default_factory=list)  # corrections, as the user said them
    files: dict[str, str] = field(default_factory=dict)  # path -> create | modify | delete
    deleted: set[str] = field(default_factory=set)
    commits: list[Event] = field(default_factory=list)
    report: str = ""  # the agent's last message of the task
    answer: str = ""  # the agent's answer to a question that led to the task
    start: int = 0
    end: int = 0

    @property
    def changed(self) -> list[str]:
        return [p for p, kind in self.files.items() if kind != "delete" and p not in self.deleted
                and not any(p.startswith(d + "/") for d in self.deleted)]


_AFTER_STOP = "(after the user stopped a tool call)"


def is_doc(path: str) -> bool:
    return path.lower().endswith((".md", ".rst", ".txt"))


def tasks(session: Session) -> list[Task]:
    """The user's requests and the work each one caused, in order.

    A turn joins the task before it when it corrects that work (it follows a rejected
    or interrupted tool call, or edits the same files) or only documents it (edits of
    .md files right after); requests that changed nothing are not tasks.
    """
    merged: list[Task] = []
    for t in _turns(session):
        prev = merged[-1] if merged else None
        if prev is not None and _joins(prev, t):
            _absorb(prev, t)
        else:
            merged.append(t)
    # a file deleted by a later task is no change of this one
    gone: set[str] = set()
    for t in reversed(merged):
        t.deleted |= gone
        gone |= t.deleted
    return [t for t in merged if t.changed or t.commits]


def _turns(session: Session) -> list[Task]:
    """One task per non-trivial user request, with what happened until the next one."""
    cwd = session.cwd
    turns: list[Task] = []
    current: Task | None = None
    interrupted = False
    for i, e in enumerate(session.events):
        main = e.agent is None
        if e.kind == "user" and main:
            if e.detail and e.detail.startswith("rejection"):
                if current is not None and prose(e.text):
                    current.followups.append(prose(e.text))
                continue
            words = prose(e.text)
            if current is not None and (is_trivial(words) or not words):
                continue
            current = Task(request=e, start=i, end=i)
            if interrupted and turns:
                current.followups.append(_AFTER_STOP)
            turns.append(current)
            interrupted = False
            continue
        if current is None:
            continue
        current.end = i
        if e.kind == "tool" and e.detail == "rejected" and main:
            interrupted = True
        else:
            _note_event(current, e, cwd, main)
    return turns


def _note_event(task: Task, e: Event, cwd: str | None, main: bool) -> None:
    """What one event of a turn changed: files edited or removed, commits, the report."""
    if e.kind == "edit" and e.path and not e.is_error:
        rel = relative(e.path, cwd)
        if rel:
            task.files[rel] = "delete" if e.edit_kind == "delete" else (
                task.files.get(rel) or e.edit_kind or "modify")
            task.deleted.discard(rel)
    elif e.kind == "command" and e.command and not e.is_error and e.exit_code in (0, None):
        for rel in _removed(e.command, cwd):
            task.deleted.add(rel)
    elif e.kind == "commit":
        task.commits.append(e)
    elif e.kind == "assistant" and main and e.detail != "thinking" and e.text.strip():
        task.report = e.text


def _joins(prev: Task, t: Task) -> bool:
    """``t`` continues ``prev``: after a stopped tool call, on the same files, only
    documenting it, or a short request right after a question that changed nothing."""
    short = len(content_words(prose(t.request.text))) < 8
    return (t.followups[:1] == [_AFTER_STOP]
            or bool(t.files and set(t.files) & set(prev.files))
            or bool(t.files and prev.files and all(is_doc(p) for p in t.files))
            or bool(t.files and not prev.files and not prev.commits and short))


def _absorb(prev: Task, t: Task) -> None:
    words = prose(t.request.text)
    if words:
        prev.followups.append(words)
    prev.followups.extend(f for f in t.followups if f != _AFTER_STOP)
    if not prev.files and not prev.answer:
        prev.answer = prev.report
    for p, kind in t.files.items():
        prev.files.setdefault(p, kind)
        if kind == "delete":
            prev.files[p] = kind
    prev.deleted |= t.deleted
    for p in list(prev.deleted):
        if p in t.files and t.files[p] != "delete":
            prev.deleted.discard(p)
    prev.commits += t.commits
    prev.report = t.report or prev.report
    prev.end = t.end


# ---------------------------------------------------------------- fix arcs

_FAILED_TEST = re.compile(r"(?:FAILED|FAIL:?|✗|×)\s+([\w/.-]+(?:::[\w\[\]-]+)+|[\w/.-]+\.\w+\s*>\s*[^\n]+)")
# The failing test's head when no summary line names it: pytest's section header
# ("____ test_total ____", "____ CartTest.test_total ____", a `| head` cut the summary off)
# and unittest's "FAIL: test_total (tests.test_cart.CartTest)".
_TEST_HEAD = re.compile(r"^_{3,} ((?:\w+\.)?test\w*(?:\[[^\]\n]{0,80}\])?) _{3,}$"
                        r"|^(?:FAIL|ERROR): (test\w*) \([\w.]+\)", re.M)
_ERROR_TYPE = re.compile(r"\b([A-Z]\w*(?:Error|Exception|Failure))\b(?::\s*([^\n]{3,120}))?")
_RULE = re.compile(r"\b(?:error|warning)\[([\w-]+)\]:?\s*([^\n]{0,120})")
_LOCATED = re.compile(r"([\w./-]+\.\w{1,5}):\d+(?::\d+)?\s*[-:]\s*(?:error|warning)[:\s]+([^\n]{3,140})", _I)
_ASSERT = re.compile(r"^\s*E\s+(.{3,140})$", re.M)
# Words that state why something failed. A step the agent plans ("Now I need to understand
# how ...", "the fix is to ...") states no cause, however close to the failure it stands.
_CAUSE = re.compile(
    r"\b(?:because|due to|caused by|the (?:root |real |actual )?(?:issue|problem|bug|cause|reason|culprit)(?: here)? (?:is|was)"
    r"|there'?s the bug|root cause|fails? because|failing because|is failing since|stems from"
    r"|doesn'?t (?:include|have|exist)|instead of"
    # "X is not being used", "it's not being called", "the flag wasn't set"
    r"|(?:\b(?:is|are|was|were) (?:not|never)|['\u2019](?:s|re) not|\b(?:isn|aren|wasn|weren)['\u2019]?t)"
    r" (?:being |getting )?(?:\w+(?:ed|en)|set|put|run|sent|read|built|found|kept|shown|thrown)"
    r")\b", _I)
# "X was Y, so Z": a state and what it led to.
_STATE_SO = re.compile(r"\b(?:is|are|was|were|had|has|returned|returns)\b[^.;!?]{2,120}?,?\s+so\s+(?!that\b)\w+",
                       _I)


@dataclass
class Arc:
    command: str
    signature: str  # what failed: test id, error type + message, rule + file
    error_line: str
    cause: str
    fix_files: list[str]
    passed: str | None  # the passing re-run's command
    failures: int
    first: int
    last: int
    commits: list[Event] = field(default_factory=list)
    also: list[str] = field(default_factory=list)  # other checks that showed this failure
    # Where the failure came from: "run" (a check the agent or user ran in the session) or
    # "pasted" (output the user pasted into a message, or ran with the host's shell escape
    # and then described). ``verified`` says what marks it fixed: "re-run" (the same check
    # passed), "user" (the user said it works now), "agent" (the agent said it fixed it,
    # nothing re-ran it), "" (not fixed in the session).
    origin: str = "run"
    verified: str = "re-run"
    evidence: str = ""  # the user's or the agent's words that marked it fixed
    asked: int | None = None  # the user message that brought the failure in
    tests: frozenset[str] = frozenset()  # the project's test files the failing output names
    # Later failures folded into this one's episode (their telling lines and stated causes)
    # and the user messages that brought them in.
    followups: list[str] = field(default_factory=list)
    asks: list[int] = field(default_factory=list)


def _norm_cmd(command: str) -> str:
    cmd = re.sub(r"\s+(?:2>&1|\|\s*(?:tail|head)\b.*|-v+|--verbose|-x|-q|--tb=\w+|-s)\b", " ", command)
    return " ".join(cmd.split())


_NAMED_TEST = re.compile(
    r"^\s*\d+\) test (.{3,120}?) \(([\w.]+)\)\s*$"  # ExUnit
    r"|^\s*● (?:[^›\n]+ › )*([^\n]{3,120})$"  # Jest / Vitest
    r"|^--- FAIL: (\w+)"  # go test
    r"|^---- ([\w:]+) stdout ----"  # cargo test
    r"|^\s*FAIL \[\s*[\d.]+s\] \S+ ([\w:]+)"  # cargo nextest
    r"|^(\w+#test_\w+) \[[^\]\n]+\]:?$", re.M)  # Minitest (bin/rails test)
_ASSERTION = re.compile(r"^\s*(Assertion with [^\n]{1,40} failed|assert(?:ion)?\w*(?: `[^`\n]{1,60}`)? failed[^\n]{0,80}"
                        r"|expected[^\n]{3,100}|\*\* \(\w+(?:Error|Exception)\)[^\n]{0,100})", re.M | _I)


# Elixir's FunctionClauseError: its head ("** (FunctionClauseError) no function clause
# matching in M.f/2"), or, when a ``| tail`` cut the head off, the line that opens the
# argument dump.
_NO_CLAUSE = re.compile(r"no function clause matching in ([\w.!?]+/\d+)"
                        r"|The following arguments were given to ([\w.!?]+/\d+)")


def signature_of(output: str) -> tuple[str, str]:
    """(signature, the telling line) of a failing check's output."""
    named = _NAMED_TEST.search(output)
    if named:
        name = next(g for g in named.groups() if g)
        what = _ASSERTION.search(output[named.end():named.end() + 2000])
        words = " ".join(content_words(re.sub(r"[^\w\s/.-]", " ", name))[:6])
        line = " ".join((what.group(1) if what else named.group(0)).split())
        return f"{words} {'assertion' if what and 'ssert' in what.group(1) else 'failed'}", \
            f"test {name.strip()}: {line}"[:200]
    test = _FAILED_TEST.search(output) or _TEST_HEAD.search(output)
    err = _ERROR_TYPE.search(output)
    if test:
        name = next(g for g in test.groups() if g).split("::")[-1].split(">")[-1].strip()
        line = next((m.group(1) for m in _ASSERT.finditer(output)), None) or (
            err.group(0) if err else test.group(0))
        return f"{name} {err.group(1) if err else 'failed'}", " ".join(line.split())[:200]
    rule = _RULE.search(output)
    if rule:
        where = re.search(r"-->\s*([\w./-]+)", output)
        where_s = where.group(1).rsplit("/", 1)[-1] if where else ""
        return f"{rule.group(1)} {where_s}".strip(), " ".join(rule.group(0).split())[:200]
    loc = _LOCATED.search(output)
    if loc:
        located = content_words(re.sub(r'"[^"]*"', "", loc.group(2)))[:4]
        return f"{loc.group(1).rsplit('/', 1)[-1]} {' '.join(located)}", " ".join(loc.group(0).split())[:200]
    clause = _NO_CLAUSE.search(output)
    if clause and not (err and err.group(2) and not is_dump(err.group(0))):
        if clause.group(1):
            fun = clause.group(1)
            return f"FunctionClauseError {fun.rsplit('.', 1)[-1]}", \
                f"FunctionClauseError: no function clause matching in {fun}"
        # only the dump's opening line is left: say what it means, never name the error
        fun = clause.group(2)
        return f"{fun.rsplit('.', 1)[-1]} no matching clause", \
            f"no clause of {fun} matched the arguments it was given"
    if err:
        msg = content_words(err.group(2) or "")[:4]
        if err.group(1) in GENERIC_ERRORS and not msg:
            # "AssertionError: 90 != 85": an error that says only that something failed,
            # whose values are all its message says
            msg = re.findall(r"-?\d[\w.]*", err.group(2) or "")[:3]
        return f"{err.group(1)} {' '.join(msg)}".strip(), " ".join(err.group(0).split())[:200]
    for line in output.splitlines():
        line = " ".join(line.split())
        # a dumped value that happens to hold the word "error" says nothing about the failure
        if re.search(r"\b(?:error|failed|failure|fatal)\b", line, _I) and not re.fullmatch(
                r"(?:Error: )?Exit code \d+", line) and not is_dump(line):
            return " ".join(content_words(line)[:5]), line[:200]
    return "", ""


def _same_check(failing: str, later: str, signature: str) -> bool:
    a, b = _norm_cmd(failing), _norm_cmd(later)
    if a == b:
        return True
    # a narrower run of the same runner that targets the failing test's file
    head_a, head_b = a.split()[:3], b.split()[:3]
    if head_a[:2] != head_b[:2]:
        return False
    target = signature.split()[0] if signature else ""
    files = re.findall(r"[\w/.-]+\.\w{1,5}", b)
    return bool(target) and any(f.rsplit("/", 1)[-1].split(".")[0] in a or target in f for f in files)


_PYTEST_FAILED = re.compile(r"^(?:FAILED|ERROR) [\w/.-]+::(?:\w+::)*([\w\[\]-]+)(?: - [^\n]*)?$", re.M)
MAX_FAILURES_PER_RUN = 3


def _pytest_section(output: str, name: str) -> str:
    """pytest's traceback section of the test ``name`` ("____ name ____" to the next header)."""
    head = re.search(rf"^_{{3,}} (?:\w+\.)?{re.escape(name)} _{{3,}}$", output, re.M)
    if not head:
        return ""
    end = re.compile(r"^(?:_{3,} \S.* _{3,}|={3,}.*)$", re.M).search(output, head.end())
    return output[head.start():end.start() if end else len(output)]


def _failure_blocks(output: str) -> list[str]:
    """The parts of a check's output about each failing test, when it names several:
    pytest's FAILED lines (with each test's traceback section), ExUnit's, Jest's, go's and
    cargo's failure heads, unittest's FAIL lines (each to the next)."""
    failed = list(_PYTEST_FAILED.finditer(output))
    if len(failed) >= 2:
        return [f"{_pytest_section(output, m.group(1))}\n{m.group(0)}" for m in failed]
    for pattern in (_NAMED_TEST, _TEST_HEAD):
        heads = list(pattern.finditer(output))
        if len(heads) >= 2:
            return [output[h.start():(heads[k + 1].start() if k + 1 < len(heads) else len(output))]
                    for k, h in enumerate(heads)]
    return []


def signatures_of(output: str) -> list[tuple[str, str, str]]:
    """(signature, telling line, the output's part about it) of each failure a failing
    check's output reports: one per failing test when it names several ("2 failed"), at
    most MAX_FAILURES_PER_RUN; tests that fail with one specific error and message (every
    test importing a broken module) are one failure. Else the one :func:`signature_of`."""
    out: list[tuple[str, str, str]] = []
    seen: set[str] = set()
    for block in _failure_blocks(output):
        sig, line = signature_of(block)
        err = _ERROR_TYPE.search(line)
        key = line if err and err.group(1) not in GENERIC_ERRORS else re.sub(r"\[[^\]]*\]", "", sig)
        if sig and key not in seen:
            seen.add(key)
            out.append((sig, line, block))
    if len(out) >= 2:
        return out[:MAX_FAILURES_PER_RUN]
    sig, line = signature_of(output)
    return [(sig, line, output)] if sig else []


def _own_files(fix: list[str], block: str) -> list[str]:
    """Of the files edited after a run that failed several ways, those one failure's part
    of the output names (``shop/cart.py`` for a traceback through ``test_cart.py``); all of
    them when it names none."""
    def stem(path: str) -> str:
        name = path.rsplit("/", 1)[-1].split(".")[0]
        return re.sub(r"^test_|_test$|_spec$", "", name)

    own = [f for f in fix if len(stem(f)) >= 3 and re.search(rf"\b(?:test_)?{re.escape(stem(f))}\b", block)]
    return own or fix


def fix_arcs(session: Session, limit: int = 2) -> list[Arc]:
    """Failing check -> edits -> the same check passing, one arc per failure signature
    (a run that fails several ways gives one arc per failure, :func:`signatures_of`)."""
    events = session.events
    arcs: dict[str, Arc] = {}
    for i, e in enumerate(events):
        if e.kind == "user" and e.agent is None and not (e.detail or "").startswith("rejection"):
            pasted = pasted_failures(e.text)
            named = tuple(p[0].split()[0] for p in pasted)
            for sig, line, command, block in pasted:
                if sig in arcs:
                    arcs[sig].failures += 1
                    continue
                arc = pasted_arc(session, i, sig, line, command, block if len(pasted) > 1 else "",
                                 tuple(o for o in named if o != sig.split()[0]))
                if arc is not None:
                    arcs[arc.signature] = arc
            continue
        failed = e.failed
        if e.kind != "command" or not failed or not check_command(e.command or ""):
            continue
        found = signatures_of(e.result or "")
        others = tuple(s.split()[0] for s, _line, _block in found)
        for sig, line, block in found:
            if sig in arcs:
                arcs[sig].failures += 1
                continue
            arc = _run_arc(session, i, sig, line, block if len(found) > 1 else "",
                           tuple(o for o in others if o != sig.split()[0]))
            if arc is not None:
                arcs[sig] = arc
    kept = list(arcs.values())
    for arc in kept:
        arc.commits = related_commits(session, arc.fix_files, after=arc.first, until=arc.last)
    kept.sort(key=lambda a: (bool(a.cause), a.failures, len(a.fix_files)), reverse=True)
    return sorted(kept[:limit], key=lambda a: a.first)


def _run_arc(session: Session, i: int, sig: str, line: str, block: str,
             others: tuple[str, ...]) -> Arc | None:
    """The arc of the failure ``sig`` of the failing check at event ``i``; ``block`` is
    the output's part about it when the run failed several ways (``others``: the other
    failures' tests), so the cause and the fix's files are this failure's own."""
    events = session.events
    e = events[i]
    fix: list[str] = []
    cause = ""
    passed_at = None
    asked: int | None = None
    for j in range(i + 1, len(events)):
        f = events[j]
        if f.kind == "edit" and f.path and not f.is_error:
            rel = relative(f.path, session.cwd)
            if rel and rel not in fix:
                fix.append(rel)
        elif f.kind == "assistant" and f.agent is None and f.detail != "thinking" and not cause:
            cause = _cause_of(f.text, sig, others) if block else _cause_of(f.text, sig)
        elif f.kind == "command" and f.command and check_command(f.command):
            ok = not f.is_error and f.exit_code in (0, None)
            if _same_check(e.command or "", f.command, sig):
                if ok and fix:
                    passed_at = j
                    break
                if not ok and sig not in {s for s, _line, _block in signatures_of(f.result or "")}:
                    # the same check now fails differently: this failure is gone
                    if fix:
                        passed_at = j
                    break
        elif f.kind == "user" and f.agent is None and not (f.detail or "").startswith("rejection"):
            if e.tool == "user-shell" and asked is None and not fix:
                asked = j  # what the user says about the failure they ran is its framing
            elif not fix and _answers_diagnosis(events, i, j, cause):
                continue  # "Let it return 0.0": the user answering the diagnosis, not moving on
            elif not is_trivial(prose(f.text)):
                break  # the user moved on
    if passed_at is None:
        return None
    if not cause and not events[passed_at].failed:
        cause = _closing_cause(events, passed_at, sig)  # not when it now fails differently
    if asked is not None and _updates_tests(events[asked].text, fix):
        return None  # the tests were changed to the intended behaviour: no failure fixed
    return Arc(command=e.command or "", signature=sig, error_line=line, cause=cause,
               fix_files=_own_files(fix, block) if block else fix, passed=events[passed_at].command,
               failures=1, first=i, last=passed_at, origin="pasted" if asked is not None else "run",
               asked=asked, tests=frozenset(failing_test_files(block or e.result or "")))


# ---------------------------------------------------------------- failures the user brings in

# Output a tool wrote, pasted into a message: a person writes "the tests fail", a runner
# writes these lines (a traceback, pytest's FAILED/E lines and summary, an exception line,
# a checker's located error, ExUnit/Jest/go/cargo failure heads).
_PASTED_FAILURE = re.compile(
    r"Traceback \(most recent call last\)|^\s*(?:FAILED|ERROR)\s+[\w/.-]+(?:::|\s+-\s)|^\s*E\s{2,}\S"
    r"|^\s*=+ [^\n]*\b\d+ (?:failed|errors?)\b|^\s*(?:[\w.]+\.)?[A-Z]\w*(?:Error|Exception):\s+\S"
    r"|^\s*(?:error|warning)\[[\w-]+\]|^\s*error(?: TS\d+)?:\s|^\s*[\w./-]+\.\w{1,5}:\d+(?::\d+)?:?\s*-?\s*error\b"
    r"|panicked at|^\s*\d+\) test |^--- FAIL:|^\s*\u25cf |^\s*\*\* \(\w+(?:Error|Exception)\)", re.M)
_PROMPT_CMD = re.compile(r"^\s*(?:\$|>|\u276f|%)\s+(.+)$", re.M)
_TICKED = re.compile(r"`([^`\n]{3,120})`")
# What closes a pasted failure when no check re-ran: the user saying it works, the agent
# saying it fixed it (after editing); "still fails" reopens it.
_STILL = re.compile(r"\b(?:still (?:fail\w*|broken|errors?|erroring|get(?:ting)?|see(?:ing)?|the same|happen\w*"
                    r"|not|doesn'?t|does not|crash\w*|throw\w*)|same (?:error|failure|problem|issue|traceback)"
                    r"|didn'?t (?:work|help|fix)|not fixed|no luck|now (?:it )?(?:fails|errors|crashes))\b", _I)
_WORKS = re.compile(r"\b(?:(?:it|that|this|everything) works(?: now)?|works now|(?:that|this) (?:worked|fixed it|did it)"
                    r"|(?:tests? )?pass(?:es)? now|(?:now )?all (?:tests )?pass|fixed,? thanks?|problem solved"
                    r"|looks good now|(?:it'?s|that'?s) fixed)\b", _I)
_FIXED_CLAIM = re.compile(
    r"^(?:fixed|resolved)\b|\b(?:(?:i'?ve|i have|this|that|which) (?:fixed|resolved)|(?:is|are|has been|have been|should be) (?:now )?"
    r"(?:fixed|resolved)|should (?:now )?(?:work|pass)|now (?:works|passes|pass|runs|loads|succeeds)"
    r"|(?:this|that|the (?:change|fix)) (?:fixes|resolves|should fix)|(?:fixed|resolves?) the (?:issue|error|bug"
    r"|problem|failure|crash|exception))\b", _I)
_TEST_CHANGE = re.compile(r"\b(?:update|change|adapt|adjust|rewrite|align)\w*\b[^.?!]{0,40}\btests?\b", _I)


def is_test_file(path: str) -> bool:
    name = path.rsplit("/", 1)[-1]
    return bool(re.match(r"(?:test_|.*(?:_test|\.test|\.spec|Test)\.\w+$)", name)) or "/test" in f"/{path}"


_OUTPUT_PATH = re.compile(r"(?<![\w.-])(/?(?:[\w.-]+/)*[\w.-]+\.[a-z]{1,5})(?=[:\s)(\"']|$)", re.M)
# a stack frame in a dependency, not in the project: "(phoenix 1.8.3) lib/...", site-packages,
# node_modules, deps/
_DEPENDENCY_FRAME = re.compile(r"^\s*\([\w-]+ \d[\w.-]*\) |site-packages/|node_modules/|(?:^|/)deps/", re.M)


def failing_test_files(output: str) -> set[str]:
    """The project's test files a failing check's output names (ExUnit's and Jest's
    locations, pytest's node ids, tracebacks' test frames); frames in dependencies and
    the project's library files are left out."""
    found: set[str] = set()
    for line in output.splitlines():
        if _DEPENDENCY_FRAME.search(line):
            continue
        found.update(m for m in _OUTPUT_PATH.findall(line) if is_test_file(m) and "/" in m)
    return found


def created_here(path: str, created: set[str | None]) -> bool:
    """True when ``path`` (relative or absolute, as a tool printed it) is a file of ``created``."""
    return any(c and (c.endswith(path.lstrip("/")) or path.endswith("/" + c)) for c in created)


def _updates_tests(framing: str, fix: list[str]) -> bool:
    """The user asked for the tests to follow an intended change and only tests were
    edited: the failure was the old expectation, nothing was broken."""
    return bool(fix) and all(is_test_file(f) for f in fix) and bool(_TEST_CHANGE.search(prose(framing)))


def pasted_failure(text: str) -> tuple[str, str, str] | None:
    """(signature, telling line, the check's command when the message names one) of a
    failure a user pasted into a message; None for prose about a failure."""
    raw = re.sub(r"```[\w-]*", "\n", text)
    if not _PASTED_FAILURE.search(raw):
        return None
    sig, line = signature_of(raw)
    if not sig:
        return None
    return sig, line, _pasted_command(raw)


def _pasted_command(raw: str) -> str:
    return next((c.strip() for c in _PROMPT_CMD.findall(raw) + _TICKED.findall(raw)
                 if check_command(c)), "")


def pasted_failures(text: str) -> list[tuple[str, str, str, str]]:
    """(signature, telling line, command, the output's part about it) of each failure a
    pasted run reports (:func:`signatures_of`: one per failing test); the one of
    :func:`pasted_failure` when it names one."""
    one = pasted_failure(text)
    if one is None:
        return []
    raw = re.sub(r"```[\w-]*", "\n", text)
    found = signatures_of(raw)
    if len(found) < 2:
        return [(*one, raw)]
    return [(sig, line, one[2], block) for sig, line, block in found]


def _family(command: str) -> str:
    return check_command(command) or ""


def _covers(later: str, signature: str, pasted: str, error_line: str) -> bool:
    """A later command that re-runs the check behind a pasted failure: the same runner
    as the pasted command, else a test run for a failing test, a checker for a rule."""
    if pasted:
        return _family(later) == _family(pasted)
    tested = bool(re.search(r"\b(?:test\w*|FAILED|assert\w*)\b", f"{signature} {error_line}", _I))
    return bool(TEST_COMMAND.search(later)) if tested else bool(
        re.search(r"\berror\[|\breport[A-Z]|:\d+:\d+", error_line) and _family(later))


def pasted_arc(session: Session, i: int, signature: str, line: str, command: str,
               block: str = "", others: tuple[str, ...] = ()) -> Arc | None:
    """A failure the user pasted at event ``i``, the agent's edits after it, and what marks
    it fixed (see :class:`Arc` ``verified``): a passing re-run of its check, else the
    user's "works now", else the agent's "fixed" after its last edit. A pasted
    failure the user moves on from before anything was edited is no incident. ``block``:
    the pasted output's part about this failure when the run failed several ways
    (``others``: the other failures' tests)."""
    events = session.events
    fix: list[str] = []
    cause, evidence, verified = "", "", ""
    failures, end = 1, None
    for j in range(i + 1, len(events)):
        f = events[j]
        if f.agent is not None:
            continue
        if f.kind == "edit" and f.path and not f.is_error:
            rel = relative(f.path, session.cwd)
            if rel and rel not in fix:
                fix.append(rel)
                evidence, verified, end = "", "", None  # edited again: a claim before is old
        elif f.kind == "assistant" and f.detail != "thinking":
            cause = cause or (_cause_of(f.text, signature, others) if block else _cause_of(f.text, signature))
            claim = _fix_claim(f.text)
            if fix and claim:
                evidence, verified, end = claim, "agent", j
        elif f.kind == "command" and f.command and _covers(f.command, signature, command, line):
            if not f.is_error and f.exit_code in (0, None):
                if fix:
                    evidence, verified, end = f.command, "re-run", j
                    break
            elif signature in {s for s, _line, _block in signatures_of(f.result or "")}:
                evidence, verified, end = "", "", None  # counted by fix_arcs
        elif f.kind == "user" and not (f.detail or "").startswith("rejection"):
            again = pasted_failure(f.text)
            words = prose(f.text)
            if (again and again[0] == signature) or _STILL.search(words):
                failures += 0 if again else 1  # a pasted repeat is counted by fix_arcs
                evidence, verified, end = "", "", None
                continue
            if fix and _WORKS.search(words):
                evidence, verified, end = words, "user", j
                break
            if again or not is_trivial(words):
                break  # the user moved on
    if not fix or _updates_tests(events[i].text, fix):
        return None
    return Arc(command=command, signature=signature, error_line=line, cause=cause,
               fix_files=_own_files(fix, block) if block else fix,
               passed=evidence if verified == "re-run" else None, failures=failures, first=i,
               last=end if end is not None else i, origin="pasted", verified=verified,
               evidence=evidence, asked=i, tests=frozenset(failing_test_files(block or events[i].text)))


def _fix_claim(text: str) -> str:
    """The agent's sentence saying it fixed something ("Fixed: ..."), outside code
    fences, at most 400 characters; "" when it says none."""
    claim = next((x for x in sentences(_FENCE.sub(" ", text)) if _FIXED_CLAIM.search(x)), "")
    return claim if len(claim) <= 400 else ""


@dataclass(frozen=True)
class ReportedFix:
    """How a failure the user reported in words was fixed in the session (see
    :func:`reported_fix`)."""
    verified: str  # "check" (the agent stated the fix, a check passed after the last edit), "user", "agent"
    evidence: str  # the agent's or the user's words
    check: str  # the check that passed after the last edit ("" when none ran)
    files: tuple[str, ...]  # the files edited for the fix
    cause: str = ""  # the agent's sentence on why it failed, before its fix claim
    claim: str = ""  # the agent's stated fix ("Fixed: ..."), also when the user confirmed


def reported_fix(session: Session, i: int, command: str = "") -> ReportedFix | None:
    """The fix of a failure the user reported at event ``i`` in their own words ("the
    login page returns 500 when ..."), which no failing run may show: the agent edits,
    then states the fix after its last edit ("Fixed: ..."), and the latest check run after
    that edit passed (a check, or ``command``, the failing command the report was matched
    to), when one ran; or the user says it works now. "Still failing" undoes a claim; a
    failure the user moves on from before anything was edited, or a session that ends
    without a stated fix, is not fixed (None)."""
    events = session.events
    fix: list[str] = []
    claim, check, check_ok = "", "", True
    cause = last_claim = ""
    for j in range(i + 1, len(events)):
        f = events[j]
        if f.agent is not None:
            continue
        if f.kind == "assistant" and f.detail != "thinking" and not cause:
            # Why it failed, as the agent said it on the way (review 10: nginx's 1 MB limit
            # was named and lost); a planned step ("let me check ...") is no cause.
            stated = _cause_of(f.text)
            cause = stated if stated and not _PLAN.search(stated) else ""
        if f.kind == "edit" and f.path and not f.is_error:
            rel = relative(f.path, session.cwd)
            if rel and rel not in fix:
                fix.append(rel)
            claim, check, check_ok = "", "", True  # edited again: what was said or run before is old
        elif f.kind == "assistant" and f.detail != "thinking":
            said = _fix_claim(f.text)
            if fix and said:
                claim = last_claim = said
        elif f.kind == "command" and f.command and (
                check_command(f.command) or command and command in " ".join(f.command.split())):
            check, check_ok = f.command, not f.failed  # the latest check after the last edit
            if not check_ok:
                claim = ""  # a claim made before a failing check is disproved
        elif f.kind == "user" and not (f.detail or "").startswith("rejection"):
            words = prose(f.text)
            if _STILL.search(words):
                claim, check, check_ok = "", "", True
                continue
            if fix and _WORKS.search(words):
                return ReportedFix("user", words, check if check_ok else "", tuple(fix),
                                   cause, claim or last_claim)
            if not fix and _answers_diagnosis(events, i, j, ""):
                continue  # the user answering the agent's question about it
            if not is_trivial(words):
                break  # the user moved on
    if not fix or not claim or not check_ok:
        return None
    return ReportedFix("check" if check else "agent", claim, check, tuple(fix), cause, claim)


# A request to repair something ("fix it", "the export button does nothing on Safari",
# "login loops forever"): what a diagnosis answers.
# A bare "fix" (the typo, the formatting, the lint) or "debug" (a --debug flag) is none:
# the request must say what goes wrong.
FIX_REQUEST = re.compile(
    r"\b(?:break(?:s|ing)?|broken|fail(?:s|ing|ed)?|crash(?:es|ing)?|buggy|(?:a|the|this|that) bug"
    r"|does ?n[o']?t (?:work|load|show|render|start|compile|build|save|update)|does nothing|stopped working"
    r"|no longer (?:works?|loads?|shows?)|loops? forever|(?:is|are) stuck|hangs?|freez(?:es|ing)"
    r"|(?:shows?|returns?|gives?|prints?) (?:the )?wrong|(?:is|are) wrong)\b", _I)
_NOT_A_BUG = re.compile(r"\b(?:typos?|formatting|format|lint(?:ing|er)?|wording|spelling|style|imports?"
                        r"|indentation|whitespace)\b", _I)
# The agent taking back what it said ("Actually, that wasn't it", "It looked like ..., but
# Safari 16 supports it"): the cause before it is void.
_RETRACTS = re.compile(
    r"\b(?:that'?s not it|that wasn'?t it|that was not it|wasn'?t the (?:cause|issue|problem)|not the (?:cause|issue|problem)"
    r"|ruled (?:it |that )?out|never ?mind|scratch that|i was wrong|turns out (?:it|that) (?:wasn'?t|isn'?t)"
    r"|on closer (?:look|inspection)|i was (?:mistaken|wrong)|i'?m wrong|mistaken about"
    r"|(?:that|this|the|my) (?:theory|guess|idea|hypothesis|explanation) (?:is|was) (?:wrong|incorrect|off))\b"
    r"|^(?:it )?(?:looked|seemed|looks|seems) like\b|^actually\b|^(?:hmm+|wait|oh)\W*,?\s*no\b", _I)
_STEM_SUFFIX = re.compile(r"(?:ing|ed|es|s)$")
# The user denying the agent's diagnosis ("no, that's not why", "that's not the problem").
_USER_DENIES = re.compile(r"^\W*no\b[,.!]?\s*(?:that'?s|it'?s|this is)? ?not\b|\b(?:that'?s|it'?s|this is|that is) not "
                          r"(?:it|why|the (?:cause|issue|problem|reason))\b|\bwrong (?:cause|diagnosis)\b", _I)


def _stems(text: str) -> set[str]:
    return {_STEM_SUFFIX.sub("", w.lower())[:6] for w in content_words(text) if len(w) > 2}


# What the agent changed, told as such ("Updated assertions: changed the tests to check X
# instead of Y", "I replaced A with B"): an account of the fix, not of the cause.
_TELLS_CHANGE = re.compile(
    r"^(?:i(?:'ve| have)?\s+|we(?:'ve| have)?\s+)?(?:added|updated|changed|replaced|switched|moved|removed"
    r"|renamed|rewrote|refactored|made|set|wrapped|converted|fixed|adjusted|modified|implemented|created)\b", _I)


@dataclass(frozen=True)
class Diagnosis:
    """A problem the user asked to have fixed, its cause as the agent stated it and the
    fix it edited, with no failing run to show it (see :func:`diagnosed_fixes`)."""
    task: Task
    cause: str  # the agent's sentence on why it went wrong
    at: int  # the assistant message that said it
    claim: str  # the agent's stated fix after its last edit ("" when none)
    files: tuple[str, ...]  # the files edited after the request (docs left out)


_FILE_NAME = re.compile(r"[\w./-]*\.\w{1,4}")


def _about(sentence: str, asked: set[str], edited: str) -> bool:
    """Whether a cause is about the problem asked (``asked``: the request's stems;
    ``edited``: the task's edits, lower case): it names (a code name, a backticked term)
    what the fix's edits changed, or shares words with the request."""
    # the code names in it, not a file it names (every cause in the session names the file)
    names = {w for m in _NAMED.finditer(sentence) if not _FILE_NAME.fullmatch(m.group(0).strip("`"))
             for w in re.findall(r"\w{3,}", m.group(0).lower())}
    if any(n in edited for n in names):
        return True
    # one shared word is enough with a named thing beside it; a generic sentence ("this
    # happens because Safari is hard to support") needs two (review 15b F2)
    shared = len(asked & _stems(sentence))
    return shared >= 2 or shared == 1 and bool(_NAMED.search(sentence))


def diagnosed_fixes(session: Session, limit: int = 2) -> list[Diagnosis]:
    """Bug fixes the session made on the agent's diagnosis alone (no failing check): the
    user asks to fix something or says what breaks, the agent states why ("the root cause
    was that the handler read `event.submitter`, which ...") in words that name something
    the session's tools showed, and edits code. A guess or a planned step is no cause; a
    question about the agent itself is no report. The last cause it stated stands (a first
    idea is often revised); at most ``limit``, in session order."""
    events = session.events
    out: list[Diagnosis] = []
    for t in tasks(session):
        if len(out) >= limit:
            break
        said = prose(t.request.text)
        if (not FIX_REQUEST.search(said) or _NOT_A_BUG.search(said) or _ABOUT_AGENT.search(said)
                or len(said) > 1500):
            continue
        asked = _stems(said)
        edited = " ".join(e.text or "" for e in events[t.start:t.end + 1] if e.kind == "edit").lower()
        code = tuple(f for f in t.changed if not is_doc(f))
        if not code:
            continue
        cause, at, last_edit, claim = "", -1, -1, ""
        for j in range(t.start + 1, t.end + 1):
            e = events[j]
            if e.agent is not None:
                continue
            if e.kind == "edit" and not e.is_error:
                last_edit, claim = j, ""
            elif e.kind == "assistant" and e.detail != "thinking":
                outputs = _outputs(events[t.start:j])
                for sent in block_sentences(_FENCE.sub("\n", e.text)):
                    plain = " ".join(sent.replace("**", "").split())
                    if _RETRACTS.search(plain):
                        # taken back ("Actually, that wasn't it - the real problem is X"):
                        # what follows the retraction may be the cause
                        cause, at = "", -1
                        parts = re.split(r"\s[\u2014\u2013-]+\s|;\s+|:\s+", plain, maxsplit=1)
                        plain = parts[1] if len(parts) > 1 and not _RETRACTS.search(parts[1]) else ""
                    if (20 <= len(plain) <= 400 and states_cause(plain) and not _PLAN.search(plain)
                            and not _RETRACTS.search(plain.split(" but ")[0]) and not plain.endswith("?")
                            and _agents_account(plain, outputs) and _about(plain, asked, edited)
                            and _looked_at(plain, events[:j])):
                        cause, at = plain, j
                if last_edit >= 0:
                    claim = _fix_claim(e.text) or next(
                        (x for x in block_sentences(e.text) if _TELLS_CHANGE.search(x)), "") or claim
        # the user's next words may deny it ("No, that's not why. It still does nothing.")
        reply = next((x for x in events[at + 1:] if x.kind == "user" and x.agent is None
                      and not (x.detail or "").startswith("rejection")), None) if cause else None
        if reply is not None and (_USER_DENIES.search(prose(reply.text)) or _STILL.search(prose(reply.text))):
            cause = ""
        if cause and last_edit >= 0:
            out.append(Diagnosis(t, cause, at, claim, code))
    return out


def told_about(session: Session, asked: int, limit: int = 2) -> tuple[int, ...]:
    """The user messages that brought one failure in: the one at ``asked`` and up to
    ``limit`` just before it with no edit or commit in between ("the export crashes on
    startup", then the traceback)."""
    out = [asked]
    for j in range(asked - 1, -1, -1):
        e = session.events[j]
        if e.agent is not None:
            continue
        if e.kind in ("edit", "commit") or len(out) > limit:
            break
        if e.kind == "user" and not (e.detail or "").startswith("rejection"):
            out.append(j)
    return tuple(out)


def _answers_diagnosis(events: Sequence[Event], failed: int, at: int, cause: str) -> bool:
    """The user message at ``at`` answers the agent about the failure at ``failed``: nothing
    was edited yet and the agent's last word before it stated a cause or asked a question
    (which fix, which behaviour): the same debugging goes on."""
    said = next((e for e in reversed(events[failed + 1:at])
                 if e.kind == "assistant" and e.agent is None and e.detail != "thinking"), None)
    return said is not None and bool(cause or said.text.rstrip().endswith("?"))


def _closing_cause(events: Sequence[Event], passed: int, signature: str) -> str:
    """A cause the agent states after the passing re-run, in its closing words before the
    user speaks again ("Fixed. The cause was that ...")."""
    for f in events[passed + 1:]:
        if f.agent is not None:
            continue
        if f.kind in ("user", "edit") or f.kind == "command" and check_command(f.command or ""):
            break  # the closing words are over: the user speaks, or the work goes on
        if f.kind == "assistant" and f.detail != "thinking":
            found = _cause_of(f.text, signature)
            if found and not _PLAN.search(found):
                return found
    return ""


# A step the agent plans ("I need to ...", "Let me ..."), not a cause it states.
_PLAN = re.compile(r"\b(?:i need to|needs? to|let me|i'?ll|we need to)\b", _I)


# "..., so it raises ZeroDivisionError", "which makes the lookup return None": a sentence
# that explains the failure by what leads to it; it counts when it names the failure.
CONSEQUENCE = re.compile(r"(?:,|;|\band)\s+(?:so|hence|therefore|thus)\b|\bwhich (?:raises|throws|causes|makes|means"
                          r"|triggers|breaks)\b|\b(?:leading|leads) to\b|\bresult(?:s|ing) in\b"
                          r"|\bthat'?s why\b|\bis why\b", _I)


def states_cause(sentence: str, signature: str = "") -> bool:
    """Whether ``sentence`` says why something failed: a cause word ("because", "due to",
    "caused by", "the problem was"), a state and what it led to ("the cache was stale, so
    the lookup ..."), or a consequence that names the failure ("..., so it raises
    ZeroDivisionError"). A planned step without such words ("I need to ...") is no cause."""
    if _CAUSE.search(sentence) or _STATE_SO.search(sentence) and not _PLAN.search(sentence):
        return True
    names = [w for w in signature.split() if re.search(r"_|[a-z][A-Z]|Error$|Exception$", w)]
    return bool(CONSEQUENCE.search(sentence) and any(n in sentence for n in names))


def _cause_of(text: str, signature: str = "", others: tuple[str, ...] | None = None) -> str:
    """The agent's sentence about why the check failed (see :func:`states_cause`). With
    ``others`` (the run failed several ways: the other failures' tests) the sentence that
    names this failure's test, else one that names none of the others."""
    if others is None:
        for sent in sentences(_FENCE.sub(" ", text)):
            if 20 <= len(sent) <= 400 and states_cause(sent, signature):
                return sent
        return ""
    name = signature.split()[0] if signature else ""
    said = [x for x in re.split(r"(?<=[.!?])\s+", " ".join(_FENCE.sub(" ", text).split()))
            if 20 <= len(x) <= 400 and states_cause(x, signature)]
    return next((x for x in said if name and name in x), None) or next(
        (x for x in said if not any(o in x for o in others)), "")


def related_commits(session: Session, files: list[str], after: int = 0,
                    until: int | None = None) -> list[Event]:
    """Commits after ``after`` whose files intersect ``files``: a commit holds the files
    edited since the previous commit (or those its ``git add`` named). With ``until`` (the
    end of the fix) only edits made by then count: a later commit of the same file holds
    later work (session A's "Store invoice totals as integer cents" after its fix commit)."""
    if not files:
        return []
    wanted = set(files)
    since: dict[str, int] = {}  # file -> the index of its first edit since the last commit
    out: list[Event] = []
    for i, e in enumerate(session.events):
        if e.kind == "edit" and e.path and not e.is_error:
            rel = relative(e.path, session.cwd)
            if rel:
                since.setdefault(rel, i)
        elif e.kind == "commit":
            named = set(re.findall(r"git\s+add\s+([^&;|]+)", e.command or ""))
            added = {relative(w, session.cwd) or w for part in named for w in part.split()
                     if not w.startswith("-")}
            edited = set(since)
            if until is not None:
                edited = {f for f, at in since.items() if at <= until}
            has = ((added - {"."}) or set(since)) & (edited if until is not None else set(since) | added)
            if i > after and (has & wanted or "-A" in (e.command or "") and edited & wanted):
                out.append(e)
            since = {}
    return out


# ---------------------------------------------------------------- compaction

_SECTION = re.compile(r"^\s*\d+\.\s+([A-Z][^\n:]{3,60}):\s*$", re.M)
_CONSTRAINT = re.compile(r"\b(?:required|requires?|must|never|always|only|cannot|can'?t|gitignored|often"
                         r"|need(?:s|ed)?|enforc\w*|not supported|unsupported)\b", _I)


def compaction_sections(text: str) -> dict[str, str]:
    """Sections of a Claude Code compaction summary, by lower-case heading."""
    out: dict[str, str] = {}
    marks = list(_SECTION.finditer(text))
    for k, m in enumerate(marks):
        end = marks[k + 1].start() if k + 1 < len(marks) else len(text)
        out[m.group(1).strip().lower()] = text[m.end():end].strip()
    return out


# what a project's hooks or CI enforce on every change is a convention, not a lesson
ENFORCED = re.compile(r"\b(?:pre-commit|enforc\w*|(?:required|run) (?:before|on) (?:every )?(?:commit|push|merge))\b", _I)


@dataclass(frozen=True)
class Compacted:
    """What a compacted summary says about the work (Claude Code's sections)."""
    request: str = ""  # "Primary Request and Intent"
    constraints: tuple[str, ...] = ()  # key-concept bullets that state a constraint
    solving: tuple[str, ...] = ()  # "Problem Solving" bullets
    points: tuple[str, ...] = ()  # every key-concept bullet: what the work was made of


def compaction_notes(session: Session) -> Compacted:
    request, concepts, solving, points = "", [], [], []
    for e in session.events:
        if e.kind != "compaction" or not e.text:
            continue
        parts = compaction_sections(e.text)
        req = parts.get("primary request and intent", "")
        if req and not request:
            request = " ".join(req.split())
        for bullet in re.findall(r"^\s*[-*]\s+(.+)$", parts.get("key technical concepts", ""), re.M):
            bullet = bullet.strip()
            if bullet not in points:
                points.append(bullet)
            if _CONSTRAINT.search(bullet) and bullet not in concepts:
                concepts.append(bullet)
        for bullet in re.findall(r"^\s*[-*]\s+(.+)$", parts.get("problem solving", ""), re.M):
            if bullet not in solving:
                solving.append(bullet.strip())
    return Compacted(request, tuple(concepts), tuple(solving), tuple(points))


# ---------------------------------------------------------------- findings

# The user asks the agent to look at something that is not a failing check ("the
# subagents seem to be stuck, can you check?", "why does the cache miss?"), and the agent's
# answer says how a named thing behaves ("`SendMessage` queues into an inbox but doesn't
# resurrect a terminated process"): what the agent found, kept as a learning. The agent's
# own closing "Takeaway: ..." / "Lesson learned: ..." line is one too.
_CHECK = re.compile(
    r"\b(?:can|could|would) you (?:please )?(?:check|look into|investigate|find out|figure out|see (?:why|what|if|whether))\b"
    r"|^(?:please )?(?:check|investigate|find out|figure out) (?:why|what|whether|if)\b"
    r"|\bwhy (?:is|are|does|do|did|was|were|isn'?t|aren'?t|doesn'?t|don'?t|didn'?t|won'?t|can'?t)\b"
    r"|\bwhat(?:'s| is| was) (?:going on|happening|wrong)\b|\bwhat happened\b"
    r"|\bseems? (?:to be )?(?:(?:either|both) )?(?:stuck|hung|hanging|frozen|idle|slow|broken)\b"
    r"|\b(?:is|are) (?:it|they|these|those) (?:stuck|hung|hanging|done|running)\b", _I | re.M)
# a statement about how something behaves: a negated or limited capability, or a cause
_BEHAVES = re.compile(
    r"\b(?:doesn'?t|does not|don'?t|do not|didn'?t|did not|can'?t|cannot|won'?t|will not|isn'?t|is not"
    r"|aren'?t|are not|never|only (?:works?|runs?|applies|when|if)|requires?|instead of|rather than)\b", _I)
_NAMED = re.compile(r"`[^`\n]{2,60}`|\b[a-z]+[A-Z]\w*\b|\b[A-Z][a-z]+[A-Z]\w*\b|\b\w+_\w+\b|\b[\w-]+\.\w{1,4}\b")
_TAKEAWAY = re.compile(
    r"^[^\w>]*(?:(?:key|main|the|one|my)\s+)?(?:takeaways?|lessons?(?: learned)?|gotchas?|insights?)"
    r"(?:\s+(?:on|about|for|from|here)\b[^:\n]{0,50})?\s*\**\s*:\s*\**\s*(?P<rest>\S.*)", _I)
_NARRATES = re.compile(r"^(?:i'?ll|i will|i'?m going to|let me|let'?s|now i|next,? i|first,? i)\b", _I)
# What is no finding of the agent's (review 13 F1, F14): what a tool, file or page says,
# passed on ("The log says the release job doesn't need review"); a guess ("I'm not sure,
# it might be ..."); the agent about itself: an apology, what it did not do or cannot do
# here ("I can't run `docker ps` in this sandbox", "I didn't add a test because ...").
_SOURCE = (r"(?:logs?|output|readme|docs?|documentation|file|page|comments?|message|ticket|issue|changelog"
           r"|notes?|website|site|wiki|guide|instructions|banner|ci|build|trace|report|`[^`\n]+\.(?:md|txt|rst|ya?ml"
           r"|json|toml|log)`|[\w.-]+\.(?:md|txt|rst|log))")
_REPORTS = r"(?:says?|said|states?|shows?|showed|indicates?|mentions?|claims?|reads|tells?|suggests?|recommends?|notes|warns?|asks?)"
# passed on: "The log says ...", "The logs show ...", "`CONTRIBUTING.md` says ...", "Per the CI output, ..."
_RELAYS = re.compile(
    r"(?:\b(?:the|this|that|its?|your|their)\s+(?:[\w.-]+\s+)?)?" + _SOURCE + r"\s+" + _REPORTS + r"\b"
    r"|(?:^|[.!?]\s+)\W*(?:per|based on|according to|from)\s+(?:the\s+)?(?:[\w.-]+\s+)?" + _SOURCE + r"\b"
    r"|\baccording to\b|\b(?:says|reads|states|shows):?\s*$", _I)
# the agent's own reading of it, with a cause: "The config file says `ttl: 0`, which is why ..."
_OWN_CAUSE = re.compile(r"\b(?:which is why|that'?s why|because|so that's why)\b", _I)
_NOT_FOUND = re.compile(
    r"\b(?:sorry|apologi[sz]e|my mistake|my bad|unfortunately)\b"
    # the agent about itself, anywhere: "I can't run ...", "I didn't verify", "I was unable to"
    r"|\bI(?:'ve| have)?\s+(?:didn'?t|did not|haven'?t|have not|can'?t|cannot|couldn'?t|could not"
    r"|wasn'?t able|was not able|was unable|am unable|don'?t have|do not have|won'?t|will not|forgot)\b"
    r"|\b(?:in|inside) (?:this|the|my) sandbox\b|\b(?:don'?t|do not) have (?:access|permission)", _I)
# A guess: it governs the sentence when it stands before its first cause or consequence
# ("It seems X, which would explain ..." is a guess; "X because Y, so a stale read might
# never happen" is a finding with a guess on the side).
_HEDGE = re.compile(
    r"\b(?:might|maybe|perhaps|probably|possibly|presumably|not sure|unsure|i think|i guess|i suspect"
    r"|i believe|could be|my guess|seems?|appears? to|likely|would explain|(?:haven'?t|have not|not) (?:yet )?"
    r"(?:verified|confirmed|checked|tested))\b", _I)
_MAIN_CLAUSE_END = re.compile(r"\b(?:because|since|so|which|that'?s why|due to)\b|[;,]\s*(?:so|which|and so)\b", _I)


def _guess(sentence: str) -> bool:
    cut = _MAIN_CLAUSE_END.search(sentence)
    return bool(_HEDGE.search(sentence[:cut.start()] if cut else sentence))


# A question about the agent's own conduct ("why didn't you add a test?"): its answer is
# an account of itself, no finding about the project ("why do you think ...", "why are you
# getting a 403" ask about the project: review 14 G7).
_ABOUT_AGENT = re.compile(r"\bwhy (?:did|didn'?t|did not|haven'?t|have not|would|wouldn'?t|won'?t) you\b"
                          r"(?!\s+(?:think|suppose|reckon|guess|say)\b)", _I)
# What says how the work should go ("should", "doesn't need review", "skip"): from a tool's
# output only, that is the tool's instruction, not the agent's finding.
_NORMATIVE = re.compile(r"\b(?:should|must|need(?:s|n'?t)? (?:to|no|not)|doesn'?t need|don'?t need|no need"
                        r"|skip|always|never|required|allowed|--force|--no-verify)\b", _I)


@dataclass(frozen=True)
class Finding:
    asked: int | None  # the user message it answers (None: a closing takeaway)
    at: int  # the assistant message it was said in
    question: str
    sentence: str


_RELAY_WORD = re.compile(r"[a-z][a-z0-9_.-]{2,}")
_RELAY_STOP = frozenset("""the and for are was were not but with that this from into its it's has have had
    should must need needs doesn't don't job jobs can will would been they them then than there also""".split())


def _relayed(sentence: str, outputs: Sequence[str]) -> bool:
    """``sentence`` tells how the work should go in words a tool output holds (two thirds
    of its content words or more): the tool's instruction passed on, not a finding."""
    if not outputs or not _NORMATIVE.search(sentence):
        return False
    if re.search(r"\bbecause\b", sentence, _I) and not any("because" in o.lower() for o in outputs):
        return False  # the agent's own cause of what the output says (review 14 G6)
    words = set(_RELAY_WORD.findall(sentence.lower())) - _RELAY_STOP
    if len(words) < 3:
        return False
    return any(len(words & set(_RELAY_WORD.findall(out.lower()))) * 3 >= len(words) * 2
               for out in outputs)


def _not_the_agents(sentence: str, outputs: Sequence[str] = (), own_cause: bool = True) -> bool:
    """``sentence`` is no finding of the agent's (see _NOT_FOUND, _RELAYS, _guess,
    _relayed); ``own_cause``: a source passed on with the agent's cause still counts."""
    relays = _RELAYS.search(sentence) and not (own_cause and _OWN_CAUSE.search(sentence))
    return bool(_NOT_FOUND.search(sentence) or _guess(sentence) or relays or _relayed(sentence, outputs))


def _finding_sentence(text: str, outputs: Sequence[str] = ()) -> str:
    # Quoted lines (">") are someone else's words.
    text = "\n".join(line for line in _FENCE.sub(" ", text).splitlines()
                     if not line.lstrip().startswith(">"))
    for sent in sentences(text):
        plain = sent.replace("**", "").strip()
        if not 30 <= len(plain) <= 320 or plain.endswith("?") or _NARRATES.search(plain):
            continue
        if _not_the_agents(plain, outputs):
            continue
        if _PLAN.search(plain) and not _CAUSE.search(plain):
            continue
        if _BEHAVES.search(plain) and _NAMED.search(plain) or states_cause(plain):
            return plain
    return ""


def _looked_at(sentence: str, before: Sequence[Event]) -> bool:
    """Whether what ``sentence`` names (a code name, a file, a backticked term) is in what
    the session's tools showed or ran before it: a finding about the project, not an answer
    from general knowledge ("`sorted()` doesn't mutate its input": review 14 G13)."""
    names = {w for m in _NAMED.finditer(sentence) for w in re.findall(r"\w{3,}", m.group(0).lower())}
    if not names:
        return True  # nothing named to look for: the other tests decide
    seen = " ".join(" ".join(v for v in (e.command, e.result, e.text, e.path) if v)
                    for e in before if e.kind in ("command", "tool", "edit", "compaction")).lower()
    return any(n in seen for n in names)


def findings(session: Session, skip: frozenset[int] | set[int] = frozenset(), limit: int = 2) -> list[Finding]:
    """What the agent found when asked to look at something (see above), and its closing
    takeaways; ``skip`` holds the user messages another reader already keeps (a failure's
    report). At most ``limit``, in session order."""
    events = session.events
    out: list[Finding] = []
    for i, e in enumerate(events):
        if len(out) >= limit:
            break
        if e.agent is not None or e.kind != "user" or i in skip or (e.detail or "").startswith("rejection"):
            continue
        said = prose(e.text)
        if not _CHECK.search(said) or len(said) > 1500 or _ABOUT_AGENT.search(said):
            continue
        failed_run = False
        outputs: list[str] = []
        for j in range(i + 1, len(events)):
            f = events[j]
            if f.agent is not None:
                continue
            if f.kind == "user":
                break
            if f.kind == "edit":
                break  # the answer became work: the task and arc readers keep it
            if f.kind in ("command", "tool") and (f.result or f.text):
                outputs.append(f.result or f.text or "")
            if f.kind == "command" and f.failed and check_command(f.command or ""):
                failed_run = True  # a failing check: the arc reader's
            if f.kind == "assistant" and f.detail != "thinking" and not failed_run:
                found = _finding_sentence(f.text, outputs)
                if found and not _looked_at(found, events[:j]):
                    break  # answered from general knowledge: nothing of the project was read
                if found:
                    out.append(Finding(i, j, first_sentence(said), found))
                    break
    closing = next((j for j in range(len(events) - 1, -1, -1) if events[j].agent is None
                    and events[j].kind == "assistant" and events[j].detail != "thinking"), None)
    if closing is not None:  # the agent's last words: a takeaway is said once, at the end
        quoting = False
        for line in _FENCE.sub("\n", events[closing].text).splitlines():
            # A quote (">") and what follows "The README says:" are another's words.
            if line.lstrip().startswith(">") or quoting and not line.strip():
                continue
            if quoting:  # the quoted line itself
                quoting = False
                continue
            quoting = bool(re.search(r"(?::|\b(?:says|reads|states|shows|writes))\s*$", line.rstrip())
                           and _RELAYS.search(line))
            m = _TAKEAWAY.match(line.strip())
            rest = m.group("rest").replace("**", "").strip() if m else ""
            first = (sentences(rest) or [rest])[0] if rest else ""
            if len(first) >= 30 and not _not_the_agents(first, own_cause=False):
                out.append(Finding(None, closing, "", first))
                break
    return out


# The agent about itself as the subject ("I missed this earlier because I only searched
# ...", "my first entry was wrong", "we didn't ..."): its account of its own work.
_ABOUT_ITSELF = re.compile(r"^(?:i|i'?m|i'?ve|i'?d|my|we|we'?ve|we'?re|our)\b", _I)


def _copied(sentence: str, outputs: Sequence[str]) -> bool:
    """Four fifths or more of ``sentence``'s words (five at least) stand in one tool
    output: the output's text passed on, not the agent's reading of it."""
    words = set(_RELAY_WORD.findall(sentence.lower())) - _RELAY_STOP
    if len(words) < 5:
        return False
    return any(len(words & set(_RELAY_WORD.findall(o.lower()))) * 5 >= len(words) * 4 for o in outputs)


def _agents_account(sentence: str, outputs: Sequence[str]) -> bool:
    """Whether ``sentence`` is the agent's own account of the code (a cause, a finding),
    as a memory may keep it: not a relayed source, a guess or the agent about itself; not
    an instruction found in a tool output ("always run `curl ... | sh`") or copied from
    one; not an account of what it changed ("Changed X to Y instead of Z")."""
    from dualtrace.encoder.hostile import instruction_like, runs_fetched_code

    return not (_not_the_agents(sentence, outputs, own_cause=False) or _ABOUT_ITSELF.search(sentence)
                or _TELLS_CHANGE.search(sentence) or instruction_like(sentence)
                or runs_fetched_code(sentence) or _copied(sentence, outputs))


def _outputs(events: Sequence[Event]) -> list[str]:
    return [e.result or "" for e in events if e.kind in ("command", "tool") and e.result]


def commit_findings(session: Session, limit: int = 2) -> list[Finding]:
    """What the session's commit messages say the work found: a body sentence that states
    a cause or how a named thing behaves ("`--filter sample` returns zero rows on the
    fixture, ..., so the assertion body never runs"). A commit body is the agent's own
    account, written down when the work was done; the list of what changed ("Add X",
    "- Style the rows") is no finding and stays in the commit. The sentences that name the
    most (code names, files, backticked terms) first, at most ``limit``, in session order;
    commits by sub-agents count too (a commit is the project's, whoever typed it)."""
    found: list[tuple[int, int, str]] = []  # (-names, at, sentence)
    seen: set[str] = set()
    events = session.events
    for i, e in enumerate(events):
        if e.kind != "commit" or not e.command:
            continue
        before = [b for b in events[:i] if b.command != e.command]  # not the message itself
        outputs = _outputs(before)
        for sentence in block_sentences(commit_body(e.command)):
            plain = " ".join(sentence.replace("**", "").split()).lstrip("-* ")
            if (plain.lower() in seen or not _finding_sentence(plain) or not _looked_at(plain, before)
                    or not _agents_account(plain, outputs)):
                continue
            seen.add(plain.lower())
            found.append((-len(_NAMED.findall(plain)), i, plain))
    best = sorted(found)[:limit]
    return [Finding(None, at, "", sentence) for _, at, sentence in sorted(best, key=lambda f: f[1])]


# ---------------------------------------------------------------- a stuck environment

# A run of commands that all failed the same way (cues.stuck_run), with the agent's own
# explanation when it gave one ("my bash context is stuck in the old directory", "...,
# which is why we're getting errors").
_EXPLAINS = re.compile(r"\b(?:stuck|no longer exists?|does(?:n'?t| not) exist|which is why|is why|because"
                       r"|the (?:issue|problem|reason) is)\b", _I)


@dataclass(frozen=True)
class Stuck:
    first: int  # the first failing command
    line: str  # the output every one of them printed
    commands: tuple[str, ...]
    explanation: str  # the agent's sentence about it, or ""


def stuck_runs(session: Session) -> Stuck | None:
    found = stuck_run(session.events)
    if found is None:
        return None
    first, line, commands = found
    events = session.events
    last = max(i for i, e in enumerate(events) if e.kind == "command" and e.agent is None
               and (e.command or "") in commands)
    said = ""
    # The agent explains inside the run or in its first message after it ("My shell is
    # stuck in a directory that no longer exists, which is why every command fails.").
    for i in range(first, len(events)):
        e = events[i]
        if e.kind == "assistant" and e.agent is None and e.detail != "thinking":
            said = next((x for x in sentences(_FENCE.sub(" ", e.text))
                         if 20 <= len(x) <= 300 and _EXPLAINS.search(x) and not _PLAN.search(x)), "")
            if said or i > last:
                break
        elif i > last and e.kind == "user":
            break
    # The error the output opens with ("Error: build cache corrupt."), not the advice that
    # may follow it on the same line ("Maintainers: the fix is ...").
    return Stuck(first, (sentences(line) or [line])[0], commands, said)


# ---------------------------------------------------------------- a broken set-up, fixed

# What a shell or a runtime prints when the environment, not the code, is wrong: a program
# or module that is not installed, a version manager with no version chosen, a port taken.
# Matched per line from the line's start (after a shell's own prefix: "sh: 1:", "bash: line
# 1:", "./deploy.sh: line 3:", "pyenv:"), so a test's expected output or code that merely
# holds the words is no failure (review 16 B3).
_SHELL_PREFIX = r"(?:[\w./-]+: (?:line )?\d+: |(?:/bin/)?(?:ba|z|da)?sh: |\(eval\):\d+: |(?:pyenv|rbenv|asdf|mise|nodenv): )"
_SETUP_FAILURE = re.compile(
    rf"^(?:{_SHELL_PREFIX}?(?:(?P<prog>[\w.+-]+): (?:command )?not found$|command not found: (?P<prog2>[\w.+-]+)$"
    r"|No version is set for (?:command )?(?P<tool>[\w.+-]+)[^\n]*)"
    r"|(?:/usr/bin/)?env: '?(?P<env>[\w.+-]+)'?: No such file or directory$"
    r"|(?:ModuleNotFoundError|ImportError): No module named '?(?P<mod>[\w.]+)'?$"
    r"|Error: Cannot find module '(?P<node>[^'./][^']*)'[^\n]*"
    r"|Error: listen EADDRINUSE\b[^\n]*|(?:OSError: )?\[Errno (?:98|48)\] Address already in use[^\n]*)", re.M)
# Programs whose output is a file's or a listing's text, not a run of the program asked
# for: a "command not found" inside it is quoted, not printed by this run's shell.
_READS = frozenset("""cat grep rg ag sed awk head tail less more find ls tree wc file stat echo
    printf pwd which type whereis env printenv ps lsof jq yq diff cmp sort uniq cut tr xargs
    true false test [ sleep curl wget ping date uname whoami id hostname du df""".split())
_NOT_STEPS = frozenset({"cd", "sleep", "for", "do", "done", "if", "then", "else", "fi", "while",
                        "break", "echo", "printf", "wait", "set", "true", "false"})
# A set-up step installs, activates, configures or frees something (review 16 B1/B5: `make
# lint`, `npx prettier`, `node -v` or `pip freeze` fix no set-up).
_SETUP_STEP = re.compile(
    r"^(?:sudo )?(?:"
    r"(?:npm|pnpm|yarn|bun|pip3?|uv|poetry|pipenv|pdm|conda|mamba|micromamba|gem|bundle|composer|cargo|go|mix"
    r"|brew|apt(?:-get)?|dnf|yum|pacman|apk|port|choco|winget|scoop|sdk|pipx|rustup|deno)"
    r"(?: (?:pip|-m pip))? (?:install|i|ci|add|sync|update|upgrade|get|deps\.get|mod download|tool install|venv)\b"
    r"|yarn$|bundle$|uv venv\b|python[\d.]* -m (?:venv|pip install)\b|virtualenv\b"
    r"|(?:asdf|mise|rtx|nvm|fnm|volta|pyenv|rbenv|nodenv|jenv|sdkman|corepack) (?:set|install|use|local|global"
    r"|shell|plugin add|enable|pin|reshim|rehash)\b"
    r"|(?:just|make|task|npm run|pnpm run|yarn) (?:install|setup|bootstrap|deps|init)\b"
    r"|(?:source|\.) \S*(?:activate|env|rc)\b|export PATH=|ln -s|chmod \+x|direnv allow"
    r"|kill\b|pkill\b|killall\b|fuser -k\b|docker(?: compose| container)? (?:start|up|pull|stop|restart)\b)", _I)
# A file the set-up lives in: a manifest, a lock, a version pin, an env file, a build file.
_SETUP_FILE = re.compile(r"(?:^|/)(?:package\.json|pyproject\.toml|requirements[\w.-]*\.txt|setup\.(?:py|cfg)"
                         r"|Pipfile|poetry\.lock|uv\.lock|[\w.-]+\.lock|Gemfile|go\.mod|Cargo\.toml|composer\.json"
                         r"|mix\.exs|\.tool-versions|\.nvmrc|\.node-version|\.python-version|mise\.toml|\.env[\w.-]*"
                         r"|Dockerfile|docker-compose[\w.-]*\.ya?ml|compose\.ya?ml|Makefile|justfile|\.envrc)$")
# A run that shows an error of another kind: not "worked" (review 16 B2, `migrate || true`).
_OTHER_ERROR = re.compile(r"(?m)^\s*(?:\w+(?:\.\w+)*(?:Error|Exception)\b|Traceback \(most recent call last\)"
                          r"|(?:npm )?ERR!|error(?:\[\w+\])?:|fatal:|FAILED\b|\w+: command not found)")
_REDIRECT = re.compile(r"\s*(?:\d?>&\d|\d?>>?\s*\S+|<\s*\S+)")
SETUP_WINDOW = 40  # events between the failure and the run that worked


@dataclass(frozen=True)
class SetupFix:
    """A command that failed because of the set-up (``just dev``: "sh: tsx: command not
    found"), the steps the agent ran or set-up files it edited before the same command
    worked (``asdf set nodejs 22.21.1``, ``npm install``), and what it said of the cause."""

    target: str  # the simple command that failed and later worked (``just dev``)
    lines: tuple[str, ...]  # the failure lines, one per signature, in order
    steps: tuple[str, ...]  # the set-up commands in between (their simple commands)
    edited: tuple[str, ...]  # set-up files edited in between
    cause: str
    first: int
    passed: int


def setup_failures(output: str) -> list[str]:
    """The set-up failure lines of a command's output, in order, each once."""
    seen: list[str] = []
    for m in _SETUP_FAILURE.finditer(output or ""):
        line = " ".join(m.group(0).split())
        if line not in seen:
            seen.append(line)
    return seen


def without_shell_prefix(line: str) -> str:
    """A failure line without the shell's own prefix ("bash: line 1: pytest: command not
    found" -> "pytest: command not found")."""
    return re.sub(rf"^{_SHELL_PREFIX}", "", line)


def _program(simple: str) -> str:
    from dualtrace.encoder.cues import _PREFIX

    rest = simple[_PREFIX.match(simple).end():]  # type: ignore[union-attr]
    return rest.split(" ", 1)[0].rsplit("/", 1)[-1]


def _runs(command: str) -> list[str]:
    """The simple commands of a line that run something (not ``cd``, ``sleep``, a loop's
    words), without their redirections: ``cd app && just dev 2>&1 &`` -> ``just dev``."""
    from dualtrace.encoder.cues import _simple_commands

    out = []
    for simple in _simple_commands(_REDIRECT.sub(" ", command)):
        simple = " ".join(simple.split())
        if simple and _program(simple) not in _NOT_STEPS:
            out.append(simple)
    return out


def _target(runs: list[str]) -> str:
    """The simple command a line's failure is of: the last one that is not a read, nor a
    set-up step when the line runs something else too (``cd web && npm ci && npm run
    build`` stops at the build; review 16 B4)."""
    ran = [r for r in runs if _program(r) not in _READS]
    return next((r for r in reversed(ran) if not _SETUP_STEP.match(r)), ran[-1] if ran else "")


def _own_module(line: str, session: Session) -> bool:
    """A module the project itself holds (``No module named 'app.utils'`` with ``app/`` in
    the session's paths) or a relative one: the code is wrong, not the set-up."""
    m = _SETUP_FAILURE.match(line)
    name = (m.group("mod") or m.group("node") or "") if m else ""
    if not name:
        return False
    top = re.split(r"[./]", name)[0]
    paths = {e.path for e in session.events if e.path}
    return "." in name and any(f"/{top}/" in f"/{p}" or p.endswith(f"/{top}.py") for p in paths) \
        or bool(session.cwd and session.cwd.rstrip("/").rsplit("/", 1)[-1] == top)


def _failed_setup(e: Event, session: Session) -> list[str]:
    """The set-up failure lines a main-thread command printed, whatever its exit status
    (``just dev 2>&1 &`` and ``npm install | tail`` exit 0 however they went), unless the
    command only reads files or listings."""
    if e.kind != "command" or e.agent is not None or not e.command or not e.result:
        return []
    runs = _runs(e.command)
    if not runs or all(_program(r) in _READS for r in runs):
        return []
    return [x for x in setup_failures(e.result) if not _own_module(x, session)]


def setup_fixes(session: Session, limit: int = 2) -> list[SetupFix]:
    """Commands that failed on the set-up and worked again after set-up steps: one per
    failing command, the later failures of the same command on the way (Node's version
    unset, then its tools missing) folded in. Not when nothing but waiting, a re-run or a
    code edit came between, when the later run showed nothing (redirected, backgrounded) or
    another error, or when it never worked again in the session."""
    events = session.events
    out: list[SetupFix] = []
    i = 0
    while i < len(events) and len(out) < limit:
        lines = _failed_setup(events[i], session)
        target = _target(_runs(events[i].command or "")) if lines else ""
        if not target:
            i += 1
            continue
        steps: list[str] = []
        edited: list[str] = []
        cause = ""
        passed = None
        for j in range(i + 1, min(len(events), i + 1 + SETUP_WINDOW)):
            f = events[j]
            if f.agent is not None:
                continue
            if f.kind == "assistant" and f.detail != "thinking" and not cause:
                cause = _setup_cause(f.text, lines)
            elif f.kind == "edit" and f.path and not f.is_error:
                rel = relative(f.path, session.cwd)
                if rel and _SETUP_FILE.search(rel) and rel not in edited:
                    edited.append(rel)
            elif f.kind == "command" and f.command:
                runs = _runs(f.command)
                if target not in runs:
                    if not f.failed:
                        steps += [r for r in runs if _SETUP_STEP.match(r) and r not in steps]
                    continue
                failed = _failed_setup(f, session)
                if failed:
                    lines += [x for x in failed if x not in lines]
                    continue
                if f.failed or not (f.result or "").strip() or _OTHER_ERROR.search(f.result or ""):
                    if f.failed or _OTHER_ERROR.search(f.result or ""):
                        break  # it fails another way now: not shown fixed
                    continue  # it printed nothing (a redirected or background run): no proof
                # the steps on the working line itself ("source .venv/bin/activate && pytest")
                steps += [r for r in runs[:runs.index(target)] if _SETUP_STEP.match(r) and r not in steps]
                if steps or edited:
                    passed = j
                break
        if passed is None:
            i += 1
            continue
        out.append(SetupFix(target, tuple(lines[:3]), tuple(steps[:6]), tuple(edited[:6]),
                            cause, i, passed))
        i = passed + 1
    return out


def _setup_cause(text: str, lines: list[str]) -> str:
    """The agent's sentence about why the set-up failed: a stated cause, or a statement
    (not a plan or a question) that names what the failure names ("You have asdf managing
    Node but no version set for this project.")."""
    named = {w.lower() for line in lines for w in re.findall(r"[A-Za-z][\w.+-]{2,}", line)} - {
        "command", "not", "found", "version", "set", "for", "line", "module", "named", "error",
        "cannot", "find", "the", "please", "run", "options", "address", "already", "use"}
    for sent in sentences(_FENCE.sub(" ", text)):
        if not 20 <= len(sent) <= 300 or sent.endswith("?") or _PLAN.search(sent):
            continue
        words = {w.lower().strip(".,;:`'\"") for w in sent.split()}
        if states_cause(sent) or named & words:
            return re.sub(r"^[^\w`\"'(\[]+", "", sent)
    return ""


# ---------------------------------------------------------------- an option the user chose

# The agent laying out alternatives and the user picking one ("You have two options: Option
# A — copy the db ...; Option B — point dev at it" -> "copy the db, good idea"): the
# decision is the user's, the alternatives and the agent's reasons are its why. Read
# narrowly (review 16: a rejected option, a question or a deferral must never be stored as
# the choice): the agent must put the options to the user, and the user's answer must be a
# pick and nothing else.
_OPTION_MARK = re.compile(r"(?:^|\n)[ \t]*(?:(?:[-*#]+|\d+[.)])[ \t]*)?\**(?:Option|Approach|Alternative)[ \t]+"
                          r"(?P<label>[A-Z]|\d)\b\**[ \t]*(?:\((?:recommended|preferred|suggested)\))?"
                          r"\**[ \t]*(?:[:.)—–-]+[ \t]*)?\**", re.I)
_COULD = re.compile(r"^(?:we|you|i) could (?:either )?(?P<what>.+)$", _I)
_OR = re.compile(r"^or(?:,)? (?:(?:we|you|i) (?:could |can )?)?(?:just |simply )?(?P<what>.+)$", _I)
# The agent asks which: a question, or an invitation to choose.
_ASKS = re.compile(r"\?\s*$|\b(?:which (?:one|do you|would you)|(?:do|would) you (?:prefer|like|want)"
                   r"|let me know|your call|up to you)\b", _I)
_RECOMMEND = re.compile(r"\bI(?:'d| would)? (?:recommend|suggest|go with|lean towards?)\b", _I)
_AGAINST = re.compile(r"\b(?:avoid(?:ing)?|against|not|n't|instead of|rather than|over)\b", _I)
_LABEL_NAMED = re.compile(r"\b(?:option|approach|alternative)\s+(?P<label>[a-z]|\d)\b"
                          r"|\b(?:go(?:ing)? with|pick|choose|take|let'?s (?:do|go with)|do|use)\s+(?P<bare>[A-C1-3])\b"
                          r"|^\W*(?P<alone>[A-Ca-c1-3])\W*(?:please|it is|then)?\W*$"
                          r"|^\W*(?P<lead>[A-C1-3])\s*(?:please|it is|then)\b", re.I)
_ORDINAL = re.compile(r"\b(?:the )?(?P<ord>first|second|third)(?: one| option| approach)\b", _I)
_ORDINALS = {"first": 0, "second": 1, "third": 2}
# An answer that is no pick: a question, a request for more, a deferral, a refusal, a doubt,
# a change of plan, or a pick taken back in the same breath.
_NOT_A_PICK = re.compile(
    r"^\W*(?:what|how|why|which|who|when|where|is|are|does|do|can|could|would|should|tell me|explain"
    r"|show me|hmm)\b|\bwhat about\b|\btell me more\b|\blet me (?:ask|check|think)\b|\bnot (?:now|yet)\b"
    r"|\blater\b|\bfirst with\b|\bneither\b|\bnone of\b|\bno,|\bnope\b|\bdon'?t\b|\bdo not\b|\bnot\b"
    r"|\bskip\b|\bavoid\b|\brisky\b|\bscary\b|\bslow\b|\bworried\b|\bbut\b|\binstead\b|\brather\b"
    r"|\bactually\b|\bwait\b|\bchanged? my mind\b|\bscratch that\b|\bundo\b|\bhowever\b", _I)
# The whole answer is an assent ("ok", "sounds good, go ahead", "yes, go with your
# recommendation"): with a single recommendation it picks that one.
_ASSENT_ONLY = re.compile(
    r"^\W*(?:(?:ok(?:ay)?|yes|yep|yeah|sure|great|good|perfect|sounds good|agreed|go ahead|do it|do that"
    r"|please|let'?s do (?:it|that)|go with (?:it|that|your (?:recommendation|suggestion)|the recommended one)"
    r"|(?:that|it) sounds good|good idea|makes sense)\W*)+$", _I)
MAX_PICK_CHARS = 200  # a longer answer says more than which option


@dataclass(frozen=True)
class Choice:
    options: tuple[str, ...]  # as the agent worded them, in order
    chosen: int  # index into options
    said: str  # the user's answer, verbatim
    reason: str  # the agent's recommendation sentence when it is the chosen option's, or ""
    offered: int  # the agent's message
    answered: int  # the user's


def _option_text(text: str) -> str:
    """An option's words: its first sentence, code inline as code."""
    text = re.sub(r"```\w*\n?(.*?)(?:```|\Z)", lambda m: f" `{' '.join(m.group(1).split())}` ", text, flags=re.S)
    text = " ".join(text.replace("**", "").split()).strip(" :—–-")
    first = (sentences(text) or [text])[0]
    return first.rstrip(" :")


def _outside_fences(text: str) -> str:
    """``text`` with fenced blocks and quoted lines blanked, offsets kept: options a
    document lays out ("the design doc says: Option A ...") are not the agent's offer."""
    blank = _FENCE.sub(lambda m: re.sub(r"[^\n]", " ", m.group(0)), text)
    return re.sub(r"(?m)^[ \t]*>.*$", lambda m: " " * len(m.group(0)), blank)


def offered_options(text: str) -> list[tuple[str, str]]:
    """(label, text) of the alternatives an agent message puts to the user: labelled ones
    (Option A/B, Approach 1/2) or a "We could X. Or Y." pair, when the message asks which
    (a question, "let me know", a recommendation); [] when it offers fewer than two."""
    plain = _outside_fences(text)
    if not (_ASKS.search(plain.strip()) or _RECOMMEND.search(plain)):
        return []  # "All tests pass. We could add caching. Or refactor the logger." narrates
    marks = list(_OPTION_MARK.finditer(plain))
    if len(marks) >= 2:
        out = []
        for m, nxt in zip(marks, [*marks[1:], None], strict=True):
            end = nxt.start() if nxt else len(text)
            chunk = text[m.end():end].split("\n\n")[0] if nxt is None else text[m.end():end]
            words = _option_text(chunk)
            if words:
                out.append((m.group("label").lower(), words))
        return out if len(out) >= 2 else []
    said = block_sentences(_FENCE.sub("\n\n", text))
    for a, b in zip(said, said[1:], strict=False):
        could, other = _COULD.match(a), _OR.match(b)
        if could and other:
            return [("1", could.group("what").rstrip(".")), ("2", other.group("what").rstrip(".?"))]
    return []


def _pick(said: str, options: list[tuple[str, str]], recommended: int | None) -> int | None:
    """Which option the answer picks: the one label or ordinal it names, the recommended
    one when the whole answer is an assent, or the option it echoes (two of its words, or
    one of the recommended one's; more than of any other) in an answer that is only that."""
    text = " ".join(said.split())
    if not text or len(text) > MAX_PICK_CHARS or text.endswith("?"):
        return None
    if _ASSENT_ONLY.match(text):
        return recommended
    if _NOT_A_PICK.search(text):
        return None
    labels = {(m.group("label") or m.group("bare") or m.group("alone") or m.group("lead")).lower()
              for m in _LABEL_NAMED.finditer(text)}
    ords = {_ORDINALS[m.group("ord").lower()] for m in _ORDINAL.finditer(text)}
    named = {i for i, (lab, _t) in enumerate(options) if lab in labels} | {o for o in ords if o < len(options)}
    if labels or ords:
        return named.pop() if len(named) == 1 else None
    from dualtrace.encoder.matching import same_word

    mine = [w.lower() for w in content_words(text)]
    shared = [sum(any(same_word(w, x.lower()) for x in content_words(opt)) for w in mine)
              for _lab, opt in options]
    best = max(shared)
    if best >= 1 and best > sorted(shared)[-2] and (best >= 2 or shared.index(best) == recommended):
        return shared.index(best)  # one word is enough when it echoes the recommended option
    return None


def _recommended(text: str, options: list[tuple[str, str]]) -> tuple[int | None, str]:
    """The option the agent recommends (the one label a recommending sentence names, with
    no "avoid"/"not"/"instead of" between the verb and it) and that sentence."""
    for sent in block_sentences(_FENCE.sub("\n\n", text)):
        verb = _RECOMMEND.search(sent)
        if verb is None:
            continue
        named = [(m.start(), k) for k, (lab, _opt) in enumerate(options)
                 for m in re.finditer(rf"\b(?:option|approach|alternative)\s+\**{re.escape(lab)}\b", sent, _I)]
        if len({k for _at, k in named}) != 1:
            return None, ""
        at, k = named[0]
        return (None, "") if _AGAINST.search(sent[verb.end():at]) else (k, sent)
    return None, ""


# A later answer that takes the pick back ("Actually no, go with option B instead").
_REVERSES = re.compile(r"\b(?:actually|instead|changed? my mind|scratch that|on second thought|undo|revert)\b", _I)


def chosen_options(session: Session, limit: int = 3) -> list[Choice]:
    """The options the agent laid out that the user picked in the next message, unless a
    later message of the user takes the pick back."""
    events = [(i, e) for i, e in enumerate(session.events) if e.agent is None
              and e.kind in ("assistant", "user", "command", "edit", "tool")
              and not (e.kind == "assistant" and e.detail == "thinking")]
    users = [i for i, e in events if e.kind == "user"]
    out: list[Choice] = []
    for (i, e), (j, nxt) in zip(events, events[1:], strict=False):
        if e.kind != "assistant" or nxt.kind != "user" or (nxt.detail or "").startswith("rejection"):
            continue
        options = offered_options(e.text or "")
        if not options:
            continue
        recommended, reason = _recommended(e.text or "", options)
        answer = prose(nxt.text or "") or " ".join((nxt.text or "").split())  # "2" is all prose drops
        chosen = _pick(answer, options, recommended)
        if chosen is None:
            continue
        later = [k for k in users if k > j][:2]
        if any(_REVERSES.search(session.events[k].text or "") for k in later):
            continue  # the pick was taken back; what replaced it is that message's own
        out.append(Choice(tuple(t for _lab, t in options), chosen, " ".join((nxt.text or "").split()),
                          reason if recommended == chosen else "", i, j))
        if len(out) >= limit:
            break
    return out


# ---------------------------------------------------------------- what the agent answered

# A question the user asks about the project in a working session ("i will host it on
# render.com, do we need something for that?", "when hosted, is it /dev/urandom?") and the
# agent's answer: how the project's tools, hosting or runtime behave, which the next session
# would otherwise have to ask again. Read off two unseen real sessions (bench fresh15,
# fresh16), where most of what a reader kept was such answers. Not a question about the
# agent or the session, not a request ("can you ..."), not an answer the agent made into
# work (the task readers keep it), and only in a session that works on something: a lone
# trivia question answered from general knowledge is no project memory (review 14 G13).
_QUESTION = re.compile(r"\?\s*$|^(?:so,? )?(?:how|what|where|why|which|when)\b"
                       r"|^(?:so,? )?(?:is|are|does|do|did|can|will|should|would)\s+(?:we|i|it|its|this|that|there"
                       r"|the|our|my|they|these|those)\b", _I)
_REQUEST = re.compile(r"\b(?:can|could|would|will) (?:you|we)\b|\bshall we\b|\bdo you know\b|\bplease\b"
                      r"|^(?:so )?(?:what|how) about\b", _I)
_META = re.compile(r"\b(?:this (?:session|conversation|chat)|the session|you (?:see|remember|have access)"
                   r"|your (?:context|model|memory))\b", _I)
_PROJECT_REF = re.compile(r"\b(?:we|our|us|it|its|it'?s|this|that|these|those|here|my|mine)\b", _I)
_OPENER = re.compile(r"^\W*(?:(?:good|great|nice|excellent|fair) (?:question|catch|point)|love it|sure|ok(?:ay)?"
                     r"|ah|oh|right|exactly|yes|yep|no|nope|correct)\b[\w\s'’-]{0,20}[.!—–:-]*\s*$", _I)
MAX_ANSWERS = 3


@dataclass(frozen=True)
class Answer:
    asked: int  # the user message
    at: int  # the assistant message
    question: str
    sentence: str  # the answer's first statement (a bare "Nope, no Dockerfile needed." and the next)
    more: tuple[str, ...]  # the answer's next sentences or list items, for the body


# No question to keep: a rhetorical or frustrated one ("why would anyone ...", "what is it
# even doing?"), or one asking for a credential (its answer is a secret, redacted at best).
_RHETORICAL = re.compile(r"\bwould anyone\b|\bwho would\b|\beven\b|\bthe (?:hell|heck)\b|\bseriously\b", _I)
_ASKS_SECRET = re.compile(r"\b(?:password|passwd|token|api[ _-]?key|secret|credentials?|hook url|webhook|dsn)\b", _I)


def _question_of(text: str) -> str:
    """The message's last question, when it asks about something (two content words in it
    or in the sentence before it: "i will host it on render.com now. do we need something
    for that?") rather than for something. Code the user pasted holds no question of theirs
    (review 16b H6: "// why is this 1?"), and a question followed by an instruction in the
    same message is a request ("why would anyone host this? just make it draw 1-6")."""
    text = _FENCE.sub("\n", text)
    said = [x for line in text.splitlines() for x in sentences(prose(line))]  # a line is a sentence too
    at = max((k for k, x in enumerate(said) if _QUESTION.search(x)), default=None)
    if at is None:
        return ""
    q = said[at]
    if re.match(r"(?:do|did) (?:that|this|it|those|these)\b", q, _I) or _RHETORICAL.search(q) \
            or _ASKS_SECRET.search(q):
        return ""  # "Do that for me": an instruction; a complaint; a credential
    if any(re.match(r"(?:just |now |also |then )?(?:make|add|change|fix|use|remove|put|set|do|write)\b", x, _I)
           for x in said[at + 1:]):
        return ""  # the question leads into a request: the work that follows keeps it
    context = " ".join(said[max(0, at - 1):at + 1])
    if _REQUEST.search(q) or _META.search(q) or _ABOUT_AGENT.search(q) or len(content_words(context)) < 2:
        return ""
    return q


def answers(session: Session, skip: frozenset[int] | set[int] = frozenset(), limit: int = MAX_ANSWERS) -> list[Answer]:
    """The user's questions about the project the agent answered in its next message (see
    above); ``skip``: the user messages another reader keeps. At most ``limit``."""
    events = session.events
    if not any(e.kind in ("edit", "commit") and e.agent is None for e in events):
        return []
    out: list[Answer] = []
    for i, e in enumerate(events):
        if len(out) >= limit:
            break
        if e.agent is not None or e.kind != "user" or i in skip or (e.detail or "").startswith("rejection") \
                or len(e.text or "") > 600 or looks_pasted(e.text or ""):
            continue
        question = _question_of(e.text or "")
        if not question or not (_PROJECT_REF.search(question) or _names_the_session(question, session)):
            continue
        outputs: list[str] = []
        for j in range(i + 1, len(events)):
            f = events[j]
            if f.agent is not None:
                continue
            if f.kind in ("user", "edit"):
                break  # moved on, or the answer became work (the task readers keep it)
            if f.kind in ("command", "tool") and (f.result or f.text):
                outputs.append(f.result or f.text or "")
            if f.kind == "assistant" and f.detail != "thinking":
                said = _answer_sentences(f.text or "", outputs)
                if said:
                    if not _turn_edits(events, j) and _related(e.text or "", said):
                        out.append(Answer(i, j, question, said[0], tuple(said[1:4])))
                    break
                if not _NARRATES.search((sentences(f.text or "") or [""])[0]):
                    break  # the reply says no statement of its own
    return out


def _related(asked: str, said: Sequence[str]) -> bool:
    """Whether the answer speaks of what the message asked (a content word in common): a
    reply about something else answers nothing (review 16b H5)."""
    from dualtrace.encoder.matching import same_word

    mine = [w.lower() for w in content_words(prose(_FENCE.sub(" ", asked))) if len(w) > 3]
    theirs = [w.lower() for w in content_words(" ".join(said)) if len(w) > 3]
    return any(same_word(a, b) for a in mine for b in theirs)


def _turn_edits(events: Sequence[Event], j: int) -> bool:
    """Whether the agent edited a file after message ``j`` before the user spoke again."""
    for f in events[j + 1:]:
        if f.agent is None and f.kind == "user":
            return False
        if f.agent is None and f.kind == "edit":
            return True
    return False


def _names_the_session(question: str, session: Session) -> bool:
    """A word of the question is a name the session uses: a file it touched, the folder."""
    names = {p.rsplit("/", 1)[-1].split(".")[0].lower() for e in session.events if (p := e.path)}
    if session.cwd:
        names.add(session.cwd.rstrip("/").rsplit("/", 1)[-1].lower())
    return any(w.lower() in names for w in content_words(question))


# A hedge anywhere in an answer's sentence: a guess, not what the agent knows (review 16b H4:
# "... fine for a week since nothing changes per user, I think.").
_HEDGE = re.compile(r"\b(?:i think|i believe|i guess|i suspect|probably|maybe|perhaps|might|may be|not sure"
                    r"|i'?m not certain|likely|possibly|presumably|should be fine)\b", _I)


# Advice that weakens a safeguard, whoever gave it first (review 16b H3: a fetched page's
# "Disable branch protection and push with --force" repeated in the answer): never a memory.
_RISKY = re.compile(r"--force\b|--no-verify\b|\bdisable (?:the )?(?:branch protection|ssl|tls|verification|2fa|mfa"
                    r"|auth\w*|the firewall|security)|\bchmod (?:-R )?777\b|\|\s*(?:sudo )?(?:ba|z)?sh\b"
                    r"|\bskip (?:the )?(?:review|tests|checks|ci)\b", _I)


def _answer_sentences(text: str, outputs: Sequence[str]) -> list[str]:
    """The statements of an answer, by paragraph and list item: not a quote, a plan, the
    agent about itself, a relayed source or a guess; a bare opener ("Nope, no Dockerfile
    needed.") joined to what follows it."""
    body = "\n".join(line for line in _FENCE.sub("\n\n", text).splitlines() if not line.lstrip().startswith(">"))
    out: list[str] = []
    carry = ""
    for sent in block_sentences(body):
        plain = sent.replace("**", "").strip()
        if not out and _OPENER.match(plain):
            continue
        if not out and re.match(r"\W*done\b", plain, _I):
            return []  # "Done — copied ...": an account of work, not an answer
        if not out and len(plain) < 30 and not plain.endswith("?"):
            carry = f"{carry} {plain}".strip()
            continue
        if plain.endswith("?") or _NARRATES.search(plain) or _PLAN.search(plain) and not out:
            if out:
                break
            continue
        if not _agents_account(plain, outputs) or _HEDGE.search(plain) or _RISKY.search(plain):
            if out:
                break  # the rest of the answer is not the agent's own statement either
            continue
        plain = f"{carry} {plain}".strip() if carry and not out else plain
        if len(plain) > 320:
            plain = clean_sentence(plain, 320)
        out.append(plain)
        if len(out) >= 4:
            break
    return out
