"""dualtrace backfill: discovery, live (resumable), dry-run estimates, Message Batches."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from dualtrace import cursors
from dualtrace.backfill import (
    discover,
    run_batch,
    run_dry,
    run_live,
    state_file,
)
from dualtrace.config import Settings
from dualtrace.errors import DualtraceError
from tests.conftest import EXAMPLES
from tests.encoder.test_backend_anthropic import LOGGING_DECISION
from tests.fake_anthropic import FakeAnthropic, error, message, text, tool_use

NAMES = ["pilot-5-session-storage.jsonl", "pilot-1b-structured-logging.jsonl",
         "pilot-4-auth-401-session1.jsonl", "noise-only.jsonl"]


@pytest.fixture
def api():
    with FakeAnthropic() as server:
        yield server


@pytest.fixture
def transcripts(tmp_path) -> list[Path]:
    folder = tmp_path / "transcripts"
    folder.mkdir()
    out = []
    for name in NAMES:
        shutil.copy(EXAMPLES / name, folder / name)
        out.append(folder / name)
    return out


def settings_for(api: FakeAnthropic, **kw) -> Settings:
    return Settings(api_key="sk-ant-test-dummy", base_url=api.url, timeout_seconds=30.0,
                    retry_base_seconds=0.01, retry_max_seconds=0.02, **kw)


def user_text(body: dict) -> str:
    return body["messages"][0]["content"][0]["text"]


def live_responder(body: dict) -> dict:
    """A scripted model: store the logging decision, fail on the auth session, else finish."""
    if body["messages"][-1]["content"][0].get("type") == "tool_result":
        return message(tool_use("finish", {}))
    if "Datadog" in user_text(body):
        return message(tool_use("store_memory", LOGGING_DECISION))
    if "401" in user_text(body):
        return error(500, "internal error")
    return message(tool_use("finish", {}))


def git_subjects(mem: Path) -> list[str]:
    if not (mem / ".git").exists():
        return []
    out = subprocess.run(["git", "log", "--format=%s"], cwd=mem, capture_output=True, text=True)
    return [s for s in out.stdout.splitlines() if not s.startswith("mem: init")]


def test_discover_default_project_sessions_oldest_first(tmp_path, monkeypatch):
    project = tmp_path / "work" / "shop-api"
    project.mkdir(parents=True)
    claude_dir = Path(os.environ["HOME"]) / ".claude" / "projects" / str(project).replace("/", "-").replace("_", "-")
    (claude_dir / "s-old" / "subagents").mkdir(parents=True)
    newer = claude_dir / "s-new.jsonl"
    older = claude_dir / "s-old.jsonl"
    newer.write_text(json.dumps({"type": "user", "timestamp": "2026-05-02T00:00:00Z"}) + "\n")
    older.write_text(json.dumps({"type": "user", "timestamp": "2026-01-02T00:00:00Z"}) + "\n")
    (claude_dir / "s-old" / "subagents" / "agent-a.jsonl").write_text("{}\n")
    codex_home = tmp_path / "codex"
    monkeypatch.setenv("CODEX_HOME", str(codex_home))
    day = codex_home / "sessions" / "2026" / "03" / "01"
    day.mkdir(parents=True)
    mine = day / "rollout-2026-03-01T00-00-00-aaaa.jsonl"
    mine.write_text(json.dumps({"timestamp": "2026-03-01T00:00:00Z", "type": "session_meta",
                                "payload": {"id": "aaaa", "cwd": str(project / "src")}}) + "\n")
    (day / "rollout-2026-03-01T00-00-00-bbbb.jsonl").write_text(json.dumps(
        {"timestamp": "2026-02-01T00:00:00Z", "type": "session_meta",
         "payload": {"id": "bbbb", "cwd": str(tmp_path / "elsewhere")}}) + "\n")
    assert discover((), project) == [older, mine, newer]


def test_discover_explicit_paths_and_missing(tmp_path, transcripts):
    found = discover([transcripts[0].parent])
    assert [p.name for p in found] == ["pilot-1b-structured-logging.jsonl",
                                       "pilot-4-auth-401-session1.jsonl",
                                       "pilot-5-session-storage.jsonl", "noise-only.jsonl"]
    with pytest.raises(DualtraceError, match="no such transcript"):
        discover([tmp_path / "nope.jsonl"])


def test_live_backfill_resumable_with_per_transcript_failure(api, tmp_path, transcripts):
    mem = tmp_path / "mem"
    api.default = live_responder
    paths = discover(transcripts)
    summary = run_live(paths, mem, settings_for(api), "anthropic")
    by_name = {Path(i.path).name: i for i in summary.items}
    assert by_name["pilot-1b-structured-logging.jsonl"].status == "encoded"
    assert by_name["pilot-1b-structured-logging.jsonl"].stored == 1
    assert by_name["pilot-4-auth-401-session1.jsonl"].status == "failed"
    assert "500" in by_name["pilot-4-auth-401-session1.jsonl"].note
    # noise-only skips the model (gates) but holds real requests: its record is committed
    assert by_name["noise-only.jsonl"].status == "encoded"
    assert by_name["noise-only.jsonl"].stored == 0
    assert (mem / "decisions/structured-logging-json.md").is_file()
    table = summary.table()
    # pilot-5's model call stored nothing, but it passed the noise gate: its session
    # record alone is committed, so it counts as encoded (stored 0).
    assert by_name["pilot-5-session-storage.jsonl"].status == "encoded"
    assert by_name["pilot-5-session-storage.jsonl"].stored == 0
    assert len(list((mem / "sessions").rglob("*.md"))) == 3
    assert "4 transcript(s): 3 encoded" in table and "1 failed" in table
    failed = transcripts[2]
    assert (cursors.load(failed).offset or 0) == 0  # not advanced: retried next run
    # second run: nothing is re-encoded; the failed one is retried and now succeeds
    api.default = lambda body: message(tool_use("finish", {}))
    before = len(api.message_requests())
    summary2 = run_live(paths, mem, settings_for(api), "anthropic")
    assert [i.status for i in summary2.items if i.status == "failed"] == []
    assert len(api.message_requests()) - before == 1  # only the previously failed session
    # the first run's three commits, plus the retried session's record (nothing re-encoded)
    subjects = git_subjects(mem)
    assert len(subjects) == 4 and sum(s.startswith("mem: record sessions/") for s in subjects) == 3


def test_dry_run_estimates_without_sending_or_writing(api, tmp_path, transcripts):
    from dualtrace.encoder.backends import BACKENDS

    mem = tmp_path / "mem"
    registered = dict(BACKENDS)
    settings = settings_for(api)
    summary = run_dry(discover(transcripts), mem, settings)
    # The capture backend is handed to the pipeline: no global registry entry, and
    # nothing smuggled through Settings.extra.
    assert BACKENDS == registered and settings.extra == {}
    estimated = [i for i in summary.items if i.status == "estimated"]
    assert len(estimated) == 3 and all(i.prompt_tokens > 1000 for i in estimated)
    assert all(0 < i.cost_usd < 0.5 for i in estimated)
    assert api.requests == [] and git_subjects(mem) == []
    assert all((cursors.load(p).offset or 0) == 0 for p in transcripts)
    cheaper = run_dry(discover(transcripts), mem, settings_for(api, model="claude-haiku-4-5"),
                      batch=True)
    assert cheaper.cost_usd < summary.cost_usd / 2
    assert "(estimate)" in summary.table()


def batch_responder(cid: str, params: dict) -> dict:
    user = user_text(params)
    if "Redis" in user:
        return {"type": "errored", "error": {"type": "error", "error": {
            "type": "overloaded_error", "message": "Overloaded"}}}
    if "Datadog" in user:
        return {"type": "succeeded", "message": message(
            tool_use("store_memory", LOGGING_DECISION), tool_use("finish", {}))}
    # no finish: the tool loop continues live from this reply
    return {"type": "succeeded", "message": message(
        text("Nothing durable beyond the incident."),
        tool_use("skip", {"reason": "covered elsewhere"}))}


def test_batch_submit_poll_partial_failure_and_continuation(api, tmp_path, transcripts):
    mem = tmp_path / "mem"
    api.batch_polls = 2
    api.batch_responder = batch_responder
    api.default = lambda body: message(tool_use("finish", {}))
    slept: list[float] = []
    summary = run_batch(discover(transcripts), mem, settings_for(api), poll_interval=0.0,
                        sleep=slept.append)
    creates = [r for r in api.requests if r.method == "POST" and r.path == "/v1/messages/batches"]
    assert len(creates) == 1
    sent = creates[0].body["requests"]
    assert len(sent) == 3  # noise-only was dropped by the gates before submission
    assert all(r["params"]["system"][0]["cache_control"] for r in sent)
    assert "single response" in sent[0]["params"]["system"][0]["text"]  # batch-mode prompt
    polls = [r for r in api.requests if r.method == "GET" and r.path.count("/") == 4]
    assert len(polls) >= 3  # in_progress twice, then ended
    by_name = {Path(i.path).name: i for i in summary.items}
    assert by_name["pilot-1b-structured-logging.jsonl"].status == "encoded"
    assert by_name["pilot-5-session-storage.jsonl"].status == "failed"
    assert "errored" in by_name["pilot-5-session-storage.jsonl"].note
    assert (mem / "decisions/structured-logging-json.md").is_file()
    # only the item without finish continued live, with exactly the batch prompt
    live = api.message_requests()
    assert len(live) == 1 and "401" in user_text(live[0])
    assert live[0]["messages"][1]["role"] == "assistant"
    assert live[0]["messages"][2]["content"][0]["type"] == "tool_result"
    assert (cursors.load(transcripts[0]).offset or 0) == 0  # failed item: retried next run
    assert not state_file(mem).exists()
    # next run resubmits only the failed session
    api.batch_responder = lambda cid, params: {"type": "succeeded", "message": message(
        tool_use("finish", {}))}
    run_batch(discover(transcripts), mem, settings_for(api), poll_interval=0.0, sleep=slept.append)
    creates = [r for r in api.requests if r.method == "POST" and r.path == "/v1/messages/batches"]
    assert len(creates) == 2 and len(creates[1].body["requests"]) == 1
    assert "Redis" in user_text(creates[1].body["requests"][0]["params"])


def _interrupted_batch(api, mem: Path, transcripts: list[Path]) -> dict:
    """Submit a batch that is still running when the run gives up; its saved state."""
    api.batch_polls = 10**6
    api.batch_responder = batch_responder
    api.default = lambda body: message(tool_use("finish", {}))
    with pytest.raises(DualtraceError, match="still in_progress.*resume"):
        run_batch(discover(transcripts), mem, settings_for(api), poll_interval=0.05,
                  max_wait=0.12, sleep=lambda s: None)
    return json.loads(state_file(mem).read_text())


def test_batch_resume_after_interruption(api, tmp_path, transcripts):
    mem = tmp_path / "mem"
    saved = _interrupted_batch(api, mem, transcripts)
    assert saved["batch_id"] and len(saved["items"]) == 3
    assert git_subjects(mem) == []
    # the batch finishes while we are away; the next run polls it instead of resubmitting
    for batch in api.batches.values():
        batch["polls_left"] = 0
    summary = run_batch(discover(transcripts), mem, settings_for(api), poll_interval=0.0,
                        sleep=lambda s: None)
    creates = [r for r in api.requests if r.method == "POST" and r.path == "/v1/messages/batches"]
    assert len(creates) == 1 and summary.batch_id == saved["batch_id"]
    assert summary.count("encoded") == 2 and summary.count("failed") == 1  # one record-only
    assert (mem / "decisions/structured-logging-json.md").is_file()


def test_batch_submit_retries_then_cli_reports(api, tmp_path, transcripts):
    """429 on submit is retried; the CLI prints a summary table and exits 1 on failures."""
    mem = tmp_path / "mem"
    api.enqueue(error(429, "slow down", {"retry-after": "0"}))  # consumed by the create call
    api.batch_polls = 0
    api.batch_responder = batch_responder
    api.default = lambda body: message(tool_use("finish", {}))
    from dualtrace import config

    (config.state_dir() / "config.toml").write_text(
        f'base_url = "{api.url}"\n[extra]\nretry_base_seconds = 0.01\n')
    env = dict(os.environ, ANTHROPIC_API_KEY="sk-ant-test-dummy")
    proc = subprocess.run([sys.executable, "-m", "dualtrace.cli", "backfill", "--batch",
                           "--poll-interval", "0", "--memory-dir", str(mem),
                           str(transcripts[0].parent)], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1, proc.stderr  # one errored item
    assert "submitted batch msgbatch_" in proc.stderr
    assert "4 transcript(s): 2 encoded" in proc.stdout and "1 failed" in proc.stdout
    creates = [r for r in api.requests if r.method == "POST" and r.path == "/v1/messages/batches"]
    assert len(creates) == 2  # the 429 and its retry


def test_cli_dry_run(tmp_path, transcripts):
    env = dict(os.environ)
    proc = subprocess.run([sys.executable, "-m", "dualtrace.cli", "backfill", "--dry-run",
                           "--cheap", "--memory-dir", str(tmp_path / "mem"),
                           str(transcripts[0].parent)], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "estimated" in proc.stdout and "(estimate)" in proc.stdout
    assert "claude-haiku" in proc.stdout and "nothing sent" in proc.stdout


def _finish_everything(api: FakeAnthropic) -> None:
    api.batch_polls = 0
    api.batch_responder = lambda cid, params: {"type": "succeeded", "message": message(
        tool_use("finish", {}))}
    api.default = lambda body: message(tool_use("finish", {}))


def _submitted(api: FakeAnthropic) -> list[dict]:
    creates = [r for r in api.requests if r.method == "POST" and r.path == "/v1/messages/batches"]
    return [req for c in creates for req in c.body["requests"]]


def test_batch_submits_only_what_todays_budget_covers_rest_offline(api, tmp_path, transcripts):
    """Each of the three model-worthy examples is estimated at ~$0.029 for its whole run
    (batch price for turn 1): a $0.07 budget covers two; the third is encoded offline."""
    mem = tmp_path / "mem"
    _finish_everything(api)
    echoed: list[str] = []
    summary = run_batch(discover(transcripts), mem, settings_for(api, daily_budget_usd=0.07),
                        poll_interval=0.0, sleep=lambda s: None, echo=echoed.append)
    assert len(_submitted(api)) == 2
    assert any(line.startswith("daily model budget ($0.07;") and "2 of 3 session(s) fit"
               in line and "1 over budget" in line for line in echoed), echoed
    offline = [i for i in summary.items if "over today's model budget: encoded offline" in i.note]
    assert len(offline) == 1 and offline[0].status in ("encoded", "nothing")
    # the offline one's cursor moved (it is done); its commit names the offline backend
    assert (cursors.load(Path(offline[0].path), str(mem.resolve())).offset or 0) > 0
    log = subprocess.run(["git", "-C", str(mem), "log", "--format=%B"], capture_output=True,
                         text=True, check=True).stdout
    assert "Dualtrace-Backend: offline" in log


def test_batch_over_budget_wait_leaves_sessions_for_later(api, tmp_path, transcripts):
    from dualtrace.encoder.backends import spend

    mem = tmp_path / "mem"
    _finish_everything(api)
    spend.record("anthropic", input_tokens=1000, cost_usd=0.99)  # $0.01 left of $1.00
    summary = run_batch(discover(transcripts), mem, settings_for(api, over_budget="wait"),
                        poll_interval=0.0, sleep=lambda s: None)
    assert _submitted(api) == []  # nothing fits: no batch at all
    waiting = [i for i in summary.items if "not submitted (over_budget = wait)" in i.note]
    assert len(waiting) == 3 and all(i.status == "skipped" for i in waiting)
    assert all((cursors.load(Path(i.path), str(mem.resolve())).offset or 0) == 0 for i in waiting)
    assert not state_file(mem).exists()
    assert git_subjects(mem) == []
    # the next day's run (a fresh ledger) submits all three
    (Path(os.environ["DUALTRACE_HOME"]) / spend.LEDGER).unlink()
    run_batch(discover(transcripts), mem, settings_for(api, over_budget="wait"),
              poll_interval=0.0, sleep=lambda s: None)
    assert len(_submitted(api)) == 3


def test_batch_token_budget_is_checked_too(api, tmp_path, transcripts):
    mem = tmp_path / "mem"
    _finish_everything(api)
    # ~12k estimated tokens per session: 30k covers two
    run_batch(discover(transcripts), mem, settings_for(api, daily_budget_tokens=30_000,
                                                      over_budget="wait"),
              poll_interval=0.0, sleep=lambda s: None)
    assert len(_submitted(api)) == 2


def test_batch_resume_skips_a_session_encoded_meanwhile_and_reports_a_lost_result(
        api, tmp_path, transcripts):
    """The two ends of applying a batch: a session another run encoded since submission is
    not encoded twice, and an item the API returned no result for is a failure (retried by
    the next run, as its cursor did not move)."""
    mem = tmp_path / "mem"
    saved = _interrupted_batch(api, mem, transcripts)
    by_name = {Path(it["path"]).name: cid for cid, it in saved["items"].items()}
    logging = transcripts[1]
    assert logging.name in by_name and len(by_name) == 3
    # meanwhile: the logging session is encoded offline, and the auth result gets lost
    live = run_live([logging], mem, settings_for(api), "offline")
    assert live.count("encoded") == 1
    offset = cursors.load(logging, str(mem.resolve())).offset
    (batch,) = api.batches.values()
    del batch["results"][by_name["pilot-4-auth-401-session1.jsonl"]]
    batch["polls_left"] = 0
    summary = run_batch(discover(transcripts), mem, settings_for(api), poll_interval=0.0,
                        sleep=lambda s: None)
    items = {Path(i.path).name: i for i in summary.items}
    assert items[logging.name].status == "skipped"
    assert items[logging.name].note == "encoded by another run since submission"
    assert items["pilot-4-auth-401-session1.jsonl"].status == "failed"
    assert items["pilot-4-auth-401-session1.jsonl"].note == "no result returned for this item"
    assert items["pilot-5-session-storage.jsonl"].status == "failed"  # errored in the batch
    assert cursors.load(logging, str(mem.resolve())).offset == offset  # not encoded twice
    assert not (mem / "decisions/structured-logging-json.md").is_file()  # the batch's answer
    assert not state_file(mem).exists()


def test_table_says_a_note_every_row_shares_once_and_cuts_at_a_word():
    """New-user review 5: every row's note column was the same "the session ran in
    /Users/dain/workspace/claude-code-log, wh", cut mid-word."""
    from dualtrace.backfill import Item, Summary

    away = ("the session ran in /Users/dain/workspace/claude-code-log, which is not on this "
            "machine: its preferences stay in this memory, not in your own")
    summary = Summary([Item("a.jsonl", "aaaa", "encoded", 1, 0, note=away),
                       Item("b.jsonl", "bbbb", "encoded", 0, 1,
                            note=away + "; over today's model budget: encoded offline"),
                       Item("c.jsonl", "cccc", "skipped", note=away + "; " + "x " * 40)])
    table = summary.table()
    assert table.count(away) == 1 and table.splitlines()[-1] == f"every session: {away}"
    rows = table.splitlines()[1:4]
    assert rows[0].rstrip().endswith("0.0000")  # nothing of its own to say
    assert rows[1].endswith("over today's model budget: encoded offline")
    assert rows[2].endswith("x…") and len(rows[2].split("0.0000  ")[1]) <= 60
    # One transcript: its note is its own, in the column.
    single = Summary([Item("a.jsonl", "aaaa", "encoded", note="short note")]).table()
    assert single.splitlines()[1].endswith("short note") and "every session" not in single


