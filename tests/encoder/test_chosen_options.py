"""The agent lays out alternatives and the user picks one in the next message: a decision
in the user's name, with the options and the agent's reasons. Read off a real session
(bench --part fresh15: "Option A — copy the db ... / Option B — point dev at the Docker db"
-> "copy the db, good idea"; "We could open an issue ... Or we just remember this" ->
"let's open an issue"); here on transcripts the test writes, through the real encode
path, and on the reader itself."""

from __future__ import annotations

from pathlib import Path

import pytest

from dualtrace.encoder.backends.work import offered_options
from dualtrace.pipeline import encode_session
from tests.conftest import bench_transcript

Transcript = bench_transcript()
OFFER = ("You have two options:\n\n"
         "**Option A** — Copy the database so you can change it freely:\n"
         "```bash\ncp /srv/live/app.db ./data/app.db\n```\n\n"
         "**Option B** — Point the dev server at the live database directly:\n"
         "```bash\nexport APP_DB_PATH=/srv/live/app.db\n```\n\n"
         "I'd recommend **Option A** (copy it) so you don't conflict with the running "
         "container — SQLite doesn't love two writers. Want me to set it up?")


def _decisions(tmp_path: Path, t) -> dict[str, str]:
    mem = tmp_path / "mem"
    encode_session(t.write(tmp_path / "t.jsonl"), memory_dir=mem, backend="offline")
    folder = mem / "decisions"
    return {p.name: p.read_text() for p in folder.glob("*.md")} if folder.is_dir() else {}


@pytest.mark.parametrize("answer", ["great! copy the database, good idea. Do that for me",
                                    "Option A please", "ok, go with your recommendation"])
def test_the_option_the_user_picks_is_a_decision_with_its_alternative_and_reason(tmp_path, answer):
    t = (Transcript(101).user("I want to test the dashboard against real data. How?")
         .say(OFFER).user(answer)
         .bash("mkdir -p data && cp /srv/live/app.db ./data/app.db", "")
         .say("Copied the database to data/app.db."))
    found = _decisions(tmp_path, t)
    chose = [v for v in found.values() if "The agent laid out" in v]
    assert len(chose) == 1, (answer, found)
    text = chose[0]
    assert ('description: Chose "copy the database so you can change it freely" over "point '
            'the dev server at the live database directly".') in text, text
    assert "- (chosen) Copy the database so you can change it freely: `cp /srv/live/app.db ./data/app.db`" in text
    assert "SQLite doesn't love two writers" in text
    assert f'The user chose: "{answer}"' in text


def test_we_could_or_pair_picked_by_its_words(tmp_path):
    t = (Transcript(102).user("Is there an AGENTS.md in the repo?")
         .say("No AGENTS.md either.\n\nWe could open an issue suggesting the repo add a CLAUDE.md — "
              "that way the maintainer decides the approach. Or we just remember this for "
              "ourselves and move on to the timeline bug. What do you prefer?")
         .user("OK, yes, let's open an issue stating the problem, and let the maintainer choose.")
         .bash("gh issue create --title 'Setup steps for AI contributors'", "https://github.com/o/r/issues/2"))
    found = _decisions(tmp_path, t)
    chose = [v for v in found.values() if "The agent laid out" in v]
    assert len(chose) == 1, found
    assert ('Chose "open an issue suggesting the repo add a CLAUDE.md" over "remember this '
            'for ourselves and move on to the timeline bug".') in chose[0], chose[0]


@pytest.mark.parametrize("answer", [
    "neither, let's just hard-code the path for now",  # refuses both
    "what's the difference between them?",  # a question, no pick
    "ok",  # assent with no recommendation to assent to... see OFFER_NO_PICK
])
def test_no_pick_no_decision(tmp_path, answer):
    offer = OFFER.replace("I'd recommend **Option A** (copy it) so you don't conflict with the "
                          "running container — SQLite doesn't love two writers. ", "")
    t = Transcript(103).user("How do I test against real data?").say(offer).user(answer).say("Sure.")
    found = _decisions(tmp_path, t)
    assert not any("The agent laid out" in v for v in found.values()), (answer, found)


@pytest.mark.parametrize(("text", "labels"), [
    (OFFER, ["a", "b"]),
    ("Two approaches:\n1. **Approach 1**: retry in the client\n2. **Approach 2**: queue on the server\n\n"
     "Which do you prefer?", ["1", "2"]),
    ("We could cache the tokens. Or we could refresh them on every call. What do you think?", ["1", "2"]),
    ("All tests pass. We could add caching. Or we could refactor the logger.", []),  # narration
    ("The design doc says:\n\n```\nOption A: Redis.\nOption B: Memcached.\n```\n\nWhich one?", []),
    ("The README says:\n> Option A: pip.\n> Option B: conda.\n\nWant me to set it up?", []),
    ("Option A is what the README describes.", []),  # one option named is no choice
    ("I could look at the logs. Then I'll fix the parser.", []),
])
def test_which_messages_lay_out_options(text, labels):
    assert [lab for lab, _t in offered_options(text)] == labels


