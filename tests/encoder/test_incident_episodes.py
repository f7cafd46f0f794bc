"""One debugging episode, told whole (issue 12 items 2 and 4; review 7 F18, F8, F3, F12).

- The commonest real pattern: the user reports a failing test, the agent runs it, states
  the cause and asks how to fix it, the user answers, the agent edits, the same command
  passes. The user's answer is part of the episode (nothing was edited yet): the incident
  is resolved, with the stated cause and the fix's files.
- A cause the agent states only in its closing words, after the passing run ("Fixed. The
  cause was that ..."), is the cause.
- A commit made with combined short flags (`git commit -qam 'msg' && git log --oneline -1`)
  keeps its message and sha; a commit the session names neither way is left out, never an
  empty `Commit:`. Only commits of the fix's own edits are the incident's.
- A recurrence updates the incident in place and keeps its original description.

Written transcripts (Claude Code's shape) beside the real corpus sessions where the
patterns occur."""

from __future__ import annotations

import subprocess
from pathlib import Path

from dualtrace.encoder.backends import work
from dualtrace.encoder.session import commit_events, commit_message
from dualtrace.hooks.transcripts import read_transcript
from dualtrace.memfs.store import MemoryStore
from dualtrace.pipeline import encode_session
from tests.conftest import corpus_path
from tests.encoder.test_offline import claude
from tests.encoder.test_pasted_failures import bash, edit, said, user

FAILING = """F                                                                        [100%]
=================================== FAILURES ===================================
_______________________________ test_refund_total ______________________________

    def test_refund_total():
>       assert refund_total([]) == 0
E       KeyError: 'amount'

test_refunds.py:9: KeyError
=========================== short test summary info ============================
FAILED test_refunds.py::test_refund_total - KeyError: 'amount'
1 failed in 0.04s"""
PASSING = "1 passed in 0.03s"
RUN = "python -m pytest -q test_refunds.py -k refund_total"


def incidents(tmp_path: Path, records: list[dict]):
    encode_session(claude(tmp_path / "s.jsonl", records), memory_dir=tmp_path / "mem", backend="offline")
    return [f for f in MemoryStore(tmp_path / "mem").scan().facts() if f.type == "incident"]


def test_the_users_answer_to_the_diagnosis_keeps_the_episode_resolved(tmp_path):
    (inc,) = incidents(tmp_path, [
        user("test_refund_total fails with a KeyError, can you look?"),
        *bash(1, RUN, f"Exit code 1\n{FAILING}", failed=True),
        said(2, "test_refund_total fails: refund_total reads row['amount'], but refunds store the "
                "value under 'value', so it raises KeyError. Should I rename the key or read both?"),
        user("Read both keys."),
        *edit(3, "refunds.py"),
        *bash(4, RUN, PASSING),
        said(5, "Done: refund_total reads 'amount' or 'value' and the test passes."),
    ])
    assert inc.status == "resolved", inc.body
    assert "Cause (as the agent stated): test_refund_total fails: refund_total reads row['amount']" in inc.body
    assert "Fix: edited `refunds.py`" in inc.body and f"Resolved: `{RUN}` passed afterwards" in inc.body
    assert "KeyError" in inc.description and "can you look" not in inc.description


def test_a_user_who_moves_on_before_any_diagnosis_ends_the_episode(tmp_path):
    # the agent reported the failure and said nothing about its cause or a choice: the
    # user's next request is other work, and a green run after it fixed nothing of this
    found = incidents(tmp_path, [
        user("Run the refund tests."),
        *bash(1, RUN, f"Exit code 1\n{FAILING}", failed=True),
        said(2, "The refund test fails."),
        user("Leave it for now and add a CHANGELOG entry for the 2.1 release."),
        *edit(3, "CHANGELOG.md"),
        *bash(4, RUN, PASSING),
    ])
    assert not any(i.status == "resolved" and "CHANGELOG.md" in i.body for i in found), [i.body for i in found]


