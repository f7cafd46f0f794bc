"""What dualtrace's hooks add to real Claude Code turns (issue 17).

    python bench/bench_e2e.py [--turns 10] [--mcp] [--arms bare,floor,floor-bg,hooked]

The real Claude Code (the pinned npm version, from the e2e cache; installed there on
first use) runs ``claude -p`` turns against the local fake Messages API in one temp HOME
per arm:

- ``bare``: no hooks (the baseline);
- ``floor``: four empty synchronous Python hooks (``python -c pass`` with the interpreter
  dualtrace's hooks run on) on SessionStart, UserPromptSubmit, Stop and SessionEnd: what
  any four Python hooks cost, however little they do;
- ``floor-bg``: the same, with Stop and SessionEnd in the shell's background the way
  ``dualtrace install`` writes them: the floor of dualtrace's design;
- ``floor-fast``: ``floor-bg`` with the two synchronous hooks started as ``python -S -c
  pass`` (no site), the way install starts SessionStart and UserPromptSubmit now: the
  floor of the current design;
- ``hooked``: dualtrace installed by ``dualtrace install`` (its hooks, the detached
  worker, the memory growing turn by turn);
- ``hooked-site``: the same with SessionStart and UserPromptSubmit as plain ``dualtrace
  hook ...`` commands (Python with site, the session-3 way), for a before/after in one run;
- ``hooked-nice0``: the same with the worker at normal priority (DUALTRACE_WORKER_NICE=0);
- ``hooked-mcp``: ``dualtrace install --mcp``, its MCP server registered too (install's
  default), whatever ``--mcp`` says for the other hooked arms;
- ``hooked-sync``: the session-2 way for a before/after in one run: every hook entry
  synchronous (the background wrapper taken off again) and the worker at nice 0;
- ``hooked-base``: ``hooked`` with dualtrace installed from a wheel of another source
  tree (``--base TREE``, e.g. main before a change): before/after in one run;
- ``hooked-nowarm``: ``hooked-mcp`` with ``mcp_warm = false``: every ``dualtrace mcp``
  Claude Code starts imports the SDK itself instead of being forked by the warm server
  (dualtrace/mcp_warm.py).

One round runs one turn of every arm, in an order rotated every round, so machine noise
hits all arms alike; each turn is the wall time of the ``claude -p`` process, which
includes the synchronous hooks. Reports per arm the median, the added milliseconds
against ``bare`` and the median of the per-round ratios to ``bare`` (target for
``hooked``: < 1.05), the load average before and after, and the hook durations Claude Code
itself recorded. ``--resume`` makes turns 2..N resume each arm's first session.
``--stream``: the interactive case, one long-lived Claude Code per arm (``claude -p
--input-format stream-json``: one session, SessionStart and the MCP server start once),
each round one more prompt to every arm; a turn is the time from writing the prompt to
the ``result`` event (UserPromptSubmit and Stop run every turn), the start-up (first
turn) is reported apart. ``--wheel``: the hooked and floor arms run a non-editable install
as a person gets one (pipx, uv tool): a wheel built from this tree in a fresh virtualenv
(dependencies from this one through a plain path entry), instead of the editable dev
install, whose import finder costs every Python start ~10 ms (more under load).

Nothing touches the real home except the npm cache (~/.cache/dualtrace-e2e).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from dualtrace.hooks.install import in_background  # noqa: E402
from tests.e2e.claude_host import Claude, LiveSession, scripted_assistant  # noqa: E402
from tests.e2e.e2e_hosts import CLAUDE_CODE, Sandbox, npm_host  # noqa: E402
from tests.fake_anthropic import FakeAnthropic  # noqa: E402

ARMS = ("bare", "floor", "floor-bg", "floor-fast", "hooked", "hooked-site", "hooked-nice0",
        "hooked-mcp", "hooked-sync", "hooked-nowarm", "hooked-base")
BACKGROUND = in_background("{}")  # the entry install writes for Stop / SessionEnd

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


def turn(claude: Claude, prompt: str, resume: str | None,
         debug: Path | None = None) -> tuple[float, str]:
    extra = ("--debug-file", str(debug)) if debug else ()
    started = time.perf_counter()
    done = claude.turn(prompt, *extra, resume=resume)
    return time.perf_counter() - started, done.session_id


HOOK_DONE = re.compile(r"Hooks: (\w+)(?::\w+)? \[.*\] finished with status \d+ \((\d+)ms\)")


def debug_hook_times(path: Path) -> dict[str, int]:
    """Each hook's duration as Claude Code's debug log (``--debug-file``) states it
    (SessionEnd's is not stated there)."""
    found: dict[str, int] = {}
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        match = HOOK_DONE.search(line)
        if match:
            found[match.group(1)] = found.get(match.group(1), 0) + int(match.group(2))
    return found


def split_turn(calls: list[tuple[float, float]], started: float,
               seconds: float) -> tuple[float, float, float, int]:
    """A turn's wall time in three parts, model time left out: from the start of
    ``claude -p`` to the first Messages request (Claude Code's start-up, SessionStart and
    UserPromptSubmit), the gaps between one reply and the next request, and from the last
    reply to the process's exit (Stop, SessionEnd, shutdown)."""
    if not calls:
        return seconds, 0.0, 0.0, 0
    ordered = sorted(calls)
    before = ordered[0][0] - started
    between = sum(max(0.0, b[0] - a[1]) for a, b in zip(ordered, ordered[1:], strict=False))
    after = started + seconds - max(done for _, done in ordered)
    return before, between, after, len(ordered)


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


def empty_hooks(box: Sandbox, background: bool, interpreter: str, no_site: bool = False) -> None:
    """Four ``python -c pass`` hooks in the arm's user settings (``no_site``: the two
    synchronous ones as ``python -S -c pass``)."""
    python = f"{interpreter} -c pass"
    hooks = {}
    for event in ("SessionStart", "UserPromptSubmit", "Stop", "SessionEnd"):
        line = BACKGROUND.format(python) if background and event in ("Stop", "SessionEnd") \
            else f"{interpreter} -S -c pass" if no_site else python
        hooks[event] = [{"hooks": [{"type": "command", "command": line, "timeout": 10}]}]
    path = box.home / ".claude" / "settings.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"hooks": hooks}, indent=2))


def user_install(tmp: Path, source: Path = ROOT, name: str = "user") -> Path:
    """A fresh virtualenv with dualtrace installed from a wheel of ``source`` (this tree
    by default); returns its python. Dependencies come from this virtualenv's
    site-packages by a path line (no import line: the dev install's editable finder is
    not loaded)."""
    import subprocess
    import sysconfig

    venv, wheels = tmp / f"{name}-venv", tmp / f"{name}-wheels"
    base = Path(sys.base_prefix) / "bin" / "python3"
    subprocess.run([str(base), "-m", "venv", str(venv)], check=True)
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(wheels),
                    str(source)], check=True)
    python = venv / "bin" / "python"
    subprocess.run([str(python), "-m", "pip", "install", "-q", "--no-deps",
                    str(next(wheels.glob("dualtrace-*.whl")))], check=True)
    site = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()"
                           "['purelib'])"], check=True, capture_output=True, text=True)
    (Path(site.stdout.strip()) / "dualtrace-bench-deps.pth").write_text(
        sysconfig.get_paths()["purelib"] + "\n")
    return python


