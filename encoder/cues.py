"""Phrase cues shared by the cheap gates and the offline encoder."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from dualtrace.encoder.session import Event

# An assistant message that restates what the user and assistant settled on
# ("Final: ...", "Settled: ...", "Recap of f(): ...", "Amended rule, superseding
# ...:"): the decision of a conversation, in its most complete form. Weaker openers
# ("Got it", "Understood", "Done") count only when the message states a rule.
AGREEMENT_STRONG = re.compile(
    r"^\W*(?:final\b|settled\b|recap\b|(?:full |final )?recap of\b|agreed\b|decision\b|amend\w*"
    r"|to be explicit\b|in summary\b|summary\b|confirmed\b|the (?:new |final )?(?:rule|policy|contract)\b)",
    re.I)
# A return to an earlier choice ("let's go back to Redis after all", "revert the session
# cache to Redis", "forget Memcached, use Redis again"): a decision that revises the later
# one (review 8 F15). A pattern text, for the encoder's decision cue and the gate's signal.
RETURN_TO = (
    r"(?:let'?s|we(?:'ll| will| should)|we(?:'re| are)) (?:go(?:ing)?|switch(?:ing)?|mov(?:e|ing)) back to\b"
    r"|\brevert(?:ing)? (?:(?:the|our) )?(?:[\w.-]+ ){0,3}(?:back )?to\b"
    # "revert the last commit to fix CI" is a task, not a return to a choice
    r"(?! (?:fix|make|get|see|check|unblock|avoid|keep|test|try|restore|undo|find|stop|let|help|clean)\b)"
    r"|\b(?:use|using) (?:the |our )?[\w.-]+(?: [\w.-]+)? again\b|\bback to [\w.-]+(?: [\w.-]+){0,4} after all\b")
# "We're going to" with a verb of choosing ("rewrite the parser in Rust", "deprecate the
# v1 API", "host it on Fly.io") is a decision; with a verb of doing ("make a little
# experiment", "build three prototypes") it opens a plan. A pattern text (review 13 F10).
# Not the verbs of doing a step ("run the migration now", "ship it on Friday", "split this
# PR", "merge", "deploy", "remove"): review 14 G12.
CHOICE_VERBS = (r"(?:move|migrate|switch|use|adopt|replace|drop|keep|stick with|go with|rewrite|port"
                r"|deprecate|retire|sunset|host|standardi[sz]e|consolidate|require|enforce|ban|support"
                r"|target|pin|self-host|vendor|outsource|stop using|no longer|go back|switch back"
                r"|abandon|phase out)\b")
# A tool ruled out for another ("don't use ClMail for communication, use the builtin teams",
# "do not use npm; use pnpm instead", "Don't use npm - use pnpm", "..., please use pnpm"):
# the project's rule. Not when either side is a pronoun ("don't use that, use what I said":
# nothing a later session could follow). A pattern text, for the encoder's convention cue
# and the gate's signal.
_DEICTIC = (r"(?:(?:that|it|this|those|these|them|what|whatever|something|anything|mine|yours)\b"
            # "don't use the old one, use the new one": which one is said elsewhere
            r"|the (?:old|new|other|first|second|third|last|previous|next|same)(?: one| option| version"
            r"| way)?(?=\s*(?:[,.;!?]|$|instead\b)))")
DONT_USE = (r"\b(?:don'?t|do not|never) use\s+(?!" + _DEICTIC + r")[^.;!?]{1,80}?"
            r"(?:[,;]|\s[-\u2013\u2014]+)\s*(?:but |instead,? |rather |please |just )?use\s+(?!" + _DEICTIC + r")")
# What limits an order to the work at hand ("for this one test", "for now", "this time",
# "for the demo", "on this ticket", "until the release"): no rule of the project (a project,
# repo or team scope is one, and so is "this kind of transform" or "this test suite").
ONE_OFF_SCOPE = re.compile(
    r"\bfor (?:(?:this|that) (?:one |single |particular |specific |current )?|the (?:one|single|particular"
    r"|specific|current) )(?!project|repo|repository|codebase|team|company|org|organi[sz]ation|monorepo"
    r"|kind|type|sort|class|style|language|stack)\w+"
    r"|\bfor (?:this|that)(?=\s*[,.;:!?])|\bfor the (?:demo|meeting|presentation|call|review|interview|release)\b"
    r"|\b(?:for now(?! or ever)|right now|this time|for the moment|for today|just this once|temporarily"
    r"|(?:on|in) this (?:one )?(?:ticket|issue|task|pr|branch|commit|run|script|function|file|case"
    r"|test(?! suites?\b))|until (?:the|we|this)\b)\b", re.I)
VAGUE_USE = re.compile(r"\buse\s+" + _DEICTIC, re.I)  # "don't use that, use what I said"
_DONT_USE_ALONE = re.compile(r"^\W*(?:please\s+)?(?:don'?t|do not|never)\s+use\s+\S[^.;!?]{0,60}[.!]$", re.I)
# "Use pnpm." after it: a tool, a few words, no "to ..." ("Use the README to find the
# commands", "Use your judgement" are no rule's other half).
_USE_NEXT = re.compile(r"^\W*(?:please\s+|just\s+|instead,?\s+)?use\s+(?!your\b|common\b)"
                       r"(?:\S+\s*){1,5}$", re.I)
_USE_NOT = re.compile(r"\b(?:to|your|judge?ment|discretion|common sense)\b", re.I)


def joined_rules(sentences: list[str]) -> list[str]:
    """"Don't use npm." + "Use pnpm." as one sentence ("Don't use npm, use pnpm."): the
    rule is the pair, and the convention cue reads one sentence at a time."""
    out: list[str] = []
    for s in sentences:
        if out and _DONT_USE_ALONE.match(out[-1]) and _USE_NEXT.match(s) and not _USE_NOT.search(s):
            out[-1] = out[-1][:-1] + ", " + s[0].lower() + s[1:]
        else:
            out.append(s)
    return out


# The user telling the agent it destroyed their work ("you just deleted my claude-parser?",
# "you wiped our changes", "my work is gone"): an incident the user reports, caused by what
# the agent ran before it. A pattern text, for the encoder's incident cue and the gate's signal.
DESTROYED = (
    r"\byou(?:'ve| have)? (?:just |accidentally |actually |completely )?(?:deleted|removed|wiped|erased"
    r"|overwr(?:ote|itten)|destroyed|nuked|trashed|clobbered|lost) (?:all (?:of )?)?(?:my|our)\b"
    # what one is glad to see go ("you removed my typo", "our unused imports")
    r"(?! (?:typos?|unused|dead|old|stale|extra|duplicated?|debug|commented|temp(?:orary)?|tmp"
    r"|placeholders?|todos?|warnings?|bugs?)\b)"
    r"|\byou(?:'ve| have)? (?:just )?(?:deleted|removed|wiped|erased|nuked|destroyed|trashed) (?:the whole|the entire"
    r"|everything|all (?:of )?the)\b|\byou (?:just )?(?:threw|thrown|throw) away (?:my|our|all)\b"
    r"|\bwhere (?:did|have|has) (?:all )?(?:my|our|the) (?:[\w.-]+ ){0,2}?(?:work|changes|files?|folders?"
    r"|director(?:y|ies)|code|commits?|branch(?:es)?|config|configs|notes|scripts?|tests|\.env|[\w-]+\.\w{1,5})"
    r"(?: files?)? (?:go|gone)\b"
    r"|\b(?:everything|it all)(?: in there)? (?:is|was|got|has been) (?:gone|lost|deleted|wiped)\b"
    r"|\b(?:my|our|all (?:my|our|the)) (?:work|changes|files?|folders?|director(?:y|ies)|repo(?:sitory)?"
    r"|project|code|commits?|data|database|branch) (?:is|are|was|were|got|has been|have been) "
    r"(?:gone|lost|deleted|wiped|erased|destroyed)\b")
# Thanks in the same sentence ("you removed my typo, thanks!"), or the user's own doing ("I
# ran rm on the wrong dir and my files are gone"): no loss the agent caused.
NOT_A_LOSS = re.compile(
    # what was meant to go: "as planned", "like I asked", "that was the point"
    r"\b(?:as (?:planned|requested|intended|expected|agreed|i asked|discussed)|like i (?:asked|said|wanted)"
    r"|that was the (?:point|plan|idea)|(?:which|that)(?:'s| is) what (?:i|we) want(?:ed)?|exactly what i wanted)\b"
    # the user's own doing: "I deleted ...", "I ran rm ..." (not "I ran git status and ...")
    r"|\bI(?:'ve| have)? (?:just )?(?:accidentally )?(?:deleted|removed|wiped|lost|overwrote|nuked|messed up"
    r"|(?:ran|run|typed) (?:an? )?(?:`)?(?:rm|git (?:reset|clean|checkout|restore|push -f|push --force)|dd|mkfs|drop))\b",
    re.I)
# A command that destroys files, history or data: what such a report is about.
DESTRUCTIVE = re.compile(
    r"\brm\s+-[a-zA-Z]*[rRf]|\bgit\s+(?:reset\s+--hard|clean\s+-[a-z]*f|checkout\s+(?:--\s+)?\.(?:\s|$)"
    r"|push\s+(?:-f\b|--force)|branch\s+-D\b|stash\s+(?:drop|clear)\b|restore\s+(?:--\S+\s+)*\.(?:\s|$))"
    r"|\bdrop\s+(?:table|database|schema)\b|\btruncate\s+table\b|\bfind\b[^|;&]*\s-delete\b"
    r"|\bmv\s+-f\b|\bdd\s+if=|\bmkfs\b|\bdropdb\b|\bredis-cli\b[^|;&]*\bflush(?:all|db)\b", re.I)
AGREEMENT_WEAK = re.compile(r"^\W*(?:got it|understood|done|right|ok(?:ay)?|so,|perfect|great)\b", re.I)
RULE_WORDS = re.compile(
    r"\b(?:exactly|always|never|only|must|rule|policy|contract|wins?|first|capped|at most|at least"
    r"|superseding|instead|unless|except|should be|keep|drop|reject|allow\w*|case-(?:in)?sensitive)\b", re.I)


_CODE_NAME = re.compile(r"\b[a-z]+_[a-z0-9_]+\b|\b\w+\(\)")


# A command that runs a test suite (any ecosystem), a project's test target or recipe
# (`make integration`, `just test`) or its CI script (`./scripts/ci.sh`: the program's
# name, as check_command sees it without its directory).
_TESTS = (
    r"pytest|py\.test|tox|nox|mix\s+test|go\s+test|cargo\s+(?:test|nextest)|jest|vitest|mocha|rspec|"
    r"phpunit|ctest|(?:npm|pnpm|yarn|bun)\s+(?:run\s+)?(?:test|e2e)|(?:rails|rake)\s+(?:test|spec)|"
    r"(?:make|just)\s+(?:-C\s+\S+\s+|-\S+\s+)*(?:[\w-]*(?:test|check|spec)[\w:-]*|integration|e2e|ci)|"
    r"(?:playwright|bats)\s+test|cypress\s+run|(?:ci|tests?|run[-_]tests?|check)\.sh|"
    r"gradle\w*\s+test|mvn\s+test|dotnet\s+test|deno\s+test|unittest"
)
TEST_COMMAND = re.compile(rf"\b(?:{_TESTS})\b")

def run_key(command: str) -> str:
    """A command's identity across its re-runs (a test, a check): its first three words."""
    return " ".join(command.split()[:3])


