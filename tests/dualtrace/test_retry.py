"""dualtrace.retry: the one retry policy (worker jobs, Anthropic requests, Batch API calls)."""

from __future__ import annotations

import re

from dualtrace import queue
from dualtrace.config import Settings
from dualtrace.encoder.backends.anthropic import AnthropicBackend
from dualtrace.retry import RETRY_AFTER_CAP, Retry
from dualtrace.worker import Worker
from tests.conftest import package_files_spelling


def test_a_failed_job_backs_off_doubling_to_the_cap_and_parks_after_its_tries(state_dir):
    worker = Worker(str(state_dir))
    policy = worker.retry(3)
    base = worker.retry_base
    assert [policy.wait(n) for n in (1, 2, 3)] == [base, 2 * base, 4 * base]
    assert policy.wait(40) == queue.BACKOFF_CAP_SECONDS
    assert [policy.exhausted(n) for n in (1, 2, 3)] == [False, False, True]
    assert not worker.retry(None).exhausted(10_000)  # a sync job never parks


def test_a_request_waits_with_equal_jitter_and_honours_retry_after_up_to_a_cap():
    backend = AnthropicBackend(Settings(retry_base_seconds=1.0, retry_max_seconds=8.0,
                                        api_retries=3))
    policy = backend.retry_policy()
    for failures, ceiling in ((1, 1.0), (2, 2.0), (3, 4.0), (4, 8.0), (9, 8.0)):
        waits = [policy.wait(failures) for _ in range(200)]
        assert all(ceiling / 2 <= w <= ceiling for w in waits)
        assert max(waits) - min(waits) > ceiling / 10  # jittered, not fixed
    assert all(5.0 <= policy.wait(1, 5.0) <= 5.5 for _ in range(50))
    assert policy.wait(1, 10_000.0) <= RETRY_AFTER_CAP * 1.1
    assert [policy.exhausted(n) for n in (3, 4)] == [False, True]  # 1 try + 3 retries
    assert 0.5 <= backend.backoff(0, None) <= 1.0  # the Batch API calls' wait: same policy


def test_no_wait_may_reach_the_deadline():
    policy = Retry(base=1.0, cap=10.0, deadline=100.0)
    assert policy.in_time(4.0, now=95.0) and not policy.in_time(5.0, now=95.0)
    assert policy.left(now=97.5) == 2.5 and policy.left(now=101.0) < 0
    assert Retry(base=1.0, cap=10.0).left() == float("inf")


def test_backoff_arithmetic_is_written_once():
    doubling = re.compile(r"\*\s*\(?2\s*\*\*")
    assert package_files_spelling(doubling) == ["dualtrace/retry.py"]
