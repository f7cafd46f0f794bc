"""A command that fails because of the set-up (a program or module not installed, a version
manager with no version chosen, a port taken) and works again after set-up steps is an
incident: the failure lines, the agent's stated cause, the steps, resolved by the run that
worked. Read off a real session (bench --part fresh15: `just dev` printed "No version is
set for nodejs" and "sh: vite: command not found" with exit status 0, and worked after
`asdf set nodejs` and `npm install`); here on transcripts the test writes, through the
real encode path."""

from __future__ import annotations

from pathlib import Path

import pytest

from dualtrace.encoder.backends.work import setup_failures
from dualtrace.encoder.cues import _simple_commands
from dualtrace.pipeline import encode_session
from tests.conftest import bench_transcript

Transcript = bench_transcript()
UNSET = "No version is set for nodejs; please run `asdf set [options] nodejs <version>`"


def _incidents(tmp_path: Path, t) -> tuple[object, dict[str, str]]:
    mem = tmp_path / "mem"
    report = encode_session(t.write(tmp_path / "t.jsonl"), memory_dir=mem, backend="offline")
    folder = mem / "incidents"
    found = {p.name: p.read_text() for p in folder.glob("*.md")} if folder.is_dir() else {}
    return report, found


def _dev_server(t, output: str):
    # The agents' usual way to start a server: in the background, then poll it. The
    # line's exit status is the loop's, 0 whatever the server did.
    return t.bash("cd /srv/app && just dev 2>&1 &; sleep 5; curl -sf http://localhost:4982/health"
                  " || echo 'server not ready'", output)


def test_a_masked_setup_failure_fixed_by_steps_is_a_resolved_incident(tmp_path):
    t = Transcript(91).user("Start the dev server and make sure it runs.")
    _dev_server(t, f"Starting dev server...\n{UNSET}\nserver not ready")
    t.say("You have asdf managing Node but no version set for this project. Let me set one.")
    t.bash("asdf list nodejs", "  22.21.1\n  24.12.0")
    t.bash("asdf set nodejs 22.21.1 && node --version", "v22.21.1")
    _dev_server(t, "Starting dev server...\nsh: tsx: command not found\nserver not ready")
    t.bash("npm install 2>&1 | tail -3", "added 212 packages\nfound 0 vulnerabilities")
    _dev_server(t, 'Starting dev server...\nServer running on :4982\n{"ok":true}')
    t.say("The server is up on :4982.")
    report, found = _incidents(tmp_path, t)
    setup = [v for v in found.values() if "failed on the set-up" in v]
    assert len(setup) == 1, (report.operations, list(found))
    text = setup[0]
    description = text.split("\n")[1]
    assert description.startswith("description:") and (
        '`just dev` failed with "No version is set for nodejs" until the agent ran '
        '`asdf set nodejs 22.21.1` and `npm install`.') in description, text
    assert "Then it failed with: sh: tsx: command not found" in text
    assert "Cause (as the agent stated): You have asdf managing Node but no version set" in text
    assert "Fix: ran `asdf set nodejs 22.21.1`, `npm install`" in text
    assert "asdf list" not in text  # looking is no step of the fix
    assert "status: resolved" in text


def test_a_missing_check_program_installed_is_one_incident(tmp_path):
    t = (Transcript(92).user("Run the tests.")
         .bash("pytest -q", "bash: line 1: pytest: command not found", error=True)
         .say("pytest is not installed in this environment.")
         .bash("pip install pytest", "Successfully installed pytest-8.3.1")
         .bash("pytest -q", "3 passed in 0.12s"))
    report, found = _incidents(tmp_path, t)
    setup = [v for v in found.values() if "failed on the set-up" in v]
    assert len(setup) == 1, (report.operations, list(found))
    assert "pytest: command not found" in setup[0] and "Fix: ran `pip install pytest`" in setup[0]


@pytest.mark.parametrize("case", ["quoted by a read", "worked on a plain re-run", "never worked",
                                  "only looked"])
def test_what_is_no_setup_fix(tmp_path, case):
    t = Transcript(93).user("Start the dev server.")
    if case == "quoted by a read":
        t.bash("cat TROUBLESHOOTING.md", "If you see\nsh: tsx: command not found\nrun npm install.")
        t.bash("npm install", "added 3 packages")
        t.bash("cat TROUBLESHOOTING.md", "If you see ... run npm install.")
    elif case == "worked on a plain re-run":
        _dev_server(t, "Error: listen EADDRINUSE: address already in use :::4982")
        t.bash("sleep 3", "")
        _dev_server(t, "Server running on :4982")
    elif case == "never worked":
        _dev_server(t, "sh: tsx: command not found")
        t.bash("npm install", "added 212 packages")
        _dev_server(t, "sh: tsx: command not found")
        t.say("It still fails; I could not get it to start.")
    else:
        _dev_server(t, UNSET)
        t.bash("asdf list nodejs", "  22.21.1")
        t.bash("node --version", "v22.21.1")
        _dev_server(t, "Server running on :4982")
    report, found = _incidents(tmp_path, t)
    assert not any("failed on the set-up" in v for v in found.values()), (case, found)


@pytest.mark.parametrize(("output", "lines"), [
    ("sh: vite: command not found\nsh: tsx: command not found",
     ["sh: vite: command not found", "sh: tsx: command not found"]),
    ("zsh: command not found: poetry", ["zsh: command not found: poetry"]),
    ("ModuleNotFoundError: No module named 'yaml'", ["ModuleNotFoundError: No module named 'yaml'"]),
    ("Error: listen EADDRINUSE: address already in use :::3000",
     ["Error: listen EADDRINUSE: address already in use :::3000"]),
    ("    raise ValueError('tsx: command not found')", []),  # code that holds the words
    ("the command not found error means ...", []),
])
def test_which_lines_are_setup_failures(output, lines):
    assert setup_failures(output) == lines


