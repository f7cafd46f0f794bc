"""Where a hook's time goes, per hook, as the real host runs them (issue 17).

    python bench/bench_hook_processes.py [--rounds 15] [--wheel [--base TREE]]

One real ``claude -p`` session (the pinned npm Claude Code against the local fake Messages
API, dualtrace installed by ``dualtrace install --no-mcp``) stores a decision; then each
hook process is run as Claude Code runs it (the installed console script, the payload on
stdin, the sandbox's environment; and the SessionStart and UserPromptSubmit entries as
install wrote them, ``sh -c`` with the ``python -S`` launcher: "entry ...") in rounds,
interleaved with bare interpreter starts of
the same Python for scale: ``python -c pass`` (with site and the install's .pth files),
``python -S -c pass`` (no site) and ``sh -c true`` (what a background entry costs the
host). Reports min / median wall ms per process, and for each hook the modules it imports
after ``site`` with their self time (``-X importtime``, one extra run).

``--wheel``: also the waited-for hooks of a non-editable install, as a person gets one
(a wheel of this tree in a fresh virtualenv, bench_e2e.user_install), entries as install
writes them for it; ``--base TREE``: the same for a wheel of another source tree (main
before a change), in the same rounds: a before/after of the hooks a turn waits for.

Nothing touches the real home except the npm cache (~/.cache/dualtrace-e2e).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.bench_e2e import user_install  # noqa: E402
from tests.e2e.claude_host import Claude, scripted_assistant  # noqa: E402
from tests.e2e.e2e_hosts import CLAUDE_CODE, DUALTRACE, Sandbox, npm_host  # noqa: E402
from tests.fake_anthropic import FakeAnthropic  # noqa: E402

DECISION = ("We decided to use PostgreSQL, not MySQL, for the billing service, because "
            "billing needs row-level locking for invoice updates.")


def imports_after_site(argv: list[str], payload: str, box: Sandbox) -> list[tuple[str, int]]:
    proc = subprocess.run([sys.executable, "-X", "importtime", *argv], input=payload,
                          capture_output=True, text=True, env=box.env, cwd=box.project)
    rows = []
    for line in proc.stderr.splitlines():
        if line.startswith("import time:") and "|" in line and "self [us]" not in line:
            self_us, _, name = line[len("import time:"):].split("|", 2)
            rows.append((name.strip(), int(self_us)))
    names = [n for n, _ in rows]
    return rows[names.index("site") + 1:] if "site" in names else rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--wheel", action="store_true",
                        help="also the hooks of a wheel install of this tree")
    parser.add_argument("--base", type=Path,
                        help="also the hooks of a wheel install of this source tree")
    args = parser.parse_args()
    exe = npm_host(*CLAUDE_CODE)
    with tempfile.TemporaryDirectory(prefix="dualtrace-bench-hooks-") as tmp, \
            FakeAnthropic() as api:
        api.default = scripted_assistant({"decided": "Understood, noted."})
        box = Sandbox.create(Path(tmp) / "box")
        box.dualtrace("install", "--agent", "claude-code", "--no-mcp")
        claude = Claude(exe, box, api)
        claude.turn(DECISION)
        box.wait_idle()
        claude.turn("warm up")  # the worker stores the SessionStart text after its commit
        box.wait_idle()
        transcript = next((box.home / ".claude" / "projects").rglob("*.jsonl"))
        base = {"session_id": transcript.stem, "transcript_path": str(transcript),
                "cwd": str(box.project)}
        hooks = {
            "session-start": dict(base, hook_event_name="SessionStart", source="startup"),
            "prompt (recalls)": dict(base, hook_event_name="UserPromptSubmit",
                                     prompt="Which database does the billing service use?"),
            "prompt (nothing)": dict(base, hook_event_name="UserPromptSubmit",
                                     prompt="Thanks, that is all for today."),
            "prompt (generic)": dict(base, hook_event_name="UserPromptSubmit",
                                     prompt="run the tests"),
            "stop": dict(base, hook_event_name="Stop", stop_hook_active=False),
            "session-end": dict(base, hook_event_name="SessionEnd", reason="other"),
        }
        runs: dict[str, tuple[list[str], str]] = {
            "python -c pass": ([sys.executable, "-c", "pass"], ""),
            "python -S -c pass": ([sys.executable, "-S", "-c", "pass"], ""),
            "sh -c true": (["/bin/sh", "-c", "true"], ""),
        }
        installed = json.loads((box.home / ".claude" / "settings.json").read_text())["hooks"]
        for name, payload in hooks.items():
            event = name.split(" ")[0]
            runs[f"hook {name}"] = ([str(DUALTRACE), "hook", event], json.dumps(payload))
            host_event = payload["hook_event_name"]
            if host_event in ("SessionStart", "UserPromptSubmit"):
                # The entry as install wrote it (the -S launcher), through sh as the host.
                line = installed[host_event][0]["hooks"][0]["command"]
                runs[f"entry {name}"] = (["/bin/sh", "-c", line], json.dumps(payload))
        installs = ([("wheel", ROOT)] if args.wheel else []) + (
            [("base", args.base.resolve())] if args.base else [])
        for label, source in installs:
            python = user_install(Path(tmp), source, label)
            script = python.parent / "dualtrace"
            site = subprocess.run([str(python), "-c", "import dualtrace, os; print(os.path."
                                   "dirname(dualtrace.__file__))"], check=True, cwd=box.project,
                                  capture_output=True, text=True, env=box.env).stdout.strip()
            launcher = f"{python} -S {site}/fasthook.py {script}"
            # Its SessionStart builds and stores the entry its prompt hook reads (the
            # entry is keyed by the command that runs the hook).
            subprocess.run([str(script), "hook", "session-start"], check=True, env=box.env,
                           input=json.dumps(hooks["session-start"]), text=True,
                           cwd=box.project, capture_output=True)
            box.wait_idle()
            runs[f"{label} python -S -c pass"] = ([str(python), "-S", "-c", "pass"], "")
            for name in ("session-start", "prompt (recalls)", "prompt (generic)"):
                event = name.split(" ")[0]
                line = f"{launcher} hook {event} --host claude-code"
                runs[f"{label} entry {name}"] = (["/bin/sh", "-c", line],
                                                 json.dumps(hooks[name]))
        times: dict[str, list[float]] = {name: [] for name in runs}
        out_bytes: dict[str, int] = {}
        load_before = os.getloadavg()[0]
        # Stop and SessionEnd last in a round (SessionEnd starts the worker's encode, whose
        # CPU would land on whatever runs next); the others in an order rotated every
        # round, so the machine's noise hits all of them alike.
        last = [n for n in runs if n in ("hook stop", "hook session-end")]
        rest = [n for n in runs if n not in last]
        for r in range(args.rounds):
            k = r % len(rest)
            for name in rest[k:] + rest[:k] + last:
                argv, payload = runs[name]
                started = time.perf_counter()
                proc = subprocess.run(argv, input=payload, capture_output=True, text=True,
                                      env=box.env, cwd=box.project)
                times[name].append((time.perf_counter() - started) * 1000)
                out_bytes[name] = len(proc.stdout)
            box.wait_idle()  # the workers Stop / SessionEnd started, before the next round
        load_after = os.getloadavg()[0]
        print(f"{args.rounds} rounds, {os.cpu_count()} cores, load average {load_before:.1f} "
              f"before, {load_after:.1f} after; {sys.executable}")
        for name, values in times.items():
            extra = f"  stdout {out_bytes[name]} B" if " hook " in f" {name} " or \
                "entry" in name else ""
            print(f"  {name:30s} min {min(values):6.1f}  median {statistics.median(values):6.1f}"
                  f" ms{extra}")
        for name, payload in hooks.items():
            rows = imports_after_site([str(DUALTRACE), "hook", name.split(" ")[0]],
                                      json.dumps(payload), box)
            total = sum(us for _, us in rows) / 1000
            heavy = sorted(rows, key=lambda r: -r[1])[:8]
            print(f"  imports after site, hook {name}: {len(rows)} modules, {total:.1f} ms self;"
                  f" heaviest: " + ", ".join(f"{n} {us / 1000:.1f}" for n, us in heavy))
    return 0


if __name__ == "__main__":
    sys.exit(main())
