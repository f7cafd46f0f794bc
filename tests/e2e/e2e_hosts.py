"""The real host CLIs for the end-to-end tests: installed from npm into a cache,
run in a temp HOME against local fake model servers.

Pinned versions live here. The cache is ``$DUALTRACE_E2E_CACHE`` or
``~/.cache/dualtrace-e2e/<package>@<version>`` (the real home's cache, resolved at
import time, before the test fixtures point HOME at a temp dir): the first run
installs, later runs and CI on the same machine reuse it. Without npm or a
reachable registry the tests skip and say why.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from filelock import FileLock

from dualtrace import queue

CLAUDE_CODE = ("@anthropic-ai/claude-code", "2.1.328", "claude")
CODEX = ("@openai/codex", "0.169.0", "codex")
INSTALL_TIMEOUT = 600
_CACHE = Path(os.environ.get("DUALTRACE_E2E_CACHE")
              or Path(os.path.expanduser("~")) / ".cache" / "dualtrace-e2e")
VENV_BIN = Path(sys.executable).parent
DUALTRACE = VENV_BIN / "dualtrace"


def npm_host(package: str, version: str, binary: str) -> Path:
    """The host's executable, installed from npm once per machine; skip if impossible."""
    folder = _CACHE / f"{package.replace('/', '_')}@{version}"
    exe = folder / "node_modules" / ".bin" / binary
    if exe.exists():
        return exe
    npm = shutil.which("npm")
    if npm is None:
        pytest.skip(f"e2e: npm is not on PATH, cannot install {package}@{version}")
    _CACHE.mkdir(parents=True, exist_ok=True)
    with FileLock(str(_CACHE / f".{folder.name}.lock")):
        if exe.exists():  # another run installed it while we waited
            return exe
        tmp = _CACHE / f".{folder.name}.{os.getpid()}.tmp"
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir()
        env = {**os.environ, "npm_config_cache": str(_CACHE / "npm-cache"),
               "npm_config_update_notifier": "false", "npm_config_fund": "false",
               "npm_config_audit": "false"}
        try:
            proc = subprocess.run(
                [npm, "install", "--no-save", "--prefix", str(tmp), f"{package}@{version}"],
                capture_output=True, text=True, timeout=INSTALL_TIMEOUT, env=env)
        except subprocess.TimeoutExpired:
            shutil.rmtree(tmp, ignore_errors=True)
            pytest.skip(f"e2e: npm install {package}@{version} timed out "
                        f"after {INSTALL_TIMEOUT}s (registry unreachable?)")
        if proc.returncode != 0 or not (tmp / "node_modules" / ".bin" / binary).exists():
            shutil.rmtree(tmp, ignore_errors=True)
            pytest.skip(f"e2e: npm install {package}@{version} failed (registry "
                        f"unreachable?): {_npm_reason(proc.stderr)}")
        shutil.rmtree(folder, ignore_errors=True)
        os.replace(tmp, folder)
    return exe


def _npm_reason(stderr: str) -> str:
    """npm's own words for a failure, without the pointer to its debug log."""
    lines = [line.removeprefix("npm error").strip() for line in stderr.splitlines()
             if line.startswith("npm error") and "complete log of this run" not in line]
    return "; ".join(line for line in lines[:3] if line) or stderr.strip()[-300:] or "no output"


