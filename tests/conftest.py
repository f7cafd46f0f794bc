"""Shared fixtures.

Every test runs with DUALTRACE_HOME, HOME and the memory directory pointed into
tmp_path. A test that would touch the real home directory fails loudly.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent
# A git worktree sits one level deeper than the main checkout: DUALTRACE_CORPUS
# points the tests at the shared corpus from there.
CORPUS = Path(os.environ.get("DUALTRACE_CORPUS") or REPO_ROOT.parent / "shared" / "corpus")
EXAMPLES = REPO_ROOT / "examples"
DATA = REPO_ROOT / "tests" / "data"
PACKAGES = ("dualtrace", "hooks", "encoder", "memfs")
# The console script next to this interpreter: what a person (and a host) runs.
DUALTRACE = Path(sys.executable).with_name("dualtrace")


def run_dualtrace(*args: str, cwd: Path | None = None, ok: bool = True,
                  timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """``dualtrace ARGS`` in a real process (the console script), in this test's
    environment; with ``ok`` its exit status must be 0. For tests where the process
    is the point (exit codes, stdio, a new user's shell); else use ``run_cli``."""
    proc = subprocess.run([str(DUALTRACE), *args], capture_output=True, text=True,
                          cwd=cwd, env=os.environ.copy(), timeout=timeout)
    if ok:
        assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc


def git_out(repo: Path, *args: str) -> str:
    """``git -C REPO ARGS``'s stdout; a failing git fails the test."""
    return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True,
                          check=True).stdout


def encode_offline(base: Path, transcripts: list[Path]) -> Path:
    """``dualtrace encode --backend offline`` of each transcript, in order, into
    ``base/memory``, with HOME and the state dir inside ``base`` and no embedder: the
    memory a module-scoped recall fixture asks."""
    from click.testing import CliRunner

    from dualtrace.cli import cli

    root = base / "memory"
    with pytest.MonkeyPatch.context() as mp:
        for name, sub in (("HOME", "home"), ("DUALTRACE_HOME", "state")):
            (base / sub).mkdir()
            mp.setenv(name, str(base / sub))
        mp.setenv("DUALTRACE_EMBEDDER", "off")
        mp.setenv("GIT_CONFIG_NOSYSTEM", "1")
        for path in transcripts:
            res = CliRunner().invoke(cli, ["encode", str(path), "--memory-dir", str(root),
                                           "--backend", "offline"], catch_exceptions=False)
            assert res.exit_code == 0, res.output
    return root


def write_chat(path: Path, *turns: tuple[str, str]) -> Path:
    """A plain chat transcript ({"role", "content"} per line) of ``turns`` (role, text)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps({"role": r, "content": c}) + "\n" for r, c in turns))
    return path


def encode_chat(run_cli, tmp_path: Path, name: str, *turns: tuple[str, str]) -> Path:
    """``dualtrace encode --backend offline`` of a written chat into ``tmp_path/mem``."""
    mem = tmp_path / "mem"
    result = run_cli("encode", "--memory-dir", str(mem), "--backend", "offline",
                     str(write_chat(tmp_path / f"{name}.jsonl", *turns)))
    assert result.exit_code == 0, result.output
    return mem


def encode_said(run_cli, tmp_path: Path, user: str, reply: str = "OK.") -> Path:
    """``encode_chat`` of one user line and the agent's reply."""
    return encode_chat(run_cli, tmp_path, "chat", ("user", user), ("assistant", reply))


def memory_text(mem: Path) -> str:
    """Every memory file of ``mem`` but the session records (they keep the user's words
    verbatim), joined: what a test of what was stored searches."""
    return "\n".join(p.read_text(encoding="utf-8") for p in sorted(mem.rglob("*.md"))
                     if ".git" not in p.parts and "sessions" not in p.parts)


def package_files_spelling(pattern: str | re.Pattern[str]) -> list[str]:
    """The package's source files (repo-relative, sorted) whose text has ``pattern``
    (a plain string, or a regex): the "one home" tests' check."""
    def found(text: str) -> bool:
        return bool(pattern.search(text)) if isinstance(pattern, re.Pattern) else pattern in text

    return sorted(str(p.relative_to(REPO_ROOT)) for pkg in PACKAGES
                  for p in (REPO_ROOT / pkg).rglob("*.py") if found(p.read_text("utf-8")))


_REAL_HOME = Path(os.path.expanduser("~")).resolve()