def fixed_by_rerun(events: Sequence[Event], i: int) -> int | None:
    """The fix arc of the failing test run ``events[i]``: the index of the first later run
    of the same test (same :func:`run_key`) that passed, when a file was edited in
    between. None when it never passed again, or passed with nothing edited (a flaky
    run is no fix). The gates' signal and the offline encoder's fallback incident both
    ask this (encoder/backends/work.fix_arcs is the detailed reader of failures)."""
    key = run_key(events[i].command or "")
    edited = False
    for j in range(i + 1, len(events)):
        e = events[j]
        if e.kind == "edit" and not e.is_error:
            edited = True
        elif (e.kind == "command" and not e.failed
              and run_key(e.command or "") == key):
            return j if edited else None
    return None


# Every command the agent runs failing with one and the same output, whatever it runs
# (`ls`, `cd ~ && ls`, `brew install ...` all answer 'Path "/x" does not exist' once the
# working directory was moved away): the environment broke, not one command. The gates'
# signal and the offline encoder's incident (encoder/backends/work.stuck_runs) both ask this.
STUCK_RUNS = 3


# What makes two failed outputs look alike without saying anything about the environment:
# the host's own messages ("<tool_use_error>Sibling tool call errored" when one of several
# parallel calls fails: 9 in the corpus), a bare "Exit code 1" (greps that find nothing),
# markup, and colour codes written out as text ("\e[31m"; real escapes are already gone:
# SessionBuilder.add strips them from every tool output).
_HOST_ERROR = "<tool_use_error>"
_ANSI = re.compile(r"\\e\[[0-9;]*m")
_MARKUP = re.compile(r"</?[A-Za-z][\w-]*(?:\s[^<>]*)?/?>")
_EXIT_LINE = re.compile(r"^\s*(?:error:?\s*)?(?:(?:the )?command failed with\s+)?(?:exit (?:code|status)|exited with"
                        r"(?: code)?)\s*-?\d+\.?\s*|\(no output\)|\[request interrupted by user[^\]]*\]", re.I)