@dataclass
class Sandbox:
    """A temp HOME with a git project in it; every process here runs with ``env``."""

    root: Path
    env: dict[str, str] = field(default_factory=dict)

    @property
    def home(self) -> Path:
        return self.root / "home"

    @property
    def project(self) -> Path:
        return self.root / "project"

    @property
    def state(self) -> Path:
        """dualtrace's state dir as a real user gets it (no DUALTRACE_HOME)."""
        return self.home / ".local" / "share" / "dualtrace"

    @classmethod
    def create(cls, root: Path, **extra_env: str) -> Sandbox:
        box = cls(root)
        box.home.mkdir(parents=True)
        box.project.mkdir()
        keep = ("PATH", "LANG", "LC_ALL", "TERM", "TMPDIR", "SSL_CERT_FILE", "NODE_EXTRA_CA_CERTS")
        env = {k: os.environ[k] for k in keep if k in os.environ}
        env["PATH"] = os.pathsep.join([str(VENV_BIN), env.get("PATH", "/usr/bin:/bin")])
        env.update(HOME=str(box.home), GIT_CONFIG_NOSYSTEM="1",
                   # The hosts must not phone home (no network here anyway: fail fast).
                   DISABLE_TELEMETRY="1", DISABLE_AUTOUPDATER="1", DISABLE_ERROR_REPORTING="1",
                   CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1", NO_UPDATE_NOTIFIER="1")
        env.update(extra_env)
        box.env = env
        subprocess.run(["git", "init", "-q", str(box.project)], check=True, env=env)
        return box

    def run(self, *argv: str | os.PathLike[str], cwd: Path | None = None, timeout: float = 120,
            input: str | None = None, check: bool = True) -> subprocess.CompletedProcess:  # noqa: A002
        proc = subprocess.run([str(a) for a in argv], cwd=cwd or self.project, env=self.env,
                              capture_output=True, text=True, timeout=timeout, input=input)
        if check and proc.returncode != 0:
            raise AssertionError(f"{argv[0]} exited {proc.returncode}\nstdout: {proc.stdout}"
                                 f"\nstderr: {proc.stderr}")
        return proc

    def dualtrace(self, *args: str, **kw) -> subprocess.CompletedProcess:
        return self.run(DUALTRACE, *args, **kw)

    # ---------------------------------------------------------------- the worker

    def worker_running(self) -> bool:
        path = self.state / "worker.lock"
        if not path.exists():
            return False
        lock = queue.FileLock(str(path))
        if lock.acquire(blocking=False):
            lock.release()
            return False
        return True

    def hooks_running(self) -> list[int]:
        """Pids of this sandbox's hook processes still running: the hosts start the Stop
        and SessionEnd hooks in their shell's background (install), so they can outlive
        the host's process. Found by HOME in /proc (Linux; [] elsewhere)."""
        home = f"HOME={self.home}".encode()
        found = []
        try:
            pids = [int(n) for n in os.listdir("/proc") if n.isdigit()]
        except OSError:
            return []
        for pid in pids:
            try:
                with open(f"/proc/{pid}/cmdline", "rb") as fh:
                    argv = fh.read().split(b"\0")
                if not any(a == b"hook" for a in argv) and not any(b" hook " in a for a in argv):
                    continue
                with open(f"/proc/{pid}/environ", "rb") as fh:
                    if home in fh.read().split(b"\0"):
                        found.append(pid)
            except OSError:
                continue
        return found

    def wait_idle(self, timeout: float = 60.0) -> None:
        """Poll until no hook of this sandbox is running, the hooks' queue is drained and
        no worker is alive."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.hooks_running():
                time.sleep(0.02)
                continue
            jobs = [j for j in queue.list_jobs(str(self.state))
                    if j.get("status") != queue.PARKED and not _debounced(j)]
            if not jobs and not self.worker_running():
                return
            time.sleep(0.05)
        raise AssertionError(f"worker not idle after {timeout}s; jobs: "
                             f"{queue.list_jobs(str(self.state))}\n{self.logs()}")

    def wait_encoded(self, session_id: str, timeout: float = 90.0) -> list[dict]:
        """The session's encode records, once there is one, and then an idle worker.

        ``wait_idle`` alone can look too early: a host returns before its
        backgrounded Stop / SessionEnd hooks have queued anything (seen once in CI,
        under load: the worker of the SessionStart sweep had exited and no job was
        written yet), and an idle queue then says nothing about this session."""
        deadline = time.monotonic() + timeout
        while True:
            found = [r for r in self.runs() if r.get("session") == session_id]
            if found or time.monotonic() >= deadline:
                break
            time.sleep(0.05)
        assert found, (f"no encode run for session {session_id} after {timeout}s; jobs: "
                       f"{queue.list_jobs(str(self.state))}\n{self.logs()}")
        self.wait_idle(timeout=timeout)
        return [r for r in self.runs() if r.get("session") == session_id]

    def runs(self) -> list[dict]:
        path = self.state / queue.RUNS
        if not path.exists():
            return []
        return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]

    def logs(self) -> str:
        out = []
        for name in ("worker.log", "hook.log", "errors.log"):
            path = self.state / "logs" / name
            if path.exists():
                out.append(f"--- {name}\n{path.read_text()[-4000:]}")
        return "\n".join(out)

    def memory_dirs(self) -> list[Path]:
        base = self.state / "memory"
        return sorted(p for p in base.iterdir() if p.is_dir()) if base.is_dir() else []

    def session_commits(self, memdir: Path) -> list[str]:
        """Subjects of the memory repo's session commits (the init commit left out)."""
        proc = self.run("git", "-C", memdir, "log", "--format=%s", check=False)
        subjects = proc.stdout.splitlines() if proc.returncode == 0 else []
        return [s for s in subjects if not s.startswith("mem: init")]


def _debounced(job: dict) -> bool:
    """A Stop job waiting out its debounce: no worker will touch it during the test."""
    return not job.get("immediate") and job.get("status") == queue.PENDING


def memory_text(memdir: Path) -> str:
    """Every memory file's text (facts, moments, system files), for assertions."""
    parts = []
    for path in sorted(memdir.rglob("*.md")):
        if ".git" not in path.parts and ".dualtrace" not in path.parts:
            parts.append(path.read_text(encoding="utf-8"))
    return "\n".join(parts)
