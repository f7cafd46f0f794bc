"""An incident's description is one clean sentence built from the failure signature (the
check, the error and its message, the failing test) and the cause the agent stated, never
raw tool output (issue 12 item 5).

A failing check's output often holds dumped values: Elixir structs (``%Plug.Conn{...}``),
maps, JSON bodies, reprs, stack frames. A dump that happens to contain the word "error"
is not the failure, and no backend's description or update sentence may be one.

Real transcript from ../shared/corpus (skipped when absent) and sessions written here."""

from __future__ import annotations

from pathlib import Path

import pytest

from dualtrace.encoder.backends import work
from dualtrace.encoder.cues import is_dump
from dualtrace.encoder.plan import clean_description, new_sentences, readable_description
from dualtrace.memfs.store import MemoryStore
from dualtrace.pipeline import encode_session
from tests.conftest import corpus_path
from tests.encoder.test_offline import claude
from tests.encoder.test_pasted_failures import bash, edit, said, user


def _incidents(memdir: Path):
    return [f for f in MemoryStore(memdir).scan().facts() if f.type == "incident"]


def test_a_failure_seen_through_tail_is_described_by_its_signature_not_the_dump_real(tmp_path, monkeypatch):
    # spotter ae4a77f8: `mix test --seed 0 2>&1 | tail -30` shows "297 tests, 11 failures"
    # and, cut off by tail, the argument dump of a FunctionClauseError: a %Plug.Conn{...}
    # whose resp_body holds the word "error". Fixed later in the session (a macro).
    monkeypatch.setenv("DUALTRACE_HOME", str(tmp_path / "state"))
    path = corpus_path("claude-code", "spotter", "ae4a77f8-aedd-4bc1-888f-c94edc91af04.jsonl")
    encode_session(path, memory_dir=tmp_path / "mem", backend="offline")
    (fact,) = [f for f in _incidents(tmp_path / "mem") if "with_span" in f.description]
    assert fact.status == "resolved"
    assert clean_description(fact.description) and not is_dump(fact.description), fact.description
    assert "SpotterWeb.OtelTraceHelpers.with_span/3" in fact.description
    assert "hooks_controller_test.exs" in fact.description  # the failing test's file
    assert "cause: " in fact.description  # the agent's stated cause
    assert "%Plug.Conn{" not in fact.body and "plug-conn" not in fact.path
    # tail cut the error's name off: the memory names no error the transcript lacks
    assert "FunctionClauseError" not in fact.description + fact.body


TAILED_PYTEST = """\
E       AssertionError: assert {'detail': 'error', 'code': 401} == {'ok': True}
FAILED tests/test_login.py::test_login_returns_ok - AssertionError: assert {'detail': 'error', 'code': 401} == {'ok': True}
1 failed, 12 passed in 0.31s"""

TAILED_NODE = """\
    at Object.<anonymous> (/home/dev/app/src/api.test.js:14:5)
  Received: {"status":"error","body":"<html><body>Bad Gateway</body></html>"}
Tests: 1 failed, 20 passed, 21 total"""


def _fixed(tmp_path: Path, command: str, output: str, cause: str, fixed: str) -> list:
    records = [user("The login check is broken, please fix it."),
               *bash(1, command, output, failed=True),
               said(2, cause),
               *edit(3, fixed),
               *bash(4, command, "all passed"),
               said(5, "Fixed.")]
    encode_session(claude(tmp_path / "s.jsonl", records), memory_dir=tmp_path / "mem", backend="offline")
    return _incidents(tmp_path / "mem")


def test_a_dumped_value_in_the_output_never_becomes_the_description(tmp_path):
    # a Jest run cut by tail: the only line with "error" is a received JSON body with HTML
    (fact,) = _fixed(tmp_path, "npx jest src/api.test.js 2>&1 | tail -3", TAILED_NODE,
                     "The test fails because the proxy URL points at the old gateway.", "src/api.js")
    assert fact.status == "resolved"
    assert clean_description(fact.description), fact.description
    assert '{"status"' not in fact.description and "<html>" not in fact.description
    assert fact.description.endswith("cause: the test fails because the proxy URL points at the old gateway.")


def test_the_description_joins_the_signature_and_the_stated_cause(tmp_path):
    (fact,) = _fixed(tmp_path, "uv run pytest tests/test_login.py 2>&1 | tail -3", TAILED_PYTEST,
                     "I see the problem. The issue is that the session cookie is not sent by the test client.",
                     "app/auth.py")
    # the assertion compares two dict reprs: the signature (test, error type, file) says it
    assert fact.description.startswith(
        "`uv run pytest tests/test_login.py 2>&1 | tail -3` failed: test_login_returns_ok AssertionError;")
    assert fact.description.endswith("; cause: the session cookie is not sent by the test client.")
    assert len(fact.description) <= 200


@pytest.mark.parametrize("text", [
    "Failed: [do: %Plug.Conn{adapter: {Plug.Adapters.Test.Conn, :...}, assigns: %{}}]",
    'resp_body: "{\\"error\\":\\"session_id required\\"}", "content-type" => "application/json"',
    "Request(method='GET', url='http://x', headers={})",
    "at Object.<anonymous> (/home/dev/app/src/api.test.js:14:5)",
    '  File "/home/dev/app/cli.py", line 41, in main',
    "(phoenix 1.8.3) lib/phoenix/router.ex:416: Phoenix.Router.__call__/5",
    "#Function<1.76585640/1 in Plug.Session.fetch_session/1>",
    "<div class=\"error\">Bad Gateway</div>",
])
def test_dump_shapes_are_not_sentences(text):
    assert is_dump(text)
    assert not clean_description(text)


@pytest.mark.parametrize("text", [
    "Use pnpm for every package script, never npm.",
    "`uv run pyright` failed: converter.py:184:17 - error: Type of \"text_value\" is unknown.",
    "The session registry is an ETS table keyed by pane id (since 2026-02).",
    "Timeouts above 30 s return HTTP 504 to the client; cause: the gateway's default idle timeout.",
])
def test_sentences_are_not_dumps(text):
    assert not is_dump(text)


def test_any_backends_dump_description_and_update_are_cleaned():
    # the plan holds every backend to the rule: a dump line is never the description and
    # never an update sentence
    desc = "%Plug.Conn{status: 400, resp_body: \"error\"}\nThe commit-event hook rejects a missing sha list."
    assert readable_description(desc) == "The commit-event hook rejects a missing sha list."
    added = new_sentences("Old text.", 'Then: %{"session_id" => "abc"} failed.\nThe fix is a macro.')
    assert added == "The fix is a macro."


def test_the_signature_of_a_tailed_function_clause_error_names_the_function():
    out = ("     The following arguments were given to MyApp.Helpers.with_span/3:\n"
           "         # 3\n         [do: %Plug.Conn{resp_body: \"{\\\"error\\\":1}\"}]\n"
           "14 doctests, 297 tests, 11 failures\n")
    sig, line = work.signature_of(out)
    assert sig == "with_span/3 no matching clause"
    assert line == "no clause of MyApp.Helpers.with_span/3 matched the arguments it was given"
    head = "** (FunctionClauseError) no function clause matching in MyApp.Helpers.with_span/3\n" + out
    assert work.signature_of(head)[1] == ("FunctionClauseError: no function clause matching in "
                                          "MyApp.Helpers.with_span/3")