_WORDS3 = re.compile(r"[A-Za-z]{3}")


def _output_key(e: Event) -> str:
    text = e.result or e.text or ""
    if _HOST_ERROR in text or text.lstrip().startswith("[Request interrupted"):
        return ""
    text = _EXIT_LINE.sub("", _MARKUP.sub("", _ANSI.sub("", text)))
    key = " ".join(text.split())[:200]
    return key if _WORDS3.search(key) else ""


# Steps of a shell line that run no program of their own: a wait, a change of directory.
_NOT_PROGRAMS = frozenset({"cd", "pushd", "sleep", "export", "set", "source", ".", "true", ":"})


def _kind(command: str) -> str:
    """What a shell line does, for telling a broken environment from one thing retried: a
    check (any test run, lint or build: one kind, the fix-arc reader's), else the program
    and its first argument that is no flag (``docker ps`` and ``docker info`` differ;
    ``sleep 2 && curl localhost:3000`` and ``curl -v localhost:3000`` are one wait loop)."""
    if check_command(command):
        return "check"
    for simple in _simple_commands(command):
        rest = simple[_PREFIX.match(simple).end():]  # type: ignore[union-attr]
        words = rest.split()
        if words and words[0].rsplit("/", 1)[-1] not in _NOT_PROGRAMS:
            arg = next((w for w in words[1:] if not w.startswith("-")), "")
            return f"{words[0].rsplit('/', 1)[-1]} {arg}"
    return command