@pytest.fixture(scope="session", autouse=True)
def _no_warm_servers_left(tmp_path_factory):
    """A real host (Claude Code, Codex) starts `dualtrace mcp` with an environment of its
    own, without DUALTRACE_MCP_WARM=0, so e2e tests may start warm servers
    (dualtrace/mcp_warm.py); they must not outlive the run. Found by their environment's
    HOME inside this run's temp dirs."""
    yield
    import signal

    base = str(tmp_path_factory.getbasetemp())
    for entry in Path("/proc").iterdir() if Path("/proc").is_dir() else ():
        try:
            if not entry.name.isdigit() or b"serve_forever" not in (entry / "cmdline").read_bytes():
                continue
            env = dict(v.split(b"=", 1) for v in (entry / "environ").read_bytes().split(b"\0")
                       if b"=" in v)
        except OSError:
            continue
        if any(env.get(k, b"").decode(errors="replace").startswith(base)
               for k in (b"HOME", b"DUALTRACE_HOME")):
            try:
                os.kill(int(entry.name), signal.SIGTERM)
            except ProcessLookupError:
                pass


@pytest.fixture(autouse=True)
def _forget_known_secrets():
    """The redactor remembers the secrets it found for the rest of the process (a value
    found once is masked everywhere after): each test starts with none, as a new worker
    process does, so one test's secret never masks another test's text."""
    yield
    redact = sys.modules.get("dualtrace.encoder.redact")
    if redact is not None:
        redact._KNOWN.clear()


@pytest.fixture(autouse=True)
def isolated_home(tmp_path_factory, monkeypatch):
    """Point every dualtrace path at a temp dir; fail if the real home is used."""
    base = tmp_path_factory.mktemp("home")
    home = base / "home"
    state = base / "state"
    home.mkdir()
    state.mkdir()
    for key in list(os.environ):
        # Inherited git state would redirect our commits; keys would reach a model.
        if key.startswith("GIT_") or key in ("ANTHROPIC_API_KEY", "DUALTRACE_MEMORY_DIR",
                                              "DUALTRACE_CHILD", "DUALTRACE_DISABLE",
                                              "CLAUDE_CONFIG_DIR", "CODEX_HOME"):
            monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("DUALTRACE_HOME", str(state))
    monkeypatch.setenv("XDG_DATA_HOME", str(home / ".local" / "share"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / ".config"))
    # No global git identity: dualtrace must commit without one.
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    # `dualtrace mcp` serves in its own process here; the warm server has its own tests
    # (tests/dualtrace/test_mcp_warm.py). One started anyway exits 2 s after its last session.
    monkeypatch.setenv("DUALTRACE_MCP_WARM", "0")
    monkeypatch.setenv("DUALTRACE_MCP_IDLE", "2")
    # kingfisher compiles its rules once (~2.5 s) and caches the database; share that
    # cache across the run (subprocesses inherit it) instead of one per temp home.
    monkeypatch.setenv("KF_RULE_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "kingfisher-rules"))
    yield state
    from dualtrace import config

    resolved = config.state_dir()
    if _REAL_HOME in (resolved, *resolved.parents) and base not in (resolved, *resolved.parents):
        pytest.fail(f"test used the real home directory: {resolved}")


@pytest.fixture
def state_dir(isolated_home) -> Path:
    return isolated_home


@pytest.fixture
def memdir(tmp_path) -> Path:
    return tmp_path / "memory"


def corpus_path(*parts: str) -> Path:
    path = CORPUS.joinpath(*parts)
    if not path.exists():
        pytest.skip(f"shared corpus not present: {path}")
    return path


def backfilled_corpus(tmp_path_factory, *parts: str) -> Path:
    """A memory dir made by `dualtrace backfill` of a shared corpus folder, as a user
    would (skips without the corpus); for module-scoped fixtures."""
    from click.testing import CliRunner

    from dualtrace.cli import cli

    source = corpus_path(*parts)
    mem = tmp_path_factory.mktemp(parts[-1]) / "memory"
    result = CliRunner().invoke(cli, ["backfill", str(source), "--memory-dir", str(mem)],
                                catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return mem


@pytest.fixture
def run_cli(monkeypatch):
    """The `dualtrace` CLI in process (click's CliRunner), for tests where the process
    boundary is not the point: ``run_cli("status", "--memory-dir", str(memdir))``.

    Returns click's Result (exit_code, output with stderr mixed in, exception); ``cwd``
    runs the command from that directory. Use a real subprocess for hooks, workers and
    anything whose exit status or stdio a host reads.
    """
    from click.testing import CliRunner

    from dualtrace.cli import cli

    def run(*args: str, input: str | None = None, cwd: Path | None = None):
        if cwd is not None:
            monkeypatch.chdir(cwd)
        return CliRunner().invoke(cli, list(args), input=input, catch_exceptions=False)

    return run


def bench_transcript():
    """bench/hostile_corpus.py's ``Transcript`` builder (bench/ is not a package): the one
    loader the encoder tests that write their own transcripts share."""
    import importlib.util
    import sys

    name = "bench_hostile_corpus"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, REPO_ROOT / "bench" / "hostile_corpus.py")
        assert spec and spec.loader
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name].Transcript
