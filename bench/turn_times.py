"""How long real Claude Code turns and model calls take (issue 17, item 4).

    python bench/turn_times.py [--corpus DIR] [--json]

Reads the real Claude Code transcripts under ``DIR`` (default
``../shared/corpus/claude-code`` next to the project; subagent files left out) and
measures, from the records' own timestamps:

- a **turn**: from a prompt the person sent to the last assistant record of the main
  chain before the next prompt. A prompt is a user record of the main chain that carries
  text and no tool result, and is neither meta (caveats, skill bodies, a Stop hook's
  feedback), a compaction summary, nor an interruption marker ("[Request interrupted by
  user...]"). A prompt that no assistant record answers (a local ``/clear``, a ``!``
  shell command and its output) makes no turn. These are what dualtrace's per-turn hooks
  (UserPromptSubmit before, Stop after) are paid on.
- a **model call**: one assistant message (its ``message.id``; Claude Code writes one
  record per content block, all with the same id), from the record before its first
  block (the prompt, a tool result, the previous message) to its last block. Synthetic
  messages (``model: <synthetic>``, API errors) are no calls.

Sidechain records (a subagent's inline activity) neither start nor end a turn nor count
as calls of the main chain. Reports per corpus folder and overall the count and the p10 /
p25 / p50 / p90 of both, in seconds; the p10 and p25 of turns are the conservative end of
real turns, the model latency ``bench/bench_e2e.py --model-ms`` should be run at.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_CORPUS = ROOT.parent / "shared" / "corpus" / "claude-code"
INTERRUPTED = "[Request interrupted by user"
QUANTILES = (10, 25, 50, 90)


@dataclass(frozen=True)
class Turn:
    start: datetime
    end: datetime
    calls: int  # model calls in the turn

    @property
    def seconds(self) -> float:
        return (self.end - self.start).total_seconds()


@dataclass(frozen=True)
class Call:
    start: datetime
    end: datetime

    @property
    def seconds(self) -> float:
        return (self.end - self.start).total_seconds()


def _when(record: dict) -> datetime | None:
    stamp = record.get("timestamp")
    if not isinstance(stamp, str):
        return None
    try:
        return datetime.fromisoformat(stamp.replace("Z", "+00:00"))
    except ValueError:
        return None


def _text_of(content: object) -> str | None:
    """The text of a user message, or None when it carries a tool result or no text."""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return None
    parts: list[str] = []
    for block in content:
        if not isinstance(block, dict):
            continue
        if block.get("type") == "tool_result":
            return None
        if block.get("type") == "text" and isinstance(block.get("text"), str):
            parts.append(block["text"])
    return " ".join(parts) if parts else None


def is_prompt(record: dict) -> bool:
    """A prompt a person sent: main chain, text, no tool result, not meta/summary/interrupt."""
    if record.get("type") != "user" or record.get("isSidechain"):
        return False
    if record.get("isMeta") or record.get("isCompactSummary"):
        return False
    message = record.get("message")
    if not isinstance(message, dict):
        return False
    text = _text_of(message.get("content"))
    if text is None or not text.strip():
        return False
    return not text.lstrip().startswith(INTERRUPTED)


def _assistant_id(record: dict) -> str | None:
    """The message id of a real (non-synthetic) main-chain assistant record."""
    if record.get("type") != "assistant" or record.get("isSidechain"):
        return None
    message = record.get("message")
    if not isinstance(message, dict) or message.get("model") == "<synthetic>":
        return None
    ident = message.get("id")
    return ident if isinstance(ident, str) and ident else None


def records(path: Path) -> Iterator[dict]:
    with path.open(encoding="utf-8", errors="replace") as handle:
        for line in handle:
            try:
                record = json.loads(line)
            except ValueError:
                continue
            if isinstance(record, dict):
                yield record


def measure(lines: Iterable[dict]) -> tuple[list[Turn], list[Call]]:
    """The turns and model calls of one transcript, in file order."""
    turns: list[Turn] = []
    calls: dict[str, list[datetime]] = {}  # message id -> [start, last block]
    order: list[str] = []
    prompt_at: datetime | None = None
    last_reply: datetime | None = None
    turn_calls: set[str] = set()
    previous: datetime | None = None  # last main-chain user/assistant record

    def close() -> None:
        if prompt_at is not None and last_reply is not None:
            turns.append(Turn(prompt_at, last_reply, len(turn_calls)))

    for record in lines:
        when = _when(record)
        if when is None or record.get("isSidechain"):
            continue
        if is_prompt(record):
            close()
            prompt_at, last_reply, turn_calls = when, None, set()
        ident = _assistant_id(record)
        if ident is not None:
            if ident not in calls:
                calls[ident] = [previous or when, when]
                order.append(ident)
            calls[ident][1] = when
            if prompt_at is not None:
                last_reply = when
                turn_calls.add(ident)
        if record.get("type") in ("user", "assistant"):
            previous = when
    close()
    return turns, [Call(calls[i][0], calls[i][1]) for i in order]


def quantile(values: list[float], q: float) -> float:
    """The q-th percentile, linear between closest ranks (numpy's default)."""
    if not values:
        return math.nan
    ordered = sorted(values)
    pos = (len(ordered) - 1) * q / 100
    low = math.floor(pos)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (pos - low)


def summary(values: list[float]) -> dict[str, float]:
    out: dict[str, float] = {"n": float(len(values))}
    for q in QUANTILES:
        out[f"p{q}"] = round(quantile(values, q), 2)
    return out


def transcripts(corpus: Path) -> list[Path]:
    return sorted(p for p in corpus.rglob("*.jsonl") if "subagents" not in p.parts)


def corpus_report(corpus: Path) -> dict[str, dict[str, dict[str, float]]]:
    by_source: dict[str, tuple[list[float], list[float]]] = {}
    for path in transcripts(corpus):
        source = path.relative_to(corpus).parts[0]
        turns, calls = measure(records(path))
        bucket = by_source.setdefault(source, ([], []))
        bucket[0].extend(t.seconds for t in turns)
        bucket[1].extend(c.seconds for c in calls)
    report = {name: {"turns": summary(t), "calls": summary(c)}
              for name, (t, c) in sorted(by_source.items())}
    report["all"] = {
        "turns": summary([s for t, _ in by_source.values() for s in t]),
        "calls": summary([s for _, c in by_source.values() for s in c]),
    }
    return report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", type=Path, default=DEFAULT_CORPUS)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    if not args.corpus.is_dir():
        print(f"Error: no corpus at {args.corpus}", file=sys.stderr)
        return 1
    report = corpus_report(args.corpus)
    if args.json:
        print(json.dumps(report, indent=1))
        return 0
    head = " ".join(f"{'p' + str(q):>7}" for q in QUANTILES)
    print(f"{'source':<20} {'what':<6} {'n':>5} {head}   (seconds)")
    for name, parts in report.items():
        for what, s in parts.items():
            cells = " ".join(f"{s[f'p{q}']:>7.2f}" for q in QUANTILES)
            print(f"{name:<20} {what:<6} {int(s['n']):>5} {cells}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
