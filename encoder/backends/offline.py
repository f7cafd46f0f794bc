"""The offline encoder: deterministic, no network, no API key.

It reads the redacted session, segments it into candidate events from linguistic
cues (decision, convention, preference, incident, pattern and learning phrases)
and structural ones (an error followed by a fix and a passing test), scores the
four evidence dimensions from documented features (``score_candidate``), and
proposes Store/Update operations to the validator. Everything it writes is the
session's own words and artifacts: it quotes statements instead of paraphrasing,
and builds moments only from files, commands, errors, commits, the branch and
timestamps that the session contains. It is less eloquent than a model, and must
never be wrong about what happened.

Scoring features (each dimension 0-3):

* durability: architectural subjects (storage, database, logging, auth, API,
  schema, framework, pipeline, deployment...) 3; other decisions/conventions 2;
  incidents, patterns, learning 2; preferences 2; "for now"/"temporary" -1.
* scope: system-wide words ("all", "every", "across", "system", "pipeline",
  storage/logging subjects) 3; a service/API/middleware/endpoint boundary 2;
  one file or module 1.
* rationale: 0 no why; 1 implicit (a hedge or a consequence); 2 an explicit why
  ("because", "the reason", "main driver", "root cause"); 3 a why plus
  alternatives or tradeoffs ("instead of", "looked at", "considered",
  "tradeoff", "worst of both worlds").
* retrieval: incidents that are intermittent, environment-specific or carry an
  error code 3, else 2; decisions 2 (+1 with an explicit why and wide scope);
  conventions 2; patterns 2; learning 2; preferences 1.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field

from dualtrace.config import Settings
from dualtrace.encoder.backends import EncodeRequest, Usage, work
from dualtrace.encoder.cues import (
    AGREEMENT_STRONG,
    CHOICE_VERBS,
    DESTROYED,
    DESTRUCTIVE,
    DONT_USE,
    NOT_A_LOSS,
    ONE_OFF_SCOPE,
    REMEMBER,
    RETURN_TO,
    VAGUE_USE,
    Retraction,
    check_command,
    correction_kind,
    fixed_by_rerun,
    is_agreement,
    is_dump,
    joined_rules,
    retraction,
    without_opener,
)
from dualtrace.encoder.cues import TEST_COMMAND as TEST_CMD
from dualtrace.encoder.matching import (
    GENERIC_ERRORS,
    STOPWORDS,
    best_match,
    distinct_failures,
    distinct_scopes,
    distinct_subjects,
    own_words,
    same_scope,
    same_word,
    spread_of,
    tokens,
)
from dualtrace.encoder.plan import (
    SIMILAR_THRESHOLD,
    MomentDraft,
    PlanBuilder,
    Rejected,
    Skip,
    Store,
    Update,
)
from dualtrace.errors import PathError
from dualtrace.memfs.anchors import MAX_ANCHOR, make_anchor
from dualtrace.memfs.formats import Fact, Scores
from dualtrace.memfs.ids import short_id

_I = re.I
LEAD = {
    "preference": re.compile(
        r"(?:^|[.!?]\s+)(?:(?:also|and|oh|btw|ps|by the way|fwiw|incidentally)\W+)?(?:i (?:really )?(?:like|prefer|love|hate|want|dislike|tend to|always|never)\b"
        r"|i don'?t like\b|my preference\b|i'?d rather\b|i'?d (?:actually |really |much )?(?:love|prefer)\b"
        r"|please (?:always|never|don'?t)\b)", _I),
    "convention": re.compile(
        r"\b(?:from now on|going forward|the rule is|our convention|by convention|as a rule"
        r"|we always|we never|always use|never use|must always|should always|must never"
        r"|every (?:new )?[\w-]+ (?:must|should)|(?:team|project) (?:rule|standard))\b"
        # a tool ruled out for another: "don't use ClMail for communication, use the builtin
        # teams", "do not use npm; use pnpm instead"
        r"|" + DONT_USE, _I),
    "decision": re.compile(
        # "we're going to" alone opens a plan ("we're going to make a little experiment");
        # it is a choice only with a verb of choosing, or going back/over to something
        r"\b(?:we(?:'re| are)? (?:switching|moving|migrating)\b[^.;]{0,40}?\b(?:to|from|over|back)\b"
        r"|we(?:'re| are)? going (?:back|over) to\b"
        r"|we(?:'re| are)? going to " + CHOICE_VERBS +
        r"|we decided|decided to|(?:the )?decision (?:is|was)|let'?s (?:go with|use|switch|move|adopt)"
        r"|we'?ll (?:use|go with|switch|adopt|standardi[sz]e|keep)|we will (?:use|switch|adopt|keep)"
        # a choice kept ("we're sticking with PostgreSQL for billing", "we keep MySQL")
        r"|we(?:'re| are)? (?:keep(?:ing)?|sticking with|staying (?:with|on))|we(?:'ll| will) (?:stick with|stay (?:with|on))"
        r"|let'?s (?:keep|stick with|stay (?:with|on))"
        r"|going with|settled on|opted (?:for|to)|we chose|standardi[sz]e on|replac(?:e|ing) \S+ with"
        r"|switch(?:ing|ed)? (?:from \S+ )?to|we(?:'re| are) (?:dropping|adopting)"
        # a sentence that opens with the revision ("I changed my mind about X: ..."); one
        # that asks to look at something first ("have a look at this patch, I changed my
        # mind ...") is a request, read by the task path
        r"|^(?:so,? )?(?:i|we)(?:'ve| have)? chang(?:e|ed|ing) (?:my|our) minds?|^on second thought"
        r"|^change of plans?|" + RETURN_TO + r")\b", _I),
    "incident": re.compile(
        r"\b(?:throw(?:s|ing)|fail(?:s|ing|ed)|failure|error|exception|crash(?:es|ed|ing)?|broken"
        r"|regression|timeouts?|timed out|outage|race condition|deadlock|memory leak|flaky"
        r"|intermittent(?:ly)?|is back|came back|back again|root cause|stack ?trace|segfault"
        r"|(?:still )?(?:does not|doesn'?t|do not|don'?t) work|(?:is|are) not working|stopped working"
        r"|[45]\d\ds|(?:http|status|returns?|returning|got an?|throws?|throwing) [45]\d\d"
        r"|[45]\d\d (?:errors?|responses?|unauthorized|forbidden|not found)"
        r"|\w+(?:Error|Exception))\b|" + DESTROYED, _I),
    "learning": re.compile(
        r"\b(?:til|today i learned|i learned|learned that|turns out|didn'?t know|now i (?:understand|know|get)"
        r"|i realized|lesson learned|the lesson)\b", _I),
    "pattern": re.compile(
        r"\b(?:keep (?:making|forgetting|doing|hitting|running into|breaking)|every time|recurring"
        r"|(?:second|third|fourth) time|keeps happening|same mistake|again and again|i always forget)\b", _I),
}
RATIONALE = re.compile(
    r"\b(?:because|the reason|main driver|driver (?:was|is)|since|due to|so that|in order to"
    r"|(?:that|which|this) is why|that'?s why|motivation|root cause|the problem (?:was|is)|couldn'?t"
    r"|can'?t|caused by|otherwise"
    r"|too (?:risky|slow|expensive|costly|complex|complicated|fragile|brittle|heavy|late|big|high|much work))\b", _I)
ALTERNATIVE = re.compile(
    r"\b(?:instead of|rather than|looked at|considered|alternatives?|we could have|options?"
    r"|trade-?offs?|worst of both|pros and cons|versus|but that|over keeping|compared to)\b", _I)
HEDGE = re.compile(r"\b(?:looks like|seems|maybe|might|probably|i think|suspect|not sure"
                   r"|hypothesis|possibly|could be)\b", _I)
CONFIRM = re.compile(r"\b(?:confirmed|verified|root cause (?:is|was)|proved|reproduced|definitely"
                     r"|turned out)\b", _I)
RESOLVED = re.compile(r"\b(?:fixed|resolved|now pass(?:es)?|all tests pass|works now|fix (?:is|was) in)\b", _I)
RECUR = re.compile(r"\b(?:is back|came back|(?:happen\w*|fail\w*|broke\w*) again|recurr\w*|same (?:issue|bug|error|problem)"
                   r"|another instance|resurfaced|again)\b", _I)
# Only explicit reversals supersede a stored decision; "instead" or "rather than"
# are everyday words in decisions that simply restate or refine one.
REVERSAL = re.compile(
    r"\b(?:no longer|switch(?:ing|ed)? back|back (?:from|to)|revert\w*|roll(?:ing|ed)? back|abandon\w*"
    r"|mov(?:e|ing) away from|stop using|revers\w*|amend\w*|supersed\w*|revis(?:e|ing|ed) (?:the|our)"
    r"|chang(?:e|ing|ed) (?:our|the|my) (?:decision|mind|rule|policy)|on second thought|not anymore"
    r"|instead of (?:the|our) (?:old|previous|current|original|existing)"
    # a move between two named things revises the decision about the first: "move
    # billing from PostgreSQL to CockroachDB", "migrating from REST to gRPC", "replace
    # Celery with RQ"; "change of plan" / "changed my mind" say so outright
    r"|(?:mov|switch|migrat|port)\w* (?:[\w.-]+ ){0,4}from (?:the |our )?[\w.-]+(?: [\w.-]+)? to"
    r"|replac\w* [\w.-]+(?: [\w.-]+)? with|change of plans?|chang(?:e|ed|ing) my mind|" + RETURN_TO + r")\b", _I)
TRANSIENT = re.compile(r"\b(?:for now|temporar\w*|quick hack|just this once|for today|workaround)\b", _I)
ARCHITECTURE = re.compile(
    r"\b(?:architecture|storage|database|postgres\w*|redis|mysql|sqlite|mongo\w*|logging|logs?|auth\w*"
    r"|api|schema|framework|pipeline|deploy\w*|infrastructure|queue|cache|caching|protocol"
    r"|migration|session storage|monitoring|observability|datadog|kafka|graphql|rest|grpc)\b", _I)
SYSTEM_WIDE = re.compile(
    r"\b(?:all|every|across|system|everywhere|whole|entire|pipeline|storage|logging|org|company"
    r"|services|codebase|project-wide)\b", _I)
BOUNDARY = re.compile(r"\b(?:service|api|middleware|endpoint|boundary|client|server|module|interface"
                      r"|contract|layer|integration)\b", _I)
ENVIRONMENT = re.compile(r"\b(?:intermittent\w*|staging|production|prod|ci|only on|locally"
                         r"|[45]\d\ds?|\w+(?:Error|Exception))\b", _I)
_SENTENCE = re.compile(r"(?<=[.!?])\s+(?=[\"'`(\[]?[A-Z0-9])|\n+")
_CODE_BLOCK = re.compile(r"```.*?(?:```|$)", re.S)
_IDENT = re.compile(r"`([^`\n]{2,80})`")
_FILE = re.compile(r"(?<![\w/.-])(?:[\w.-]+/)+[\w.-]+\.\w{1,5}\b|(?<![\w/.-])[\w-]+\.(?:py|js|ts|tsx|go|rs|rb|java|sql|yml|yaml|json|toml|md|sh)\b")
PRIORITY = ("preference", "convention", "decision", "learning", "pattern", "incident")
# Code-like tokens in prose: snake_case, CamelCase with an inner capital, calls,
# dotted names, CONSTANTS. They make a moment concrete without a tool call.
_CODEISH = re.compile(
    r"`([^`\n]{2,80})`|\b([A-Za-z]+_[A-Za-z0-9_]+|[A-Z][a-z0-9]+[A-Z]\w*|[a-z]+[A-Z]\w*"
    r"|\w+\(\)|[A-Za-z_]\w*\.[A-Za-z_][\w.]*[A-Za-z]|[A-Z][A-Z0-9_]{2,})\b")
_SUBJECT_AFTER = re.compile(
    r"\b(?:switching to|switch(?:ed)? to|moving to|migrat(?:ing|ed) to|mov(?:e|ed) to|go with|going with|use|using|adopt"
    r"|standardi[sz]e on|settled on|opted for|decided to|replac(?:e|ing) \S+ with|from now on,?|always|never"
    r"|(?:we(?:'re| are)? |let'?s |we(?:'ll| will) )(?:keep(?:ing)?|stick(?:ing)? with|stay(?:ing)? (?:with|on)))\s+(.+)", _I)
_SUBJECT_STOP = re.compile(r"\b(?:instead of|rather than|because|since|so that|but|and then|for)\b|[,.;:(—–]| -- ", _I)
_VERBISH = re.compile(r"\b(?:is|are|was|were|keeps?|throws?|throwing|fails?|failing|returns?|crash\w*"
                      r"|breaks?|hangs?|times out|started|stopped)\b", _I)
_CAUSE_WORDS = ("race", "timeout", "deadlock", "leak", "overflow", "null", "expired", "idempotent",
                "retry", "cache", "encoding", "permission", "deadline", "duplicate", "oom")
GENERIC = STOPWORDS | {
    "issue", "problem", "thing", "stuff", "something", "like", "think", "looks", "seems", "really",
    "going", "want", "need", "let", "lets", "okay", "ok", "yes", "please", "actually", "back",
    "different", "time", "way", "also", "still", "bit", "lot", "sure", "good", "bad", "well",
    "switching", "decided", "decide", "moving", "instead", "keep", "keeping", "always", "never",
    "from", "now", "on", "forward", "rule", "throwing", "intermittently", "passes",
    "fails", "locally", "staging", "condition", "use", "using", "re", "ll", "ve", "til", "turns",
    "out", "third", "month", "week", "today", "understood", "got", "settled", "recap", "final",
    "amended", "amending", "amendment", "superseding", "done", "right", "perfect", "great",
    "explicit", "full", "exactly", "policy", "contract", "new", "shape", "then", "must",
    "should", "only", "every", "any", "first", "last", "whether", "into", "onto",
    "sticking", "stick", "staying", "stay",
}


@dataclass
class Candidate:
    type: str
    lead: list[str]
    support: list[str] = field(default_factory=list)
    event_index: int = 0
    ts: str | None = None
    role: str = "user"
    problem: list[str] = field(default_factory=list)  # how the conversation opened
    idents: list[str] = field(default_factory=list)  # code names the conversation used
    # Prebuilt by the structural readers (encoder/backends/work.py): what the agent did.
    description: str | None = None
    body_text: str | None = None
    subject: str | None = None
    status: str | None = None
    files: list[str] = field(default_factory=list)
    extra: list[str] = field(default_factory=list)  # what the work it asked for added
    confidence: str | None = None  # set by a structural reader that knows how sure it is
    told: tuple[int, ...] = ()  # the user messages a structural candidate stands for
    # The user asked for it to be remembered ("remember that ...", "note for the future:
    # ..."): the strongest signal a user gives, stored whatever its scores say.
    explicit: bool = False
    # Taken back later in the session ("scratch that", "never mind"): never stored.
    retracted: bool = False
    # What this statement replaces, taken back in the same session (the history it keeps).
    took_back: list[str] = field(default_factory=list)
    # Said as a revision ("scratch that: ...", "on second thought, ..."): it revises a
    # decision an earlier session stored on its subject, as "instead" would.
    revises: bool = False

    @property
    def text(self) -> str:
        return " ".join(self.lead + self.support)


def sentences(text: str) -> list[str]:
    text = _CODE_BLOCK.sub(" ", text)
    out = []
    for part in _SENTENCE.split(text):
        part = " ".join(part.split())
        if len(part) >= 3:
            out.append(part)
    return out


# A project's goal or brief ("I want to build ...", "the goal is ...") is a fact about the
# project, not the user's taste; a stack statement names several technologies at once.
GOAL = re.compile(r"^(?:so,? )?(?:i want to (?:build|create|make|write)|i'?m building|we'?re building"
                  r"|we are building|the goal (?:is|of this project)|this project (?:is|will be)"
                  r"|the project is)\b", _I)
STACK = re.compile(r"\b(?:i want to use|we(?:'ll| will)? use|let'?s use|we'?re using|(?:our|the) stack is)"
                   r"\s+(.+)", _I)


def stack_items(sentence: str) -> list[str]:
    """The technologies of a stack statement, one per subject ("Redis for caching")."""
    m = STACK.search(sentence)
    if not m:
        return []
    items = [i.strip(" .") for i in re.split(r",\s*(?:and\s+)?|\s+with\s+|\s+and\s+|\s+plus\s+",
                                               m.group(1).rstrip(". "))]
    items = [i for i in items if i and len(i.split()) <= 5 and re.match(r"[A-Z0-9]", i)]
    return items if len(items) >= 3 else []


# A request about something of this session ("I'd love that test to be saved as a
# permanent unit test", "I want it in the sidebar") is part of the work, not the person's
# standing taste: the wish points at a thing in front of them (that/this/these/those/it/
# them) and says nothing general (always, never, every, in general, whenever, from now on).
ONE_OFF = re.compile(
    r"\b(?:like|prefer|love|want|rather|hate|dislike)\b(?:\s+(?:to\s+)?(?:see|have|get|keep|make))?"
    r"\s+(?:that|this|these|those|it|them)\b(?!\s+(?:(?:way|style|approach|kind|sort|pattern)s?|when)\b)", _I)
GENERAL = re.compile(r"\b(?:always|never|every\w*|in general|generally|whenever|from now on|going forward"
                     r"|by default|in (?:all|any|every) (?:\w+ )?(?:projects?|repos?|cases?|code)|all (?:my|our|the) )", _I)


# "Never mind the flaky e2e tests for now, focus on the API": the user sets a failure aside;
# it is no report of one
_DISMISS = re.compile(r"^(?:(?:ok(?:ay)?|so|and|also)\W+)?(?:never ?mind|ignore|forget about|don'?t worry about"
                      r"|skip|leave)\s+(?:the|those|these|that|this|all)\b", _I)


def lead_type(sentence: str) -> str | None:
    if GOAL.search(sentence):
        return "decision"
    corrected = correction_kind(sentence)
    if corrected == "convention" and (VAGUE_USE.search(sentence) or ONE_OFF_SCOPE.search(sentence)
                                      and not GENERAL.search(sentence)):
        corrected = None  # an order for the task at hand, or one naming nothing (review 13 F9)
    if corrected is not None and not LEAD["decision"].search(sentence):
        return corrected
    for kind in PRIORITY:
        if LEAD[kind].search(sentence):
            if kind == "incident" and _DISMISS.match(sentence):
                continue
            if kind == "incident" and NOT_A_LOSS.search(sentence) and _DESTROYED.search(sentence) \
                    and not LEAD["incident"].search(_DESTROYED.sub(" ", sentence)):
                continue  # "you removed my typo, thanks!": no other incident word
            if kind == "preference" and not re.match(
                    r"^(?:(?:also|and|oh|btw|ps|by the way|fwiw|incidentally)\W+)?(?:i\b|my\b|please\b|personally\b)",
                    sentence, _I):
                continue
            if kind == "preference" and ONE_OFF.search(sentence) and not GENERAL.search(sentence):
                continue  # a one-off request within the work (see ONE_OFF)
            if kind == "convention" and ONE_OFF_SCOPE.search(sentence) and not GENERAL.search(sentence):
                continue  # "don't use the staging DB for this one test, use ...": the task's
            return kind
    return None


# What a remembered statement is when it names no type of its own: a rule (an imperative
# or "we use/always/never ..."), the user themself (a preference), else a fact about the
# project (learning: what is known).
_RULE_HEAD = re.compile(
    r"^(?:always|never|don'?t|do not|use|run|keep|put|write|call|avoid|prefer|make sure|add|check"
    r"|ask|test|commit|push|deploy|name|format|document|mention|include|skip|start|stop"
    r"|we (?:always|never|use|run|keep|write|put|deploy|name|don'?t|do not|only)|all |every |each |no )\b", _I)
# says what must be done, not what is ("the staging database is reset every Sunday" is a fact)
_PRESCRIBES = re.compile(r"\b(?:must|should|shall|has to|have to|needs? to|is required to|are required to"
                         r"|(?:is|are) (?:not )?(?:allowed|forbidden)|may (?:not|never))\b", _I)
_ABOUT_ME = re.compile(r"^(?:i|i'?m|i am|i'?ve|my|me)\b", _I)


def remembered(sentence: str) -> tuple[str, str] | None:
    """(type, statement) of a sentence that asks to remember something, else None."""
    m = REMEMBER.match(sentence)
    if not m or sentence.rstrip().endswith("?"):
        return None
    rest = sentence[m.end():].strip(" :,-\u2014\"'")
    if len(work.content_words(rest)) < 2:
        return None
    rest = rest[0].upper() + rest[1:]
    if m.group("to") or m.group("to2"):
        return "convention", rest  # "remember to run the linters": a standing instruction
    kind = lead_type(rest)
    if kind in ("preference", "convention", "decision"):
        return kind, rest
    if _RULE_HEAD.search(rest) or _PRESCRIBES.search(rest) and not _ABOUT_ME.search(rest):
        return "convention", rest
    if _ABOUT_ME.search(rest):
        return "preference", rest
    return "learning", rest


_CHOICES = ("decision", "convention", "preference")
# words that say what is done to a subject, not which subject: "let's not add X" and
# "we decided to add Y" share no subject
_NO_SUBJECT = GENERIC | {"add", "make", "change", "remove", "create", "update", "fix", "run", "put",
                         "set", "get", "go", "stay", "stick", "leave", "after", "all", "bother",
                         "said", "say", "idea", "plan", "thing", "one", "that", "this", "decid",
                         "decide", "chose", "choos", "agreed", "agree"}


def _subject_tokens(text: str) -> set[str]:
    return {t for t in tokens(text) if t not in _NO_SUBJECT and len(t) > 2}


def _shares_subject(a: set[str], b: set[str]) -> bool:
    """A word in common, counting one word's forms ("cache" / "caching") as one."""
    return any(same_word(x, y) for x in a for y in b)