def test_a_backfill_that_finds_nothing_says_where_it_looked(tmp_path, monkeypatch):
    """Review 10: `dualtrace backfill` in a project with no sessions said only "No
    transcripts to backfill." Now it names each host's folder (the one a person would check)."""
    project = tmp_path / "work" / "shop_api"
    project.mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(project)], check=True)
    monkeypatch.setenv("CODEX_HOME", str(tmp_path / "codex"))
    env = {**os.environ, "DUALTRACE_HOME": str(tmp_path / "state")}
    proc = subprocess.run([sys.executable, "-m", "dualtrace", "backfill", "--memory-dir",
                           str(tmp_path / "mem")], cwd=project, env=env, capture_output=True,
                          text=True)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0] == f"No transcripts to backfill for {project}. Looked in:", proc.stdout
    claude = Path(os.environ["HOME"]) / ".claude" / "projects" / "-".join(
        str(project).replace("_", "-").split("/"))
    assert f"  claude-code: {claude}/*.jsonl" in lines, proc.stdout
    assert any(ln.startswith(f"  codex: {tmp_path / 'codex' / 'sessions'}/") and
               ln.endswith(f"whose cwd is {project}") for ln in lines), proc.stdout
    assert any(ln.startswith("  letta: ") for ln in lines), proc.stdout
    empty = tmp_path / "empty"
    empty.mkdir()
    proc = subprocess.run([sys.executable, "-m", "dualtrace", "backfill", str(empty),
                           "--memory-dir", str(tmp_path / "mem")], cwd=project, env=env,
                          capture_output=True, text=True)
    assert proc.returncode == 0 and proc.stdout.startswith(
        f"No transcripts to backfill in {empty} (a folder is searched for *.jsonl"), proc.stdout
    assert not (tmp_path / "mem").exists()
