"""The spending guard: a daily token and dollar budget over every model backend.

A memory plugin must never quietly burn money. Before each model request a backend
calls ``check``; after it, ``record`` adds the usage the API (or ``claude -p``)
reported to today's ledger. Over budget, ``check`` raises ``BudgetExceeded`` and the
pipeline does what ``over_budget`` says: ``"offline"`` (default) encodes the session
with the offline encoder, ``"wait"`` leaves the job queued until the budget resets
at local midnight.

Defaults: $1.00 and 1,000,000 tokens a day (all backends together), on unless set to
0. A project's ``dualtrace.toml`` can lower these, never raise them (config.py).

The ledger is ``<state>/spend.json``: ``{day: {backend: {requests, input_tokens,
output_tokens, cache_read_tokens, cache_write_tokens, cost_usd}}}`` for the last 31
days, updated under a file lock with an atomic replace; ``dualtrace status`` prints
today's line per backend.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import time
from typing import Any

from dualtrace.atomic import write_json
from dualtrace.errors import BackendError

LEDGER = "spend.json"
KEEP_DAYS = 31
FIELDS = ("requests", "input_tokens", "output_tokens", "cache_read_tokens",
          "cache_write_tokens", "cost_usd")
ACTIONS = ("offline", "wait")


class BudgetExceeded(BackendError):
    """Today's budget is spent; ``resume_at`` is when it resets (epoch seconds)."""

    def __init__(self, message: str, resume_at: float) -> None:
        super().__init__(message)
        self.resume_at = resume_at


def _state() -> str:
    from dualtrace.paths import state_dir

    return str(state_dir())


def today() -> str:
    return _dt.date.today().isoformat()


def next_midnight(now: float | None = None) -> float:
    moment = _dt.datetime.fromtimestamp(time.time() if now is None else now)
    tomorrow = (moment + _dt.timedelta(days=1)).replace(hour=0, minute=0, second=0,
                                                        microsecond=0)
    return tomorrow.timestamp()


def _path(state: str | None) -> str:
    return os.path.join(state or _state(), LEDGER)


def _read(path: str) -> dict[str, Any]:
    try:
        with open(path, encoding="utf-8") as fh:
            data = json.load(fh)
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def spent(day: str | None = None, state: str | None = None) -> dict[str, dict[str, float]]:
    """backend -> totals for ``day`` (default today)."""
    got = _read(_path(state)).get(day or today())
    return {k: dict(v) for k, v in got.items() if isinstance(v, dict)} if isinstance(
        got, dict) else {}


def totals(day: str | None = None, state: str | None = None) -> tuple[float, int]:
    """(dollars, tokens) spent on ``day`` over every backend."""
    cost, tokens = 0.0, 0
    for entry in spent(day, state).values():
        cost += float(entry.get("cost_usd") or 0)
        tokens += sum(int(entry.get(k) or 0) for k in FIELDS[1:5])
    return round(cost, 6), int(tokens)


def record(backend: str, *, input_tokens: int = 0, output_tokens: int = 0,
           cache_read_tokens: int = 0, cache_write_tokens: int = 0, cost_usd: float = 0.0,
           requests: int = 1, state: str | None = None) -> None:
    """Add one request's reported usage to today's ledger (never raises)."""
    from filelock import FileLock, Timeout

    path = _path(state)
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with FileLock(path + ".lock", timeout=10):
            data = _read(path)
            day = data.setdefault(today(), {})
            entry = day.setdefault(backend, dict.fromkeys(FIELDS, 0))
            for key, value in (("requests", requests), ("input_tokens", input_tokens),
                               ("output_tokens", output_tokens),
                               ("cache_read_tokens", cache_read_tokens),
                               ("cache_write_tokens", cache_write_tokens)):
                entry[key] = int(entry.get(key) or 0) + int(value or 0)
            entry["cost_usd"] = round(float(entry.get("cost_usd") or 0) + float(cost_usd or 0), 6)
            for old in sorted(data)[:-KEEP_DAYS]:
                del data[old]
            write_json(path, data, fsync=False, indent=1, sort_keys=True, ensure_ascii=True)
    except (OSError, Timeout, ValueError):
        return  # the ledger is an account, not a reason to lose an encode


def record_usage(backend: str, usage: Any, state: str | None = None) -> None:
    """``record`` from a backend ``Usage`` (the whole run at once)."""
    record(backend, input_tokens=usage.input_tokens, output_tokens=usage.output_tokens,
           cache_read_tokens=usage.cache_read_tokens, cache_write_tokens=usage.cache_write_tokens,
           cost_usd=usage.cost_usd, requests=max(1, usage.requests), state=state)


def limits(settings: Any) -> tuple[float, int]:
    return float(settings.daily_budget_usd or 0), int(settings.daily_budget_tokens or 0)


def remaining_usd(settings: Any, state: str | None = None) -> float | None:
    """Dollars left today (None when no dollar budget is set)."""
    usd, _tokens = limits(settings)
    if usd <= 0:
        return None
    return max(usd - totals(state=state)[0], 0.0)


def check(settings: Any, backend: str, state: str | None = None) -> None:
    """Raise ``BudgetExceeded`` when today's spend has reached either budget."""
    usd, tokens = limits(settings)
    if usd <= 0 and tokens <= 0:
        return
    cost, used = totals(state=state)
    over = []
    if usd > 0 and cost >= usd:
        over.append(f"${cost:.2f} of ${usd:.2f}")
    if tokens > 0 and used >= tokens:
        over.append(f"{used:,} of {tokens:,} tokens")
    if over:
        raise BudgetExceeded(
            f"daily model budget reached ({', '.join(over)} today); {backend} request not "
            "sent (raise daily_budget_usd / daily_budget_tokens in config, or wait for "
            "midnight)", next_midnight())


def action(settings: Any) -> str:
    value = str(settings.over_budget or "offline").lower()
    return value if value in ACTIONS else "offline"