def _retracted(candidates: list[Candidate], back: Retraction, index: int, session,
               earlier: str) -> Candidate | None:
    """The earlier statement of this session a retraction takes back (``earlier``: what
    this message said before it).

    "Forget what I said about X": the latest statement about X. "Scratch that" / "never
    mind": what the user's words point at - the latest message (this one first) that
    shares a subject word with the replacement ("scratch that: we keep MySQL for billing"
    -> the billing decision), else the message just before; its last statement, if it
    made one (a message that stated nothing has nothing to take back). An inline form
    ("let's not X", "actually, keep X") takes back only a statement about its own subject.
    """
    pool = [c for c in candidates if not c.retracted and c.role in ("user", "stack", "assistant")]
    if not pool:
        return None

    def latest_about(text: str) -> Candidate | None:
        words = _subject_tokens(text)
        return next((c for c in reversed(pool) if _shares_subject(words, _subject_tokens(c.text))), None)

    if back.about:
        return latest_about(back.about)
    if not back.deictic:
        return latest_about(back.rest) if back.rest else None
    said = [(i, e.text) for i, e in enumerate(session.events[:index])
            if e.kind == "user" and e.agent is None and not work.is_trivial(work.prose(e.text))]
    said.append((index, earlier))
    words = _subject_tokens(back.rest)
    shared = [i for i, text in said if text and words and _shares_subject(words, _subject_tokens(text))]
    at: int | None = shared[-1] if shared else (
        index if earlier.strip() else (said[-2][0] if len(said) > 1 else None))
    if at is None:
        return None
    upto = next((i for i, _t in said if i > at), len(session.events))
    mine = [c for c in pool if at <= c.event_index < upto]
    return mine[-1] if mine else None


# why the user took it back, not what they want instead: "it's too expensive for us"
_ONLY_WHY = re.compile(r"(?:it|that|this|they|which)(?:'s|'re| is| was| would| will| are| seems?| looks?)\b"
                       r"|(?:because|since|as|too)\b", _I)


def _replacement(statement: str, target: Candidate, index: int, ts: str | None) -> Candidate | None:
    """The statement that replaces a retracted one, as a memory of the retracted one's
    type (a decision taken back and replaced is still a decision: "scratch that: we keep
    MySQL for billing"); None when it says nothing of its own ("never mind.") or only why
    it was taken back ("forget what I said about X, it's too expensive")."""
    # "let's not; merge commits are fine": what is left once the "not" has taken it back
    bare = re.sub(r"^(?:let'?s|let us) not\s*[;,.:\u2014-]+\s*", "", statement, flags=_I)
    statement = bare[:1].upper() + bare[1:] if bare else statement
    if len(work.content_words(statement)) < 2 or statement.rstrip().endswith("?"):
        return None
    if lead_type(statement) is None and (_ONLY_WHY.match(statement) or RATIONALE.match(statement)):
        return None
    kind = target.type if target.type in _CHOICES else lead_type(statement)
    if kind is None:
        return None
    return Candidate(kind, [statement], event_index=index, ts=ts,
                     took_back=[*target.took_back, " ".join(target.lead)], revises=True)


def _names_a_choice(sentence: str) -> bool:
    """A decision cue followed by what was chosen ("we decided to rotate the password
    monthly"), not one that points back ("we decided that because ...")."""
    if not LEAD["decision"].search(sentence):
        return False
    m = _SUBJECT_AFTER.search(sentence)
    return m is not None and bool(_clean_words(_SUBJECT_STOP.split(m.group(1))[0]))


# What a user says when refusing a tool call that states a rule for the project: "use
# pnpm", "we don't want a CONTRIBUTING file, use the wiki", "no new dependencies".
_REFUSAL_RULE = re.compile(r"\b(?:we|i) (?:don'?t|do not|never) (?:want|use|do|need|add)\b"
                           r"|\b(?:instead|rather than|not here)\b", _I)


def _rejection_rule(event, index: int, session) -> Candidate | None:
    """A rejected tool call's reason as a convention (review 8 F2: "we don't want a
    CONTRIBUTING file, use the wiki" was heard as nothing): the user refused what the agent
    was about to do and said what the project does instead. A reason that states no rule
    ("not now", "wait", a question) is left to the ordinary reading."""
    if not (event.detail or "").startswith("rejection"):
        return None
    reason = " ".join(event.text.split())
    if reason.endswith("?") or len(work.content_words(reason)) < 2:
        return None
    clauses = [c.strip(" .!") for c in re.split(r"[,;]|\s+-\s+|\bbut\b", reason) if c.strip(" .!")]
    if lead_type(reason) not in (None, "convention") or not any(
            _RULE_HEAD.search(c) or _REFUSAL_RULE.search(c) for c in clauses):
        return None
    what = event.detail[len("rejection of "):] if event.detail.startswith("rejection of ") else ""
    tool, _, target = what.partition(" ")
    target = work.relative(target, session.cwd) if target.startswith("/") else target
    refused = f"{tool} of `{target}`" if tool in ("Write", "Edit", "MultiEdit") and target else \
        f"`{one_line(target, 80)}`" if target else (tool or "a tool call")
    lead = work.clean_sentence(reason[0].upper() + reason[1:], 200)
    return Candidate("convention", [lead], event_index=index, ts=event.ts,
                     extra=[f"Said when the user rejected the agent's {refused}."])


# a discourse opener says how the statement is meant, not what it is about
_ASIDE = re.compile(r"^(?:(?:just )?to be (?:clear|precise|explicit)|to clarify|for the record|one more thing"
                    r"|important(?:ly)?|note|nb|p\.?s\.?)\s*[:,\u2014-]\s*(?=\S)", _I)


def _without_aside(sentence: str) -> str:
    body = _ASIDE.sub("", sentence, count=1)
    return body[0].upper() + body[1:] if body != sentence else sentence


def segment(session) -> list[Candidate]:
    """Candidate events from the user's messages, with support from the assistant."""
    candidates: list[Candidate] = []
    for index, event in enumerate(session.events):
        if event.agent is not None:
            continue
        if event.kind == "user":
            rule = _rejection_rule(event, index, session)
            if rule is not None:
                candidates.append(rule)
                continue
            current: Candidate | None = None
            pending: Candidate | None = None  # taken back; its replacement may follow
            said = work.prose(event.text) if work.looks_pasted(event.text) else event.text
            earlier: list[str] = []  # this message's sentences before the current one
            for sentence in joined_rules(sentences(said)):
                earlier.append(sentence)
                revising = False
                back = retraction(sentence)
                if back is not None:
                    target = _retracted(candidates, back, index, session, " ".join(earlier[:-1]))
                    if target is not None:
                        target.retracted = True
                        current = _replacement(back.rest, target, index, event.ts) if back.rest else None
                        pending = target if current is None else None
                        if current is not None:
                            candidates.append(current)
                        continue
                    if back.deictic:
                        if not back.rest:
                            continue  # "never mind." with nothing to take back
                        sentence, revising = back.rest, True  # "never mind, we'll use X": its statement
                if pending is not None and remembered(sentence) is None:
                    current = _replacement(sentence, pending, index, event.ts)
                    pending = None
                    if current is not None:
                        candidates.append(current)
                        continue
                asked = remembered(sentence)
                if asked is not None:
                    current = Candidate(asked[0], [asked[1]], event_index=index, ts=event.ts,
                                        explicit=True)
                    candidates.append(current)
                    continue
                items = stack_items(sentence)
                if items:
                    # one decision per subject, each carrying the whole statement
                    for item in items:
                        candidates.append(Candidate("decision", [f"Use {item}."], support=[sentence],
                                                    event_index=index, ts=event.ts, role="stack",
                                                    subject=" ".join(_clean_words(item)[:5]) or None))
                    current = None
                    continue
                kind = lead_type(sentence)
                supports = bool(RATIONALE.search(sentence) or ALTERNATIVE.search(sentence)
                                or CONFIRM.search(sentence))
                # a sentence that states a decision of its own ("Also, we decided to rotate
                # the password monthly") is its own candidate, whatever came before it in the
                # message (a failure report, another decision); a decision's reason that
                # names a failure ("the old one kept timing out because ...") supports it
                own = (kind == "decision" and current is not None and _names_a_choice(sentence)
                       and (current.type != "decision"
                            or not _shares_subject(_subject_tokens(RATIONALE.split(sentence)[0]),
                                                   _subject_tokens(RATIONALE.split(current.lead[0])[0]))))
                if current is not None and not own and (kind is None or kind == current.type or
                                                        (supports and kind not in ("preference", "convention"))):
                    (current.lead if kind == current.type and not supports else current.support).append(sentence)
                elif kind is not None:
                    if correction_kind(sentence):
                        sentence = without_opener(sentence)  # "wait, the base path is ..."
                    sentence = _without_aside(sentence)  # "To be clear: don't use X, use Y"
                    current = Candidate(kind, [sentence], event_index=index, ts=event.ts, revises=revising)
                    candidates.append(current)
        elif event.kind == "assistant" and event.detail != "thinking":
            settled = agreement(session, index, event)
            if settled is not None:
                # A later restatement replaces an earlier one from the same conversation,
                # and the opening report it answers becomes its "Problem:" section rather
                # than a second memory of the same discussion.
                opening = set(settled.problem)
                candidates[:] = [c for c in candidates if c.role != "assistant"
                                 and not (opening and set(c.lead) <= opening
                                          and c.type in ("incident", "decision"))]
                candidates.append(settled)
                continue
            if not candidates:
                continue
            last = candidates[-1]
            if index - last.event_index > 3 or len(last.support) >= 6:
                continue
            for sentence in sentences(event.text)[:12]:
                if (CONFIRM.search(sentence) or RATIONALE.search(sentence)) and len(sentence) < 400:
                    last.support.append(sentence)
                    break
    for c in candidates:
        # "the goal is simple" says nothing on its own: what follows it is the goal (not its
        # reason, "because ..."); with nothing after it, it is no candidate (review 16b M9)
        if c.lead and _EMPTY_LEAD.match(c.lead[0]):
            then = next((x for x in c.support if not RATIONALE.match(x)
                         and not re.match(r"(?:because|since|as|so)\b", x, _I)), None)
            if then is None:
                c.retracted = True
            else:
                c.support.remove(then)
                c.lead[0] = f"{c.lead[0].rstrip(' .:!')}: {then}"
    return candidates


