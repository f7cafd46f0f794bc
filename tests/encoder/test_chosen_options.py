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
    chose = [v for v in found.values() if "rather than" in v]
    assert len(chose) == 1, (answer, found)
    text = chose[0]
    assert ("description: Chose to copy the database so you can change it freely rather than "
            "point the dev server at the live database directly.") in text
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
    chose = [v for v in found.values() if "rather than" in v]
    assert len(chose) == 1, found
    assert ("Chose to open an issue suggesting the repo add a CLAUDE.md rather than remember this "
            "for ourselves and move on to the timeline bug.") in chose[0]


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
    assert not any("rather than" in v for v in found.values()), (answer, found)


@pytest.mark.parametrize(("text", "labels"), [
    (OFFER, ["a", "b"]),
    ("Two approaches:\n1. **Approach 1**: retry in the client\n2. **Approach 2**: queue on the server", ["1", "2"]),
    ("We could cache the tokens. Or we could refresh them on every call.", ["1", "2"]),
    ("Option A is what the README describes.", []),  # one option named is no choice
    ("I could look at the logs. Then I'll fix the parser.", []),
])
def test_which_messages_lay_out_options(text, labels):
    assert [lab for lab, _t in offered_options(text)] == labels