def stuck_run(events: Sequence[Event]) -> tuple[int, str, tuple[str, ...]] | None:
    """(index of the first, the output, the commands) of the longest run of main-thread
    commands that all failed with one output, by at least ``STUCK_RUNS`` different commands
    of at least two kinds (:func:`_kind`). Re-runs of one thing (three pytest runs refused
    by a database that is down, curl polling a server that is starting) are its failure,
    for the fix-arc reader; an environment that broke fails whatever runs (``docker ps``,
    ``docker info``; ``git status``, ``git log``)."""
    best: tuple[int, str, tuple[str, ...]] | None = None
    run: list[int] = []

    def close() -> None:
        nonlocal best
        commands = tuple(dict.fromkeys(events[k].command or "" for k in run))
        kinds = {_kind(c) for c in commands}
        if (len(commands) >= STUCK_RUNS and len(kinds) >= 2
                and (best is None or len(commands) > len(best[2]))):
            best = (run[0], _output_key(events[run[0]]), commands)

    for i, e in enumerate(events):
        if e.kind != "command" or e.agent is not None:
            continue
        key = _output_key(e) if e.failed else ""
        if key and run and key == _output_key(events[run[0]]):
            run.append(i)
            continue
        if run:
            close()
        run = [i] if key else []
    if run:
        close()
    return best