_EMPTY_LEAD = re.compile(r"^\W*(?:so,? )?(?:the|my|our|here'?s the) (?:goal|plan|idea|task|ask|thing|problem|request|point)s?"
                         r"(?: (?:is|are|here is))?(?: (?:simple|easy|this|these|as follows|straightforward|twofold|clear))?\W*$", _I)


CONSTRAINT = re.compile(
    r"\b(?:no\b|not|never|only|must|has to|have to|needs? to|should|always|exactly|keep|we measured"
    r"|the rule|policy|because|since|otherwise|rejects?|breaks?|instead|wrong|amend\w*)\b", _I)


def agreement(session, index: int, event) -> Candidate | None:
    """A decision candidate from an assistant summary of what was settled."""
    text = _CODE_BLOCK.sub(" ", event.text).strip()
    if not text or not is_agreement(text):
        return None
    # In an agentic session an assistant message after a tool result ("Perfect! So I
    # can...") is narration, not a settlement: a weak opener must answer the user.
    previous = next((e for e in reversed(session.events[:index])
                     if e.agent is None and not (e.kind == "assistant" and e.detail == "thinking")),
                    None)
    if (previous is None or previous.kind != "user") and not AGREEMENT_STRONG.search(text[:80]):
        return None
    if previous is not None and previous.kind == "command" and previous.failed \
            and check_command(previous.command or ""):
        return None  # "Confirmed: two separate bugs ...": the diagnosis of a failing check, no settlement
    users = [e for e in session.events[:index] if e.kind == "user" and e.agent is None]
    if not users:
        return None
    lead = sentences(text)[:4]
    if not lead:
        return None
    support: list[str] = []
    for user in users[-6:]:
        for sentence in sentences(user.text):
            if CONSTRAINT.search(sentence) and sentence not in support:
                support.append(sentence)
    problem = sentences(users[0].text)[:3]
    support = [x for x in support if x not in problem]
    idents: list[str] = []
    for e in session.events[: index + 1]:
        if e.kind in ("user", "assistant") and e.agent is None:
            idents.extend(i for i in _identifiers(e.text) if i not in idents)
    return Candidate("decision", [one_line(" ".join(lead), 700)], support[:8], event_index=index,
                     ts=event.ts, role="assistant", problem=problem, idents=idents[:8])


def structural_incidents(session, covered: Iterable[Candidate]) -> list[Candidate]:
    """A failing test -> an edit -> the same test passing becomes a resolved incident.

    The fallback for a failure :func:`work.fix_arcs` found no signature for: when it
    found arcs they were judged already (an arc of the agent's own new test is no
    incident). Only test runs count (a failed `git add` followed by a green test run is
    not an incident worth remembering), never a test file the session created, and the
    subject comes from the failure's own line, never from the command.
    """
    if any(c.type == "incident" for c in covered) or work.fix_arcs(session, limit=1):
        return []
    created = {work.relative(e.path, session.cwd) for e in session.events
               if e.kind == "edit" and e.path and e.edit_kind == "create"}
    events = session.events
    for i, event in enumerate(events):
        failed = event.failed
        if (event.kind != "command" or event.agent is not None or not failed
                or not TEST_CMD.search(event.command or "")):
            continue
        if any(c and c in (event.command or "") for c in created):
            continue  # the agent's own new test, failing while it was written
        error_line = error_line_of(event.result or event.text or "")
        subject = " ".join(_clean_words(re.sub(r"[^\w\s.-]", " ", error_line))[:5])
        if not error_line or len(subject.split()) < 2:
            continue
        passed_at = fixed_by_rerun(events, i)
        if passed_at is None:
            continue
        passed = events[passed_at]
        cand = Candidate("incident", [f"`{one_line(event.command or '', 80)}` failed: {error_line}"],
                         event_index=i, ts=event.ts, role="tool", subject=subject)
        cand.support.append(f"Fixed; `{one_line(passed.command or '', 80)}` then passed")
        return [cand]
    return []


_ERROR_LINE = re.compile(r"\b(?:\w+(?:Error|Exception)\b|error[:\[]|FAIL(?:ED)?\b|panic|fatal|"
                         r"assert\w*|expected\b|Traceback)", _I)


def error_line_of(text: str) -> str:
    """The most telling line of a failure: an error/exception/FAIL line, not "Exit code 1"."""
    fallback = ""
    for line in text.splitlines():
        line = " ".join(line.split())
        if not line or line.startswith("[...") or re.fullmatch(r"Exit code \d+", line):
            continue
        if _ERROR_LINE.search(line):
            return line[:200]
        fallback = fallback or line[:200]
    return fallback


def first_line(text: str) -> str:
    for line in text.splitlines():
        line = " ".join(line.split())
        if line and not line.startswith("[..."):
            return line[:200]
    return ""


# ----------------------------------------------------------------- failures the user reports

# A failure report that names several failures ("the DB login fails and the deploy is
# broken; fix both"): one clause per failure.
_FAILURE_CLAUSES = re.compile(r";\s*|,\s*(?:and\s+)?|\s+(?:and|but|plus|also)\s+(?=(?:the|our|my|a|an|this|that|its)\b)", _I)
_ENV_PREFIX = re.compile(r"^(?:(?:export\s+)?\w+=(?:'[^']*'|\"[^\"]*\"|\S*)\s*(?:&&|;)?\s*)+")


def _bare_command(command: str) -> str:
    """A command without the variables set before it: the same command run again with a
    new password or token (``PGPASSWORD=... psql ...``) is the same check."""
    return " ".join(_ENV_PREFIX.sub("", command.strip()).split())


def _command_words(command: str) -> set[str]:
    return _subject_tokens(re.sub(r"[^\w]+", " ", _bare_command(command)))


_DESTROYED = re.compile(DESTROYED, _I)


# What a loss report names that says nothing about which command caused it.
_LOSS_GENERIC = frozenset("""you just accidentally actually completely deleted removed wiped erased
    overwrote overwritten destroyed nuked trashed clobbered lost all my our the work change changes file
    files folder folders directory directories repo repository project code commit commits data database
    branch everything stuff thing things gone got has have been was were is are wait what why did
    please restore back undo ugh had there here whole entire not just now again seriously hey oh
    throw threw thrown away uncommitted afternoon morning day week hours""".split())
# Commands that destroy without naming what (``git reset --hard``, ``git checkout .``):
# a loss report is about the last of them within ``LOSS_TURNS`` user turns.
_PATHLESS = re.compile(r"^\s*git\s+(?:reset\s+--hard|checkout\s+(?:--\s+)?\.|clean\b|stash\s+(?:drop|clear)"
                       r"|restore\s+(?:--\S+\s+)*\.)", _I)


LOSS_TURNS = 3  # how many user turns back a path-less destructive command is still the cause
_LOSS_GENERIC_TOKENS = frozenset(_subject_tokens(" ".join(_LOSS_GENERIC)))  # stemmed once


def _loss_commands(events, at: int, said: str) -> list:
    """The destructive commands the agent ran before the user's loss report at ``at``
    that the report is about: those naming what it names ("you deleted my reports" and
    ``rm -rf /srv/archive/reports``); when it names nothing particular ("you wiped our
    changes!"), those since the user's previous message; failing both, the last path-less
    one (``git clean -fdx``) within ``LOSS_TURNS`` user turns. Review 13 F7: any earlier
    destructive command was blamed ("you deleted my comment in README" and
    ``rm -rf .pytest_cache``)."""
    if NOT_A_LOSS.search(said):
        return []
    ran = [i for i in range(at) if events[i].kind == "command" and events[i].agent is None
           and events[i].command and DESTRUCTIVE.search(events[i].command)]
    named = _subject_tokens(re.sub(r"[^\w]+", " ", said)) - _LOSS_GENERIC_TOKENS
    turns = [i for i in range(at) if events[i].kind == "user" and events[i].agent is None]
    since = turns[-1] if turns else -1
    # A command that names no path (`git clean -fdx`) deletes what it finds: a loss noticed
    # a few turns later is still its doing when it is the last destructive command.
    lately = turns[-LOSS_TURNS] if len(turns) >= LOSS_TURNS else -1
    out = [events[i] for i in ran
           if named and any(same_word(w, x) for w in named for x in _command_words(events[i].command or ""))
           or i > since and not named]
    if not out and ran and ran[-1] > lately and _PATHLESS.match(_destructive_part(events[ran[-1]].command or "")):
        out = [events[ran[-1]]]
    return out


def _destructive_part(command: str) -> str:
    """The step of a shell line that destroys (``rm -rf X`` of ``rm -rf X && mv Y X``): a
    description names it whole rather than cutting the line inside a path."""
    parts = [p.strip() for p in re.split(r"\s(?:&&|\|\||;)\s", command)]
    return next((p for p in parts if DESTRUCTIVE.search(p)), command)


def _destruction_reports(candidates: list[Candidate], session) -> list[Candidate]:
    """A user's report that the agent destroyed their work ("you just deleted my X?") is
    one incident per session: later reports of the same loss join it, and it names the
    destructive commands (``rm -rf``, ``git reset --hard``, ...) the agent ran before the
    first report. Without such a command in the session it stays an ordinary report."""
    events = session.events
    first: Candidate | None = None
    out: list[Candidate] = []
    for c in candidates:
        if not (c.type == "incident" and c.role in ("user", "destroyed") and c.body_text is None
                and any(_DESTROYED.search(x) for x in c.lead)):
            out.append(c)
            continue
        if first is not None:
            first.support.extend(x for x in c.lead if x not in first.support)
            continue
        ran = _loss_commands(events, c.event_index, c.lead[0])
        if not ran:
            out.append(c)
            continue
        c.role = "destroyed"
        said = " ".join(c.lead[0].split()).rstrip(" ?!.")
        c.description = (f"The user reported \"{one_line(said, 90)}\" after the agent ran "
                         f"`{one_line(_destructive_part(ran[-1].command or ''), 70)}`.")
        for e in ran[-2:]:
            c.extra.append(f"Before it the agent ran `{one_line(e.command or '', 160)}`"
                           + (" (it failed)" if e.failed else ""))
        first = c
        out.append(c)
    return out


def _per_failure(cand: Candidate, session) -> list[Candidate]:
    """A user's failure report as one incident per failure it names *and the session
    shows*: each clause matched to the failing command its own words name ("the deploy"
    and ``./deploy.sh``, "the billing DB login" and ``psql -U billing``), resolved when that
    same command passes later in the session. A report whose failures no two commands
    show stays one incident (with the command that matches it, if one does)."""
    events = session.events
    failed = [i for i in range(cand.event_index, len(events)) if events[i].kind == "command"
              and events[i].agent is None and events[i].failed and events[i].command]
    if not failed:
        return [_resolved_as_reported(cand, session)]

    def matched(text: str, taken: set[int]) -> int | None:
        words = _subject_tokens(text)
        scored = [(sum(any(same_word(w, x) for x in _command_words(events[i].command or "")) for w in words), i)
                  for i in failed if i not in taken]
        best = max(scored, key=lambda s: (s[0], -s[1]), default=(0, -1))
        return best[1] if best[0] >= 1 else None

    lead = cand.lead[0]
    clauses = [c.strip(" .") for c in _FAILURE_CLAUSES.split(lead) if c and LEAD["incident"].search(c)]
    pairs: list[tuple[str, int]] = []
    taken: set[int] = set()
    for clause in clauses if len(clauses) >= 2 else []:
        at = matched(clause, taken)
        if at is not None:
            taken.add(at)
            pairs.append((clause, at))
    if len(pairs) < 2:
        at = matched(lead, set())
        one = _with_command(cand, at, session) if at is not None else cand
        return [_resolved_as_reported(one, session, _bare_command(events[at].command or "")
                                      if at is not None else "")]
    return [_with_command(Candidate("incident", [work.clean_sentence(clause[0].upper() + clause[1:], 200)],
                                    support=list(cand.support) if n == 0 else [],
                                    event_index=cand.event_index, ts=cand.ts), at, session)
            for n, (clause, at) in enumerate(pairs)]


def _with_command(cand: Candidate, i: int, session) -> Candidate:
    """``cand`` with the failing command ``events[i]`` it is about: its failure line and
    signature, and resolved when the same command passes later."""
    events = session.events
    command = _bare_command(events[i].command or "")
    sig, line = work.signature_of(events[i].result or "")
    cand.extra.append(f"`{one_line(command, 100)}` failed: {line or error_line_of(events[i].result or '')}")
    passed = next((j for j in range(i + 1, len(events)) if events[j].kind == "command"
                   and events[j].agent is None and not events[j].failed
                   and _bare_command(events[j].command or "") == command), None)
    if passed is not None:
        cand.extra.append(f"Resolved: `{one_line(command, 100)}` passed afterwards")
        cand.status, cand.confidence = "resolved", "HIGH"  # the re-run is the proof
    if sig:
        cand.extra.append(f"Failure signature: {sig}")
    return cand


_REPORTED_FIX = {
    "check": "the agent stated the fix and `{check}` passed afterwards: \"{words}\"",
    "agent": "the agent stated the fix (no check ran after it): \"{words}\"",
    "user": "the user confirmed it works: \"{words}\"",
}


def _resolved_as_reported(cand: Candidate, session, command: str = "") -> Candidate:
    """A failure report (one failure) the same command's re-run did not resolve: resolved
    when the agent edited, stated the fix after its last edit and the checks run since
    passed, or the user said it works (:func:`work.reported_fix`); the fix's files and
    what marked it fixed go into its body. Else it stays as it is (investigating)."""
    if cand.status == "resolved":
        return cand
    fix = work.reported_fix(session, cand.event_index, command)
    if fix is None:
        return cand
    if fix.cause and fix.cause not in (fix.claim, fix.evidence):
        cand.extra.append(f"Cause (as the agent stated it): {_quote(fix.cause, 300)}")
    edited = ", ".join(f"`{f}`" for f in fix.files[:8])
    if fix.claim and fix.verified == "user":  # else the Resolved line quotes the claim
        cand.extra.append(f"Fix: \"{_quote(fix.claim, 240)}\" (edited {edited})")
    else:
        cand.extra.append(f"Fix: edited {edited}")
    cand.extra.append("Resolved: " + _REPORTED_FIX[fix.verified].format(
        check=one_line(fix.check, 100), words=_quote(fix.evidence, 240)))
    cand.status = "resolved"
    # only the user's "works now" proves it; a check that passed may not reproduce the report
    cand.confidence = "HIGH" if fix.verified == "user" else "MEDIUM"
    cand.files = list(fix.files)
    return cand


