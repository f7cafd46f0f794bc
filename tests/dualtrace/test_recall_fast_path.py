"""`dualtrace recall` without click (issue 11: the CLI's 150 ms budget).

The console script answers a plain ``recall`` in dualtrace.recallcmd; ``--help`` and bad
input go to the click command. Real processes through the console script's entry
(``python -m dualtrace`` runs ``hookcmd.entry``, as the installed script does), compared
with the click command (``python -m dualtrace.cli``) on a real memory directory.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from dualtrace import recallcmd
from tests.dualtrace.test_cli_basic import seed

HEAVY = ("click", "yaml", "jinja2", "git", "anthropic")

# Report which heavy packages the process loaded, after the entry's sys.exit.
PROBE = """
import atexit, os, sys
heavy = {heavy!r}
atexit.register(lambda: sys.stderr.write("LOADED " + ",".join(sorted(
    {{m.split(".")[0] for m in sys.modules if m.split(".")[0] in heavy}})) + "\\n"))
atexit.register(lambda: sys.stderr.write("BLAS %s %s\\n" % (
    os.environ.get("OPENBLAS_NUM_THREADS"), "numpy" in sys.modules)))
sys.argv = ["dualtrace", *{argv!r}]
from dualtrace.hookcmd import entry
entry()
"""


def entry(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "dualtrace", *args], capture_output=True,
                          text=True)


def click_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "dualtrace.cli", *args], capture_output=True,
                          text=True)


def loaded(*argv: str, env: dict[str, str] | None = None,
           ) -> tuple[subprocess.CompletedProcess[str], set[str]]:
    proc = subprocess.run([sys.executable, "-c", PROBE.format(heavy=HEAVY, argv=list(argv))],
                          capture_output=True, text=True, env=env)
    line = [ln for ln in proc.stderr.splitlines() if ln.startswith("LOADED ")][-1]
    return proc, set(filter(None, line[len("LOADED "):].split(",")))


def test_a_plain_recall_loads_neither_click_nor_yaml_jinja2_git_anthropic(memdir):
    seed(memdir)
    proc, heavy = loaded("recall", "--memory-dir", str(memdir), "structured logging json")
    assert proc.returncode == 0, proc.stderr
    assert "decisions/structured-logging-json.md" in proc.stdout
    assert heavy == set()
    # The probe sees them when they load: --help is click's.
    helped, heavy = loaded("recall", "--help")
    assert helped.returncode == 0 and "Usage: dualtrace recall" in helped.stdout
    assert "click" in heavy


def test_a_semantic_recall_process_imports_no_typing_logging_or_hashlib(memdir):
    """What a new semantic recall process does without (session 10: typing ~2-5 ms of
    its imports; logging and OpenSSL's hashlib before it)."""
    pytest.importorskip("dualtrace.memfs.vectors")  # the semantic extra (simsimd)
    seed(memdir)
    probe = PROBE.replace("heavy = ", "heavy = ('typing', 'logging', 'hashlib', 'numpy') or ")
    argv = ["recall", "--memory-dir", str(memdir), "structured logging json"]
    env = {**os.environ, "DUALTRACE_EMBEDDER": "auto"}
    for _ in range(2):  # the first run writes the vocabulary cache, the second reads it
        proc = subprocess.run([sys.executable, "-c", probe.format(heavy=HEAVY, argv=argv)],
                              capture_output=True, text=True, env=env)
        assert proc.returncode == 0 and "structured-logging-json" in proc.stdout, proc.stderr
    line = [ln for ln in proc.stderr.splitlines() if ln.startswith("LOADED ")][-1]
    assert line == "LOADED ", line


def test_a_plain_question_compiles_none_of_the_patterns_it_does_not_use(memdir):
    """The indexer's template pattern, the alternatives ("X or Y"), the answer kinds and
    the file references are compiled at their first use, not by every recall process."""
    seed(memdir)
    assert entry("recall", "--memory-dir", str(memdir), "structured logging json").returncode == 0
    code = f"""
import sys
from dualtrace.memfs import index, recall
recall.recall({str(memdir)!r}, "structured logging json")
print(index._template.cache_info().currsize, recall._compiled.cache_info().currsize)
recall.recall({str(memdir)!r}, "do we keep logs in Zorblax or Quuxdb?")  # unknown names
print(recall._compiled.cache_info().currsize)
recall.recall({str(memdir)!r}, "how long do we keep the JSON logs?")  # asks for a duration
print(recall._compiled.cache_info().currsize)
"""
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["0", "0", "1", "2"]


def test_a_one_question_process_starts_no_blas_thread_pool_unless_asked(memdir):
    import os

    seed(memdir)
    argv = ("recall", "--memory-dir", str(memdir), "structured logging json")
    proc, _ = loaded(*argv)
    assert proc.returncode == 0 and "BLAS 1 " in proc.stderr
    mine, _ = loaded(*argv, env={**os.environ, "OPENBLAS_NUM_THREADS": "2"})
    assert mine.returncode == 0 and "BLAS 2 " in mine.stderr  # the person's setting stands


@pytest.mark.parametrize("args", [
    ["structured", "logging", "json"],
    ["--json", "--limit", "1", "structured logging json"],
    ["--type=decision", "what", "logging", "did", "we", "choose"],
    ["--type", "session", "structured logging"],
    ["--limit=2", "--", "--verbose", "logging"],
    ["never", "discussed", "kubernetes", "helm", "charts"],
])
def test_the_fast_path_answers_exactly_as_the_click_command(memdir, args):
    seed(memdir)
    fast = entry("recall", "--memory-dir", str(memdir), *args)
    slow = click_cli("recall", "--memory-dir", str(memdir), *args)
    assert fast.returncode == slow.returncode == 0, fast.stderr + slow.stderr
    assert (fast.stdout, fast.stderr) == (slow.stdout, slow.stderr)
    if "--json" in args:
        assert json.loads(fast.stdout)["memories"][0]["path"] == "decisions/structured-logging-json.md"


@pytest.mark.parametrize("args", [
    [], ["--limit", "0", "q"], ["--limit", "x", "q"], ["--type", "bogus", "q"], ["--bogus", "q"],
    ["--memory-dir"], ["-h"],
])
def test_help_and_bad_input_are_the_click_commands_own_answer(memdir, args):
    seed(memdir)
    fast = entry("recall", *args)
    slow = click_cli("recall", *args)
    assert (fast.returncode, fast.stdout, fast.stderr) == (slow.returncode, slow.stdout, slow.stderr)
    if args != ["-h"]:
        assert fast.returncode == 1 and fast.stderr.startswith("Error: ")
        assert len(fast.stderr.strip().splitlines()) == 1


def test_a_missing_memory_dir_is_one_error_line(tmp_path):
    fast = entry("recall", "--memory-dir", str(tmp_path / "none"), "anything")
    assert fast.returncode == 1
    assert fast.stderr == f"Error: no memory directory at {tmp_path / 'none'} (nothing stored yet)\n"
    assert fast.stdout == ""


def test_a_bug_on_the_fast_path_is_one_line_and_a_logged_report(memdir, state_dir, monkeypatch,
                                                                capsys):
    from dualtrace.memfs import recall as recall_mod

    seed(memdir)

    def broken(*_a, **_k):
        raise RuntimeError("boom")

    monkeypatch.setattr(recall_mod, "recall", broken)
    assert recallcmd.main(["--memory-dir", str(memdir), "anything"]) == 1
    err = capsys.readouterr().err
    log = state_dir / "logs" / "errors.log"
    assert err == f"Error: internal error: RuntimeError: boom (details in {log})\n"
    assert "Traceback" in log.read_text(encoding="utf-8")


def test_the_parser_takes_only_what_it_can_answer_exactly():
    assert recallcmd.parse(["why", "--json", "json"]) == recallcmd.Args(("why", "json"), as_json=True)
    assert recallcmd.parse(["--limit=100", "q"]).limit == 100
    assert recallcmd.parse(["-"]) == recallcmd.Args(("-",))
    for bad in (["--limit", "101", "q"], ["--json=1", "q"], ["--"], ["--type=x", "q"], ["-v", "q"],
                [""], ["  ", " "]):
        assert recallcmd.parse(bad) is None
