"""A question the user asks about the project in a working session, and the agent's answer,
is a learning in the agent's words, quoted with the question; a follow-up on the same
subject joins it. Read off two unseen real sessions (bench --part fresh15 and fresh16: "so
now, when hosted on render.com, its likely /dev/urandom?" -> "It runs entirely in the
browser ..."); here on transcripts the test writes, through the real encode path."""

from __future__ import annotations

from pathlib import Path

import pytest

from dualtrace.pipeline import encode_session
from tests.conftest import bench_transcript

Transcript = bench_transcript()
BROWSER = ("It runs entirely in the browser — there's no server-side logic. The "
           "`crypto.getRandomValues()` call happens in JavaScript on the visitor's device, not on "
           "Render's servers, so the entropy comes from that device's OS.")
SEEDED = ("`crypto.getRandomValues()` isn't seeded like a traditional PRNG. It pulls directly from "
          "the OS entropy pool: `/dev/urandom` on Linux.")


def _memories(tmp_path: Path, t) -> dict[str, str]:
    mem = tmp_path / "mem"
    encode_session(t.write(tmp_path / "t.jsonl"), memory_dir=mem, backend="offline")
    return {str(p.relative_to(mem)): p.read_text() for p in mem.glob("*/*.md")
            if not str(p.relative_to(mem)).startswith(("sessions", "scenes"))}


def _page(t):
    return (t.user("Make a page that shows a random number between two bounds.")
            .edit("index.html", "", "<script>crypto.getRandomValues(buf)</script>\n")
            .say("Done: index.html draws the number with crypto.getRandomValues()."))


def test_an_answered_question_about_the_project_is_a_learning(tmp_path):
    t = _page(Transcript(130)).user("so now, when hosted on render.com, where does its entropy come from?").say(BROWSER)
    found = _memories(tmp_path, t)
    learned = [v for v in found.values() if "The agent answered" in v]
    assert len(learned) == 1, found
    text = learned[0]
    assert "type: learning" in text
    assert "description: It runs entirely in the browser — there's no server-side logic." in text
    assert 'Asked (' in text and 'where does its entropy come from?' in text
    assert "not on Render's servers" in text


def test_a_follow_up_on_the_same_subject_joins_the_answer(tmp_path):
    t = (_page(Transcript(131)).user("how is our random number seeded?").say(SEEDED)
         .user("so when it's hosted, is it still /dev/urandom?").say(BROWSER))
    learned = [v for v in _memories(tmp_path, t).values() if "The agent answered" in v]
    assert len(learned) == 1, learned
    assert "isn't seeded like a traditional PRNG" in learned[0] and "Then asked" in learned[0]
    assert "runs entirely in the browser" in learned[0]


@pytest.mark.parametrize(("question", "reply"), [
    ("when did this session start?", "I don't have access to timestamps for this conversation."),
    ("can you make the numbers bigger?", "Sure, the font size is now 96px in the display."),
    ("Do that for me", "The page now remembers its bounds in localStorage across reloads."),
    ("do you know where the session file is?", "It's a JSONL file under the projects folder of the host."),
])
def test_what_is_no_answer_to_keep(tmp_path, question, reply):
    t = _page(Transcript(132)).user(question).say(reply)
    assert not any("The agent answered" in v for v in _memories(tmp_path, t).values())


def test_an_answer_that_became_work_is_the_works(tmp_path):
    t = (_page(Transcript(133)).user("is it truly random? i need to reason about its randomness")
         .say("`Math.random()` is a pseudo-random generator seeded once. I'll swap it for crypto.getRandomValues().")
         .edit("index.html", "Math.random()", "crypto.getRandomValues(buf)"))
    assert not any("The agent answered" in v for v in _memories(tmp_path, t).values())


def test_trivia_in_a_session_that_works_on_nothing_is_no_memory(tmp_path):  # review 14 G13
    t = (Transcript(134).user("Why does Python's `sorted()` not mutate its input list?")
         .say("`sorted()` doesn't mutate its input because it builds a new list; `list.sort()` is in place."))
    assert not any("The agent answered" in v for v in _memories(tmp_path, t).values())


def test_an_empty_goal_sentence_borrows_the_next(tmp_path):
    t = (Transcript(135).user("this will be a new project!\nthe goal is simple\nwhen we play dominion every monday, "
                              "we need a way to randomize who starts\nit should remember the bounds")
         .edit("index.html", "", "<html></html>\n").say("Done."))
    descriptions = [v.split("\n")[1] for v in _memories(tmp_path, t).values()]
    assert not any(d.rstrip(".'\"").endswith("goal is simple") for d in descriptions), descriptions