# ----------------------------------------------------------------- what the agent did

MAX_TASKS = 3
MAX_LEARNINGS = 3


def _quote(text: str, limit: int) -> str:
    return one_line(text, limit)


def work_candidates(session) -> list[Candidate]:
    """Decisions from the user's requests and the work they caused, incidents from fix
    arcs, learnings from a compacted summary's constraints (see work.py)."""
    where = short_id(session.session_id) if session.session_id else "this session"
    notes = work.compaction_notes(session)
    arcs = _incident_arcs(session)
    # A request that only brought in a failure (pasted, or run with the shell escape) and
    # got it fixed is remembered as that incident, not a second time as work.
    brought = {i: set(a.fix_files) for a in arcs for i in (a.asked, *a.asks) if i is not None}
    found = [t for t in work.tasks(session)
             if not (t.start in brought and all(f in brought[t.start] or work.is_test_file(f)
                                                or work.is_doc(f) for f in t.changed))]
    # the biggest pieces of work first when a session holds many requests
    ranked = sorted(found, key=lambda t: (len(t.changed) + 2 * len(t.commits)), reverse=True)[:MAX_TASKS]
    compacted = [i for i, e in enumerate(session.events) if e.kind == "compaction" and e.text]
    out = [c for t in sorted(ranked, key=lambda t: t.start)
           if (c := _task_candidate(t, where, notes, compacted)) is not None]
    out += _constraint_candidates(notes, where, len(session.events))
    out.extend(_arc_candidate(arc, where, session) for arc in arcs)
    return out


_QUOTED_PATH = re.compile(r"[\"'`][^\"'`\n]*[/\\][^\"'`\n]*[\"'`]")


def stuck_candidates(session) -> list[Candidate]:
    """Every command failing with one output (work.stuck_runs): an incident of the
    environment, with the commands and the agent's explanation, quoted."""
    stuck = work.stuck_runs(session)
    if stuck is None:
        return []
    where = short_id(session.session_id) if session.session_id else "this session"
    events = session.events
    last = max(i for i, e in enumerate(events) if e.kind == "command" and e.agent is None
               and (e.command or "") in stuck.commands)
    recovered = any(e.kind == "command" and e.agent is None and not e.failed for e in events[last + 1:])
    n = len(stuck.commands)
    line = one_line(stuck.line, 160)
    body = [f"From `{one_line(stuck.commands[0], 80)}` on ({where}), {n} different commands in a row "
            f"failed with the same output:", f"    {line}"]
    if stuck.explanation:
        body.append(f"The agent said: \"{_quote(stuck.explanation, 300)}\"")
    body.append("Commands: " + ", ".join(f"`{one_line(c, 60)}`" for c in stuck.commands[:5])
                + (f" and {n - 5} more" if n > 5 else ""))
    if recovered:
        body.append("Later commands passed again.")
    words = _polar_content(_QUOTED_PATH.sub(" ", stuck.line))[:5]
    return [Candidate("incident", [f"{n} commands failed with: {line}"], event_index=stuck.first,
                      role="found", description=work.clean_sentence(
                          f"Commands kept failing with the same error ({n} in a row): {line}", 200),
                      body_text="\n\n".join(body), subject=" ".join(["commands", "fail", *words]),
                      status="resolved" if recovered else "investigating", confidence="MEDIUM")]


def _said_steps(fix: work.SetupFix) -> str:
    """The fix's steps as a sentence names them ("ran `a` and `b`", "edited `x`"): not a
    bare ``export X=...`` (its value is often a secret, redacted); at most two, and a count."""
    ran = [f"`{one_line(s, 50)}`" for s in fix.steps if "[REDACTED" not in s and not re.match(r"export (?!PATH=)", s)]
    edited = [f"`{f}`" for f in fix.edited]
    more = len(ran) + len(edited) - 2
    ran, edited = ran[:2], edited[:max(0, 2 - len(ran))]
    parts = ([f"ran {' and '.join(ran)}"] if ran else []) + ([f"edited {' and '.join(edited)}"] if edited else [])
    return " and ".join(parts) + (f" (and {more} more steps)" if more > 0 else "")


def setup_candidates(session, covered: Iterable[Candidate]) -> list[Candidate]:
    """A command that failed on the set-up and worked after set-up steps (work.setup_fixes):
    an incident with the failure lines, the agent's stated cause, the steps, resolved by the
    run that worked. Not when another incident already covers that stretch of the session."""
    spans = [c.event_index for c in covered if c.type == "incident"]
    where = short_id(session.session_id) if session.session_id else "this session"
    out: list[Candidate] = []
    for fix in work.setup_fixes(session):
        if any(fix.first <= at <= fix.passed for at in spans):
            continue
        did = _said_steps(fix)
        if not did:
            continue
        first = one_line(re.split(r";\s", work.without_shell_prefix(fix.lines[0]))[0], 90)
        desc = f"`{one_line(fix.target, 50)}` failed with \"{first}\" until the agent {did}."
        body = [f"`{one_line(fix.target, 100)}` failed on the set-up (session {where}): {fix.lines[0]}"]
        body += [f"Then it failed with: {x}" for x in fix.lines[1:]]
        if fix.cause:
            body.append(f"Cause (as the agent stated): {_quote(fix.cause, 300)}")
        if fix.steps:
            body.append("Fix: ran " + ", ".join(f"`{one_line(s, 100)}`" for s in fix.steps))
        if fix.edited:
            body.append("Fix: edited " + ", ".join(f"`{f}`" for f in fix.edited))
        body.append(f"Resolved: `{one_line(fix.target, 100)}` ran without the error afterwards")
        words = _polar_content(_QUOTED_PATH.sub(" ", work.without_shell_prefix(fix.lines[0])))[:4]
        out.append(Candidate("incident", [desc], support=[fix.cause] if fix.cause else [],
                             event_index=fix.first, role="found", description=desc,
                             body_text="\n\n".join(body), subject=" ".join([*words, "setup"]),
                             status="resolved", confidence="HIGH", files=list(fix.edited)))
    return out


_CLAUSE_END = re.compile(r"[,;:]\s|\s(?:so that|so|because|since|which|and then)\s|\s[—–]\s|\s--\s")


def _gist(option: str, limit: int = 80) -> str:
    """An option in a few words, to quote: without the code it shows after a colon, a
    leading "We/I could", or what follows its first clause; never cut inside a word."""
    words = re.sub(r":\s*`[^`]*`\s*$", "", option).strip(" .:")
    words = re.sub(r"^(?:we|i|you)(?: could| can| will| would|'ll)?\s+", "", words, flags=re.I)
    words = re.split(r"\s[—–]\s|\s--\s", words)[0]  # not the aside after a dash
    if len(words) > limit:
        words = _CLAUSE_END.split(words)[0]
    if len(words) > limit:
        words = words[:limit].rsplit(" ", 1)[0].rstrip(" ,;:") + " ..."
    if re.match(r"[A-Z][a-z]+ [a-z]", words):  # "Copy the db": a sentence's capital, not a name's
        words = words[0].lower() + words[1:]
    return words


def _users_words(description: str, said: str) -> bool:
    """Whether a description is mostly the user's own message (a decision they stated)."""
    mine = {w.lower() for w in work.content_words(said)}
    theirs = [w.lower() for w in work.content_words(description)]
    return bool(theirs) and sum(w in mine for w in theirs) >= 0.6 * len(theirs)


def choice_candidates(session, covered: Iterable[Candidate]) -> list[Candidate]:
    """The option the user picked of those the agent laid out (work.chosen_options): a
    decision in the user's name, the alternatives and the agent's reasons as its why. When
    the pick is also the request of a piece of work ("copy the db, good idea, do that"),
    that work's decision becomes the choice, its body kept below the options (no second
    memory), unless its description is what the user asked for besides the pick (review 16
    A8: "Option B please, and also rename DB_PATH to DB_URL because ..."); a decision the
    user stated in that message otherwise stays as it is."""
    at = {c.event_index: c for c in covered if c.type == "decision"}
    where = short_id(session.session_id) if session.session_id else "this session"
    out: list[Candidate] = []
    for ch in work.chosen_options(session):
        known = at.get(ch.answered)
        if known is not None and known.role != "work":
            continue
        if known is not None and _users_words(known.description or "", ch.said):
            known = None  # the work stays the user's decision; the choice is one of its own
        chosen = ch.options[ch.chosen]
        others = [o for k, o in enumerate(ch.options) if k != ch.chosen]
        desc = work.clean_sentence(f"Chose \"{_gist(chosen)}\" over \"{_gist(others[0])}\".", 200)
        offered = [f"The agent laid out {len(ch.options)} options (session {where}):"]
        offered += [f"- {'(chosen) ' if k == ch.chosen else ''}{one_line(o, 300)}" for k, o in enumerate(ch.options)]
        body = ["\n".join(offered)]
        if ch.reason:
            body.append(f"The agent recommended it: \"{_quote(ch.reason, 300)}\"")
        body.append(f"The user chose: \"{_quote(ch.said, 300)}\"")
        if known is not None:
            body += [ln for ln in (known.body_text or "").split("\n\n") if not ln.startswith("The user asked")]
            known.description, known.lead, known.body_text = desc, [desc], "\n\n".join(body)
            known.subject = _gist(chosen)
            known.support = [*known.support, *([ch.reason] if ch.reason else [])]
            continue
        out.append(Candidate("decision", [desc], support=[ch.reason] if ch.reason else [],
                             event_index=ch.answered, role="found", description=desc,
                             body_text="\n\n".join(body), subject=_gist(chosen),
                             confidence="MEDIUM"))
    return out


_GONE = re.compile(r"does not exist|no such file|ENOENT|cannot access|not found", _I)
_RAN = re.compile(r"^Before it the agent ran `(.*)`(?: \(it failed\))?$", re.S)


def _paths_in(command: str) -> list[str]:
    return [w.strip("\"'`").rstrip("/") for w in command.split() if "/" in w and len(w.strip("\"'`/")) > 1]


def _fold_consequences(candidates: list[Candidate], stuck: list[Candidate],
                       session) -> list[Candidate]:
    """``candidates`` plus the stuck runs that are not a consequence of a destruction the
    user reported: when every command fails because a path the agent's destructive command
    removed or moved is gone (``rm -rf ~/p && mv /Volumes/x/p ~/p``, then "Path
    /Volumes/x/p does not exist" nine times), that is one incident, the loss, with the
    failures in its body; one failure never yields two incidents in a session. Only a
    path that is gone, and is the one that loss's command named or lies under it (review
    16 C1/C2: not a parent folder's permission error, not another loss's path)."""
    lost = [c for c in candidates if c.type == "incident" and c.role == "destroyed"]
    out = list(candidates)
    for s in stuck:
        quoted = [q.strip("\"'`").rstrip("/") for q in _QUOTED_PATH.findall(s.lead[0])]
        owner = None
        if lost and _GONE.search(s.lead[0]):
            for c in lost:
                named = [p for x in c.extra if (m := _RAN.match(x)) for p in _paths_in(m.group(1))]
                if any(q == p or q.startswith(p + "/") for q in quoted if q for p in named):
                    owner = c
                    break
        if owner is None:
            out.append(s)
            continue
        said = [ln for ln in (s.body_text or "").split("\n\n") if ln.startswith("The agent said")]
        owner.extra.append("Afterwards " + s.lead[0].replace(" failed with: ", " in a row failed with: ", 1)
                           + (" (later commands passed again)" if s.status == "resolved" else "")
                           + "".join(f". {x}" for x in said))
    return out


def finding_candidates(session, covered: Iterable[Candidate]) -> list[Candidate]:
    """What the agent found when the user asked it to look at something, and its closing
    takeaway (work.findings): learnings in the agent's own words, quoted. A user message
    another candidate already stands for (a failure report, a decision) is not asked again."""
    where = short_id(session.session_id) if session.session_id else "this session"
    taken = {i for c in covered for i in (c.event_index, *c.told) if c.role != "assistant"}
    out: list[Candidate] = []
    for f in work.findings(session, skip=taken):
        said = " ".join(f.sentence.split())
        if f.asked is None:
            body = f"The agent's takeaway at the end of the session ({where}): {_quote(said, 500)}"
        else:
            body = (f"Asked ({where}): \"{_quote(f.question, 200)}\"\n\n"
                    f"The agent found: {_quote(said, 500)}")
        out.append(Candidate("learning", [said], event_index=f.at, role="found",
                             description=work.clean_sentence(said), body_text=body,
                             subject=" ".join(_polar_content(said)[:6]),  # "doesn't" stays "not"
                             told=(f.asked,) if f.asked is not None else ()))
    known = {(c.description or "").lower() for c in out} | {
        work.clean_sentence(x).lower() for c in covered if c.role == "found" for x in (*c.support, *c.lead) if x}
    for f in work.commit_findings(session):
        said = f.sentence
        if work.clean_sentence(said).lower() in known:
            continue
        commit = session.events[f.at]
        sha = commit.detail if commit.detail and re.fullmatch(r"[0-9a-f]{7,40}", commit.detail) else ""
        named = f"{sha[:10]} \"{_quote(commit.text or '', 120)}\"".strip()
        out.append(Candidate("learning", [said], event_index=f.at, role="found",
                             description=work.clean_sentence(said),
                             body_text=f"From the message of commit {named} ({where}): {_quote(said, 500)}",
                             subject=" ".join(_polar_content(said)[:6])))
    return out


# How a reply opens ("Nope, no Dockerfile needed.", "Yes: ...", "You're right — ..."): the
# description keeps what follows (review 16b M3).
_ANSWER_OPENER = re.compile(r"^\W*(?:yes|yep|yeah|no(?=[,:;—–-])|nope|correct|exactly|right|you'?re right|good catch)"
                            r"\s*[,:;—–-]+\s*", _I)


def _same_subject(words: set[str], text: str, files: set[str] = frozenset()) -> bool:  # type: ignore[assignment]
    """Two shared long words, one of them a name ("crypto.getRandomValues", "/dev/urandom")
    that is not a file the session edited (review 16b H1: in a one-file project every
    answer names index.html)."""
    def norm(w: str) -> str:
        return re.sub(r"['’]s$", "", w.lower())  # "index.html's" is index.html

    shared = {norm(w) for w in words} & {norm(w) for w in work.content_words(text) if len(w) > 4}
    return len(shared) >= 2 and any(re.search(r"[./_\d]", w) and w not in files for w in shared)


