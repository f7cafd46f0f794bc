"""One tokenizer and one English stop-word list (dualtrace.words) for matching and recall."""

from __future__ import annotations

from dualtrace import words
from dualtrace.encoder import matching
from dualtrace.memfs import recall


def test_content_words_are_lowercased_in_order_without_stop_words_or_letters():
    assert words.split("Why did we pick SQLite-3? x") == ["why", "did", "we", "pick", "sqlite", "3", "x"]
    assert words.content_words("Why did we pick SQLite over JSON files, x?") == \
        ["pick", "sqlite", "json", "files"]
    assert words.content_words("pick the parser", frozenset({"pick"})) == ["the", "parser"]


def test_matching_and_recall_add_only_their_own_words_to_the_one_list():
    for own, full in ((matching.NO_SUBJECT, matching.STOPWORDS),
                      (recall.QUESTION_WORDS, recall.STOPWORDS)):
        assert full == words.STOPWORDS | own
        assert not own & words.STOPWORDS, "a grammar word restated outside dualtrace.words"


def test_both_jobs_tokenize_the_same_way():
    text = "Why did the FTS5 tokenizer drop the unicode61 option in index.py?"
    assert recall.content_terms(text) == ["fts5", "tokenizer", "drop", "unicode61", "option",
                                          "index", "py"]
    assert matching.tokens(text) == {"fts5", "tokenizer", "drop", "unicode61", "option", "index", "py"}