# The checks a person asks about later: tests, linters, type checkers, builds, in any
# case, as the program a command runs (see check_command). Session records list them;
# a failing one is an incident to the offline encoder. The one list of checks.
_CHECKS = (
    _TESTS
    + r"|ruff|flake8|pylint|mypy|pyright|ty\s+check|black\s+--check|isort\s+--check|eslint|tsc"
    r"|prettier\s+--check|clippy|golangci-lint|go\s+vet|cargo\s+(?:build|check|clippy)"
    r"|(?:npm|pnpm|yarn|bun)\s+(?:run\s+)?(?:build|lint|typecheck)|make(?:\s+(?:build|lint|all))?$"
    r"|lint-imports|pre-commit\s+run|mix\s+(?:compile|credo|dialyzer)|dialyzer|credo"
    r"|just\s+lint|act"
)
_ANY_CHECK = re.compile(rf"(?:{_CHECKS})\b", re.I)
# What may run before the check's program in one simple command: variable
# assignments, wrappers, and the runners of an environment or a package manager.
_PREFIX = re.compile(
    r"(?:\w+=\S*\s+|(?:time|nice|sudo|exec|command|env)\s+|timeout\s+\S+\s+"
    r"|(?:uv|poetry|pipenv|pdm|hatch|rye)\s+run\s+(?:-\S+\s+)*|(?:npx|bunx)\s+(?:-\S+\s+)*"
    r"|(?:pnpm|yarn)\s+(?:exec|dlx)\s+|bundle\s+exec\s+|python[\d.]*\s+-m\s+|(?:ba)?sh\s+(?=\S+\.sh\b))*")
_SEPARATORS = frozenset({";", "&", "&&", "|", "||", "|&", "(", ")", "`", "$", "\n"})


def _simple_commands(command: str) -> list[str]:
    """The simple commands of a shell line, split at its unquoted operators (``;``,
    ``&&``, ``|``, subshells); quoted text stays inside its word, so a check named in a
    commit message, a grep pattern or an issue title is no command of its own."""
    import shlex

    lexer = shlex.shlex(command.replace("\n", " ; "), posix=True, punctuation_chars=";&|()`")
    lexer.whitespace_split = True
    words: list[str] = []
    out: list[str] = []
    try:
        for token in lexer:
            if token in _SEPARATORS or not token.strip(";&|"):  # zsh's "cmd &; next" too
                out.append(" ".join(words))
                words = []
            else:
                words.append(token)
    except ValueError:  # an unclosed quote: what was read before it
        pass
    out.append(" ".join(words))
    return [c for c in out if c]


def check_command(command: str) -> str | None:
    """The check ``command`` runs (``"pytest"``, ``"mix credo"``, ``"npm run build"``:
    lowercase, single-spaced), or None. A check is the program of one of the command's
    simple commands, after variable assignments, wrappers (``timeout 60``) and runners
    (``uv run``, ``npx``, ``python -m``) and without its directory (``.venv/bin/``);
    a check's name anywhere else (an argument, a quoted message) is not one."""
    if not _ANY_CHECK.search(command):
        return None  # the common case, without tokenizing
    for simple in _simple_commands(command):
        rest = simple[_PREFIX.match(simple).end():]  # type: ignore[union-attr]
        program, _, args = rest.partition(" ")
        m = _ANY_CHECK.match(" ".join((program.rsplit("/", 1)[-1], args)).strip())
        if m:
            return " ".join(m.group(0).lower().split())
    return None


def is_agreement(text: str) -> bool:
    """An assistant message that restates a settled decision (see above)."""
    if AGREEMENT_STRONG.search(text[:80]):
        return True
    if not AGREEMENT_WEAK.search(text[:40]) or len(text) < 80:
        return False  # "Understood; I'll keep changes small." acknowledges, it settles nothing
    # A weak opener ("Got it") counts when the message states a rule, or restates what
    # a named piece of code does (snake_case or a call) at some length.
    return bool(RULE_WORDS.search(text[:600])
                or (len(text) > 100 and _CODE_NAME.search(text[:600])))


# Raw tool output where a sentence belongs (a description, an update, a failure's telling
# line): a struct or map dump (Elixir ``%Plug.Conn{``, ``#Function<``, Ruby ``#<Obj``,
# ``"key" => v``, ``{"key":``, Python ``Obj(a=1, b=2)``), a stack frame, markup or
# entities, long hex, or a line that is mostly brackets and operators.
_DUMP = re.compile(
    r"%[A-Z][\w.]*\{|%\{|#[A-Z][\w.]*<|#<[A-Z]|#\{"
    r"|(?:\"[^\"\n]{1,60}\"|:\w+)\s*=>|\{\s*\"[\w-]+\"\s*:|\b[A-Z]\w*\(\w+=[^)]*,\s*\w+="
    r"|\bat [\w.$<>]+ \(|File \"[^\"]+\", line \d+|\(\w[\w-]* \d+\.\d+[\w.-]*\) [\w/.-]+:\d+"
    r"|</?[a-zA-Z][\w:-]*(?:\s[^<>]*)?/?>|&(?:lt|gt|amp|quot|nbsp);|<!--"
    r"|\b0x[0-9a-f]{8,}\b|\b[0-9a-f]{32,}\b")
