"""Cheap gates (no LLM), docs/PROTOCOL.md §11.

(1) activity: any edit, command or commit; (2) signal: decision phrases, an
error -> fix -> passing-test arc, convention phrases, three or more file edits.
Minimum tiers: 3+ file edits -> RECORD; error -> fix -> passing test -> FULL; a commit
or merged PR -> RECORD. A session with neither activity nor signal skips the backend.
(The third gate, the memory-dir lock, belongs to the writer, not here.)
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from dualtrace.encoder.backends.work import (
    answers,
    chosen_options,
    diagnosed_fixes,
    findings,
    setup_fixes,
)
from dualtrace.encoder.cues import (
    CHOICE_VERBS,
    DESTROYED,
    DONT_USE,
    RETURN_TO,
    asks_to_remember,
    correction_kind,
    fixed_by_rerun,
    is_agreement,
    retraction,
    run_key,
    stuck_run,
)
from dualtrace.encoder.cues import TEST_COMMAND as _TEST
from dualtrace.encoder.session import Event, Session

_DECISION = re.compile(
    r"(?i)\b(?:we(?:'ve| have)? decided|(?:we're|we are|i'm|let's go with|we'll go with) switching"
    r"|we(?:'re| are) switching|switch(?:ed|ing)? (?:from \S+ )?to\b|instead of [^.\n]{1,60}?"
    r"(?:we'll|we will|let's|i'll|use|go with)|the reason (?:is|was)|trade-?offs?|"
    r"decided (?:to|on|against)|we chose|going with|opted (?:for|to)"
    r"|(?:i|we)(?:'ve| have)? changed (?:my|our) mind|on second thought)"
)
# A request that says why ("I need to ...", "so that ...") and led to an edit.
_REASONED = re.compile(r"(?i)\b(?:i need(?:ed)? to|we need to|so that|because|otherwise|which is less"
                       r"|as that would|we(?:'re| are) not doing|we don'?t need)\b")
_CONVENTION = re.compile(
    r"(?i)\b(?:from now on|going forward|the rule is|as a rule|by convention|"
    r"(?:always|never) (?:use|run|call|commit|push|add|put|write|import|edit|modify|touch|"
    r"merge|deploy|skip|mock|delete|rename|prefer|do))\b"
)
# Phrases that carry a memory even in a session with no tool activity: a stated
# preference (pilot 1A), a reported problem (pilot 4), something learned, a
# recurring mistake. Only the user's own words count for these.
_USER_SIGNAL = re.compile(
    r"(?i)(?:^|[.!?]\s+)(?:i (?:really )?(?:like|prefer|hate|dislike|tend to|always|never)\b"
    r"|i don'?t like\b|i'?d rather\b|please (?:always|never|don'?t)\b"
    r"|(?:by the way|btw|fwiw|also),? i (?:really )?(?:like|prefer|hate|dislike)\b)"
    r"|\b(?:throw(?:s|ing)|fail(?:s|ing|ed)|exception|crash(?:es|ed|ing)?|regression|outage"
    r"|race condition|deadlock|memory leak|flaky|intermittent(?:ly)?|root cause|is back"
    r"|(?:does not|doesn'?t|do not|don'?t) work|(?:is|are) not working|stopped working"
    r"|turns out|today i learned|til|i learned|lesson learned|keep (?:making|forgetting|hitting)"
    r"|we'?ll (?:use|go with|switch|adopt|keep)|let'?s (?:use|go with|switch|adopt)"
    r"|we(?:'re| are) (?:moving|migrating|dropping|adopting|replacing|switching|swapping|standardi[sz]ing)"
    r"|we(?:'re| are) going to " + CHOICE_VERBS +
    r"|" + DONT_USE +
    r"|we(?:'re| are)? (?:sticking with|staying (?:with|on)|keeping)"
    r"|replac(?:e|ing) [\w.-]+(?: [\w.-]+){0,2} with|came back|\w+(?:Error|Exception)"
    # an HTTP failure the user reports ("the login page returns 500 when ...")
    r"|(?:returns?|returning|got|gets|getting|gives?|giving|throws?|throwing) (?:an? |the )?(?:http )?[45]\d\d"
    r"|[45]\d\d (?:errors?|internal server error|unauthorized|forbidden|not found)"
    r"|i want to (?:build|use|create)|we'?re building|the goal (?:is|of this project))\b"
    r"|" + RETURN_TO + r"|" + DESTROYED
)
_MERGED = re.compile(r"\bgh\s+pr\s+merge\b|\bgit\s+merge\b")


@dataclass(frozen=True)
class GateVerdict:
    activity: bool
    signal: bool
    min_tier: str | None  # "RECORD" | "FULL" | None
    reasons: tuple[str, ...]
    file_edits: int  # successful edit events
    files_changed: int = 0  # distinct paths edited
    commands: int = 0
    failed_commands: int = 0
    commits: int = 0
    fix_arc: bool = False  # error -> edit -> passing test

    @property
    def skip_backend(self) -> bool:
        """No signal and no minimum tier: nothing for a model to encode.

        Activity alone (a rename, an import reordering, a removed print) is routine
        editing that docs/PROTOCOL.md §7 says never to encode; it does not justify a model
        call. Any signal phrase, a fix arc, 3+ edited files or a commit does.
        """
        return not self.signal and self.min_tier is None


def _hhmm(ts: str | None) -> str:
    return ts[11:16] if ts and len(ts) >= 16 else "--:--"


def _phrase(events: tuple[Event, ...], pattern: re.Pattern[str]) -> tuple[str, Event] | None:
    for e in events:
        if e.kind in ("user", "assistant", "compaction") and e.detail != "thinking":
            m = pattern.search(e.text)
            if m:
                return m.group(0), e
    return None


def _fix_arc(events: tuple[Event, ...]) -> str | None:
    """A failing test -> an edit -> the same test passing (cues.fixed_by_rerun)."""
    for i, e in enumerate(events):
        if (e.kind == "command" and e.command and _TEST.search(e.command)
                and e.failed):
            j = fixed_by_rerun(events, i)
            if j is not None:
                return (f"test `{run_key(e.command)}` failed at {_hhmm(e.ts)}, fixed, "
                        f"passed at {_hhmm(events[j].ts)}")
    return None


def _correction(events: tuple[Event, ...]) -> str | None:
    """The user steering the work: what they said when stopping a tool call, an answer to
    the agent's question, a failing check they ran themselves, or a reasoned request
    that the agent then carried out."""
    edited = False
    for e in reversed(events):
        if e.kind == "edit" and not e.is_error:
            edited = True
        if e.agent is not None:
            continue
        if e.kind == "user" and e.detail and e.detail.startswith("rejection"):
            return f"the user's reason for rejecting a tool call (at {_hhmm(e.ts)})"
        if e.kind == "tool" and e.tool == "AskUserQuestion" and e.result and not e.is_error:
            return f"the user answered the agent's question (at {_hhmm(e.ts)})"
        if e.kind == "command" and e.tool == "user-shell" and e.is_error and edited:
            return f"a check the user ran failed, then code changed (at {_hhmm(e.ts)})"
        if e.kind == "user" and edited and _REASONED.search(e.text):
            return f"a reasoned request that changed code (at {_hhmm(e.ts)})"
    for i, e in enumerate(events):
        if e.kind == "tool" and e.detail == "rejected" and e.agent is None:
            later = next((x for x in events[i + 1:] if x.kind == "user" and x.agent is None), None)
            if later is not None:
                return f"the user corrected the agent after stopping a tool call (at {_hhmm(later.ts)})"
    return None


def evaluate(session: Session) -> GateVerdict:
    events = session.events
    edits = [e for e in events if e.kind == "edit" and not e.is_error]
    paths = {e.path for e in edits if e.path}
    commands = [e for e in events if e.kind == "command"]
    failed = [e for e in commands if e.failed]
    commits = [e for e in events if e.kind == "commit"]
    merged = [e for e in commits if e.text == "PR merged"] + [
        e for e in commands if e.command and _MERGED.search(e.command) and not e.is_error]
    reasons: list[str] = []
    activity = bool(edits or commands or commits)
    if activity:
        reasons.append(f"activity: {_count(len(edits), 'file edit')} "
                       f"({_count(len(paths), 'file')}), {_count(len(commands), 'command')} "
                       f"({len(failed)} failed), {_count(len(commits), 'commit')}")
    else:
        reasons.append("no activity: no edit, command or commit")
    signal_reasons: list[str] = []
    hit = _phrase(events, _DECISION)
    if hit:
        signal_reasons.append(f"decision phrase '{hit[0]}' ({hit[1].kind} at {_hhmm(hit[1].ts)})")
    hit = _phrase(events, _CONVENTION)
    if hit:
        signal_reasons.append(f"convention phrase '{hit[0]}' ({hit[1].kind} at "
                              f"{_hhmm(hit[1].ts)})")
    for e in events:
        if e.kind == "user" and e.agent is None:
            if asks_to_remember(e.text):
                signal_reasons.append(f"the user asked to remember something (at {_hhmm(e.ts)})")
                break
            fixed = next((s for s in re.split(r"(?<=[.!?])\s+|\n+", e.text.strip())
                          if correction_kind(s)), None)
            if fixed is not None:
                signal_reasons.append(f"the user corrected the work: '{fixed[:80]}' (at {_hhmm(e.ts)})")
                break
            # "scratch that: we keep MySQL", "forget what I said about X": what the user
            # settles on changed within the session
            back = next((s for s in re.split(r"(?<=[.!?])\s+|\n+", e.text.strip())
                         if (r := retraction(s)) is not None and (r.deictic or r.about)), None)
            if back is not None:
                signal_reasons.append(f"the user took back what they said: '{back[:80]}' (at {_hhmm(e.ts)})")
                break
            m = _USER_SIGNAL.search(e.text)
            if m:
                signal_reasons.append(f"user phrase '{m.group(0).strip(' .!?')}' (at {_hhmm(e.ts)})")
                break
    for e in events:
        if e.kind == "assistant" and e.agent is None and e.detail != "thinking" and is_agreement(e.text):
            signal_reasons.append(f"settled decision restated by the assistant (at {_hhmm(e.ts)})")
            break
    correction = _correction(events)
    if correction:
        signal_reasons.append(correction)
    arc = _fix_arc(events)
    if arc:
        signal_reasons.append(f"error -> fix -> passing test: {arc}")
    stuck = stuck_run(events)
    if stuck is not None:
        signal_reasons.append(f"{len(stuck[2])} different commands in a row failed the same way")
    # A question the agent answered with what it found ("why does the cache miss on every
    # request?"): worth reading even when the session did nothing else (review 13 F13).
    found = findings(session, limit=1)
    if found:
        signal_reasons.append("the agent reported what it found" + (
            f" when asked (at {_hhmm(events[found[0].asked].ts)})" if found[0].asked is not None
            else " in its closing takeaway"))
    # A problem the user asked to have fixed, diagnosed and fixed with no failing run
    # ("the export button does nothing on Safari" -> "the root cause was ...").
    if diagnosed_fixes(session, limit=1):
        signal_reasons.append("the agent stated why a problem the user reported happened, and fixed it")
    if answers(session, limit=1):
        signal_reasons.append("the agent answered a question about the project")
    if chosen_options(session, limit=1):
        signal_reasons.append("the user chose one of the options the agent laid out")
    if setup_fixes(session, limit=1):
        signal_reasons.append("a command failed on the set-up and worked after set-up steps")
    if len(paths) >= 3:
        signal_reasons.append(f"{len(paths)} files edited")
    reasons.extend("signal: " + r for r in signal_reasons)
    tier: str | None = None
    if arc:
        tier = "FULL"
        reasons.append("min tier FULL: error -> fix -> passing test")
    elif len(paths) >= 3 or commits or merged:
        tier = "RECORD"
        why = "3+ file edits" if len(paths) >= 3 else "a commit or merged PR"
        reasons.append(f"min tier RECORD: {why}")
    if not signal_reasons and tier is None:
        reasons.append("skip backend: no signal and no minimum tier (routine activity only)"
                       if activity else "skip backend: no activity and no signal")
    return GateVerdict(
        activity=activity, signal=bool(signal_reasons), min_tier=tier, reasons=tuple(reasons),
        file_edits=len(edits), files_changed=len(paths), commands=len(commands),
        failed_commands=len(failed), commits=len(commits), fix_arc=arc is not None,
    )


def _count(n: int, noun: str) -> str:
    """``1 file``, ``3 files``: the gate's reasons are read by people (encode, explain)."""
    return f"{n} {noun}{'' if n == 1 else 's'}"