def stop_warm_servers(tmp: Path) -> None:
    """The `dualtrace mcp` warm servers (dualtrace/mcp_warm.py) the arms' Claude Code
    sessions started: their argv names their state dir, which is under ``tmp``."""
    import signal

    for entry in Path("/proc").iterdir():
        try:
            cmd = (entry / "cmdline").read_bytes() if entry.name.isdigit() else b""
            if b"serve_forever" in cmd and str(tmp).encode() in cmd:
                os.kill(int(entry.name), signal.SIGTERM)
        except OSError:
            pass


def synchronous(box: Sandbox) -> None:
    """Every installed hook entry back in the foreground (as before issue 17.4)."""
    path = box.home / ".claude" / "settings.json"
    data = json.loads(path.read_text())
    prefix, suffix = BACKGROUND.split("{}")
    for groups in data["hooks"].values():
        for group in groups:
            for handler in group["hooks"]:
                line = handler["command"]
                if line.startswith(prefix) and line.endswith(suffix):
                    handler["command"] = line[len(prefix):-len(suffix)]
    path.write_text(json.dumps(data, indent=2))


def with_site(box: Sandbox) -> None:
    """SessionStart and UserPromptSubmit as plain ``dualtrace hook ...`` commands again
    (install's fast launcher, ``python -S .../fasthook.py SCRIPT hook EV --host H``, off)."""
    path = box.home / ".claude" / "settings.json"
    data = json.loads(path.read_text())
    for groups in data["hooks"].values():
        for group in groups:
            for handler in group["hooks"]:
                line = handler["command"]
                if "fasthook.py " in line:
                    line = line.split("fasthook.py ", 1)[1]
                    handler["command"] = line.rsplit(" --host ", 1)[0]
    path.write_text(json.dumps(data, indent=2))