def test_zsh_background_then_next_command_splits():
    assert _simple_commands("just dev &; sleep 5") == ["just dev", "sleep 5"]


# ---- review 16 (an adversarial new user)

def _setup(tmp_path: Path, t) -> list[str]:
    _report, found = _incidents(tmp_path, t)
    return [v for v in found.values() if "failed on the set-up" in v]


@pytest.mark.parametrize("build", [
    # B1: a step that installs or frees nothing is no fix
    lambda: (Transcript(120).user("Build it.")
             .bash("make build", "sh: protoc: command not found\nmake: *** [build] Error 127", error=True)
             .bash("make lint", "ok").bash("npm run format", "formatted 3 files").bash("make build", "built ok")),
    lambda: (Transcript(121).user("Start the server.")
             .bash("npm run dev", "Error: listen EADDRINUSE: address already in use :::3000", error=True)
             .bash("npx prettier --write src/", "src/a.ts 20ms").bash("npm run dev", "Server listening on :3000")),
    # B2: a redirected run shows nothing; a run masked by `|| true` that fails another way
    lambda: (Transcript(122).user("Start the dev server.")
             .bash("just dev 2>&1 &", "sh: vite: command not found").bash("npm install", "added 212 packages")
             .bash("just dev > /tmp/dev.log 2>&1 &", "").bash("sleep 3; tail -5 /tmp/dev.log", "sh: vite: command not found")
             .say("Still failing; vite is not in package.json.")),
    lambda: (Transcript(123).user("Run the migration.")
             .bash("python manage.py migrate", "ModuleNotFoundError: No module named 'psycopg2'", error=True)
             .bash("pip install --upgrade pip", "Successfully installed pip-24.2")
             .bash("python manage.py migrate || true", "django.db.utils.OperationalError: could not connect")),
    # B3: code bugs that read like set-up failures
    lambda: (Transcript(124).user("The self-check script fails, fix it.")
             .bash("python scripts/selfcheck.py", "check port message... FAIL\n  expected: Error: listen "
                   "EADDRINUSE (port 3000 in use)\n  got:      port busy", error=True)
             .edit("app/errors.py", "return 'port busy'\n", "return str(e)\n")
             .bash("python scripts/selfcheck.py", "all checks OK")),
    lambda: (Transcript(125).user("Fix the script.")
             .bash("node scripts/gen.js", "Error: Cannot find module './lib/helpers'", error=True)
             .edit("scripts/gen.js", "require('./lib/helpers')\n", "require('./lib/helper')\n")
             .bash("node scripts/gen.js", "generated 4 files")),
    lambda: (Transcript(126).user("Fix the import error.")
             .bash("python -m app", "ModuleNotFoundError: No module named 'app.utils'", error=True)
             .edit("app/main.py", "from app.utils import x\n", "from app.common.utils import x\n")
             .bash("pip install -e .", "Successfully installed app").bash("python -m app", "running")),
])
def test_what_is_no_setup_fix_review16(tmp_path, build):
    assert _setup(tmp_path, build()) == []


def test_the_failure_is_the_chains_last_command(tmp_path):  # B4
    t = (Transcript(127).user("Build the frontend.")
         .bash("cd web && npm ci && npm run build", "added 100 packages\n> vite build\nsh: vite: command not found",
               error=True)
         .bash("cd web && npm install -D vite", "added 1 package")
         .bash("cd web && npm ci && npm run build", "added 101 packages\nbuilt in 2.1s"))
    found = _setup(tmp_path, t)
    assert len(found) == 1 and "`npm run build` failed with" in found[0], found


def test_looks_are_no_steps_and_a_step_on_the_working_line_counts(tmp_path):  # B5, B7
    t = (Transcript(128).user("Run the tests.")
         .bash("pytest -q", "bash: line 1: pytest: command not found", error=True)
         .bash("node -v", "v22.1.0").bash("pip freeze | grep -i pytest", "")
         .bash("source .venv/bin/activate && pytest -q", "12 passed"))
    found = _setup(tmp_path, t)
    assert len(found) == 1, found
    description = found[0].split("\n")[1]
    assert ('`pytest -q` failed with "pytest: command not found" until the agent ran '
            '`source .venv/bin/activate`.') in description, description
    assert "node -v" not in found[0] and "pip freeze" not in found[0]


def test_a_secret_step_is_not_named_and_the_description_is_whole(tmp_path):  # B6
    t = (Transcript(129).user("Install deps.")
         .bash("npm test", "sh: husky: command not found", error=True)
         .bash("export NPM_TOKEN=npm_a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8 && npm install", "added 50 packages")
         .bash("brew install husky", "installed").bash("npm install -g husky", "added 1 package")
         .bash("npm test", "3 passed"))
    found = _setup(tmp_path, t)
    assert len(found) == 1, found
    description = found[0].split("\n")[1]
    assert "npm_a1B2c3D4" not in found[0]
    assert description.endswith("(and 1 more steps).'") or description.endswith("(and 1 more steps)."), description
    assert description.count("`") % 2 == 0


@pytest.mark.parametrize("line", [
    "sh: 1: vite: not found", "/bin/sh: 1: vite: not found", "./deploy.sh: line 3: gh: command not found",
    "env: node: No such file or directory", "/usr/bin/env: 'python': No such file or directory",
    "pyenv: python3.11: command not found", "ImportError: No module named yaml",
    "OSError: [Errno 98] Address already in use",
])
def test_more_shapes_of_setup_failures(line):
    assert setup_failures(line) == [line]
