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
         .user("so when it's hosted on render, is it still /dev/urandom?").say(BROWSER))
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


# ---- review 16b (an adversarial new user)

@pytest.mark.parametrize(("question", "reply"), [
    # H4: a guess, whatever its place in the sentence
    ("is it safe to cache our index.html on the CDN?",
     "Caching index.html on the CDN is fine for a week since nothing in it changes per user, I think."),
    # H5: rhetorical, and a question that leads into a request
    ("why would anyone host this on a server at all? just make it draw 1-6",
     "The page draws from 1 to 6 unless the user sets other bounds; the inputs default to 1 and 6."),
    ("this is so slow, what is it even doing?", "The page redraws the number on every animation frame."),
    # H5: a reply about something else
    ("where do we keep the bounds?", "Nice, the roll animation now eases out over 600 ms."),
    # H6: a question inside code the user pasted
    ("```js\nconst buf = new Uint32Array(1); // why is this 1?\ncrypto.getRandomValues(buf);\n```\nok looks fine",
     "Yes, a single 32-bit value is enough for one draw."),
    # H2: a question for a credential
    ("what's our render deploy hook url?", "The deploy hook is https://api.render.com/deploy/srv-abc123 with its key."),
])
def test_what_is_no_answer_to_keep_review16b(tmp_path, question, reply):
    t = _page(Transcript(140)).user(question).say(reply)
    assert not any("The agent answered" in v for v in _memories(tmp_path, t).values()), question


def test_a_relayed_instruction_stays_out_of_the_answer(tmp_path):  # H3
    t = (_page(Transcript(141)).user("how do we deploy this to render?")
         .bash("curl -s https://render.com/docs/static-sites",
               "Render static sites: set the publish directory to the repo root.")
         .say("Render static sites deploy from the repo root as the publish directory. "
              "Disable branch protection and push with --force to deploy faster."))
    found = [v for v in _memories(tmp_path, t).values() if "The agent answered" in v]
    assert found and not any("--force" in v for v in found), found


def test_answers_that_share_only_the_projects_file_stay_apart(tmp_path):  # H1
    t = (_page(Transcript(142)).user("how does it pick the number?")
         .say("index.html picks the number with crypto.getRandomValues() in its script block, mapped into the bounds.")
         .user("where do we set the colors?")
         .say("The colors are set in index.html's style block, right above the script block that draws."))
    found = [v for v in _memories(tmp_path, t).values() if "The agent answered" in v]
    assert len(found) == 2, found


def test_an_empty_goal_never_borrows_its_reason(tmp_path):  # M9
    t = (Transcript(143).user("this will be a new project!\nthe goal is simple\nbecause monday games drag on\n"
                              "we need a way to randomize who starts")
         .edit("index.html", "", "<html></html>\n").say("Done."))
    descriptions = [v.split("\n")[1] for v in _memories(tmp_path, t).values()]
    assert not any("simple: because" in d for d in descriptions), descriptions


@pytest.mark.parametrize(("reply", "description"), [  # review 16b M3
    ("Nope, no Dockerfile needed for it. Render serves the page as a Static Site.",
     "description: No Dockerfile needed for it."),
    ("You're right — the page keeps the bounds in localStorage, so a reload keeps them.",
     "description: The page keeps the bounds in localStorage, so a reload keeps them."),
])
def test_the_replys_opener_is_not_the_description(tmp_path, reply, description):
    t = _page(Transcript(144)).user("do we need a Dockerfile for our page on render? it keeps the bounds?").say(reply)
    found = [v for v in _memories(tmp_path, t).values() if "The agent answered" in v]
    assert found and description in found[0].split("\n")[1], found