def answer_candidates(session, covered: Iterable[Candidate]) -> list[Candidate]:
    """The user's questions about the project and the agent's answers (work.answers):
    learnings in the agent's words, quoted with the question. When the question's message
    already stands for a statement of the user's ("i will host it on render.com now. do we
    need something for that?"), the answer joins that memory's body instead."""
    where = short_id(session.session_id) if session.session_id else "this session"
    covered = list(covered)
    by_message = {i: c for c in covered if c.role != "assistant" for i in (c.event_index, *c.told)}
    files = {x.lower() for e in session.events if e.kind == "edit" and e.path
             for x in (e.path, e.path.rsplit("/", 1)[-1])}
    out: list[Candidate] = []
    for a in work.answers(session):
        said = " ".join(a.sentence.split())
        answer = " ".join([said, *a.more])
        own = by_message.get(a.asked)
        if own is not None:
            if own.role == "user" and own.type in ("decision", "preference", "convention", "project"):
                own.extra.append(f"The agent answered \"{_quote(a.question, 160)}\": {_quote(answer, 500)}")
            continue
        if any(said in (c.description or "") or said in c.support for c in covered):
            continue
        words = {w.lower() for w in work.content_words(answer) if len(w) > 4}

        near = next((c for c in out if _same_subject(words, c.body_text or "", files)), None)
        if near is not None:  # a follow-up on the same subject: one memory
            near.body_text = (f"{near.body_text}\n\nThen asked: \"{_quote(a.question, 200)}\"\n\n"
                              f"The agent answered: {_quote(answer, 600)}")
            near.told = (*near.told, a.asked)
            continue
        out.append(Candidate("learning", [said], support=list(a.more[:2]), event_index=a.at, role="found",
                             description=work.clean_sentence(_ANSWER_OPENER.sub("", said) or said),
                             body_text=(f"Asked ({where}): \"{_quote(a.question, 200)}\"\n\n"
                                        f"The agent answered: {_quote(answer, 600)}"),
                             subject=" ".join(_polar_content(said)[:6]), confidence="MEDIUM",
                             told=(a.asked,)))
    return out


# "This was caused by X" / "It happens because X": the cause is X ("Fixed." before it too).
_DIAGNOSIS_LEAD = re.compile(r"^(?:fixed[.!:]?\s+)?(?:this|that|it)(?: (?:was|is))? (?:caused by|happens because|happened because"
                             r"|(?:was|is) because(?: of)?)\s+", _I)


def diagnosis_candidates(session, covered: Iterable[Candidate]) -> list[Candidate]:
    """A problem the user asked to have fixed and the agent fixed on its diagnosis, with no
    failing run to show it (work.diagnosed_fixes): an incident in the user's and the agent's
    words - what was reported, the cause as the agent stated it, the files it edited, and
    resolved when the agent stated the fix after its last edit or committed it (the agent's
    word: MEDIUM). A request another candidate already stands for is not told twice."""
    where = short_id(session.session_id) if session.session_id else "this session"
    taken = {i for c in covered for i in (c.event_index, *c.told)}
    fixed_files = {f for c in covered if c.type == "incident" for f in c.files}
    out: list[Candidate] = []
    for d in work.diagnosed_fixes(session):
        t = d.task
        if t.start in taken or set(d.files) & fixed_files:
            continue
        cause = _DIAGNOSIS_LEAD.sub("", _CAUSE_LEAD.sub("", d.cause, count=1), count=1).strip()
        if not re.match(r"[\w.-]*[/.`]", cause):  # "src/app.py ...", "`x` ...": as written
            cause = cause[:1].upper() + cause[1:]
        lines = [f"The user asked (session {where}): {_quote(work.prose(t.request.text), 400)}",
                 f"Cause (as the agent stated it): {_quote(d.cause, 400)}",
                 "Fix: edited " + ", ".join(f"`{f}`" for f in d.files[:8])]
        if d.claim:
            lines.append(f"Resolved: the agent stated the fix (no check ran after it): \"{_quote(d.claim, 240)}\"")
        elif t.commits:
            lines.append("Resolved: the fix was committed (no check ran after it).")
        else:
            lines.append("Not confirmed fixed in the session.")
        lines += _commit_lines(t.commits[-2:])
        resolved = bool(d.claim or t.commits)
        out.append(Candidate("incident", [work.clean_sentence(cause)], support=[d.cause],
                             event_index=t.start, role="found", ts=t.request.ts,
                             description=work.clean_sentence(cause), body_text="\n\n".join(lines),
                             subject=" ".join(_polar_content(cause)[:6]), files=list(d.files),
                             status="resolved" if resolved else "investigating", confidence="MEDIUM",
                             told=(t.start,)))
    return out


def _constraint_candidates(notes: work.Compacted, where: str, at: int) -> list[Candidate]:
    """The constraints a compacted summary lists: what the project's hooks or CI enforce is
    a convention; one about the work itself (it names what the request is about: "OTEL
    failures must never crash the hooks" in an OpenTelemetry epic) stays in the work's
    decision (its key points); the rest - what a tool or the build needs - is a learning."""
    asked = {t for t in tokens(notes.request) if t not in GENERIC}
    out: list[Candidate] = []
    for bullet in notes.constraints:
        if len(out) >= MAX_LEARNINGS:
            break
        text = work.clean_sentence(bullet)
        kind = "convention" if work.ENFORCED.search(bullet) else "learning"
        if kind == "learning" and notes.request and asked & tokens(bullet):
            continue
        out.append(Candidate(kind, [text], event_index=at, role="work", description=text,
                             body_text=f"From the session's compacted summary ({where}): {_quote(bullet, 500)}",
                             subject=" ".join(work.content_words(bullet)[:6])))
    return out


# A request says *what* to do; a decision says *how* or *why* (a choice with rationale,
# docs/PROTOCOL.md): the user's words state one when they carry a decision or rule cue,
# a reason or an alternative, a restriction ("not", "only", "just", "without", "instead")
# or a condition ("if", "unless", "but"), in the request or in what the user added while
# the work ran. A bare request ("Add a function called X", "Work on bead Y", "Create a TODO app")
# is the session's topic: the work it caused is still remembered (files, commits, the
# agent's report), but as a task the user asked for, never as a settled HIGH decision.
HOW = re.compile(r"\b(?:not|no|never|only|just|without|instead|rather|unless|if|but|must|always"
                 r"|(?:do|does|is|are|was|were|wo|should|could|would|ca)n'?t)\b", _I)
# a request that names the means ("Use these models to ...", "Switch the client to httpx")
MEANS = re.compile(r"^(?:help (?:me )?(?:to )?)?(?:use|switch|migrate)\b", _I)


def states_choice(request: str, followups: Iterable[str] = ()) -> bool:
    """Whether a user's request or corrections (their first sentences each) state a choice
    ("continue" or "thanks, now update the docs" during the work are no choice)."""
    said = [*sentences(request)[:3], *(x for f in followups for x in sentences(f)[:3])]
    for sentence in said:
        if MEANS.search(work.unpolite(sentence)):
            return True
        if (GOAL.search(sentence) or STACK.search(sentence) or LEAD["decision"].search(sentence)
                or LEAD["convention"].search(sentence) or RATIONALE.search(sentence)
                or ALTERNATIVE.search(sentence) or HOW.search(sentence)):
            return True
    return False


# A request that states no choice is one of two things (review 7 F7: a third of what the
# offline encoder wrote on real sessions was such a request filed as a decision):
# - the project's goal or brief: it creates the project ("Create a TODO app with Next.js",
#   "Build a CLI that ..."), it is an epic of the project's tracker, it had the work write a
#   plan, or the work was a feature of the project's own (several commits, many files, or
#   long enough to be compacted). That is a fact about the project: what it sets out to be
#   and how the feature was built (files, commits, the agent's account, a compacted
#   summary's design points), stored as "Project goal: ..." (MEDIUM, the user's words).
# - a one-off task with no lasting choice ("Add a function called X and a test for it"):
#   the session record keeps the request and what the agent did; no fact is written.
# A question about something that goes wrong ("why does the label break here?", "why is
# the build failing", "what causes the 500?").
_BREAKAGE = re.compile(r"\b(?:break(?:s|ing)?|broken|fail(?:s|ing|ed)?|crash(?:es|ing)?|errors?|"
                       r"wrong|bug(?:gy)?|(?:does ?n[o']?t|won'?t|isn'?t|not) (?:work|load|show|render|"
                       r"start|compile|build)|500|404|hang(?:s|ing)?|freez(?:es|ing)|overflow(?:s|ing)?"
                       r"|wrap(?:s|ping)?|cut off|truncat\w*)\b", _I)
_CREATES = re.compile(
    r"^(?:create|build|make|scaffold|set up|setup|bootstrap|start|write|develop|implement|generate|port)\b"
    r"[^.;:]{0,60}?\b(?:apps?|application|project|service|website|web ?site|site|library|package|tool|cli"
    r"|game|bot|api|server|dashboard|extension|plugin|prototype|mvp)\b", _I)
_EPIC = re.compile(r"\bepics?\b", _I)
# A project brief in a request: "My project: X - ...", "Project: X".
_BRIEF = re.compile(r"(?:^|\n)[ \t]*(?:(?:my|our|the) )?project(?: name)?[ \t]*[:—–][ \t]*", _I)
_PLAN_DOC = re.compile(r"(?:^|/)(?:plans?|roadmap|spec|specification|design|proposal|rfc|adr)[\w.-]*\.(?:md|txt|rst)$",
                       _I)
FEATURE_COMMITS = 2
FEATURE_FILES = 8


def is_project_goal(t: work.Task, lead: str, request: str = "", spans_compaction: bool = False) -> bool:
    """Whether a request that states no choice is the project's goal or brief (see above)."""
    if _CREATES.search(lead) or _EPIC.search(lead) or _EPIC.search(request):
        return True
    if t.changed and all(_PLAN_DOC.search(f) for f in t.changed):
        return True  # the work was the plan
    return spans_compaction or len(t.commits) >= FEATURE_COMMITS or len(t.changed) >= FEATURE_FILES


def as_task(lead: str, label: str = "Project goal") -> str:
    """A bare request as the description of the goal it set: "Project goal: create ..."."""
    first = lead.split(" ", 1)[0]
    named = bool(re.search(r"[a-z][A-Z]|^[A-Z]{2}", first))  # "StableInvoice", "USDC": a name keeps its case
    head = lead[:1].lower() + lead[1:] if not named and (lead[:2].istitle() or lead[1:2].islower()) else lead
    return work.clean_sentence(f"{label}: {head}", 200)


def _task_candidate(t: work.Task, where: str, notes: work.Compacted,
                    compacted: list[int]) -> Candidate | None:
    """A user's request and the work it caused as one decision (None when it says nothing)."""
    request, solving = notes.request, notes.solving
    said = work.prose(t.request.text)
    lead = _request_sentence(said)
    spans = any(t.start < i <= t.end for i in compacted)
    vague = len(work.content_words(lead)) < 4 or spans
    if vague and request:
        lead = _request_sentence(re.sub(r"^(?:the )?user (?:asked|requested|wants?)(?: to)?\s*", "",
                                        request.replace('"', ""), flags=_I))
    outcome = work._outcome(t.report)
    answer = work._outcome(t.answer, 2) if t.answer else []
    asked = bool(answer and said.rstrip().endswith("?"))
    if asked:
        # a question the agent answered, then acted on: the finding leads
        lead = work.clean_sentence(f"{answer[0].rstrip('.')} ({lead.rstrip('.').lower()})", 200)
    if vague and not request and outcome:
        lead = work.clean_sentence(outcome[0])
    if not lead or len(work.content_words(lead)) < 2:
        return None
    subject = " ".join(_polar_content(lead)[:8])
    description, confidence = lead, None
    brief = _BRIEF.search(t.request.text) if t.changed and not answer else None
    if brief:
        # "help me apply for the grant. My project: StableInvoice - escrowed USDC invoicing
        # ...": the brief is the project's goal, whatever else the request asks
        told = _request_sentence(t.request.text[brief.end():].split("\n\n")[0])
        if len(work.content_words(told)) >= 3:
            lead = told
            subject = " ".join(_polar_content(lead)[:8])
            description, confidence = as_task(lead), "MEDIUM"
    if not brief and not answer and not states_choice(lead if vague else said, t.followups):
        if not is_project_goal(t, lead, request, spans):
            return None  # a one-off task: the session record keeps it
        description, confidence = as_task(lead), "MEDIUM"
    lines = [f"The user asked (session {where}): {_quote(said, 600)}"]
    lines += [f"The user added: \"{_quote(f, 300)}\"" for f in t.followups[:5]]
    if answer:
        lines.append("The agent found: " + " ".join(answer))
    if outcome:
        lines.append("Outcome (the agent's report): " + " ".join(outcome))
    if request and vague:
        lines.append("From the compacted context: " + _quote(request, 500))
    if solving and vague:
        lines.append("How: " + " ".join(_quote(b, 240) for b in solving[:2]))
    if notes.points and vague:
        lines.append("Key points (from the compacted summary): "
                     + _quote("; ".join(p.rstrip(".;") for p in notes.points[:10]), 900))
    if t.changed:
        lines.append("Files changed: " + ", ".join(f"`{f}`" for f in t.changed[:10])
                     + (f" and {len(t.changed) - 10} more" if len(t.changed) > 10 else ""))
    lines += _commit_lines(t.commits[-3:])
    raw = "\n".join([t.request.text, *t.followups, t.report])
    kind, status = "decision", None
    if asked:
        # The lead is the agent's diagnosis, not the user's word: never HIGH (review 10).
        confidence = "MEDIUM"
        if t.changed and _BREAKAGE.search(said):
            # "why does the label break here?", answered and then fixed in the files: what
            # broke, why and the fix - an incident, resolved when the fix was committed.
            kind, status = "incident", "resolved" if t.commits else None
    return Candidate(kind, [lead], support=[*t.followups, *outcome], event_index=t.start, status=status,
                     problem=[" ".join(t.request.text.split())],
                     ts=t.request.ts, role="work", idents=_identifiers(raw)[:8],
                     description=description, body_text="\n\n".join(lines),
                     subject=subject, files=t.changed, confidence=confidence)


def _commit_lines(commits) -> list[str]:
    """"Commit: <sha> <subject>" per commit; one the session names neither way is left out."""
    out = []
    for c in commits:
        sha = c.detail if c.detail and re.fullmatch(r"[0-9a-f]{7,40}", c.detail) else None
        line = f"{sha[:10] if sha else ''} {_quote(c.text or '', 120)}".strip()
        if line:
            out.append(f"Commit: {line}")
    return out


def _incident_arcs(session) -> list[work.Arc]:
    """The session's fix arcs worth an incident: one per failure, at most two; never the
    agent's own new code or test failing while it was written (a failure the user brought
    in is theirs, whoever wrote the code)."""
    created = {work.relative(e.path, session.cwd) for e in session.events
               if e.kind == "edit" and e.path and e.edit_kind == "create"}
    out: list[work.Arc] = []
    for arc in _merge_arcs(work.fix_arcs(session, limit=4), session)[:2]:
        target = re.split(r"[(:]", arc.signature.split()[0])[0].rsplit("/", 1)[-1] if arc.signature else ""
        if arc.origin == "run" and any(c and (c.rsplit("/", 1)[-1] == target or c in arc.command)
                                       for c in created):
            continue
        tests = work.failing_test_files(session.events[arc.first].result or "")
        if arc.origin == "run" and tests and all(work.created_here(t, created) for t in tests):
            continue  # every failing test is in a test file the session created
        out.append(arc)
    return out


_VERIFIED = {
    "user": "the user confirmed it works: \"{}\"",
    "agent": "the agent stated the fix (no check re-ran in the session): \"{}\"",
}