_DUMP_PUNCT = frozenset("{}[]<>=%#|\\\"")


def is_dump(text: str) -> bool:
    """True for text shaped like raw tool output rather than a person's sentence."""
    if _DUMP.search(text):
        return True
    body = " ".join(text.split())
    return len(body) >= 40 and sum(ch in _DUMP_PUNCT for ch in body) > 0.08 * len(body)


# An explicit request to remember, at the head of a sentence: "remember that X", "please
# remember: X", "note for the future: X", "for future reference, X", "keep in mind that
# X", "don't forget that X", "make a note that X", "I want you to remember that X";
# "remember to X" is a standing instruction. A question ("do you remember ...?") or the
# user's own memory ("I remember ...") is no request.
REMEMBER = re.compile(
    r"^(?:(?:please|also|and|oh|btw|ok(?:ay)?|so|one more thing|important)\W+)*"
    r"(?:(?:i want you to|i need you to|can you|could you|you should|you need to|make sure (?:to|you))\s+)?"
    r"(?:(?:please\s+)?(?:remember|memori[sz]e)(?P<to>\s+to\b)?(?:\s+(?:that|this))?"
    r"|(?:a )?note (?:for|to) (?:the )?future|for (?:future|later) reference|keep in mind(?:\s+that)?"
    r"|(?:don'?t|do not|never) forget(?P<to2>\s+to\b)?(?:\s+that)?|make a note(?:\s+that)?|note to self"
    r"|(?:save|store|add) (?:this |that )?(?:to|in) (?:your |the )?memory(?:\s+that)?)"
    r"(?![\w-])\s*[:,\-\u2014]?\s*", re.I)


def asks_to_remember(text: str) -> bool:
    """A sentence of ``text`` opens with an explicit request to remember (:data:`REMEMBER`)."""
    return any(REMEMBER.match(s) and not s.rstrip().endswith("?")
               for s in re.split(r"(?<=[.!?])\s+|\n+", text.strip()))


# A user correcting the work: "No, we use pnpm in this repo, not npm.", "Use tabs, not
# spaces, in the Go files.", "Don't use print here; use the structured logger.", "wait,
# the API base path is /api/v2 now, not /api/v1", "Stop adding comments to every line, I
# hate that." What it is: a rule (an imperative or "we use ..." that rejects an
# alternative, or a "don't X; use Y"), a corrected fact (a statement opened by "no" /
# "wait" / "actually" that rejects the old value), or the user's taste ("I hate that").
_CORRECTION_OPEN = re.compile(r"^(?:(?:no|nope|wait|actually|careful|hmm|sorry|oops|correction)\b[\s,.!:;-]*)+", re.I)
_CONTRAST = re.compile(r",\s*(?:and\s+)?(?:not|never)\s+[\w`'\"./@-]+|\b(?:instead of|rather than)\s+\S", re.I)
_IMPERATIVE = re.compile(
    r"^(?:please\s+)?(?:use|don'?t|do not|never|always|stop|avoid|write|put|keep|run|call|prefer|name"
    r"|import|commit|push|deploy|test|format)\b|^we (?:use|run|write|keep|deploy|put|call|name|only|always|never)\b",
    re.I)
_THEN_USE = re.compile(r"[;,:]\s*(?:just\s+)?(?:use|write|call|run|prefer)\b", re.I)
_DISTASTE = re.compile(r"\bi (?:really )?(?:hate|dislike|can'?t stand|don'?t like)\b(?: (?:that|it|this|when))?", re.I)
_STATES = re.compile(r"\b(?:is|are|was|were|lives?|runs?|sits?|moved|became|points?)\b", re.I)


