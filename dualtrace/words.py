"""The one tokenizer and English stop-word list (the encoder's matching, recall).

A word is a run of ASCII letters and digits in lowercased text; one letter is not a
content word. ``STOPWORDS`` holds English function words (articles, pronouns,
auxiliaries, prepositions, the contracted stems "didn", "don", ...) plus the few
verbs that say nothing about a subject ("use", "make", "get"). A job that needs more
adds its own vocabulary to this set (recall: the words of a question put to a memory;
the encoder's subject matching: "new", "old", "done"), so the grammar is spelled once.
Standard library only (the floor layer).
"""

from __future__ import annotations

import re

WORD = re.compile(r"[a-z0-9]+")

STOPWORDS = frozenset("""
a about above after again against all also am an and any are aren as at be because been
before being below between both but by can cannot could couldn did didn do does doesn
doing don down during each else ever few for from further get got had hadn has hasn have
haven having he her here hers herself him himself his how i if in into is isn it its
itself just let may me might more most my myself no nor not now of off on once one only
or other ought our ours ourselves out over own per same shall she should shouldn so some
such than that the their theirs them themselves then there these they this those through
to too under until up us use used using very via was wasn we were weren what when where
which while who whom why will with won would wouldn you your yours yourself yourselves
make made
""".split())


def split(text: str) -> list[str]:
    """Every word of ``text``, lowercased, in order."""
    return WORD.findall(text.lower())


def content_words(text: str, stopwords: frozenset[str] = STOPWORDS) -> list[str]:
    """The words of ``text`` that are not stop words or single characters, in order."""
    return [w for w in WORD.findall(text.lower()) if len(w) > 1 and w not in stopwords]


# The words of an instruction to act that name no subject. A prompt made only of these
# ("run the tests", "continue", "commit and push") asks nothing a memory could answer,
# and any memory that mentions a test would win it: issue 11 item 4 says never inject for
# generic prompts. Recall by hand (`dualtrace recall`) is not filtered. Here, not in
# memfs/inject, so the prompt hook can apply it before it imports recall.
ACTION_ONLY = frozenset("""
run rerun test tests testing check checks fix fixes failing fails failed broken continue
go ahead keep going proceed start stop resume commit push pull merge rebase build lint
format deploy retry try again please thanks thank ok okay yes yeah sure next finish done
everything
""".split()) | frozenset("""
hey hi hello claude codex assistant help like look looking think thoughts opinion something
anything stuff thing things error errors issue issues problem problems update updates edit
""".split())  # what a developer says to the agent around a request (review 8 F7): "Hey
# Claude, what do you think?", "I'd like your help with something", "please have a look";
# fact bodies that quote such a request would win every one of them.


def names_a_subject(prompt: str) -> bool:
    """Whether ``prompt`` has a content word beyond an instruction to act."""
    return any(w not in ACTION_ONLY for w in content_words(prompt))