def _arc_candidate(arc: work.Arc, where: str, session) -> Candidate:
    """An incident from a fix arc: what failed, the stated cause, the fix's files, and what
    marked it resolved (a passing re-run; for a pasted failure also the user's or the
    agent's word, said so in the body)."""
    pasted = arc.origin == "pasted" and not arc.command
    desc = incident_description(arc)
    if pasted:
        lines = [f"The user pasted this failure (session {where}): {arc.error_line}"]
    else:
        by = " (the user's run)" if arc.origin == "pasted" else ""
        lines = [f"`{one_line(arc.command, 100)}` failed{by} (session {where}): {arc.error_line}"]
    if arc.cause and work.states_cause(arc.cause, arc.signature):
        lines.append(f"Cause (as the agent stated): {_quote(arc.cause, 400)}")
    if arc.fix_files:
        lines.append("Fix: edited " + ", ".join(f"`{f}`" for f in arc.fix_files[:8]))
    lines += [f"Then the fix broke: {_quote(f, 500)}" for f in arc.followups[:2]]
    runs = f" ({arc.failures} failing runs before)" if arc.failures > 1 else ""
    if arc.verified == "re-run":
        lines.append(f"Resolved: `{one_line(arc.passed or arc.command, 100)}` passed afterwards{runs}")
    elif arc.verified:
        lines.append("Resolved: " + _VERIFIED[arc.verified].format(_quote(arc.evidence, 240)) + runs)
    else:
        lines.append("Not confirmed fixed in the session.")
    lines += _commit_lines(arc.commits[-2:])
    also = list(dict.fromkeys(work._norm_cmd(c) for c in arc.also))
    also = [c for c in also if c != work._norm_cmd(arc.command)]
    if also:
        lines.append("The same failure in: " + ", ".join(f"`{one_line(c, 80)}`" for c in also[:3]))
    lines.append(f"Failure signature: {arc.signature}")
    cand = Candidate("incident", [desc], support=[arc.cause] if arc.cause else [],
                     event_index=arc.first, role="tool", description=desc,
                     body_text="\n\n".join(lines), subject=arc.signature,
                     status="resolved" if arc.verified else "investigating", files=arc.fix_files)
    cand.confidence = "MEDIUM" if arc.verified in ("agent", "") else "HIGH"
    asked = [i for i in (arc.asked, *arc.asks) if i is not None]
    cand.told = tuple(dict.fromkeys(t for i in asked for t in work.told_about(session, i)))
    return cand


# The agent's lead-in to a cause ("I see the issue. The issue is that ..."): the cause is
# what follows it.
_CAUSE_LEAD = re.compile(
    r"^(?:[\w.:/-]+ (?:fails|failed|is failing|errors|raises):\s+"  # "test_x fails: <cause>"
    r"|(?:(?:i see|i found|found|here'?s|that'?s) the (?:issue|problem|bug)[.:!]?\s*)?"
    r"(?:the (?:root )?(?:issue|problem|bug|cause|reason)(?: here)? (?:is|was)(?: that)?:?\s+"
    r"|root cause:?\s+|this is because\s+|it fails because\s+))", _I)


_PROGRESS = re.compile(r"\s+(?:(?:PASSED|FAILED|ERROR|SKIPPED|XFAIL|XPASS)\s+)?\[\s*\d{1,3}%\]\s*$")


def incident_description(arc: work.Arc) -> str:
    """One sentence from the failure signature (check, error type and message, the failing
    test's file) and the agent's stated cause; never the raw output (a dumped value that
    happens to hold the word "error" is not the failure)."""
    shown = re.sub(r"(?:[\w.-]*/)+([\w.-]+\.\w{1,5})", r"\1", arc.error_line)
    shown = _PROGRESS.sub("", shown)  # pytest -v's "FAILED [ 20%]": the runner's progress
    if not shown or is_dump(shown):
        shown = arc.signature
    head = f"`{_short_command(arc.command)}` failed" if arc.command else "The user reported"
    test = arc.signature.split()[0] if arc.signature else ""
    if "test" in test.lower() and test not in shown:
        shown = f"{test}: {shown}"  # the failing test's name, when the line lacks it
    where = sorted(t.rsplit("/", 1)[-1] for t in arc.tests)
    if len(where) == 1 and where[0] not in shown + head and not shown.startswith("test "):
        shown = f"{shown.rstrip('.')} in {where[0]}"
    whole = work.clean_sentence(f"{head}: {shown}", 200)
    cause = ""
    if arc.cause and work.states_cause(arc.cause, arc.signature) and not is_dump(arc.cause):
        cause = _CAUSE_LEAD.sub("", work.clean_sentence(arc.cause, 400)).strip()
    if cause:
        cause = cause[0].lower() + cause[1:] if cause[1:2].islower() else cause
        # the cause whole or not at all (a cut one ends "... is failing because"); the
        # failure gives up its tail first
        # the command's head alone (cut at whole arguments) before the failure's tail
        terse = f"`{_short_command(arc.command, 20)}` failed" if arc.command else head
        parts = [work.clean_sentence(f"{h}: {shown}", n).rstrip(".")
                 for n in (200, 110) for h in (head, terse)]
        for part in parts:
            if len(part) + len("; cause: ") + len(cause) <= 200:
                return f"{part}; cause: {cause}"
    return whole


def _short_command(command: str, limit: int = 80) -> str:
    """A check command for a description, as it ran: a memory that backticks a command
    the session never ran as written (flags or paths dropped) is not grounded. A long or
    multi-line one loses whole trailing arguments, marked "...", never a part of one."""
    first = command.strip().split("\n", 1)[0]
    words = first.split(" ")  # split on single spaces: the kept head stays verbatim
    out = words[0]
    for w in words[1:]:
        if len(out) + 1 + len(w) > limit:
            break
        out = f"{out} {w}"
    out = out.rstrip()
    return out if out == command.strip() else f"{out} ..."


_PROOF = ("", "agent", "user", "re-run")  # what marks an arc fixed, weakest first


def _one_episode(a: work.Arc, b: work.Arc) -> bool:
    """Two arcs of one debugging episode: the same failure, the same check with fixes in
    the same files, or a failure the user brought in and a check the agent ran on it
    afterwards whose fix touches the same files."""
    if a.first == b.first and a.origin == b.origin and a.signature != b.signature:
        return False  # one run (or one pasted run) that failed two ways: two failures (work.signatures_of)
    first = a.signature.split()[:1]
    if first == b.signature.split()[:1] and not (set(first) & GENERIC_ERRORS):
        return True  # the same test, rule or specific error (never two AssertionErrors)
    if a.signature == b.signature:
        return True
    shared = bool(set(a.fix_files) & set(b.fix_files))
    if work._norm_cmd(a.command).split()[:2] == work._norm_cmd(b.command).split()[:2] and shared:
        return True
    early, late = sorted((a, b), key=lambda x: x.first)
    return early.origin == "pasted" and late.origin == "run" and shared


def _breaks_fix(early: work.Arc, late: work.Arc, session) -> bool:
    """``late`` is what ``early``'s fix broke: it fails after that fix, only in test files
    the fix edited, is fixed in the fix's files again, and no other request came in
    between (ty's invalid-assignment errors fixed with mocks, then the rewritten tests
    failing on what the mocks no longer record). One episode, one incident; the second
    failure is part of the first one's story, not a memory of its own."""
    if late.first <= early.last or not late.tests or not late.fix_files:
        return False
    fixed: set[str | None] = set(early.fix_files)
    if not (all(work.created_here(t, fixed) for t in late.tests) and set(late.fix_files) <= fixed):
        return False
    between = session.events[early.last + 1:late.first]
    return not any(e.kind == "user" and e.agent is None and not work.is_trivial(work.prose(e.text))
                   for e in between)


def _merge_arcs(arcs: list[work.Arc], session) -> list[work.Arc]:
    """One incident per debugging episode (:func:`_one_episode`); a failure the episode's
    own fix caused (:func:`_breaks_fix`) joins it as a follow-up."""
    out: list[work.Arc] = []
    folded: dict[tuple[int, str], work.Arc] = {}  # a run's failures that joined an episode
    for arc in sorted(arcs, key=lambda a: a.first):
        broke = folded.get((arc.first, arc.origin)) or next(
            (a for a in out if _breaks_fix(a, arc, session)), None)
        if broke is not None:
            _follow(broke, arc)  # what the fix broke, with the other failures of its run
            folded[(arc.first, arc.origin)] = broke
            continue
        same = next((a for a in out if _one_episode(a, arc)), None)
        if same is None:
            out.append(arc)
            continue
        if arc.failures > same.failures and same.origin == "run":
            # the check that failed most is the failure's home; keep its words (a failure
            # the user brought in stays theirs)
            same.command, arc.command = arc.command, same.command
            same.signature, same.error_line, same.passed = arc.signature, arc.error_line, arc.passed
        if _PROOF.index(arc.verified) > _PROOF.index(same.verified):
            same.verified, same.passed, same.evidence = arc.verified, arc.passed, arc.evidence
        same.failures += arc.failures
        same.fix_files += [f for f in arc.fix_files if f not in same.fix_files]
        same.cause = same.cause or arc.cause
        same.last = max(same.last, arc.last)
        if arc.command:
            same.also.append(arc.command)
        if arc.asked is not None:
            same.asks.append(arc.asked)
    return out


def _follow(arc: work.Arc, later: work.Arc) -> None:
    """Fold ``later`` (what ``arc``'s fix broke) into ``arc``: the episode is over when the
    later failure is, so its proof of fix is the episode's."""
    cause = f" Cause (as the agent stated): {_quote(later.cause, 300)}" if later.cause else ""
    what = later.signature.split()[0] if later.signature else ""
    shown = f"{what}: {later.error_line}" if what and what not in later.error_line else later.error_line
    arc.followups.append(f"{shown.rstrip('.')}.{cause}")
    arc.verified, arc.evidence = later.verified, later.evidence
    arc.passed = later.passed or arc.passed
    arc.last = max(arc.last, later.last)
    arc.commits += [c for c in later.commits if c not in arc.commits]
    if later.asked is not None:
        arc.asks.append(later.asked)


_META = re.compile(r"\b(?:have a look|look at|changed my mind|would like|here is|here's|following"
                   r"|as follows|this (?:patch|diff))\b", _I)


def _request_sentence(text: str) -> str:
    """The user's request as one clean sentence (more than one when the first says little)."""
    parts = work.sentences(text)
    if not parts:
        return ""
    picked = parts[0]
    head, sep, tail = picked.partition(": ")
    if sep and len(work.content_words(tail)) >= 5 and _META.search(head):
        picked = tail  # "have a look at this patch, I changed my mind: <the new rule>"
    for more in parts[1:3]:
        if len(work.content_words(picked)) >= 6 or len(picked) + len(more) > 200:
            break
        picked = f"{picked.rstrip('?!.')}: {more[0].lower() + more[1:] if more[:1].isupper() else more}"
    return work.clean_sentence(picked, 200)


# ----------------------------------------------------------------- scoring


def score_candidate(c: Candidate) -> Scores:
    if c.role == "work" or c.body_text is not None:
        return _score_structural(c)
    if c.explicit:
        # asked to be remembered: durable by the user's word, and at least RECORD
        scores = _score_spoken(c)
        return bump_to(Scores(3, scores.scope, scores.rationale, max(scores.retrieval, 2)), 6)
    return _score_spoken(c)


def _score_spoken(c: Candidate) -> Scores:
    text = c.text
    lead = " ".join(c.lead)
    has_why = bool(RATIONALE.search(text))
    has_alt = bool(ALTERNATIVE.search(text))
    rationale = 3 if has_why and has_alt else 2 if has_why or (has_alt and c.type == "decision") else (
        1 if HEDGE.search(text) or len(c.support) > 0 else 0)
    arch = bool(ARCHITECTURE.search(text))
    if c.type in ("decision", "convention"):
        durability = 3 if arch else 2
    elif c.type == "preference":
        durability = 2
    else:
        durability = 2
    if TRANSIENT.search(lead):
        durability = max(durability - 1, 0)
    if c.type == "preference":
        scope = 1
    elif SYSTEM_WIDE.search(text) and (arch or c.type == "convention"):
        scope = 3
    elif BOUNDARY.search(text) or arch:
        scope = 2
    else:
        scope = 1
    if c.type == "incident":
        retrieval = 3 if ENVIRONMENT.search(text) else 2
    elif c.type == "decision":
        retrieval = 3 if has_why and scope >= 2 else 2
    elif c.type == "preference":
        retrieval = 1
    else:
        retrieval = 2
    if c.type == "preference":
        # A plain preference is native memory (a bullet); only an explained one goes further.
        if rationale < 2:
            rationale = 0
        else:
            retrieval = 2
    return Scores(durability, scope, rationale, retrieval)


def _score_structural(c: Candidate) -> Scores:
    """Scores for what the session did (not what a user said): work, fix arcs, learnings."""
    text = f"{c.description or ''} {c.body_text or ''}"
    arch = bool(ARCHITECTURE.search(text))
    has_why = bool(RATIONALE.search(text))
    if c.type == "incident":
        # a failure fixed in the session with its stated cause: worth a moment
        return Scores(2, 2 if len(c.files) > 1 or arch else 1, 3 if c.support else 2,
                      3 if ENVIRONMENT.search(text) else 2)
    if c.type == "learning":
        return Scores(2, 2 if arch else 1, 2, 2)
    scope = 2 if len(c.files) >= 3 or arch else 1
    return Scores(3 if arch and len(c.files) >= 3 else 2, scope, 2 if has_why else 1, 2)


def bump_to(scores: Scores, minimum: int) -> Scores:
    """Raise retrieval then rationale until the total reaches a gate's minimum tier."""
    values = scores.as_dict()
    for key in ("retrieval", "durability", "scope", "rationale"):
        while sum(values.values()) < minimum and values[key] < 3:
            values[key] += 1
    return Scores(**values)


# ----------------------------------------------------------------- subjects and anchors


def _clean_words(text: str, keep: frozenset[str] = frozenset()) -> list[str]:
    words = re.findall(r"[A-Za-z0-9][A-Za-z0-9_.+#-]*", text)
    out = []
    for w in words:
        lw = w.lower().rstrip(".-")
        if re.fullmatch(r"\d{3}s", lw):
            lw = lw[:-1]
        if lw not in keep and (lw in GENERIC or len(lw) < 2):
            continue
        out.append(lw)
    return out


# A subject keeps its polarity: "turn off WAL mode" is not "turn WAL mode", and "we
# decided not to use Docker" is not "Docker". The particle inside the subject phrase
# stays; a negation before it (in the same clause) makes the subject "no <subject>" or,
# for a rule, "never <subject>".
_PARTICLES = frozenset({"no", "not", "never", "off", "without", "non", "disable", "disabled", "disabling"})
_NEGATED = re.compile(r"\b(?:not|no|never|no longer|don'?t|do not|doesn'?t|won'?t|will not|shouldn'?t"
                      r"|should not|mustn'?t|must not|stop(?:ped)?|avoid|against)\b(?!.*[,;:.!?])", _I)


_CONTRACTED_NOT = re.compile(r"\b(?:do|does|did|is|are|was|were|wo|should|must|ca|could|would)n[\'\u2019]?t\b", _I)