def test_a_cause_stated_in_the_closing_words_and_only_the_fix_commit(tmp_path):
    quiet = "git commit -qam 'Read refund values under either key' && git log --oneline -1"
    later = "git commit -qam 'Store refund amounts as integer cents' && git log --oneline -1"
    (inc,) = incidents(tmp_path, [
        user("test_refund_total in test_refunds.py fails, please fix it."),
        *bash(1, "python -m pytest -q test_refunds.py", f"Exit code 1\n{FAILING}", failed=True),
        *edit(2, "refunds.py"),
        *bash(3, "python -m pytest -q test_refunds.py", PASSING),
        *bash(4, quiet, "3f9c2ab Read refund values under either key"),
        said(5, "Fixed. The cause was that refund_total read row['amount'] while refunds store "
                "'value', so test_refund_total raised KeyError. It now reads either key."),
        user("Now store refund amounts as integer cents."),
        *edit(6, "refunds.py"),
        *bash(7, "python -m pytest -q test_refunds.py", PASSING),
        *bash(8, later, "8d41e07 Store refund amounts as integer cents"),
    ])
    assert "Cause (as the agent stated): The cause was that refund_total read row['amount']" in inc.body
    assert "Commit: 3f9c2ab Read refund values under either key" in inc.body
    assert "integer cents" not in inc.body  # the next request's commit is its own work
    assert "Commit:\n" not in inc.body + "\n" and 'commit ""' not in inc.body


def test_commit_messages_from_every_form_of_the_flag():
    forms = {
        "git commit -qam 'Fix the empty cart' && git log --oneline -1": "Fix the empty cart",
        'git commit -am "Fix the empty cart"': "Fix the empty cart",
        "git commit -q -m 'Fix the empty cart'": "Fix the empty cart",
        "git commit -mFix": "Fix",
        "git commit --message='Fix the empty cart'": "Fix the empty cart",
        "git commit --message 'Fix the empty cart'": "Fix the empty cart",
        "git add -A && git -C app commit -S -qm 'Sign it' ; git push": "Sign it",
        'git commit -m "Subject" -m "Body text"': "Subject\n\nBody text",
        "git commit -F msg.txt": "",
        "git commit --amend --no-edit": "",
        "git commit -c HEAD": "",
    }
    assert {c: commit_message(c) for c in forms} == forms


def test_a_quiet_commit_takes_sha_and_message_from_a_real_git_log(tmp_path):
    """The output a real `git commit -qam ... && git log --oneline -1` prints (no
    "[branch sha] msg" line), from a real repository."""
    repo = tmp_path / "repo"
    repo.mkdir()
    env = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@e", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@e", "HOME": str(tmp_path), "PATH": "/usr/bin:/bin"}
    (repo / "billing.py").write_text("x = 1\n")
    for cmd in ("git init -q", "git add billing.py", "git commit -qm init"):
        subprocess.run(cmd, shell=True, cwd=repo, env=env, check=True)
    (repo / "billing.py").write_text("x = 2\n")
    command = "git commit -qam 'Fix ZeroDivisionError in average_price' && git log --oneline -1"
    out = subprocess.run(command, shell=True, cwd=repo, env=env, check=True, capture_output=True,
                         text=True).stdout
    sha = subprocess.run("git rev-parse --short HEAD", shell=True, cwd=repo, env=env, check=True,
                         capture_output=True, text=True).stdout.strip()
    (event,) = commit_events(command, out, None, True)
    assert (event.text, event.detail) == ("Fix ZeroDivisionError in average_price", sha)
    # the message from a file and no log line: nothing names the commit, no event
    assert commit_events("git commit -qF msg.txt", "", None, True) == []
    # the message from a file, the log names it
    (logged,) = commit_events("git commit -qF msg.txt && git log --oneline -1", out, None, True)
    assert (logged.text, logged.detail) == ("Fix ZeroDivisionError in average_price", sha)