def load() -> float:
    return os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--turns", type=int, default=10)
    parser.add_argument("--resume", action="store_true")
    parser.add_argument("--wheel", action="store_true",
                        help="hooked and floor arms on a non-editable install (as pipx/uv)")
    parser.add_argument("--base", type=Path,
                        help="a source tree (e.g. `git archive main | tar -x -C DIR`): the "
                             "hooked-base arm runs dualtrace installed from a wheel of it, "
                             "for a before/after in one run (use with --wheel, so both "
                             "hooked arms are wheel installs)")
    parser.add_argument("--stream", action="store_true",
                        help="one long-lived session per arm (the interactive case)")
    parser.add_argument("--arms", default="bare,floor,floor-bg,hooked",
                        help=f"comma-separated, from {', '.join(ARMS)}; bare is always run")
    parser.add_argument("--model-ms", type=float, default=0.0,
                        help="the fake model waits this long before each reply (a real "
                             "model's latency; 0 = instant, the worst case for the ratio)")
    parser.add_argument("--hook-times", action="store_true",
                        help="run every turn with Claude Code's --debug-file and report each "
                             "hook's duration as the host logs it (debug logging costs "
                             "every arm some time)")
    parser.add_argument("--dump", type=Path,
                        help="write every turn (round, position, the arm before it, seconds, "
                             "phases) to this JSON file")
    parser.add_argument("--mcp", action="store_true",
                        help="the hooked arms install with the MCP server (`install --mcp`)")
    parser.add_argument("--no-mcp", action="store_true",
                        help="no effect (the hooked arms install without the MCP server "
                             "unless --mcp; kept for the commands in docs/BENCHMARKS.md)")
    args = parser.parse_args()
    arms = ["bare"] + [a for a in args.arms.split(",") if a and a != "bare"]
    unknown = set(arms) - set(ARMS)
    if unknown:
        parser.error(f"unknown arm(s): {', '.join(sorted(unknown))}")
    if ("hooked-base" in arms) != (args.base is not None):
        parser.error("--base TREE and the hooked-base arm go together")
    exe = npm_host(*CLAUDE_CODE)
    load_before = load()
    with tempfile.TemporaryDirectory(prefix="dualtrace-bench-e2e-") as tmp, \
            FakeAnthropic() as api:
        answer = scripted_assistant({"decided": "Understood, noted.",
                                     "switching": "Understood, switching."})

        calls: list[tuple[float, float]] = []  # (arrival, reply) of each Messages request

        def timed(body: dict) -> dict:
            arrived = time.perf_counter()
            if args.model_ms:
                time.sleep(args.model_ms / 1000)
            reply = answer(body)
            calls.append((arrived, time.perf_counter()))
            return reply

        api.default = timed
        python = user_install(Path(tmp)) if args.wheel else Path(sys.executable)
        base_python = user_install(Path(tmp), args.base, "base") if args.base else None
        boxes: dict[str, Sandbox] = {}
        for arm in arms:
            box = boxes[arm] = Sandbox.create(Path(tmp) / arm)
            if arm.startswith("floor"):
                empty_hooks(box, background=arm != "floor", interpreter=str(python),
                            no_site=arm == "floor-fast")
            elif arm.startswith("hooked"):
                if arm in ("hooked-nice0", "hooked-sync"):
                    box.env["DUALTRACE_WORKER_NICE"] = "0"
                mcp = args.mcp or arm in ("hooked-mcp", "hooked-nowarm")
                own = base_python if arm == "hooked-base" and base_python else python
                install = box.run(own.parent / "dualtrace", "install", "--agent",
                                  "claude-code", "--mcp" if mcp else "--no-mcp")
                assert "SessionEnd" in install.stdout, install.stdout
                if arm == "hooked-sync":
                    synchronous(box)
                if arm in ("hooked-site", "hooked-sync"):
                    with_site(box)
                if arm == "hooked-nowarm":
                    box.state.mkdir(parents=True, exist_ok=True)
                    (box.state / "config.toml").write_text("mcp_warm = false\n")
        claudes = {arm: Claude(exe, box, api) for arm, box in boxes.items()}
        # One warm-up turn each (node's and Python's first start fill the page cache).
        for claude in claudes.values():
            turn(claude, "warm up", None)
        for box in boxes.values():
            box.wait_idle()
        times: dict[str, list[float]] = {arm: [] for arm in arms}
        phases: dict[str, list[tuple[float, float, float, int]]] = {arm: [] for arm in arms}
        hook_times: dict[str, dict[str, list[int]]] = {arm: {} for arm in arms}
        turns: list[dict] = []
        starts: dict[str, float] = {}
        sessions: dict[str, str | None] = {arm: None for arm in arms}
        streams = {arm: LiveSession(exe, boxes[arm]) for arm in arms} if args.stream else {}
        for i in range(args.turns + (1 if args.stream else 0)):
            prompt = PROMPTS[i % len(PROMPTS)]
            order = arms[i % len(arms):] + arms[:i % len(arms)]
            for arm in order:
                if args.stream:
                    seconds = streams[arm].turn(prompt)[0]
                    if i == 0:
                        starts[arm] = seconds
                    else:
                        times[arm].append(seconds)
                    continue
                first = len(calls)
                started = time.perf_counter()
                debug = Path(tmp) / f"debug-{arm}-{i}.txt" if args.hook_times else None
                seconds, sid = turn(claudes[arm], prompt,
                                    sessions[arm] if args.resume else None, debug)
                times[arm].append(seconds)
                phases[arm].append(split_turn(calls[first:], started, seconds))
                turns.append({"round": i, "arm": arm, "after": order[order.index(arm) - 1]
                              if order.index(arm) else (turns[-1]["arm"] if turns else None),
                              "seconds": seconds, "phases": phases[arm][-1][:3]})
                if debug is not None and debug.exists():
                    for event, ms in debug_hook_times(debug).items():
                        hook_times[arm].setdefault(event, []).append(ms)
                if args.resume and sessions[arm] is None:
                    sessions[arm] = sid
        for stream in streams.values():
            stream.close()
        if args.dump:
            args.dump.write_text(json.dumps(turns, indent=1))
        load_after = load()
        stop_warm_servers(Path(tmp))
        summary = {}
        for arm, box in boxes.items():
            box.wait_idle(timeout=180)
            if arm.startswith("hooked"):
                runs = box.runs()
                log = box.state / "logs" / "worker.log"
                lines = log.read_text().splitlines() if log.exists() else []
                summary[arm] = (len(runs), sum(1 for r in runs if r.get("commit")),
                                sum(1 for r in runs if r.get("error")), len(box.memory_dirs()),
                                host_hook_durations(box.home / ".claude" / "projects"),
                                sum(1 for ln in lines if ln.endswith(" start")),
                                sum(1 for ln in lines if " sweep " in ln))
    kind = (" (one long-lived stream-json session per arm)" if args.stream else
            " (one resumed session per arm)" if args.resume else " (a new session each)")
    print(f"claude-code {CLAUDE_CODE[1]}, {args.turns} rounds{kind}, "
          f"fake model latency {args.model_ms:.0f} ms, "
          f"{'hooks + MCP server (--mcp)' if args.mcp else 'hooks only'} in the "
          f"hooked arms but hooked-mcp, "
          f"{'non-editable install (--wheel)' if args.wheel else 'editable dev install'}, "
          f"{os.cpu_count()} cores, load average {load_before:.1f} before, "
          f"{load_after:.1f} after the turns")
    base = times["bare"]
    med_b = statistics.median(base)
    for arm in arms:
        values = times[arm]
        med = statistics.median(values)
        line = (f"  {arm:13s} median {med * 1000:6.0f} ms (min {min(values) * 1000:5.0f}, "
                f"max {max(values) * 1000:5.0f})")
        if arm != "bare":
            ratios = [v / b for b, v in zip(base, values, strict=True)]
            line += (f"  added {(med - med_b) * 1000:+5.0f} ms, median per-round ratio "
                     f"{statistics.median(ratios):.3f}")
        print(line)
    if any(phases.values()):
        print("  phases (medians): before the first model request / between requests "
              "(model time excluded) / after the last reply; requests per turn")
        for arm in arms:
            cols = list(zip(*phases[arm], strict=True))
            print(f"    {arm:13s} " + " / ".join(
                f"{statistics.median(c) * 1000:5.0f} ms" for c in cols[:3])
                + f"; {statistics.median(cols[3]):.0f} requests (max {max(cols[3])})")
    for arm, events in hook_times.items():
        if events:
            print(f"  {arm} hooks per Claude Code's debug log: " + ", ".join(
                f"{event} median {statistics.median(ms):.0f} ms (max {max(ms)}, {len(ms)} runs)"
                for event, ms in sorted(events.items())))
    if starts:
        print("  session start (first turn): " + ", ".join(
            f"{arm} {sec * 1000:.0f} ms" for arm, sec in starts.items()))
    print("  target for hooked: ratio < 1.05")
    for arm, (n, commits, errors, dirs, hook_ms, starts_n, sweeps) in summary.items():
        print(f"  {arm}: worker {n} encode runs, {commits} with a commit, {errors} errors, "
              f"{dirs} memory dir(s); {starts_n} worker starts, {sweeps} sweeps")
        for event, values in sorted(hook_ms.items()):
            print(f"    {event} hook as Claude Code timed it: median "
                  f"{statistics.median(values):.0f} ms over {len(values)} runs")
    return 0


if __name__ == "__main__":
    sys.exit(main())
