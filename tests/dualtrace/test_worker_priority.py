"""The worker a hook starts runs below the hook's CPU priority (issue 17.4): its encode
must not take the cores from the agent turn that follows. Real hook, real worker."""

from __future__ import annotations

import os
import sys

import pytest

from tests import hook_helpers
from tests.hook_helpers import claude_payload, pids_of_workers, run_hook, wait_until

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc")

hook_env = hook_helpers.hook_env  # the fixture (stops the worker afterwards)


@pytest.mark.parametrize("setting,step", [(None, 10), ("0", 0), ("5", 5), ("junk", 10),
                                          ("99", 19)])
def test_the_worker_runs_niced(hook_env, state_dir, tmp_path, setting, step):
    transcript = tmp_path / "proj" / "s1.jsonl"
    transcript.parent.mkdir(parents=True)
    transcript.write_text('{"type":"user","message":{"role":"user","content":"hi"}}\n')
    env = dict(hook_env)
    env.pop("DUALTRACE_WORKER_NICE", None)
    if setting is not None:
        env["DUALTRACE_WORKER_NICE"] = setting
    mine = os.getpriority(os.PRIO_PROCESS, 0)
    proc = run_hook("stop", claude_payload("Stop", "s1", transcript, str(tmp_path)), env=env)
    assert proc.returncode == 0 and proc.stdout == b""
    [pid] = wait_until(lambda: pids_of_workers(state_dir), timeout=30, step=0.01,
                       what="the worker the Stop hook started")
    assert os.getpriority(os.PRIO_PROCESS, pid) == min(19, mine + step)
