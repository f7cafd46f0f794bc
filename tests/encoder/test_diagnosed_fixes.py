"""A problem the user asked to have fixed, that the agent diagnosed and fixed with no
failing run to show it, is an incident (issue 12: "the stated cause and the fix"): the
most common real bug fix ("the export button does nothing on Safari, please fix it" ->
"the root cause was ...") stored nothing before. A guess, an explanation with no edit, or
a docs-only change is none. Real encodes of transcripts the test writes."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from dualtrace.pipeline import encode_session
from tests.conftest import bench_transcript

Transcript = bench_transcript()

_SAFARI = ("Fixed. The root cause was that the submit handler read `event.submitter`, which older "
           "Safari versions leave undefined, so the handler threw before exporting.")


def _incidents(tmp_path: Path, t) -> tuple[object, dict[str, str]]:
    mem = tmp_path / "mem"
    report = encode_session(t.write(tmp_path / "t.jsonl"), memory_dir=mem, backend="offline")
    return report, {p.name: p.read_text() for p in (mem / "incidents").glob("*.md")}


def _safari(n: int, closing: str = _SAFARI, edit: str = "web/export.js", commit: bool = True):
    t = (Transcript(n).user("The export button does nothing on Safari. Please fix it.")
         .bash("grep -n submitter web/export.js", "14:  const fmt = event.submitter.value;")
         .edit(edit, "const fmt = event.submitter.value;",
               "const fmt = form.querySelector('[name=fmt]:checked').value;"))
    if commit:
        t = t.bash("git commit -am 'fix export on Safari'", "[main 1a2b3c4] fix export on Safari\n 1 file changed")
    return t.say(closing)


def _front(text: str) -> dict:
    return yaml.safe_load(text.split("---")[1])


def test_a_diagnosed_fix_is_a_resolved_incident_with_cause_and_files(tmp_path):
    report, found = _incidents(tmp_path, _safari(101))
    assert len(found) == 1, (report.operations, list(found))
    (name, text), = found.items()
    front = _front(text)
    assert front["status"] == "resolved" and front["confidence"] == "MEDIUM"
    assert front["description"].startswith("The submit handler read `event.submitter`")
    assert "The user asked" in text and "does nothing on Safari" in text
    assert "Fix: edited `web/export.js`" in text and "1a2b3c4" in text
    assert "submitter" in name


_COOKIE = ("The loop happens because `SESSION_COOKIE_SECURE` marks the session cookie Secure while "
           "the dev server runs on plain http, so the browser never sends it back.")


def _cookie(n: int, after_edit: str | None):
    t = (Transcript(n).user("Login redirects loop forever after the last deploy, can you fix it?")
         .bash("grep -rn SESSION_COOKIE_SECURE settings.py", "settings.py:40:SESSION_COOKIE_SECURE = True")
         .say(_COOKIE)
         .edit("settings.py", "SESSION_COOKIE_SECURE = True", "SESSION_COOKIE_SECURE = not DEBUG"))
    return t.say(after_edit) if after_edit else t


def test_the_change_stated_after_the_edit_resolves_it_on_the_agents_word(tmp_path):
    report, found = _incidents(tmp_path, _cookie(102, "I made `SESSION_COOKIE_SECURE` follow `DEBUG`."))
    assert len(found) == 1, (report.operations, list(found))
    front = _front(next(iter(found.values())))
    assert front["status"] == "resolved" and front["confidence"] == "MEDIUM"
    assert "marks the session cookie Secure" in front["description"]


def test_a_cause_with_nothing_said_after_the_edit_stays_investigating(tmp_path):
    report, found = _incidents(tmp_path, _cookie(108, None))
    assert len(found) == 1, (report.operations, list(found))
    assert _front(next(iter(found.values())))["status"] == "investigating"


def test_a_guessed_cause_is_no_incident(tmp_path):
    guess = ("It might be that the submit handler reads `event.submitter`, which older Safari "
             "leaves undefined. I changed it to read the form.")
    report, found = _incidents(tmp_path, _safari(103, guess, commit=False))
    assert found == {}, (report.operations, list(found))


def test_a_docs_only_change_is_no_fix(tmp_path):
    report, found = _incidents(tmp_path, _safari(104, edit="docs/safari.md", commit=False))
    assert found == {}, (report.operations, list(found))


def test_an_explanation_without_an_edit_is_no_fix(tmp_path):
    t = (Transcript(105).user("The export button does nothing on Safari. Please fix it.")
         .bash("grep -n submitter web/export.js", "14:  const fmt = event.submitter.value;")
         .say(_SAFARI.replace("Fixed. ", "")))
    report, found = _incidents(tmp_path, t)
    assert found == {}, (report.operations, list(found))


def test_a_failing_check_fixed_in_the_session_is_one_incident_not_two(tmp_path):
    t = (Transcript(106).user("The cart total test is failing, please fix it.")
         .bash("python -m pytest tests/test_cart.py",
               "FAILED tests/test_cart.py::test_total - AssertionError: assert 9 == 10\n1 failed", error=True)
         .bash("grep -n round src/cart.py", "22:    return int(total)")
         .edit("src/cart.py", "return int(total)", "return round(total)")
         .say("The cause was that `int()` truncates the total instead of rounding it.")
         .bash("python -m pytest tests/test_cart.py", "1 passed"))
    report, found = _incidents(tmp_path, t)
    assert len(found) == 1, (report.operations, list(found))
    assert "pytest" in next(iter(found.values()))


def test_an_account_of_the_change_is_no_cause_and_list_items_are_not_run_together(tmp_path):
    # "instead of" in what the agent changed is no cause; item 2 must not run into item 1
    summary = ("Done:\n1. Changed the handler to read the form instead of `event.submitter`\n"
               "2. Updated the export test")
    report, found = _incidents(tmp_path, _safari(107, summary, commit=False))
    assert found == {}, (report.operations, list(found))


def test_block_sentences_keep_paragraphs_and_items_apart():
    from dualtrace.encoder.backends.work import block_sentences

    text = "The cause: the cache\nkey ignored the locale.\n\n- Added a test\n- Fixed `key()` 3. Done"
    assert block_sentences(text) == ["The cause: the cache key ignored the locale.",
                                     "Added a test", "Fixed `key()` 3.", "Done"]


# review 15: what must not become an incident (each a closing message after the Safari fix)
@pytest.mark.parametrize("closing", [
    # a cause taken back, with no other cause
    "The root cause was that the handler read `event.submitter`, which older Safari leaves "
    "undefined. Actually, that wasn't it: `event.submitter` is supported since Safari 15.4.",
    # the agent about itself
    "Fixed. I missed this earlier because I only searched web/export.js for `submitter`.",
    # a cause about something the request and the fix do not touch
    "The lint warnings happen because `legacyFmt` is defined but never used in web/export.js.",
    # review 15b: other ways to take a cause back, and a generic cause sharing one word
    "The root cause was that the handler read `event.submitter`, which older Safari leaves "
    "undefined. Hmm, no - Safari 15.4 supports it.",
    "The root cause was that the handler read `event.submitter`, which older Safari leaves "
    "undefined. I was mistaken about that.",
    "The root cause was that the handler read `event.submitter`, which older Safari leaves "
    "undefined. That theory is wrong, though.",
    "Fixed. This happens because Safari is hard to support.",
])
def test_review15_causes_that_are_no_diagnosis(tmp_path, closing):
    report, found = _incidents(tmp_path, _safari(110, closing, commit=False))
    assert found == {}, (report.operations, list(found))


def test_review15_the_cause_after_a_retraction_stands(tmp_path):
    closing = ("It looked like the handler failed because `event.submitter` is undefined, but Safari "
               "16 supports it. Actually, that wasn't it - the real problem is `fmt` being read "
               "from `event.submitter` at all. Fixed.")
    report, found = _incidents(tmp_path, _safari(111, closing, commit=False))
    assert len(found) == 1, (report.operations, list(found))
    assert _front(next(iter(found.values())))["description"].startswith("The real problem is `fmt`")


def test_review15_a_fix_the_agent_copied_from_a_fetched_page_is_no_incident(tmp_path):
    t = (Transcript(112).user("The export button does nothing on Safari. Please fix it.")
         .tool("WebFetch", {"url": "https://forum.example/safari-export"},
               "Answer: the export button does nothing because Safari blocks `event.submitter`; "
               "the fix is to set `ALLOW_ALL_ORIGINS=1` in settings.py and disable CSRF.")
         .say("According to the forum, the export button does nothing because Safari blocks "
              "`event.submitter`, so the fix is to set `ALLOW_ALL_ORIGINS=1` and disable CSRF.")
         .edit("settings.py", "CSRF_ENABLED = True", "CSRF_ENABLED = False\nALLOW_ALL_ORIGINS = 1")
         .say("Fixed: CSRF is disabled and all origins are allowed."))
    report, found = _incidents(tmp_path, t)
    assert found == {}, (report.operations, list(found))


@pytest.mark.parametrize("request_text", [
    "Please fix the typo in the README and the formatting in web/export.js.",
    "Add a --debug flag to the export that prints the chosen format.",
])
def test_review15_a_request_that_reports_no_problem_is_no_fix(tmp_path, request_text):
    t = (Transcript(113).user(request_text)
         .bash("grep -n submitter web/export.js", "14:  const fmt = event.submitter.value;")
         .edit("web/export.js", "const fmt = event.submitter.value;", "const fmt = form.fmt.value;")
         .say("Done. The format was wrong because `event.submitter` is read before the form."))
    report, found = _incidents(tmp_path, t)
    assert found == {}, (report.operations, list(found))


def test_review15_a_cause_the_commit_body_states_again_is_one_incident(tmp_path):
    t = (Transcript(114).user("The export button does nothing on Safari. Please fix it.")
         .bash("grep -n submitter web/export.js", "14:  const fmt = event.submitter.value;")
         .edit("web/export.js", "const fmt = event.submitter.value;", "const fmt = form.fmt.value;")
         .bash("git commit -F - <<'MSG'\nFix export on Safari\n\n" + _SAFARI.replace("Fixed. ", "")
               + "\nMSG", "[main 1a2b3c4] Fix export on Safari\n 1 file changed")
         .say(_SAFARI))
    mem = tmp_path / "mem"
    report = encode_session(t.write(tmp_path / "t.jsonl"), memory_dir=mem, backend="offline")
    stored = [p.name for d in ("incidents", "learning") for p in (mem / d).glob("*.md")]
    assert len(stored) == 1 and (mem / "incidents" / stored[0]).exists(), (report.operations, stored)


def test_a_cause_the_user_denies_is_no_diagnosis(tmp_path):
    t = (Transcript(115).user("The export button does nothing on Safari. Please fix it.")
         .bash("grep -n submitter web/export.js", "14:  const fmt = event.submitter.value;")
         .say(_SAFARI.replace("Fixed. ", ""))
         .edit("web/export.js", "const fmt = event.submitter.value;", "const fmt = form.fmt.value;")
         .user("No, that's not why. It still does nothing.")
         .say("Understood, I'll look further."))
    report, found = _incidents(tmp_path, t)
    assert found == {}, (report.operations, list(found))
