"""The one retry policy: capped exponential backoff, a try limit and a deadline.

Used by the worker (a failed job waits ``base * 2**(n-1)`` seconds, capped, and is
parked after its last try; a sync job never gives up) and by the Anthropic client
(each request, with equal jitter, a server's retry-after, and the encode's
deadline). ``failures`` counts the failed tries so far, from 1. Standard library only
(the floor layer).
"""

from __future__ import annotations

import random
import time
from dataclasses import dataclass

RETRY_AFTER_CAP = 300.0  # a server asking for more than this is not waited for longer


@dataclass(frozen=True)
class Retry:
    base: float
    cap: float
    tries: int | None = None       # all tries, the first included; None = never give up
    jitter: bool = False           # equal jitter: half the wait fixed, half random
    deadline: float | None = None  # time.monotonic() value no wait may reach

    def exhausted(self, failures: int) -> bool:
        """No try is left after ``failures`` failed ones."""
        return self.tries is not None and failures >= self.tries

    def wait(self, failures: int, retry_after: float | None = None) -> float:
        """Seconds to wait after the ``failures``-th failed try.

        A server's retry-after wins (capped, plus up to 10% jitter when jittered);
        otherwise ``base * 2**(failures-1)``, capped at ``cap``.
        """
        if retry_after is not None:
            after = min(retry_after, RETRY_AFTER_CAP)
            return after * (1 + random.uniform(0, 0.1)) if self.jitter else after
        ceiling = min(self.cap, self.base * (2 ** max(failures - 1, 0)))
        return ceiling / 2 + random.uniform(0, ceiling / 2) if self.jitter else ceiling

    def in_time(self, wait: float, now: float | None = None) -> bool:
        """Waiting ``wait`` seconds still leaves time before the deadline."""
        if self.deadline is None:
            return True
        return (time.monotonic() if now is None else now) + wait < self.deadline

    def left(self, now: float | None = None) -> float:
        """Seconds left before the deadline (infinite without one)."""
        if self.deadline is None:
            return float("inf")
        return self.deadline - (time.monotonic() if now is None else now)
