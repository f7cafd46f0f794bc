"""What dualtrace's hooks add to real Claude Code turns (issue 17).

    python bench/bench_e2e.py [--turns 10] [--resume]

The real Claude Code (the pinned npm version, from the e2e cache; installed there on
first use) runs ``claude -p`` turns against the local fake Messages API in two temp
HOMEs: one with dualtrace installed by ``dualtrace install`` (all five hooks, the
detached worker, the memory growing turn by turn), one without. The turns are paired
and interleaved (bare, hooked, bare, hooked, with the order flipped every pair) so
machine noise hits both alike; each turn is the wall time of the ``claude -p``
process, which includes the synchronous hooks (SessionStart, UserPromptSubmit, Stop,
SessionEnd). Reports medians, the median of the per-pair ratios, and the added
milliseconds. Target: under 5% added. ``--resume`` makes turns 2..N resume the first
turn's session (one growing session instead of N fresh ones).

Nothing touches the real home except the npm cache (~/.cache/dualtrace-e2e).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.e2e.claude_host import Claude, scripted_assistant  # noqa: E402
from tests.e2e.e2e_hosts import CLAUDE_CODE, Sandbox, npm_host  # noqa: E402
from tests.fake_anthropic import FakeAnthropic  # noqa: E402

PROMPTS = [
    "We decided to use PostgreSQL, not MySQL, for the billing service, because billing "
    "needs row-level locking for invoice updates.",
    "Which database does the billing service use?",
    "We're switching to JSON structured logging instead of plain text, because Datadog "
    "cannot parse free-form lines.",
    "How do I center a div with CSS grid?",
    "The auth middleware is throwing 401s intermittently in staging; looks like a race "
    "condition in the token refresh.",
    "What did we decide about logging?",
    "From now on, always run ruff before committing.",
    "Let's plan the next sprint.",
    "Why does billing need row-level locking?",
    "Thanks, that is all for today.",
]


def turn(claude: Claude, prompt: str, resume: str | None) -> tuple[float, str]:
    started = time.perf_counter()
    done = claude.turn(prompt, resume=resume)
    return time.perf_counter() - started, done.session_id


def host_hook_durations(projects: Path) -> dict[str, list[int]]:
    """The hook durations Claude Code itself records in its transcripts (SessionStart
    as a hook_success attachment, Stop in stop_hook_summary)."""
    import json

    found: dict[str, list[int]] = {}
    for path in projects.rglob("*.jsonl"):
        for line in path.read_text(encoding="utf-8").splitlines():
            if "durationMs" not in line:
                continue
            record = json.loads(line)
            attachment = record.get("attachment") or {}
            if attachment.get("type") == "hook_success" and attachment.get("durationMs"):
                event = str(attachment.get("hookName") or "?").split(":")[0]
                found.setdefault(event, []).append(int(attachment["durationMs"]))
            for info in record.get("hookInfos") or []:
                if info.get("durationMs") is not None:
                    found.setdefault("Stop", []).append(int(info["durationMs"]))
    return found


def stop_warm_servers(tmp: Path) -> None:
    """The `dualtrace mcp` warm servers (dualtrace/mcp_warm.py) Claude Code's sessions
    started under ``tmp``: their socket path, in their argv, is in the sandbox's state."""
    import signal

    for entry in Path("/proc").iterdir():
        try:
            cmd = (entry / "cmdline").read_bytes() if entry.name.isdigit() else b""
            if b"serve_forever" in cmd and str(tmp).encode() in cmd:
                os.kill(int(entry.name), signal.SIGTERM)
        except OSError:
            pass


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--turns", type=int, default=10)
    parser.add_argument("--resume", action="store_true")
    parser.add_argument("--model-ms", type=float, default=0.0,
                        help="the fake model waits this long before each reply (a real "
                             "model's latency; 0 = instant, the worst case for the ratio)")
    parser.add_argument("--no-mcp", action="store_true",
                        help="install without the MCP server (`install --no-mcp`): the "
                             "hooks' cost alone, without Claude Code starting `dualtrace mcp`")
    parser.add_argument("--no-warm", action="store_true",
                        help="mcp_warm = false: each `dualtrace mcp` imports the SDK itself "
                             "instead of being forked by the warm server (dualtrace/mcp_warm.py)")
    parser.add_argument("--async-events", default="",
                        help="experiment: comma-separated hook events to mark async")
    args = parser.parse_args()
    exe = npm_host(*CLAUDE_CODE)
    with tempfile.TemporaryDirectory(prefix="dualtrace-bench-e2e-") as tmp, \
            FakeAnthropic() as api:
        answer = scripted_assistant({"decided": "Understood, noted.",
                                     "switching": "Understood, switching."})

        def slow(body: dict) -> dict:
            time.sleep(args.model_ms / 1000)
            return answer(body)

        api.default = slow if args.model_ms else answer
        bare_box = Sandbox.create(Path(tmp) / "bare")
        hooked_box = Sandbox.create(Path(tmp) / "hooked")
        install = hooked_box.dualtrace("install", "--agent", "claude-code",
                                       *(["--no-mcp"] if args.no_mcp else []))
        assert "SessionEnd" in install.stdout, install.stdout
        if args.no_warm:
            hooked_box.state.mkdir(parents=True, exist_ok=True)
            with (hooked_box.state / "config.toml").open("a") as fh:
                fh.write("mcp_warm = false\n")
        if args.async_events:
            import json

            path = hooked_box.home / ".claude" / "settings.json"
            data = json.loads(path.read_text())
            for event in args.async_events.split(","):
                for group in data["hooks"][event]:
                    for handler in group["hooks"]:
                        handler["async"] = True
            path.write_text(json.dumps(data, indent=2))
        bare, hooked = Claude(exe, bare_box, api), Claude(exe, hooked_box, api)
        # One warm-up turn each (node's and Python's first start fill the page cache).
        turn(bare, "warm up", None)
        turn(hooked, "warm up", None)
        hooked_box.wait_idle()
        times: dict[str, list[float]] = {"bare": [], "hooked": []}
        sessions: dict[str, str | None] = {"bare": None, "hooked": None}
        for i in range(args.turns):
            prompt = PROMPTS[i % len(PROMPTS)]
            order = [("bare", bare), ("hooked", hooked)]
            if i % 2:
                order.reverse()
            for name, claude in order:
                seconds, sid = turn(claude, prompt, sessions[name] if args.resume else None)
                times[name].append(seconds)
                if args.resume and sessions[name] is None:
                    sessions[name] = sid
        hooked_box.wait_idle(timeout=120)
        runs = hooked_box.runs()
        commits = sum(1 for r in runs if r.get("commit"))
        leftover = [r for r in runs if r.get("error")]
        memories = hooked_box.memory_dirs()
        hook_ms = host_hook_durations(hooked_box.home / ".claude" / "projects")
        stop_warm_servers(Path(tmp))
    ratios = [h / b for b, h in zip(times["bare"], times["hooked"], strict=True)]
    med_b, med_h = statistics.median(times["bare"]), statistics.median(times["hooked"])
    print(f"claude-code {CLAUDE_CODE[1]}, {args.turns} paired turns"
          f"{' (one resumed session)' if args.resume else ' (a new session each)'}, "
          f"fake model latency {args.model_ms:.0f} ms, "
          f"{'hooks only (--no-mcp)' if args.no_mcp else 'hooks + MCP server'}"
          f"{' (no warm server)' if args.no_warm and not args.no_mcp else ''}, "
          f"{os.cpu_count()} cores")
    print(f"  without hooks: median {med_b * 1000:.0f} ms  (min {min(times['bare']) * 1000:.0f},"
          f" max {max(times['bare']) * 1000:.0f})")
    print(f"  with hooks:    median {med_h * 1000:.0f} ms  (min {min(times['hooked']) * 1000:.0f},"
          f" max {max(times['hooked']) * 1000:.0f})")
    print(f"  added: {(med_h - med_b) * 1000:+.0f} ms; median per-pair ratio "
          f"{statistics.median(ratios):.3f} (target < 1.05)")
    for event, values in sorted(hook_ms.items()):
        print(f"  {event} hook as Claude Code timed it: median {statistics.median(values):.0f} ms"
              f" over {len(values)} runs")
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"  load average at the end: {load:.1f}")
    print(f"  worker: {len(runs)} encode runs, {commits} with a commit, {len(leftover)} errors,"
          f" {len(memories)} memory dir(s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