# ---- review 16 (an adversarial new user): what must never be stored as the user's choice

PLAIN = ("You have two options:\n\n"
         "**Option A** — Copy the database so you can change it freely.\n\n"
         "**Option B** — Point the dev server at the live database directly.\n\n")
ASKED = PLAIN + "Which do you prefer?"
RECOMMENDED = PLAIN + "I'd recommend **Option A**. Want me to set it up?"


def _chosen(tmp_path: Path, offer: str, *answers: str) -> list[str]:
    t = Transcript(110).user("I want to test the dashboard against real data. How?").say(offer)
    for answer in answers:
        t.user(answer).bash("ls data", "app.db").say("Done.")
    found = _decisions(tmp_path, t)
    return [v.split("\n")[1] for v in found.values() if "The agent laid out" in v]


@pytest.mark.parametrize(("offer", "answer"), [
    (ASKED, "skip the copy, the disk is full"),  # A1: against the option its words echo
    (ASKED, "the live database is too risky"),
    (ASKED, "What about option B"),  # A3: a question without "?"
    (ASKED, "Option A looks risky to me. Tell me more about B"),
    (ASKED, "hmm, let me ask the team whether copying is allowed"),
    (ASKED, "copying is fine but not now"),
    (RECOMMENDED, "sure, but use postgres instead of sqlite"),  # A4: assent, then another plan
    (RECOMMENDED, "good, now fix the login bug"),
    (RECOMMENDED.replace("I'd recommend **Option A**.", "I'd suggest avoiding **Option B**."), "ok"),  # A5
    (RECOMMENDED, "Option A please... no wait, option B"),  # A6: two labels
])
def test_what_is_no_pick(tmp_path, offer, answer):
    assert _chosen(tmp_path, offer, answer) == []


def test_a_pick_taken_back_later_is_not_stored(tmp_path):  # A6
    assert _chosen(tmp_path, RECOMMENDED, "Option A please",
                   "Actually no, undo that, go with option B instead.") == []


@pytest.mark.parametrize(("offer", "answer", "chosen"), [
    (ASKED, "Go with B", "point the dev server"),  # A2: a bare label in a sentence
    (ASKED, "B please", "point the dev server"),
    (ASKED, "the second one", "point the dev server"),
    ("Option 1: Redis, we already run it.\nOption 2: An in-process LRU cache.\nThoughts?", "2",
     "an in-process LRU cache"),  # A11: a bare digit
])
def test_what_is_a_pick(tmp_path, offer, answer, chosen):
    found = _chosen(tmp_path, offer, answer)
    assert len(found) == 1 and f'Chose "{chosen}' in found[0], found


def test_narration_with_could_or_is_no_offer(tmp_path):  # A7
    t = (Transcript(111).user("fix tests")
         .say("All tests pass now. We could also add caching to the API layer. Or we could refactor the logger.")
         .user("Next, the API layer returns 500 on /users, look at caching there.").bash("ls", "a").say("Done."))
    assert not any("The agent laid out" in v for v in _decisions(tmp_path, t).values())


def test_a_pick_with_its_own_decision_keeps_that_decision(tmp_path):  # A8
    t = (Transcript(112).user("I want to test the dashboard against real data. How?").say(RECOMMENDED)
         .user("Option B please, and also rename the config key DB_PATH to DB_URL because the ORM expects a URL.")
         .edit("config/settings.py", "DB_PATH = 'x'\n", "DB_URL = 'x'\n")
         .bash("export APP_DB_PATH=/srv/live/app.db", "")
         .say("Renamed DB_PATH to DB_URL and pointed dev at live."))
    found = _decisions(tmp_path, t)
    descriptions = [v.split("\n")[1] for v in found.values()]
    assert any("DB_URL" in d for d in descriptions), descriptions


@pytest.mark.parametrize(("option", "gist"), [
    ("We copy the db locally.", "copy the db locally"),
    ("Redis.", "Redis"),
    ("`git rebase main` — keeps history linear.", "`git rebase main`"),
    ("Rewrite the authentication middleware so that every request validates the session token "
     "against the database and refreshes it when it is close to expiring.",
     "rewrite the authentication middleware"),
])
def test_an_option_is_quoted_in_a_few_words(option, gist):
    from dualtrace.encoder.backends.offline import _gist

    assert _gist(option) == gist
