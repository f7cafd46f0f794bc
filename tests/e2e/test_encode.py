"""Acceptance tests for the encoder (docs/PROTOCOL.md §12), through the real CLI."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import git
import pytest

from dualtrace.memfs.store import MemoryStore
from tests.conftest import EXAMPLES


def encode(memdir: Path, name: str, *extra: str) -> dict:
    path = name if Path(name).is_absolute() else str(EXAMPLES / name)
    proc = subprocess.run(
        [sys.executable, "-m", "dualtrace.cli", "encode", path, "--memory-dir", str(memdir),
         "--backend", "offline", "--json", *extra],
        capture_output=True, text=True,
    )
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def commits(memdir: Path) -> list[git.Commit]:
    return [c for c in git.Repo(memdir).iter_commits() if not c.summary.startswith("mem: init")]


def dual_trace_files(memdir: Path) -> list[str]:
    return sorted(p.relative_to(memdir).as_posix() for folder in
                  ("decisions", "incidents", "patterns", "learning", "scenes")
                  for p in (memdir / folder).rglob("*.md") if (memdir / folder).exists())


def test_pilot_1a_preference_is_only_a_bullet(memdir):
    report = encode(memdir, "pilot-1a-preference.jsonl")
    assert [op["tier"] for op in report["operations"]] == ["SKIP"]
    assert report["operations"][0]["evidence"] <= 4
    assert dual_trace_files(memdir) == []
    human = (memdir / "system" / "human.md").read_text()
    assert "- I like to keep my functions under 30 lines." in human
    front = human.split("---")[1].strip().splitlines()
    assert [line.split(":")[0] for line in front] == ["description"]


def test_pilot_1b_full_decision_with_moment(memdir):
    report = encode(memdir, "pilot-1b-structured-logging.jsonl")
    (op,) = report["operations"]
    assert op["tier"] == "FULL" and op["evidence"] >= 8 and op["action"] == "store"
    path = op["path"]
    assert path.startswith("decisions/")
    anchor = Path(path).stem
    assert {"json", "structured", "logging"} <= set(anchor.split("-"))
    store = MemoryStore(memdir)
    fact = store.read_fact(path)
    assert "Datadog" in fact.body and "log shipper" in fact.body
    assert fact.linked_scene == f"scenes/decisions/{anchor}.md"
    moment = store.read_moment(fact.linked_scene)
    session_text = (EXAMPLES / "pilot-1b-structured-logging.jsonl").read_text()
    assert "src/shop/logging_config.py" in moment.narrative and "src/shop/logging_config.py" in session_text
    assert len(moment.timeline) == 1
    marker = re.search(r"\[([^\]]+)\]$", moment.timeline[0]).group(1)
    assert marker in ("commit 4e1f2ab", "2026-03-12")
    assert (commits(memdir)[0].summary
            == f"mem: store decisions/{anchor} (decision, evidence:{op['evidence']})")


def test_pilot_4_incident_updated_in_place(memdir):
    first = encode(memdir, "pilot-4-auth-401-session1.jsonl")
    (op1,) = first["operations"]
    assert op1["tier"] == "FULL" and op1["confidence"] == "MEDIUM" and op1["evidence"] >= 8
    second = encode(memdir, "pilot-4-auth-401-session2.jsonl")
    (op2,) = second["operations"]
    assert op2["action"] == "update" and op2["path"] == op1["path"]
    assert sorted(p.name for p in (memdir / "incidents").iterdir()) == [Path(op1["path"]).name]
    store = MemoryStore(memdir)
    fact = store.read_fact(op1["path"])
    assert fact.confidence == "HIGH"
    assert "user session service" in fact.description and "confirmed" in fact.description
    assert "race condition in the token refresh" in fact.body  # earlier content kept
    moment = store.read_moment(fact.linked_scene)
    assert len(moment.timeline) == 2
    assert moment.timeline[0].endswith("[2026-03-15]") and moment.timeline[1].endswith("[2026-03-18]")
    history = commits(memdir)
    assert len(history) == 2
    assert history[0].summary.startswith(f"mem: update {op1['path'][:-3]} (")


def test_pilot_5_session_storage_decision(memdir):
    report = encode(memdir, "pilot-5-session-storage.jsonl")
    (op,) = report["operations"]
    assert op["tier"] == "FULL" and op["evidence"] >= 10
    assert {"redis", "postgres"} <= set(Path(op["path"]).stem.split("-"))
    fact = MemoryStore(memdir).read_fact(op["path"])
    assert "worst of both worlds" in fact.body


class Recording:
    """A backend that records being constructed and fails if asked to encode."""

    name = "recording"
    calls: list = []

    def __init__(self, settings):
        Recording.calls.append(settings)

    def encode(self, request, builder):  # pragma: no cover - must not be reached
        raise AssertionError("backend called on a noise-only session")


def test_noise_only_session_skips_backend_and_commits_only_its_record(memdir, monkeypatch):
    from dualtrace.encoder import backends
    from dualtrace.pipeline import encode_session

    Recording.calls.clear()
    monkeypatch.setitem(backends.BACKENDS, "recording", f"{__name__}:Recording")
    report = encode_session(EXAMPLES / "noise-only.jsonl", memory_dir=memdir, backend="recording")
    assert report.skipped.startswith("gates:") and not report.operations
    assert Recording.calls == []
    # the user's requests (a rename) are kept in the session record, and nothing else
    assert report.record and report.commit
    assert [list(c.stats.files) for c in commits(memdir)] == [[report.record]]
    assert dual_trace_files(memdir) == []


def test_same_transcript_twice_is_one_commit(memdir):
    encode(memdir, "pilot-1b-structured-logging.jsonl")
    again = encode(memdir, "pilot-1b-structured-logging.jsonl")
    assert again["skipped"].startswith("nothing new")
    assert len(commits(memdir)) == 1


def test_appended_transcript_encodes_only_the_new_part(memdir, tmp_path):
    transcript = tmp_path / "grow.jsonl"
    shutil.copy(EXAMPLES / "pilot-4-auth-401-session1.jsonl", transcript)
    first = encode(memdir, str(transcript))
    assert len(first["operations"]) == 1
    lines = (EXAMPLES / "pilot-5-session-storage.jsonl").read_text().splitlines(keepends=True)
    with transcript.open("a") as fh:
        fh.writelines(lines)
    second = encode(memdir, str(transcript))
    assert second["cursor"][0] == first["cursor"][1]
    assert [op["path"].split("/")[0] for op in second["operations"]] == ["decisions"]
    assert len(commits(memdir)) == 2


def test_dry_run_writes_nothing(memdir):
    proc = subprocess.run(
        [sys.executable, "-m", "dualtrace.cli", "encode", str(EXAMPLES / "pilot-1b-structured-logging.jsonl"),
         "--memory-dir", str(memdir), "--backend", "offline", "--dry-run"],
        capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert "+++ b/decisions/json-structured-logging.md" in proc.stdout
    assert "+[MOMENT:json-structured-logging]" in proc.stdout
    assert "dry run: nothing written" in proc.stdout
    assert not memdir.exists()  # not even the directory or its git repo
    # a dry run does not consume the transcript either
    assert encode(memdir, "pilot-1b-structured-logging.jsonl")["commit"]


def test_human_output_lists_operations_and_commit(memdir):
    proc = subprocess.run(
        [sys.executable, "-m", "dualtrace.cli", "encode", str(EXAMPLES / "pilot-5-session-storage.jsonl"),
         "--memory-dir", str(memdir), "--backend", "offline"], capture_output=True, text=True)
    assert proc.returncode == 0
    first = proc.stdout.splitlines()[1]
    assert re.match(r"FULL\s+d/s/r/l=\d/\d/\d/\d\s+\(\d+\)\s+store\s+decisions/\S+\.md\s+HIGH", first)
    assert "commit " in proc.stdout and "dualtrace log" in proc.stdout


@pytest.mark.parametrize("content,message", [
    (None, "Error: "),
    ("", "Error: "),
    ("not json at all\n", "Error: "),
])
def test_bad_transcripts_are_one_line_errors(tmp_path, memdir, content, message):
    path = tmp_path / "t.jsonl"
    if content is not None:
        path.write_text(content)
    proc = subprocess.run([sys.executable, "-m", "dualtrace.cli", "encode", str(path),
                           "--memory-dir", str(memdir)], capture_output=True, text=True)
    assert proc.returncode == 1
    assert proc.stderr.startswith(message) and len(proc.stderr.strip().splitlines()) == 1
    assert "Traceback" not in proc.stderr


def test_session_in_memory_dir_is_never_encoded(tmp_path):
    memdir = tmp_path / "mem"
    memdir.mkdir()
    line = json.dumps({"type": "user", "uuid": "u1", "sessionId": "s-in-mem", "cwd": str(memdir),
                       "timestamp": "2026-03-01T10:00:00Z",
                       "message": {"role": "user", "content": "We decided to use Postgres because of backups."}})
    path = tmp_path / "t.jsonl"
    path.write_text(line + "\n")
    report = encode(memdir, str(path))
    assert "memory directory itself" in report["skipped"]
    assert not (memdir / "decisions").exists()


def test_same_transcript_into_a_new_memory_dir_is_encoded_again(tmp_path):
    first = encode(tmp_path / "one", "pilot-5-session-storage.jsonl")
    second = encode(tmp_path / "two", "pilot-5-session-storage.jsonl")
    assert first["commit"] and second["commit"]


def test_commit_without_saved_cursor_is_not_encoded_twice(memdir, state_dir):
    """A worker killed between the commit and the cursor save must not duplicate work."""
    first = encode(memdir, "pilot-4-auth-401-session1.jsonl")
    assert first["commit"]
    for cursor_file in (state_dir / "cursors").glob("*.json"):
        cursor_file.unlink()  # as if the process died right after committing
    again = encode(memdir, "pilot-4-auth-401-session1.jsonl")
    assert again["skipped"].startswith("already committed")
    assert len(commits(memdir)) == 1
    assert "Dualtrace-Range: " in commits(memdir)[0].message
    assert encode(memdir, "pilot-4-auth-401-session1.jsonl")["skipped"].startswith("nothing new")


def test_plain_chat_session_id_is_the_file_name(memdir, tmp_path):
    path = tmp_path / "design-review-42.jsonl"
    path.write_text(json.dumps({"role": "user", "content": "We decided to use Postgres for the "
                                "audit log because we need transactions with the orders table."}) + "\n")
    report = encode(memdir, str(path))
    assert report["session_id"] == "design-review-42"
    assert "Dualtrace-Session: design-review-42" in commits(memdir)[0].message


def test_failed_commit_leaves_no_written_files(memdir):
    # A detached HEAD makes the commit fail after the files were written: they must be
    # taken back, or the retry (after `git switch main`) records them as "update".
    encode(memdir, "pilot-1b-structured-logging.jsonl")
    repo = git.Repo(memdir)
    repo.git.checkout("--detach", "HEAD~1")
    proc = subprocess.run(
        [sys.executable, "-m", "dualtrace.cli", "encode", str(EXAMPLES / "pilot-5-session-storage.jsonl"),
         "--memory-dir", str(memdir), "--backend", "offline"], capture_output=True, text=True)
    assert proc.returncode == 1
    assert proc.stderr.strip().splitlines()[0].startswith("Error: the memory repository")
    assert repo.git.status("--porcelain") == ""
    repo.git.switch("main")
    again = encode(memdir, "pilot-5-session-storage.jsonl")
    assert [op["action"] for op in again["operations"]] == ["store"]
    assert commits(memdir)[0].summary.startswith("mem: store decisions/")


def test_failed_commit_restores_an_updated_file(memdir):
    encode(memdir, "pilot-4-auth-401-session1.jsonl")
    repo = git.Repo(memdir)
    repo.git.checkout("--detach")
    proc = subprocess.run(
        [sys.executable, "-m", "dualtrace.cli", "encode",
         str(EXAMPLES / "pilot-4-auth-401-session2.jsonl"), "--memory-dir", str(memdir),
         "--backend", "offline"], capture_output=True, text=True)
    assert proc.returncode == 1, proc.stdout
    assert repo.git.status("--porcelain") == ""


def test_secrets_reach_no_memory_file_and_no_commit(memdir, tmp_path):
    aws, aws_secret = "AKIAZ7Q3WERTY4ZXCVBN", "q8Jd2LmZ7vRk4XbN1sTc9YwHe5GuPa3FiO6rEyK0"
    gh, pw = "ghp_R8s2kLq9ZxT4vW1yB6nM3cJ7pD0fH5gA2eUi", "Sup3rS3cretPw!x"
    key_line = "MIIEowIBAAKCAQEAv1aXq8Zk3bY7nQ2wLrT5yUe9oP0iHjKlMn4bVcXz6dFgHs2aQw"
    url = f"postgres://app:{pw}@db.internal:5432/shop"
    lines, n = [], 0

    def add(kind, content):
        nonlocal n
        n += 1
        lines.append({"type": kind, "uuid": f"u{n}", "sessionId": "5ec00000-0000-4000-8000-0000000000aa",
                      "cwd": "/home/dev/shop", "gitBranch": "main",
                      "timestamp": f"2026-05-02T10:{n:02d}:00.000Z",
                      "message": {"role": kind, "content": content, **({"id": f"m{n}"} if kind == "assistant" else {})}})

    def bash(command, output, failed=False):
        add("assistant", [{"type": "tool_use", "id": f"t{n}", "name": "Bash", "input": {"command": command}}])
        add("user", [{"type": "tool_result", "tool_use_id": f"t{n - 1}", "content": output, "is_error": failed}])

    add("user", f"We're moving session storage to Postgres instead of Redis, because Redis evictions "
                f"dropped sessions. Use DATABASE_URL={url} and the deploy key {gh}. "
                f"Our AWS key is {aws} with secret {aws_secret}.")
    add("assistant", [{"type": "text", "text": "I'll update src/shop/sessions.py to use Postgres."}])
    bash("cat ~/.ssh/id_rsa", f"-----BEGIN RSA PRIVATE KEY-----\n{key_line}\n-----END RSA PRIVATE KEY-----")
    bash(f"export AWS_SECRET_ACCESS_KEY={aws_secret} && psql {url}",
         f"psql: error: FATAL: password authentication failed ({url})", failed=True)
    bash("pytest -q tests/test_sessions.py", f"FAILED tests/test_sessions.py::test_store - {url} {aws}", True)
    bash("pytest -q tests/test_sessions.py", "5 passed in 0.3s")
    bash(f"git commit -am 'Move sessions to Postgres ({gh})'", f"[main 9ab12cd] Move sessions to Postgres ({gh})")
    add("user", f"From now on always keep the staging password {pw} out of commits.")
    transcript = tmp_path / "secrets.jsonl"
    transcript.write_text("".join(json.dumps(line) + "\n" for line in lines))

    report = encode(memdir, str(transcript))
    assert report["commit"] and report["operations"]
    written = "".join(p.read_text() for p in memdir.rglob("*.md") if ".git" not in p.parts)
    history = git.Repo(memdir).git.log("-p", "--all")
    assert "[REDACTED:" in written  # the secret-bearing sentences were stored, redacted
    for secret in (aws, aws_secret, gh, pw, key_line, "PRIVATE KEY"):
        assert secret not in written and secret not in history, secret