def test_the_corpus_commits_keep_their_messages_and_shas():
    # a real Codex rollout's `git commit -m "..."` with git's "[branch sha] msg" line
    s = read_transcript(corpus_path("agentlogs", "codex", "images.jsonl"))
    assert [(e.text, e.detail) for e in s.events if e.kind == "commit"] == [
        ("web: Widen agent usage axis", "4a25878")]
    # every commit of the real Claude Code sessions names its message
    for name in ("258c7280-ae70-4798-800f-63464d01a85d", "ae4a77f8-aedd-4bc1-888f-c94edc91af04"):
        commits = [e for e in read_transcript(corpus_path("claude-code", "spotter", f"{name}.jsonl")).events
                   if e.kind == "commit"]
        assert commits and all(e.text.strip() for e in commits)


def test_real_the_users_question_before_any_edit_does_not_split_the_episode():
    """claude-code-log 37f83ec9: test_combined_link_with_valid_cache fails (event 68), the
    agent explains ("... falling back to the regular generate_html function instead of
    ..."), the user asks "Do we even need _generate_html_with_combined_link then?" before
    anything was edited, the fix follows: one episode from its first failing run."""
    s = read_transcript(corpus_path("claude-code", "claude-code-log", "-Users-dain-workspace-claude-code-log-sample",
                                    "37f83ec9-f2ea-42a9-925e-0d5c105cb6e8.jsonl"))
    arc = next(a for a in work.fix_arcs(s, limit=4) if a.signature.startswith("test_combined_link_with_valid_cache"))
    runs = [i for i, e in enumerate(s.events) if e.kind == "command" and e.failed
            and work.signature_of(e.result or "")[0] == arc.signature]
    asked = next(i for i, e in enumerate(s.events) if e.kind == "user" and "Do we even need" in e.text)
    # the last failing run before the question, nothing edited between it and the question
    before = max(i for i in runs if i < asked)
    assert not any(e.kind == "edit" and not e.is_error for e in s.events[before:asked])
    assert arc.first == before < asked < arc.last
    assert "instead of" in arc.cause and "claude_code_log/renderer.py" in arc.fix_files


def test_real_only_the_fix_commits_are_the_incidents():
    """spotter ae4a77f8: the with_span/3 fix is committed with the hook controllers; the
    later "enable opentelemetry_ash" commit edits one of those files again for other work."""
    s = read_transcript(corpus_path("claude-code", "spotter", "ae4a77f8-aedd-4bc1-888f-c94edc91af04.jsonl"))
    (arc,) = [a for a in work.fix_arcs(s, limit=4) if "with_span" in a.signature]
    assert [c.text.split(" (")[0] for c in arc.commits] == [
        "feat: instrument hook controllers with OTEL trace correlation and error spans"]


def test_a_recurrence_that_confirms_the_cause_is_the_new_summary_in_whole_sentences(tmp_path, monkeypatch):
    monkeypatch.setenv("DUALTRACE_HOME", str(tmp_path / "state"))
    root = Path(__file__).resolve().parents[2] / "examples"
    mem = tmp_path / "mem"
    encode_session(root / "pilot-4-auth-401-session1.jsonl", memory_dir=mem, backend="offline")
    (first,) = [f for f in MemoryStore(mem).scan().facts() if f.type == "incident"]
    encode_session(root / "pilot-4-auth-401-session2.jsonl", memory_dir=mem, backend="offline")
    (again,) = [f for f in MemoryStore(mem).scan().facts() if f.type == "incident"]
    assert again.path == first.path and len(again.sessions) == 2
    # What is known moved on (PROTOCOL.md pilot 4: the confirmed cause is the new summary),
    # so the description is the confirmed one, a whole sentence; the first is kept in the body.
    assert again.status != first.status and again.description != first.description
    assert "user session service" in again.description and "confirmed" in again.description
    assert len(again.description) <= 200 and "\n" not in again.description
    assert "race condition in the token refresh" in again.body  # the first account is kept
    assert "both try to refresh" in again.body and "both try." not in again.body
