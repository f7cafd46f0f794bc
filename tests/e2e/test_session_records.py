"""Session records (issue 11, write side): format, builder, budget, encode, CLI, backfill."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import git
import pytest

from dualtrace import config
from dualtrace.encoder.records import fit, record_for
from dualtrace.errors import DualtraceError
from dualtrace.hooks.transcripts import read_transcript
from dualtrace.memfs import sessions
from dualtrace.memfs.sessions import Check, Commit, Turn
from tests.conftest import CORPUS, EXAMPLES
from tests.memfs.test_session_format import _record

SID = "0b6f1c2e-7d1a-4b8e-9c55-2f0e8a1d3b44"


def cli(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "dualtrace.cli", *args], capture_output=True,
                          text=True, cwd=cwd)


def encode(memdir: Path, transcript: Path, cwd: Path | None = None) -> dict:
    proc = cli("encode", str(transcript), "--memory-dir", str(memdir), "--backend", "offline",
               "--json", cwd=cwd)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


class Transcript:
    """A Claude Code transcript written line by line (the real reader parses it)."""

    def __init__(self, path: Path, sid: str = SID, day: str = "2026-03-25",
                 cwd: str = "/home/dev/shop") -> None:
        self.path, self.sid, self.day, self.n, self.cwd = path, sid, day, 0, cwd
        self.lines: list[dict] = []

    def add(self, kind: str, content, **extra) -> None:
        self.n += 1
        msg = {"role": kind, "content": content}
        if kind == "assistant":
            msg["id"] = f"m{self.n}"
        self.lines.append({"type": kind, "uuid": f"u{self.sid[:4]}{self.n}", "sessionId": self.sid,
                           "cwd": self.cwd, "gitBranch": "main",
                           "timestamp": f"{self.day}T09:{self.n:02d}:00.000Z", "message": msg,
                           **extra})

    def user(self, text: str) -> None:
        self.add("user", text)

    def say(self, text: str) -> None:
        self.add("assistant", [{"type": "text", "text": text}])

    def bash(self, command: str, output: str, failed: bool = False) -> None:
        self.add("assistant", [{"type": "tool_use", "id": f"t{self.n}", "name": "Bash",
                                "input": {"command": command}}])
        self.add("user", [{"type": "tool_result", "tool_use_id": f"t{self.n - 1}",
                           "content": output, "is_error": failed}])

    def edit(self, path: str) -> None:
        self.add("assistant", [{"type": "tool_use", "id": f"t{self.n}", "name": "Edit",
                                "input": {"file_path": path, "old_string": "a", "new_string": "b"}}])
        self.add("user", [{"type": "tool_result", "tool_use_id": f"t{self.n - 1}",
                           "content": "The file has been updated."}])

    def write(self) -> Path:
        with self.path.open("w") as fh:
            fh.writelines(json.dumps(line) + "\n" for line in self.lines)
        return self.path

    def append_to_file(self, start: int) -> None:
        with self.path.open("a") as fh:
            fh.writelines(json.dumps(line) + "\n" for line in self.lines[start:])


def fix_session(path: Path, sid: str = SID, day: str = "2026-03-25",
                cwd: str = "/home/dev/shop") -> Transcript:
    return add_fix(Transcript(path, sid, day, cwd))


def add_fix(t: Transcript) -> Transcript:
    t.user("<command-name>/fix</command-name>\n<command-args>the flaky auth test</command-args>")
    t.user("We decided to retry the token refresh once because the staging proxy drops the first call.")
    t.bash("pytest -q tests/test_auth.py", "FAILED tests/test_auth.py::test_refresh - "
           "AssertionError: 401 != 200\n1 failed, 11 passed", failed=True)
    t.say("The root cause is that refresh_token is not idempotent.")
    t.edit("/home/dev/shop/src/shop/auth.py")
    t.bash("pytest -q tests/test_auth.py", "12 passed in 0.4s")
    t.bash("git commit -am 'Retry token refresh once'", "[main 9ab12cd] Retry token refresh once")
    t.say("Fixed: refresh_token now retries once. I haven't checked the staging logs yet.")
    return t


# ------------------------------------------------------------------ builder and budget


def test_builder_keeps_words_verbatim_and_states_failures_checks_and_open_ends(tmp_path):
    t = fix_session(tmp_path / "s.jsonl")
    session = read_transcript(t.write())
    record, text = record_for(session, tmp_path, project="shop", memories=())
    assert len(record.turns) == 1
    turn = record.turns[0]
    assert turn.user == ("/fix the flaky auth test\n\nWe decided to retry the token refresh once "
                         "because the staging proxy drops the first call.")
    assert turn.agent == "Fixed: refresh_token now retries once. I haven't checked the staging logs yet."
    assert turn.notes == ("The root cause is that refresh_token is not idempotent.",)
    assert turn.failures[0] == ("09:04 `pytest -q tests/test_auth.py` exited 1: FAILED "
                                "tests/test_auth.py::test_refresh - AssertionError: 401 != 200")
    assert turn.failures[1].startswith("fixed 09:")
    assert "after editing src/shop/auth.py" in turn.failures[1]
    assert record.checks == (Check("pytest -q tests/test_auth.py", 2, 1, "passed"),)
    assert record.commits == (Commit("9ab12cd", "Retry token refresh once"),)
    assert record.files_changed == ("src/shop/auth.py",)
    assert record.description == "/fix the flaky auth test"
    assert record.open_ends == ('agent: "I haven\'t checked the staging logs yet."',)
    assert "> /fix the flaky auth test" in text


def test_a_long_explanation_before_the_turns_last_words_is_kept_whole(tmp_path):
    t = Transcript(tmp_path / "port.jsonl")
    t.user("Port this Python project to Rust.")
    t.edit("/home/dev/shop/src/lib.rs")
    summary = ("The port is complete. Here's a summary:\n\n- **list_utils** - `flatten()` "
               "uses a `NestedItem<T>` enum for values or nested lists\n- **math_utils** - "
               "`factorial()` returns `Result<u64, NegativeInputError>`\n- coverage checked "
               "with `cargo llvm-cov`: 100% of lines")
    t.say(summary)
    t.say("Let me check.")  # short, no decision words: not a note
    t.bash("git commit -am 'Port to Rust'", "[main 1a2b3c4] Port to Rust")
    t.say("The Python project has been fully ported to Rust.")
    session = read_transcript(t.write())
    record, text = record_for(session, tmp_path, project="shop", memories=())
    turn = record.turns[0]
    assert turn.agent == "The Python project has been fully ported to Rust."
    assert turn.notes == (summary,)
    assert "NestedItem<T>" in text and "NegativeInputError" in text
    assert "Let me check." not in text


def test_budget_drops_tool_noise_first_and_keeps_user_words(tmp_path):
    turns = tuple(Turn(i, "2026-03-25", "09:00", user=f"request {i} " + "u" * 300,
                       agent="a" * 2000, notes=("Because " + "n" * 400,),
                       activity="12 commands, 4 edits (" + "x.py, " * 40 + ")") for i in range(1, 9))
    big = _record(turns=turns, open_ends=())
    assert len(sessions.render_body(big).encode()) > 20000
    small = fit(big, 12000)
    assert len(sessions.render_body(small).encode()) <= 12000
    assert all(t.activity is None and not t.notes for t in small.turns)  # noise went first
    assert [t.user for t in small.turns] == [t.user for t in turns]  # every request verbatim
    assert all("chars omitted" in (t.agent or "") for t in small.turns)
    assert small.omitted >= 8 * 3
    loose = fit(big, 100000)
    assert loose == big


def test_record_file_stays_within_the_budget_on_a_long_session(tmp_path):
    t = Transcript(tmp_path / "long.jsonl")
    for i in range(60):
        t.user(f"step {i}: please change module_{i}.py so that it logs JSON")
        t.bash(f"pytest -q tests/test_{i}.py", "E" * 3000, failed=True)
        t.say(f"Done with step {i}. " + "Details. " * 150)
    session = read_transcript(t.write())
    record, text = record_for(session, tmp_path, project="shop", memories=(), budget=12000)
    assert len(text.encode()) <= 12000 + 200
    assert all(f"step {i}: please change module_{i}.py" in text for i in range(60))


# ------------------------------------------------------------------ encode end to end


def test_encode_commits_the_record_with_the_facts_and_links_them(memdir, tmp_path):
    report = encode(memdir, EXAMPLES / "pilot-4-auth-401-session1.jsonl")
    rel = report["record"]
    assert rel == "sessions/2026-03/2026-03-15-40000000.md"
    head = git.Repo(memdir).head.commit
    assert set(head.stats.files) == {rel, "incidents/auth-middleware-401-race.md",
                                     "scenes/incidents/auth-middleware-401-race.md"}
    assert f"Dualtrace-Record: {rel}" in head.message
    fact = (memdir / "incidents/auth-middleware-401-race.md").read_text()
    moment = (memdir / "scenes/incidents/auth-middleware-401-race.md").read_text()
    assert f"records: [{rel}]" in fact and f"records: [{rel}]" in moment
    record = sessions.read_record(memdir, rel)
    assert record.memories == (("incidents/auth-middleware-401-race.md", "stored"),)
    assert record.turns[0].user.startswith("The auth middleware is throwing 401s intermittently")
    # the second session updates the incident: its record is a new file, the fact links both
    report2 = encode(memdir, EXAMPLES / "pilot-4-auth-401-session2.jsonl")
    fact = (memdir / "incidents/auth-middleware-401-race.md").read_text()
    assert f"records: [{rel}, {report2['record']}]" in fact
    assert sessions.read_record(memdir, report2["record"]).memories == (
        ("incidents/auth-middleware-401-race.md", "updated"),)


def test_a_session_encoded_in_parts_updates_its_record_in_place(memdir, tmp_path):
    t = fix_session(tmp_path / "parts.jsonl")
    t.write()
    first = encode(memdir, t.path)
    start = len(t.lines)
    t.user("Now add a changelog entry for the retry.")
    t.edit("/home/dev/shop/CHANGELOG.md")
    t.bash("pytest -q tests/test_auth.py", "1 failed", failed=True)
    t.say("Added the entry; the auth test fails again, still need to look at it.")
    t.append_to_file(start)
    second = encode(memdir, t.path)
    assert second["record"] == first["record"]
    assert len(list((memdir / "sessions").rglob("*.md"))) == 1
    record = sessions.read_record(memdir, SID)
    assert record.parts == 2 and [t.number for t in record.turns] == [1, 2]
    assert record.turns[1].user == "Now add a changelog entry for the retry."
    assert record.checks == (Check("pytest -q tests/test_auth.py", 3, 2, "failed"),)
    assert record.files_changed == ("src/shop/auth.py", "CHANGELOG.md")
    assert record.open_ends[0] == "`pytest -q tests/test_auth.py` failed on its last run (09:26)" or \
        record.open_ends[0].startswith("`pytest -q tests/test_auth.py` failed on its last run")
    # the second part amends the session's own unpushed commit (one commit per session)
    repo = git.Repo(memdir)
    assert len(repo.git.log("--format=%s", "--", record.path).splitlines()) == 1
    assert "(2 turns, part 2)" in repo.head.commit.message
    assert "part 1)" not in repo.head.commit.message


def test_a_session_without_a_real_request_writes_no_record(memdir, tmp_path):
    t = Transcript(tmp_path / "hi.jsonl")
    t.user("hi")
    t.say("Hello! What would you like to work on?")
    t.user("<command-name>/clear</command-name>")
    report = encode(memdir, t.write())
    assert report["record"] is None and not (memdir / "sessions").exists()
    assert report["commit"] is None


def test_a_record_alone_is_committed_when_nothing_is_worth_a_memory(memdir, tmp_path):
    t = Transcript(tmp_path / "plain.jsonl")
    t.user("What does the auth module do?")
    t.say("It checks the bearer token on every request and refreshes it when it expired.")
    report = encode(memdir, t.write())
    assert report["skipped"].startswith("gates:") and not report["operations"]
    assert report["commit"] and report["record"]
    head = git.Repo(memdir).head.commit
    assert head.summary.startswith(f"mem: record {report['record'][:-3]} (1 turn, part 1)")
    assert list(head.stats.files) == [report["record"]]


def test_local_records_stay_out_of_git_and_facts(memdir, tmp_path, state_dir):
    (state_dir / "config.toml").write_text('session_records = "local"\n')
    report = encode(memdir, EXAMPLES / "pilot-4-auth-401-session1.jsonl")
    rel = report["record"]
    assert rel.startswith(".dualtrace/sessions/2026-03/")
    assert (memdir / rel).is_file()
    repo = git.Repo(memdir)
    assert not any(p.startswith((".dualtrace", "sessions")) for p in repo.git.ls_files().split())
    assert "records:" not in (memdir / "incidents/auth-middleware-401-race.md").read_text()
    proc = cli("sessions", "--memory-dir", str(memdir), "--json")
    assert proc.returncode == 0, proc.stderr
    listed = json.loads(proc.stdout)
    assert [(i["path"], i["local"]) for i in listed] == [(rel, True)]


def test_records_off_and_bad_setting(memdir, tmp_path, state_dir):
    (state_dir / "config.toml").write_text('session_records = "off"\n')
    report = encode(memdir, EXAMPLES / "pilot-4-auth-401-session1.jsonl")
    assert report["record"] is None and not (memdir / "sessions").exists()
    (state_dir / "config.toml").write_text('session_records = "always"\n')
    proc = cli("encode", str(EXAMPLES / "pilot-4-auth-401-session1.jsonl"), "--memory-dir",
               str(memdir))
    assert proc.returncode == 1
    assert proc.stderr.strip().splitlines() == [
        "Error: session_records must be one of commit, local, off, not 'always'"]
    with pytest.raises(DualtraceError, match="session_record_budget"):
        config._merge(config.Settings(), {"session_record_budget": 10}, None)


def test_secrets_never_reach_a_record(memdir, tmp_path):
    token = "ghp_R8s2kLq9ZxT4vW1yB6nM3cJ7pD0fH5gA2eUi"
    t = fix_session(tmp_path / "secret.jsonl")
    t.user(f"The deploy token is {token}, use it for the release script.")
    t.bash(f"GITHUB_TOKEN={token} ./release.sh", f"error: bad credentials for {token}", failed=True)
    t.say("The release failed: bad credentials.")
    report = encode(memdir, t.write())
    text = (memdir / report["record"]).read_text()
    assert "[REDACTED:" in text and token not in text
    assert token not in git.Repo(memdir).git.log("-p", "--all")


# ------------------------------------------------------------------ CLI and SessionStart


def test_sessions_and_show_commands(memdir, tmp_path):
    encode(memdir, EXAMPLES / "pilot-4-auth-401-session1.jsonl")
    encode(memdir, fix_session(tmp_path / "fix.jsonl").write())
    proc = cli("sessions", "--memory-dir", str(memdir))
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0].startswith("2026-03-25 09:01  0b6f1c2e  claude-code")
    assert "/fix the flaky auth test" in lines[0]
    assert lines[1].startswith("2026-03-15 10:01  40000000") and "1 stored, 0 updated" in lines[1]
    listed = json.loads(cli("sessions", "--memory-dir", str(memdir), "--json", "-n", "1").stdout)
    assert [i["session"] for i in listed] == [SID]
    assert listed[0]["outcome"] == "1 commit; pytest -q tests/test_auth.py passed; open end"
    shown = cli("show", "0b6f1c2e", "--memory-dir", str(memdir))
    assert shown.returncode == 0 and shown.stdout.startswith(
        "==> sessions/2026-03/2026-03-25-0b6f1c2e.md\n---\ntype: session\n")
    assert cli("show", "auth-middleware-401-race", "--memory-dir", str(memdir)).stdout.startswith(
        "==> incidents/auth-middleware-401-race.md")
    missing = cli("show", "deadbeef", "--memory-dir", str(memdir))
    assert missing.returncode == 1 and missing.stderr.startswith("Error: no session record")


def test_session_start_lists_the_last_three_sessions(memdir, tmp_path):
    from dualtrace.memfs.inject import session_start_context
    from dualtrace.memfs.store import MemoryStore

    project = tmp_path / "shop"  # a real folder: the records' project is its name
    project.mkdir()
    for i in range(4):
        t = fix_session(tmp_path / f"s{i}.jsonl", sid=f"{i}{SID[1:]}", day=f"2026-03-2{i}",
                        cwd=str(project))
        encode(memdir, t.write(), cwd=project)  # the project is where the command runs
    assert {i.project for i in sessions.list_records(memdir)} == {"shop"}
    store = MemoryStore(memdir, project="shop", create=False)
    text = session_start_context(store, config.Settings(), mark_shown=False)
    block = text.split("## Recent sessions in this project", 1)[1].split("\n\n", 1)[0]
    lines = [ln for ln in block.splitlines() if ln.startswith("- ")]
    assert [ln[2:12] for ln in lines] == ["2026-03-23", "2026-03-22", "2026-03-21"]
    assert lines[0] == ("- 2026-03-23 3b6f1c2e: /fix the flaky auth test -> 1 commit; pytest -q "
                        "tests/test_auth.py passed; open end: agent: \"I haven't "
                        "checked the staging logs yet.\"")
    assert len(text) <= config.Settings().session_start_chars


# ------------------------------------------------------------------ backfill on real sessions


def test_backfill_records_for_real_claude_code_log_sessions(tmp_path):
    corpus = CORPUS / "claude-code" / "claude-code-log"
    if not corpus.exists():
        pytest.skip("shared corpus not present")
    memdir = tmp_path / "mem"
    proc = cli("backfill", "--records", "--memory-dir", str(memdir), str(corpus))
    assert proc.returncode == 0, proc.stderr
    assert "9 transcript(s): 9 encoded, 0 skipped, 0 failed" in proc.stdout
    from dualtrace.encoder.redact import Redactor, redact_session

    infos = sessions.list_records(memdir)
    assert len(infos) == 9
    sizes = []
    shell = re.compile(r"<(bash-stdout|bash-stderr)>(.*?)</\1>", re.S)
    for info in infos:
        text = (memdir / info.path).read_text()
        sizes.append(len(text.encode()))
        record = sessions.parse_record(text, info.path)
        transcript = next(corpus.glob(f"*/{info.session}.jsonl"))
        session, _ = redact_session(read_transcript(transcript))
        users = [e.text.strip() for e in session.events
                 if e.kind == "user" and e.agent is None and e.text.strip()]
        kept = "\n".join(t.user or "" for t in record.turns)
        for request in users:  # every request verbatim (shell output pasted by "!" may be cut)
            assert shell.sub("", request) in shell.sub("", kept), (info.path, request[:80])
        assert Redactor().redact(text) == text  # nothing left for the redactor to find
    assert max(sizes) <= 12000
    again = cli("backfill", "--records", "--memory-dir", str(memdir), str(corpus))
    assert "0 encoded, 9 skipped" in again.stdout
    assert len(git.Repo(memdir).git.log("--format=%s").splitlines()) == 10  # init + 9 records


def test_a_record_first_written_at_a_later_part_starts_from_the_beginning(memdir, tmp_path):
    t = Transcript(tmp_path / "late.jsonl")
    t.user("Hello")
    t.say("Hi! What would you like to work on?")
    t.write()
    first = encode(memdir, t.path)
    assert first["skipped"].startswith("gates:") and first["record"] is None
    start = len(t.lines)
    add_fix(t)
    t.append_to_file(start)
    second = encode(memdir, t.path)
    record = sessions.read_record(memdir, second["record"])
    assert [turn.user.splitlines()[0] for turn in record.turns] == [
        "Hello", "/fix the flaky auth test"]
    assert record.parts == 1


def test_encode_force_rewrites_the_record_instead_of_appending(memdir, tmp_path):
    t = fix_session(tmp_path / "again.jsonl")
    first = encode(memdir, t.write())
    proc = cli("encode", str(t.path), "--memory-dir", str(memdir), "--backend", "offline",
               "--json", "--force")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["record"] == first["record"]
    record = sessions.read_record(memdir, SID)
    assert len(record.turns) == 1 and record.parts == 1