def _polar_content(text: str) -> list[str]:
    """``work.content_words`` of a request with its "not"/"no" in place ("Keep non-ASCII
    letters, do not transliterate them" -> keep non-ASCII letters not transliterate;
    "never", "off" and "without" are content words already)."""
    text = _CONTRACTED_NOT.sub(" not", text)
    words = work.content_words(text)
    marks = [(len(work.content_words(text[: m.start()])), m.group(0).lower())
             for m in re.finditer(r"\b(?:not|no)\b", text, _I)]
    for at, mark in reversed(marks):
        words.insert(at, mark)
    return words


def _polar(words: list[str], before: str) -> list[str]:
    """``words`` of a subject phrase with the negation that precedes it in its clause."""
    clause = re.split(r"[,;:.!?]|\b(?:but|because|since|and then)\b", before)[-1]
    neg = _NEGATED.search(clause)
    if not words or neg is None or words[0] in ("no", "never", "not"):
        return words
    return ["never" if neg.group(0).lower() == "never" else "no", *words]


def _identifiers(text: str) -> list[str]:
    """Code names in prose (snake_case, CamelCase, calls, backticked), as words."""
    out: list[str] = []
    for match in _CODEISH.finditer(_CODE_BLOCK.sub(" ", text)):
        token = (match.group(1) or match.group(2) or "").strip().rstrip("()")
        if not token or "/" in token or " " in token or token.isupper() or len(token) > 40:
            continue
        if "_" in token or "(" in match.group(0) or re.search(r"[a-z][A-Z]", token):
            if token not in out:
                out.append(token)
    return out


def _enough(words: list[str], more: list[str], want: int = 4) -> list[str]:
    """Top up a short subject with further salient words, so anchors stay specific."""
    out = list(words)
    for w in more:
        if len(out) >= want:
            break
        if w not in out and len(w) >= 4 and not w.isdigit():
            out.append(w)
    return out


# "I changed my mind about integer cents: <the new decision>": the subject is the new one
_MIND_LEAD = re.compile(r"^(?:so,? )?(?:i|we)(?:'ve| have)? chang\w* (?:my|our) minds?(?: about [^:;]{1,80})?[:;,]\s*"
                        r"|^(?:on second thought|change of plans?)[:;,]?\s*", _I)


# What an anchor is made of: the subject's content words, each once, whole, in order.
# A redaction placeholder names the redactor's work, not the subject ("use OpenAI key
# [REDACTED:openai-key] for embeddings" is about the OpenAI key); a file's extension is a
# fragment of its name ("test_tui_expansion.py" -> test tui expansion); a word glued from
# words already there ("TestTimelineBrowser" beside test_timeline_browser) repeats them;
# and an anchor never ends on a word that leads into a cut-off phrase ("... page rather").
_PLACEHOLDER = re.compile(r"\[REDACTED(?::[^\]\s]*)?\]|\bREDACTED\b(?::[\w.-]+)?", _I)
_EXTENSION = re.compile(r"(?<=[A-Za-z0-9_])\.(?:py|pyi|js|mjs|cjs|ts|tsx|jsx|rb|go|rs|ex|exs|java|kt|cc?|h|cpp|hpp|cs"
                        r"|php|swift|sql|md|json|ya?ml|toml|sh|html?|css|heex|lock|txt)\b", _I)
_NO_END = STOPWORDS | {"rather", "called", "named", "instead", "whether", "like", "versus", "redacted"}


def _glued(word: str, others: set[str]) -> bool:
    """``word`` is two or more of ``others`` written together."""
    if len(word) < 6:
        return False
    ends = [False] * (len(word) + 1)
    ends[0] = True
    for i in range(len(word)):
        if ends[i]:
            for o in others:
                if len(o) >= 2 and len(o) < len(word) and word.startswith(o, i):
                    ends[i + len(o)] = True
    return ends[len(word)]


def anchor_words(subject: str) -> str:
    """The words of ``subject`` an anchor is made of (see above); "" when none is left.
    A compound name keeps all its parts ("with_span/3", "end-to-end"); a little word on
    its own ("the", "with") is no content word."""
    from dualtrace.config import slugify

    out: list[str] = []
    for token in re.findall(r"[^\s,;()\[\]{}<>\"'`]+", _PLACEHOLDER.sub(" ", subject)):
        token = token.strip(".:!?")
        if re.search(r"[/_]|::|^[a-z0-9-]+\.\w+$", token):
            token = _EXTENSION.sub("", token)  # a file's name, not its extension
        for part in re.split(r"::|/", token):
            compound = bool(re.search(r"\w[-_.]\w|[a-z][A-Z]", part))
            seen = set(out)  # a word repeats another token's, not its own ("end-to-end")
            for w in slugify(part, 200).split("-"):
                if not w or w == "redacted" or (w in seen and not w.isdigit()):
                    continue
                if not compound and w in STOPWORDS and w not in _PARTICLES:
                    continue
                out.append(w)
    out = [w for w in out if not _glued(w, set(out) - {w})]
    kept: list[str] = []
    for w in out:
        if len("-".join([*kept, w])) > MAX_ANCHOR:
            break
        kept.append(w)
    while len(kept) > 1 and kept[-1] in _NO_END:
        kept.pop()
    return " ".join(kept)


def subject_of(c: Candidate) -> str:
    """The words a memory's anchor is made of; a word said twice in a row ("decimal.Decimal")
    is said once."""
    words = [p for w in _subject_words(c).split() for p in w.split(".") if p]
    return " ".join(w for n, w in enumerate(words) if n == 0 or w.lower() != words[n - 1].lower())


def _subject_words(c: Candidate) -> str:
    lead = _MIND_LEAD.sub("", c.lead[0]) or c.lead[0]
    lead_words = _clean_words(lead)
    idents = [w.lower() for w in (_identifiers(lead) or c.idents)][:2]
    if c.role == "assistant":
        # A restated agreement: name it by the code it governs, then its key terms.
        return " ".join(_enough(idents, lead_words, 5)[:6]) or c.type
    if c.type in ("decision", "convention"):
        match = _SUBJECT_AFTER.search(lead)
        if match:
            phrase = _SUBJECT_STOP.split(match.group(1))[0]
            words = _polar(_clean_words(phrase, keep=_PARTICLES), lead[: match.start(1)])
            if words:
                return " ".join(_enough(words[:6], idents + lead_words, 3)[:6])
    if c.type == "incident":
        verb = _VERBISH.search(lead)
        head = lead[: verb.start()] if verb else lead
        words = _clean_words(head)[:3]
        codes = [w.rstrip("s") for w in re.findall(r"\b[45]\d\ds?\b", c.text)][:1]
        errors = re.findall(r"\b[A-Z]\w*(?:Error|Exception)\b", c.text)[:1]
        cause = [w for w in _CAUSE_WORDS if re.search(rf"\b{w}", c.text, _I)][:1]
        parts = words + [x for x in codes + [e.lower() for e in errors] + cause if x not in words]
        if parts:
            return " ".join(_enough(parts[:5], lead_words, 3))
    return " ".join(_enough(idents, lead_words, 5)[:5]) or c.type


def _first_statement(fact: Fact) -> str:
    """The statement a fact's description was cut from (the body's first paragraph, when
    the description is a shortened form of it)."""
    first = fact.body.split("\n\n", 1)[0]
    first = re.sub(r"^[^:]{0,80}\):\s*", "", first)  # "The user stated (session x, date): "
    head = fact.description.rstrip(".").split(";")[0][:60]
    return first[:320] if head and head in first else ""


def _failure_text(c: Candidate) -> str:
    return "\n".join(x for x in (c.description, c.body_text, c.text) if x)


def _fact_text(fact: Fact) -> str:
    return f"{fact.description}\n{fact.body}"


def one_sentence(parts: list[str], limit: int = 200) -> str:
    """Statements as one clean sentence of at most ``limit`` chars: joined by "; ", cut at
    a clause or word boundary (never inside a word, no trailing "...")."""
    out = ""
    for part in parts:
        part = work.first_sentence(part).rstrip(" .;")
        if not part:
            continue
        if out and re.match(r"[A-Z][a-z]", part) and not re.match(r"I\b", part):
            part = part[0].lower() + part[1:]
        room = limit - 1 - (len(out) + 2 if out else 0)
        if len(part) > room:
            if room < 30:
                break
            part = work.clean_sentence(part, room).rstrip(".")
            if out and re.match(r"[A-Z][a-z]", part) and not re.match(r"I\b", part):
                part = part[0].lower() + part[1:]
            out = f"{out}; {part}" if out else part
            break
        out = f"{out}; {part}" if out else part
    return f"{out}." if out and out[-1] not in ".!?)`'\"" else out


def one_line(text: str, limit: int = 220) -> str:
    text = " ".join(text.split())
    if len(text) <= limit:
        return text
    cut = text[: limit - 3]
    if cut.count("`") % 2:
        # a cut inside a `code` pair would leave a broken token whose other tick pairs
        # with the next one: cut before the opened pair instead
        cut = cut[: cut.rindex("`")]
    return cut.rstrip() + "..."


# ----------------------------------------------------------------- the backend


@dataclass
class SessionFacts:
    """The concrete artifacts of a session, for moments (all taken from the session)."""

    session_id: str | None
    date: str
    branch: str | None
    files: list[str]
    commands: list[tuple[str, int | None]]
    errors: list[str]
    commits: list[tuple[str | None, str]]
    idents: list[str]
    # Who said a quoted sentence (speaker): the user's and the agent's own words, each
    # flattened to one lowercase line.
    user_words: tuple[str, ...] = ()
    agent_words: tuple[str, ...] = ()

    def speaker(self, sentence: str, role: str) -> str:
        """"the user" / "the agent" for a sentence found in their words, else by the
        candidate's role (review 10: a request quoted as "the session said")."""
        flat = " ".join(sentence.lower().split())[:160].rstrip(".!?\"'")
        if role in ("user", "stack") or (flat and any(flat in u for u in self.user_words)):
            return "the user"
        if role == "assistant" or (flat and any(flat in a for a in self.agent_words)):
            return "the agent"
        return "the session"

    @classmethod
    def of(cls, session, date: str) -> SessionFacts:
        files: list[str] = []
        commands: list[tuple[str, int | None]] = []
        errors: list[str] = []
        commits: list[tuple[str | None, str]] = []
        idents: list[str] = []
        prefix = (session.cwd or "").rstrip("/") + "/"
        gone = {p for t in work.tasks(session) for p in t.deleted}
        for e in session.events:
            if e.kind == "edit" and e.path and not e.is_error:
                # Project-relative paths read better; both forms are in the session text.
                if prefix != "/" and e.path.startswith(("/", "~")) and not e.path.startswith(prefix):
                    continue  # outside the project (an agent's plan file, say)
                rel = e.path[len(prefix):] if prefix != "/" and e.path.startswith(prefix) else e.path
                if rel not in files and rel not in gone and e.edit_kind != "delete":
                    files.append(rel)
            elif e.kind == "command" and e.command:
                commands.append((first_line(e.command), e.exit_code))
            elif e.kind == "error":
                line = first_line(e.result or e.text or "")
                if line:
                    errors.append(line)
            elif e.kind == "commit":
                commits.append((e.detail if e.detail and re.fullmatch(r"[0-9a-f]{7,40}", e.detail)
                                else None, first_line(e.text)))
            if e.kind in ("user", "assistant"):
                for ident in _IDENT.findall(e.text):
                    if ident not in idents and len(idents) < 40:
                        idents.append(ident)
                for path in _FILE.findall(e.text):
                    if path not in idents and len(idents) < 40:
                        idents.append(path)
                for match in _CODEISH.finditer(_CODE_BLOCK.sub(" ", e.text)):
                    token = (match.group(1) or match.group(2) or "").strip()
                    if "_" in token or "(" in token or "/" in token:
                        if token not in idents and len(idents) < 40:
                            idents.append(token)
        said = {kind: tuple(" ".join(e.text.lower().split()) for e in session.events
                            if e.kind == kind and e.agent is None and e.text
                            and e.detail != "thinking")
                for kind in ("user", "assistant")}
        # A redacted value is no identifier of the session ("it mentions `REDACTED`").
        idents = [i for i in idents if "REDACTED" not in i]
        return cls(session.session_id, date, session.git_branch, files, commands, errors,
                   commits, idents, said["user"], said["assistant"])


