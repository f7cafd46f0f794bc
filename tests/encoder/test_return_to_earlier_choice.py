"""A return to an earlier choice revises the current decision (review 8 F15, issue 12
item 3: a decision revised in a later session supersedes the earlier one).

"Let's go back to X after all", "revert Y to X", "forget Y, use X again" used to be heard
as no signal at all, so the stale decision stayed current and was injected at every
session start. Sessions written here in wording of their own.
"""

from __future__ import annotations

import re

import pytest

from dualtrace.encoder.cues import RETURN_TO
from dualtrace.memfs.store import MemoryStore
from tests.conftest import encode_chat

FIRST = ("We'll use the local disk for uploads because the NAS is slow to mount.", "OK, local disk.")
SECOND = ("We're switching uploads from the local disk to S3, because disk space ran out.",
          "Switched the uploads to S3.")


def _current_decisions(mem):
    store = MemoryStore(mem)
    return [f for f in store.scan().facts() if f.type == "decision" and not f.superseded_by]


@pytest.mark.parametrize("back", [
    "Let's go back to the local disk for uploads after all.",
    "Revert the uploads to the local disk, S3 costs too much.",
    "Forget S3, use the local disk again for uploads.",
    "We're going back to the local disk for uploads: S3 latency hurt the thumbnails.",
])
def test_a_return_to_an_earlier_choice_supersedes_the_current_one(back, tmp_path, run_cli):
    for n, (user, reply) in enumerate((FIRST, SECOND, (back, "OK."))):
        mem = encode_chat(run_cli, tmp_path, f"s{n}", ("user", user), ("assistant", reply))
    (current,) = _current_decisions(mem)  # the return, not the stale S3 decision
    assert "local disk" in current.description and "switching" not in current.description
    decisions = [f for f in MemoryStore(mem).scan().facts() if f.type == "decision"]
    (s3,) = [f for f in decisions if f.description.startswith("We're switching uploads")]
    assert current.supersedes == s3.path and s3.superseded_by == current.path
    assert len(decisions) == 3  # history kept: the first and the S3 decision stay, superseded


@pytest.mark.parametrize("said", [
    "Revert the last commit to fix CI.",
    "Run the migration again.",
    "Go back to the previous page and click save.",
    "The deploy went back to normal after the restart.",
])
def test_everyday_sentences_are_not_a_return_to_a_choice(said):
    assert not re.search(RETURN_TO, said, re.I)
