"""Does the real Claude Code run ``"async": true`` command hooks to the end? (issue 17)

    python bench/probe_async_hooks.py

For ``claude -p`` (one turn) and a long-lived ``--input-format stream-json`` session (two
turns, the session open 2.5 s after each), with Stop and SessionEnd hooks that sleep 0 s
or 1 s and then append their event name to a file, async and synchronous: the wall time
and which hooks finished. Answers why ``dualtrace install`` backgrounds Stop in the shell
instead, and why the plugin's hooks.json may use ``async`` (docs/HOSTS.md). Runs in temp
HOMEs against the local fake Messages API; the host comes from the e2e npm cache.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.e2e.claude_host import Claude, LiveSession  # noqa: E402
from tests.e2e.e2e_hosts import CLAUDE_CODE, Sandbox, npm_host  # noqa: E402
from tests.fake_anthropic import FakeAnthropic, message, text  # noqa: E402


def settings(mark: Path, sleep: int, background: bool) -> dict:
    def entry(event: str) -> dict:
        hook = {"type": "command", "timeout": 30,
                "command": f"cat >/dev/null; sleep {sleep}; echo {event} >> {mark}"}
        return {"hooks": [dict(hook, **{"async": True}) if background else hook]}

    return {"hooks": {event: [entry(event)] for event in ("Stop", "SessionEnd")}}


def main() -> int:
    exe = npm_host(*CLAUDE_CODE)
    with tempfile.TemporaryDirectory() as tmp, FakeAnthropic() as api:
        api.default = lambda body: message(text("OK."))
        for mode in ("p", "stream"):
            for background in (True, False):
                for sleep in (0, 1):
                    box = Sandbox.create(Path(tmp) / f"{mode}-{background}-{sleep}")
                    mark = box.root / "finished.txt"
                    (box.home / ".claude").mkdir(parents=True)
                    (box.home / ".claude" / "settings.json").write_text(
                        json.dumps(settings(mark, sleep, background)))
                    started = time.perf_counter()
                    if mode == "p":
                        Claude(exe, box, api).turn("hello")
                    else:
                        box.env.update(ANTHROPIC_BASE_URL=api.url, ANTHROPIC_API_KEY="sk-ant-probe")
                        live = LiveSession(exe, box)
                        for i in range(2):
                            live.turn(f"hello {i}")
                            time.sleep(2.5)  # the session stays open after the turn
                        live.close()
                    wall = time.perf_counter() - started
                    time.sleep(sleep + 1.5)  # a hook still running gets to finish
                    done = mark.read_text().split() if mark.exists() else []
                    print(f"{mode:6} {'async' if background else 'sync':5} sleep {sleep}s: "
                          f"wall {wall:5.2f} s, finished {done}", flush=True)
    subprocess.run(["uptime"], check=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
