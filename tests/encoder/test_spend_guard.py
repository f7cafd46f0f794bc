"""The spending guard: a daily budget over every model backend, checked before each request."""

from __future__ import annotations

import json
import time

import pytest

from dualtrace import config, queue
from dualtrace.encoder.backends import spend
from dualtrace.errors import DualtraceError
from dualtrace.pipeline import encode_session
from tests.conftest import EXAMPLES
from tests.encoder.test_backend_anthropic import DECISION, run, settings_for
from tests.fake_anthropic import FakeAnthropic, message, tool_use
from tests.hook_helpers import claude_payload, hook_env, run_hook, runs, wait_until  # noqa: F401

EXAMPLE = EXAMPLES / "pilot-5-session-storage.jsonl"


@pytest.fixture
def api():
    with FakeAnthropic() as server:
        yield server


def test_reported_usage_lands_in_todays_ledger(api, tmp_path):
    usage, _builder, _ = run(api, tmp_path, [
        message(tool_use("store_memory", DECISION)),
        message(tool_use("finish", {"summary": "ok"})),
    ])
    today = spend.spent()
    assert set(today) == {"anthropic"}
    entry = today["anthropic"]
    assert entry["requests"] == 2
    assert entry["input_tokens"] == usage.input_tokens and entry["output_tokens"] == usage.output_tokens
    assert entry["cost_usd"] == pytest.approx(usage.cost_usd, abs=1e-6)
    assert spend.totals()[0] == pytest.approx(usage.cost_usd, abs=1e-6)


def test_over_budget_no_request_is_sent_and_the_session_is_encoded_offline(api, tmp_path):
    spend.record("anthropic", input_tokens=1000, cost_usd=1.25)  # earlier today
    settings = settings_for(api, backend="anthropic")
    report = encode_session(EXAMPLE, memory_dir=tmp_path / "mem", backend="anthropic",
                            settings=settings)
    assert api.message_requests() == []
    assert report.backend == "offline" and report.commit
    assert any("daily model budget reached ($1.25 of $1.00 today)" in n for n in report.notes)


def test_budget_reached_mid_run_keeps_accepted_operations(api, tmp_path):
    # Each fake reply costs more than a tenth of a cent: the second request is never sent.
    settings = settings_for(api, daily_budget_usd=0.0001)
    usage, builder, _ = run(api, tmp_path, [
        message(tool_use("store_memory", DECISION)),
        message(tool_use("finish", {})),
    ], settings=settings)
    assert len(api.message_requests()) == 1
    assert "decisions/session-storage-postgres.md" in builder.pending
    assert any("daily budget reached after turn 1" in n for n in usage.notes)


def test_token_budget_counts_too(api, tmp_path):
    spend.record("claude", input_tokens=600, output_tokens=500, cost_usd=0.0)
    with pytest.raises(spend.BudgetExceeded, match="1,100 of 1,000 tokens"):
        spend.check(config.Settings(daily_budget_tokens=1000), "anthropic")
    spend.check(config.Settings(daily_budget_tokens=0, daily_budget_usd=0), "anthropic")  # off


def test_a_project_file_can_lower_the_budget_but_not_raise_it(tmp_path, state_dir):
    (state_dir / "config.toml").write_text("daily_budget_usd = 2.0\n")
    project = tmp_path / "proj"
    project.mkdir()
    (project / "dualtrace.toml").write_text("daily_budget_usd = 500.0\ndaily_budget_tokens = 0\n")
    got = config.load_settings(project)
    assert got.daily_budget_usd == 2.0 and got.daily_budget_tokens == 1_000_000
    (project / "dualtrace.toml").write_text("daily_budget_usd = 0.25\n")
    assert config.load_settings(project).daily_budget_usd == 0.25
    (project / "dualtrace.toml").write_text('over_budget = "spend-anyway"\n')
    with pytest.raises(DualtraceError, match="over_budget must be"):
        config.load_settings(project)


def test_status_shows_todays_spend_per_backend(run_cli, tmp_path):
    spend.record("anthropic", input_tokens=12000, output_tokens=800, cost_usd=0.0421)
    spend.record("anthropic", input_tokens=3000, output_tokens=200, cost_usd=0.01)
    spend.record("claude", input_tokens=5000, output_tokens=700, cost_usd=0.0123)
    result = run_cli("status", "--memory-dir", str(tmp_path / "mem"))
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    head = next(x for x in lines if x.startswith("spend today:"))
    assert head == ("spend today: $0.0644, 21,700 tokens (budget $1.00 and 1,000,000 tokens "
                    "a day; over it: offline)")
    assert "  anthropic   $0.0521  2 request(s), 16,000 tokens" in lines
    assert "  claude      $0.0123  1 request(s), 5,700 tokens" in lines


def test_wait_keeps_the_job_queued_until_midnight(hook_env, state_dir, tmp_path):  # noqa: F811
    (state_dir / "config.toml").write_text(
        'backend = "anthropic"\napi_key = "sk-ant-test-dummy"\nbase_url = "http://127.0.0.1:9"\n'
        'over_budget = "wait"\n')
    spend.record("anthropic", cost_usd=3.0, state=str(state_dir))
    transcript = tmp_path / "s.jsonl"
    transcript.write_text(EXAMPLE.read_text())
    end = claude_payload("SessionEnd", "budget-1", transcript, str(tmp_path), reason="other")
    assert run_hook("session-end", end, env=hook_env).returncode == 0
    record = wait_until(lambda: runs(state_dir), what="a run record")[0]
    assert record["error"] is None and record["skipped"].startswith("waiting for the daily budget")
    wait_until(lambda: queue.list_jobs(str(state_dir))
               and queue.list_jobs(str(state_dir))[0]["status"] == queue.PENDING, what="pending")
    (job,) = queue.list_jobs(str(state_dir))
    assert job["attempts"] in (0, None) and job["not_before"] == spend.next_midnight()
    assert job["not_before"] > time.time()
    assert not (tmp_path / "memory" / "decisions").exists()
    ledger = json.loads((state_dir / "spend.json").read_text())
    assert list(ledger[spend.today()]) == ["anthropic"]  # nothing was added