class OfflineBackend:
    name = "offline"

    def __init__(self, settings: Settings | None = None) -> None:
        self.settings = settings

    def encode(self, request: EncodeRequest, builder: PlanBuilder) -> Usage:
        session = request.session
        usage = Usage(model="offline")
        date = request.ctx.date
        facts = SessionFacts.of(session, date)
        candidates = segment(session)
        worked = work_candidates(session)
        # A request that is itself a report, a rule or a preference is remembered as
        # that (with the session's files); the work it caused is not a second memory.
        kept: list[Candidate] = []
        for w in worked:
            spoken = [c for c in candidates if c.role == "user" and w.role == "work"
                      and any(x.lower() in w.problem[0].lower() for x in c.lead)]
            if not spoken:
                kept.append(w)
                continue
            # A decision the user stated in the request stays the user's (its why and
            # alternatives score it); the work's corrections and outcome join its body.
            for c in spoken:
                if c.type == "decision":
                    c.extra = [ln for ln in (w.body_text or "").split("\n\n")
                               if ln.startswith(("The user added", "The agent found", "Outcome"))]
        worked = kept
        # what the user took back is gone now that the work it asked for was matched to it
        candidates = [c for c in candidates if not c.retracted]
        # the user telling the agent it destroyed their work: one incident, with the
        # destructive commands the agent ran before it
        candidates = _destruction_reports(candidates, session)
        # a user's failure report: one incident per failure it names, each with its command
        candidates = [x for c in candidates
                      for x in (_per_failure(c, session) if c.type == "incident" and c.role == "user"
                                and c.body_text is None and c.role != "destroyed" else [c])]
        if worked:
            # What the agent did at the user's request carries that request: an assistant
            # recap of the work would be a second memory of one subject.
            candidates = [c for c in candidates if c.role != "assistant"]
            told = {i for c in worked for i in c.told}
            if any(c.type == "incident" for c in worked):
                # the user's words about a failure an arc followed are that incident
                candidates = [c for c in candidates if c.type != "incident" or c.role != "user"
                              or (c.event_index not in told
                                  and (CONFIRM.search(c.text) or RESOLVED.search(c.text)))]
            candidates += worked
        else:
            candidates += structural_incidents(session, candidates)
        # the diagnosis first: a cause its commit message states again is that incident
        candidates += diagnosis_candidates(session, candidates)
        candidates += finding_candidates(session, candidates)
        candidates += answer_candidates(session, candidates)
        candidates = _fold_consequences(candidates, stuck_candidates(session), session)
        candidates += setup_candidates(session, candidates)
        candidates += choice_candidates(session, candidates)
        min_tier = getattr(request.gates, "min_tier", None)
        proposals = []
        for cand in candidates:
            scores = score_candidate(cand)
            proposals.append((cand, scores))
        if min_tier and proposals:
            # FULL comes from an error -> fix -> passing test arc: it raises the incident
            # that arc is about, not an unrelated candidate. RECORD (3+ files edited, a
            # commit) raises the strongest candidate.
            floor = 8 if min_tier == "FULL" else 5
            eligible = [i for i, (c, _s) in enumerate(proposals)
                        if c.type != "preference" and (min_tier != "FULL" or c.type == "incident")]
            if not eligible and min_tier == "FULL":
                floor = 5
                eligible = [i for i, (c, _s) in enumerate(proposals) if c.type != "preference"]
            if eligible:
                best = max(eligible, key=lambda i: proposals[i][1].total)
                cand, scores = proposals[best]
                if scores.total < floor:
                    proposals[best] = (cand, bump_to(scores, floor))
                    usage.notes.append(f"gate minimum {min_tier} applied to {cand.type} candidate")
        for cand, scores in proposals:
            for op in self.operations(cand, scores, facts, builder):
                try:
                    builder.add(op)
                except (Rejected, PathError) as exc:
                    usage.notes.append(f"rejected {type(op).__name__.lower()}: {exc}")
                    if isinstance(op, Store) and op.moment is not None:
                        # A moment the validator refuses: keep the fact (State B, honest).
                        try:
                            builder.add(Store(**{**op.__dict__, "moment": None}))
                        except (Rejected, PathError) as again:
                            usage.notes.append(f"rejected fact-only store: {again}")
        if not proposals:
            builder.add(Skip("no decision, incident, convention, preference, pattern or "
                             "learning cues in the session"))
        return usage

    # ------------------------------------------------------------- operations

    def operations(self, cand: Candidate, scores: Scores, facts: SessionFacts,
                   builder: PlanBuilder) -> list:
        superseded = self.contradicted(cand, builder)
        if superseded is not None:
            # The amendment governs the same code as the decision it replaces.
            inherited = _identifiers(f"{superseded.description}\n{superseded.body}")
            cand.idents.extend(i for i in inherited if i not in cand.idents)
        subject = cand.subject or subject_of(cand)
        description = cand.description or self.describe(cand)
        confidence = cand.confidence or self.confidence(cand)
        status = cand.status
        if cand.type == "incident" and status is None:
            status = "resolved" if RESOLVED.search(cand.text) else (
                "root-cause-confirmed" if CONFIRM.search(cand.text) else "investigating")
        moment = self.moment(cand, subject, facts)
        existing = None if superseded else self.recurrence(cand, builder)
        if existing is None and superseded is None and cand.body_text is None:
            existing = self.same_subject(cand, subject, builder)
        if existing is not None:
            body = cand.body_text if cand.body_text is not None else self.body(cand, facts, update=True)
            verb = "recurred" if cand.type == "incident" else "seen again"
            return [Update(
                target=existing.path,
                reason="recurred" if cand.type == "incident" else "seen again",
                body=body,
                description=description,
                confidence=confidence,
                status=status,
                what=f"{verb}: {one_line(subject, 80)}",
                marker=moment.marker if moment else facts.date,
                moment=moment,
                scores=scores,
            )]
        body = cand.body_text if cand.body_text is not None else self.body(cand, facts)
        try:
            anchor = make_anchor(anchor_words(subject))
        except PathError:
            return [Skip(f"no usable subject for {cand.type}")]
        return [Store(
            type=cand.type,
            anchor=anchor,
            description=description,
            body=body,
            scores=scores,
            confidence=confidence,
            status=status,
            moment=moment,
            bullet=one_line(" ".join(cand.lead), 300) if cand.type in ("convention", "preference") else None,
            supersedes=superseded.path if superseded else None,
        )]

    @staticmethod
    def same_subject(cand: Candidate, subject: str, builder: PlanBuilder) -> Fact | None:
        """The validator's duplicate guard, asked with the statement itself rather than its
        200-character description (a short description must not split one subject)."""
        if cand.type not in ("decision", "incident", "pattern", "learning"):
            return None
        parts = list(cand.lead[:2])
        confirm = next((s for s in cand.support if CONFIRM.search(s)), None)
        if confirm and confirm not in parts:
            parts.append(confirm)
        text = f"{subject} {one_line(' '.join(parts), 240)}"
        live = [(f.path, f"{f.anchor.replace('-', ' ')} {_first_statement(f)[:240] or f.description}")
                for f in builder.facts() if f.type == cand.type and not f.superseded_by
                and not (cand.type == "incident" and distinct_failures(_failure_text(cand), _fact_text(f)))
                and not (cand.type == "decision" and distinct_scopes(" ".join(cand.lead), f.description))]
        key = best_match(text, live, SIMILAR_THRESHOLD)
        if key is None and cand.type == "decision":
            # the same choice for the same thing, said with a new reason
            said = " ".join(cand.lead)
            key = next((f.path for f in reversed(builder.facts()) if f.type == "decision"
                        and not f.superseded_by and same_scope(said, f.description)), None)
        return next((f for f in builder.facts() if f.path == key), None) if key else None

    @staticmethod
    def confidence(cand: Candidate) -> str:
        if cand.type == "incident":
            if CONFIRM.search(cand.text) or RESOLVED.search(cand.text):
                return "HIGH"
            return "MEDIUM"
        if HEDGE.search(" ".join(cand.lead)):
            return "MEDIUM"
        return "HIGH"

    @staticmethod
    def describe(cand: Candidate) -> str:
        parts = list(cand.lead[:2])
        if cand.role in ("user", "stack") and parts:
            plain = work.unpolite(parts[0])
            if plain and plain != parts[0]:
                # a request stripped of "can you please": a statement, not a question
                parts[0] = plain[:-1].rstrip() + "." if plain.endswith("?") else plain
        confirm = next((s for s in cand.support if CONFIRM.search(s)), None)
        if confirm and confirm not in parts:
            parts.append(confirm)
        return one_sentence(parts)

    @staticmethod
    def body(cand: Candidate, facts: SessionFacts, *, update: bool = False) -> str:
        who = "The user" if cand.role in ("user", "stack") else "The session"
        where = f"session {short_id(facts.session_id)}, {facts.date}" if facts.session_id else facts.date
        lead = " ".join(cand.lead)
        if cand.role == "assistant":
            who = "Settled in the conversation"
            lines = [lead if update else f"{who} ({where}): {lead}"]
        elif cand.role == "stack" and cand.support:
            # one subject of a stack statement: the user's own words are the statement
            # ("I want to use FastAPI with ..., Docker, ..."), never "Use Docker."
            said = f"\"{one_line(cand.support[0], 400)}\""
            lines = [f"The user stated: {said}" if update else f"The user stated ({where}): {said}",
                     f"Decision: {lead[:1].lower()}{lead[1:].rstrip('.')} (one subject of that statement)."]
        else:
            said = "asked to remember" if cand.explicit else "stated"
            lines = [lead if update else f"{who} {said} ({where}): {lead}"]
        if cand.problem:
            lines.append("Problem: " + " ".join(cand.problem))
        support = cand.support[1:] if cand.role == "stack" else cand.support  # its first is quoted
        why = [s for s in support if RATIONALE.search(s) or CONFIRM.search(s)]
        alts = [s for s in support if ALTERNATIVE.search(s) and s not in why]
        rest = [s for s in support if s not in why and s not in alts]
        labels = {
            "decision": ("Rationale", "Alternatives and tradeoffs"),
            "incident": ("Root cause / evidence", "Other leads"),
        }.get(cand.type, ("Why", "Alternatives"))
        if why:
            lines.append(f"{labels[0]}: " + " ".join(why))
        if alts:
            lines.append(f"{labels[1]}: " + " ".join(alts))
        if rest:
            lines.append("Context: " + " ".join(rest[:3]))
        lines.extend(cand.extra)
        lines += [f"Taken back earlier in the same session: \"{one_line(t, 300)}\"" for t in cand.took_back[-2:]]
        if cand.idents:
            lines.append("Code: " + ", ".join(f"`{i}`" for i in cand.idents[:8]))
        # Not again when a Fix line named them all (review 10: a fixed failure listed its
        # files twice).
        named = set(cand.files) if any(x.startswith("Fix: ") for x in cand.extra) else set()
        if facts.files and not set(facts.files) <= named:
            lines.append("Files changed in the session: " + ", ".join(f"`{f}`" for f in facts.files[:6]))
        if facts.commits:
            sha, msg = facts.commits[-1]
            shown = f"{sha[:10] if sha else ''} {msg}".strip()
            if shown:
                lines.append(f"Commit: {shown}")
        return "\n\n".join(lines)

    @staticmethod
    def contradicted(cand: Candidate, builder: PlanBuilder) -> Fact | None:
        """A stored decision this one reverses ("switching back", "no longer", "instead")."""
        said = " ".join([cand.text, *cand.problem])
        if cand.type != "decision" or not (REVERSAL.search(said) or cand.revises):
            return None
        mine = {t for t in tokens(cand.text) if t not in GENERIC}
        best, best_score = None, 0.0
        for fact in builder.facts():
            if fact.type != "decision" or fact.superseded_by:
                continue
            if distinct_scopes(" ".join(cand.lead), fact.description):
                continue  # a choice for another subject revises nothing of this one
            theirs = {t for t in tokens(f"{fact.anchor.replace('-', ' ')} {fact.description}")
                      if t not in GENERIC}
            shared = mine & theirs
            if len(shared) < 2:
                continue
            score = len(shared) / max(min(len(mine), len(theirs)), 1)
            # the code both govern (a function, a file) is the strongest sign of one subject
            code = {i.lower() for i in cand.idents}
            if code & {i.lower() for i in _identifiers(fact.body)}:
                score += 0.3
            if score > best_score:
                best, best_score = fact, score
        return best if best_score >= 0.3 else None

    @staticmethod
    def recurrence(cand: Candidate, builder: PlanBuilder) -> Fact | None:
        """The stored memory this candidate revisits (same incident recurring, pattern again)."""
        if cand.type not in ("incident", "pattern", "decision", "learning"):
            return None
        recurring = bool(RECUR.search(cand.text)) or cand.type == "pattern"
        mine = {t for t in tokens(cand.text) if t not in GENERIC}
        # The code a decision governs is its strongest subject key: two conversations
        # settling merge_records' rule are one decision revisited.
        code = {i.lower() for i in (_identifiers(cand.text) + cand.idents)}
        distinctive = {t for t in mine if re.search(r"\d", t) or len(t) >= 6}
        best, best_score = None, 0.0
        subject = f"{cand.subject or ''} {' '.join(cand.lead)}"
        live = [f for f in builder.facts() if f.type == cand.type and not f.superseded_by]
        # a description is one short sentence; the statement it was cut from counts too
        said = {f.path: tokens(f"{f.anchor.replace('-', ' ')} {_first_statement(f)[:240] or f.description}")
                for f in live}
        spread = spread_of(said.values())
        code_of = {f.path: {i.lower() for i in _identifiers(f"{f.description}\n{f.body}")} for f in live}
        code_spread = spread_of(code_of.values())
        for fact in live:
            if distinct_subjects(subject, f"{fact.anchor.replace('-', ' ')} {fact.description}"):
                continue  # boilerplate shared, the named subjects differ
            if cand.type == "decision" and distinct_scopes(" ".join(cand.lead), fact.description):
                continue  # the same choice for another subject: its own decision
            if cand.type == "incident" and distinct_failures(_failure_text(cand), _fact_text(fact)):
                continue  # another test, error or rule failed: a new incident, not a recurrence
            if cand.role == "stack" and not (set((cand.subject or "").split()) & set(fact.anchor.split("-"))):
                continue  # one technology of a stack statement is not another
            theirs = said[fact.path]
            # the same subject shares something with this memory that no other memory has:
            # a project's name, "bead", "epic" or a framework (LiveView) in every memory of
            # the project name none of them
            own_code = own_words(code, code_of[fact.path], code_spread)
            if len(live) > 1 and not own_words(mine, theirs, spread) and not own_code:
                continue
            shared = mine & theirs
            strong = distinctive & theirs
            score = len(shared) / max(min(len(mine), len(theirs)), 1)
            if recurring and strong and (len(strong) >= 1 and score >= 0.15):
                score += 0.5
            elif own_code and score >= 0.25 and cand.type == "decision":
                score += 0.5
            if score > best_score:
                best, best_score = fact, score
        threshold = 0.6 if recurring else 0.75
        return best if best is not None and best_score >= threshold else None

    @staticmethod
    def moment(cand: Candidate, subject: str, facts: SessionFacts) -> MomentDraft | None:
        """A moment made only of the session's contents; None when it has no artifact."""
        artifacts: list[str] = []
        if facts.files:
            artifacts.append("the work touched " + ", ".join(f"`{f}`" for f in facts.files[:3]))
        mentioned = [i for i in facts.idents if i.lower() in cand.text.lower()][:3]
        for match in _CODEISH.finditer(cand.text):
            token = (match.group(1) or match.group(2) or "").strip()
            if token and token not in mentioned and len(mentioned) < 4 \
                    and "REDACTED" not in token:
                mentioned.append(token)
        if not mentioned and not facts.files:
            mentioned = facts.idents[:2]  # the session's own code references
        if mentioned:
            artifacts.append("it mentions " + ", ".join(f"`{m}`" for m in mentioned))
        # Tests and failures say more about a moment than the closing `git status`.
        telling = [c for c in facts.commands if c[1] is not None and (c[1] != 0 or TEST_CMD.search(c[0]))]
        runs = (telling or [c for c in facts.commands if c[1] is not None])[-2:]
        if runs:
            artifacts.append("; ".join(f"`{one_line(cmd, 80)}` exited {code}" for cmd, code in runs))
        if facts.errors:
            artifacts.append(f"the session hit \"{one_line(facts.errors[0], 120)}\"")
        if facts.commits:
            sha, msg = facts.commits[-1]
            shown = f"{sha[:10] if sha else ''} " + (f"\"{one_line(msg, 80)}\"" if msg.strip() else "")
            if shown.strip():
                artifacts.append(f"commit {shown.strip()}")
        if not artifacts:
            return None
        where = f" on branch `{facts.branch}`" if facts.branch else ""
        sid = f"session {short_id(facts.session_id)}" if facts.session_id else "a session"
        # a stack statement's subject is quoted as the user said it, not as "Use Docker."
        said, then = (cand.support[0], cand.support[1:]) if cand.role == "stack" and cand.support \
            else (cand.lead[0], cand.support)
        who = facts.speaker(said, cand.role)
        # Only a person's words are quoted as said; a line the encoder composed from the
        # session's runs ("`pytest` failed: ...") is stated as what happened.
        stated = one_line(said, 300)
        opening = (f", {who} said: \"{stated}\"" if who != "the session"
                   else ": " + (stated if stated.endswith((".", "!", "?", "…")) else stated + "."))
        narrative = (f"In {sid}{where} ({facts.date}){opening}"
                     + (f" Then: \"{one_line(then[0], 240)}\"" if then else "")
                     + " Concretely, " + "; ".join(artifacts) + ".")
        verbs = {"decision": "decided", "incident": "reported", "convention": "set convention",
                 "preference": "stated preference", "pattern": "noticed again", "learning": "learned"}
        what = f"{verbs[cand.type]}: {one_line(subject, 80)}"
        sha = facts.commits[-1][0] if facts.commits else None
        marker = f"commit {sha[:10]}" if sha else facts.date
        prior = ""
        alt = next((s for s in cand.support if ALTERNATIVE.search(s)), None)
        if cand.took_back:
            prior = f"Said first, then taken back: \"{one_line(cand.took_back[-1], 180)}\""
        elif alt:
            prior = one_line(alt, 200)
        after = ""
        if facts.commits and facts.commits[-1][1].strip():
            after = f"Committed: \"{one_line(facts.commits[-1][1], 120)}\""
        elif runs and runs[-1][1] == 0:
            after = f"`{one_line(runs[-1][0], 80)}` exited 0"
        return MomentDraft(narrative=narrative, what=what, marker=marker, prior=prior, after=after)
