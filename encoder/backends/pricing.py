"""Token estimates and cost for Anthropic models (no SDK import).

Prices are the public list prices in USD per million tokens. Prompt caching: a
5-minute cache write costs 1.25x the input price, a cache read 0.1x. The Message
Batches API halves every price. Unknown models are priced like the Sonnet class
(the most common choice) and flagged as estimated by the caller.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Price:
    input: float  # USD per million input tokens
    output: float  # USD per million output tokens

    @property
    def cache_write(self) -> float:
        return self.input * 1.25

    @property
    def cache_read(self) -> float:
        return self.input * 0.10


# Longest prefix wins: "claude-sonnet-4-5-20250929" matches "claude-sonnet-4".
PRICES: dict[str, Price] = {
    "claude-opus-4-5": Price(5.0, 25.0),
    "claude-opus-4-6": Price(5.0, 25.0),
    "claude-opus-4": Price(15.0, 75.0),
    "claude-sonnet-4": Price(3.0, 15.0),
    "claude-3-7-sonnet": Price(3.0, 15.0),
    "claude-haiku-4": Price(1.0, 5.0),
    "claude-3-5-haiku": Price(0.8, 4.0),
    "claude-3-haiku": Price(0.25, 1.25),
}
DEFAULT_PRICE = PRICES["claude-sonnet-4"]
BATCH_DISCOUNT = 0.5


def price_for(model: str | None) -> Price:
    name = (model or "").lower()
    best = ""
    for prefix in PRICES:
        if name.startswith(prefix) and len(prefix) > len(best):
            best = prefix
    if best:
        return PRICES[best]
    for family, prefix in (("opus", "claude-opus-4"), ("haiku", "claude-haiku-4"),
                           ("sonnet", "claude-sonnet-4")):
        if family in name:
            return PRICES[prefix]
    return DEFAULT_PRICE


def cost_usd(model: str | None, *, input_tokens: int = 0, output_tokens: int = 0,
             cache_read_tokens: int = 0, cache_write_tokens: int = 0,
             batch: bool = False) -> float:
    """Estimated cost; ``input_tokens`` excludes cached tokens, as the API reports them."""
    p = price_for(model)
    total = (input_tokens * p.input + output_tokens * p.output
             + cache_read_tokens * p.cache_read + cache_write_tokens * p.cache_write) / 1e6
    return round(total * (BATCH_DISCOUNT if batch else 1.0), 6)


CHARS_PER_TOKEN = 4


def estimate_tokens(text: str) -> int:
    """The one token estimate (digest budgets, prompt sizes, cost): ceil(len(text) / 4),
    about four characters per token for English and code (the tokenizer is not local)."""
    return (len(text) + CHARS_PER_TOKEN - 1) // CHARS_PER_TOKEN


def estimate_request_tokens(params: dict[str, Any]) -> int:
    """Prompt tokens of a Messages API request body: tools + system + messages."""
    parts: list[str] = []
    for tool in params.get("tools") or []:
        parts.append(json.dumps({k: tool[k] for k in ("name", "description", "input_schema")
                                 if k in tool}, separators=(",", ":")))
    system = params.get("system")
    if isinstance(system, str):
        parts.append(system)
    elif isinstance(system, list):
        parts.extend(str(b.get("text", "")) for b in system if isinstance(b, dict))
    for message in params.get("messages") or []:
        content = message.get("content")
        if isinstance(content, str):
            parts.append(content)
            continue
        for block in content or []:
            if not isinstance(block, dict):
                continue
            if block.get("type") == "text":
                parts.append(str(block.get("text", "")))
            elif block.get("type") == "tool_use":
                parts.append(json.dumps(block.get("input"), separators=(",", ":")))
            elif block.get("type") == "tool_result":
                inner = block.get("content")
                parts.append(inner if isinstance(inner, str) else json.dumps(inner))
    return sum(estimate_tokens(p) for p in parts)