def correction_kind(sentence: str) -> str | None:
    """convention, learning or preference for a user's correction (see above), else None."""
    body = _CORRECTION_OPEN.sub("", sentence.strip())
    opened = body != sentence.strip()
    if not body or sentence.rstrip().endswith("?"):
        return None
    if _DISTASTE.search(body) and (_IMPERATIVE.match(body) or opened):
        return "preference"
    contrast = _CONTRAST.search(body)
    if _IMPERATIVE.match(body) and (contrast or re.match(r"(?:don'?t|do not|never|stop|avoid)\b", body, re.I)
                                    and _THEN_USE.search(body)):
        return "convention"
    if opened and contrast and _STATES.search(body[:contrast.start()]):
        return "learning"
    return None


def without_opener(sentence: str) -> str:
    """A correction's statement without its "No," / "wait," / "Actually," opener."""
    body = _CORRECTION_OPEN.sub("", sentence.strip())
    return body[0].upper() + body[1:] if body else sentence


# A user taking back what they said earlier in the session: "scratch that", "never mind",
# "on second thought", "forget what I said (about X)", "I take that back", "cancel that",
# "disregard my last message"; "let's not X", "actually, keep X" and "X after all" take
# back an earlier statement about the same subject when there is one. "Never mind the
# lint warnings" (ignore them) and "don't forget that X" (a request to remember) take
# nothing back, nor does "after all" inside a clause ("after all the refactoring", "close
# the epic after all 4 subtasks are done").
_RETRACT_OPENER = r"(?:(?:no|nope|wait|actually|hmm+|ok(?:ay)?|sorry|oh|um+|uh+|so|hold on|ah)\b[\s,.!:;\u2014-]*)*"
_CLAUSE_END = r"(?=\s*(?:[,.;:!\u2014-]|$))"
_RETRACT_HEAD = re.compile(
    rf"^{_RETRACT_OPENER}"
    r"(?:(?:scratch|strike|cancel|belay|ignore|disregard|undo) (?:that|this)(?: (?:last|idea|plan|one))?"
    rf"|(?:ignore|disregard) my (?:last|previous|earlier) \w+|never ?mind(?: (?:that|this|it))?{_CLAUSE_END}"
    rf"|nvm{_CLAUSE_END}|on (?:second|further) thoughts?|i take (?:that|it|this) back"
    rf"|forget (?:that|it|this|about (?:it|that|this)){_CLAUSE_END}"
    r"|(?:forget|ignore|disregard) what i (?:said|wrote|told you|asked(?: for)?|suggested|proposed)"
    r"(?: (?:earlier|before|above|just now))?(?: (?:about|regarding|on) (?P<about>[^,;:.!?\u2014]+))?)"
    r"(?:\s*[,.;:!\u2014-]+)*\s*", re.I)
_RETRACT_INLINE = re.compile(
    rf"^(?P<opened>{_RETRACT_OPENER})"
    r"(?:(?:let'?s|let us) not\b|.+\bafter all(?=\s*(?:[,.;:!)\u2014-]|$))"
    r"|(?:let'?s |we(?:'ll| will)? |we |i'?d )?(?:keep|stay (?:with|on)|stick with|leave)\b)", re.I)


@dataclass(frozen=True)
class Retraction:
    """What a retracting sentence says: the subject it names ("forget what I said about
    X"), the statement that replaces what it takes back ("we keep MySQL ..."), and whether
    it points at what was just said ("scratch that") rather than at a named subject."""

    about: str
    rest: str
    deictic: bool


def retraction(sentence: str) -> Retraction | None:
    """The retraction ``sentence`` makes (see above), else None. An inline form ("let's
    not X", "actually, keep X") is only a candidate: it takes something back only when an
    earlier statement shares its subject (the caller decides)."""
    text = sentence.strip()
    if text.endswith("?"):
        return None
    head = _RETRACT_HEAD.match(text)
    if head is not None:
        rest = text[head.end():].strip()
        rest = rest[0].upper() + rest[1:] if rest else ""
        return Retraction((head.group("about") or "").strip(), rest, deictic=not head.group("about"))
    inline = _RETRACT_INLINE.match(text)
    if inline is None:
        return None
    if re.match(r"(?:keep|stay|stick|leave|let'?s keep|we(?:'ll| will)? keep|we keep|i'?d)",
                text[inline.end("opened"):], re.I) and not inline.group("opened") \
            and not re.search(r"\bafter all\b", text, re.I):
        return None  # "Keep the tests small": a plain instruction, nothing taken back
    rest = text[inline.end("opened"):].strip()
    return Retraction("", rest[0].upper() + rest[1:] if rest else "", deictic=False)
