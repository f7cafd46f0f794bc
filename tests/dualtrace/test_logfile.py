"""dualtrace.logfile: the one log writer (hook, worker, CLI errors, recovery notes)."""

from __future__ import annotations

import os
import re
import stat

from dualtrace import logfile
from tests.conftest import package_files_spelling


def test_append_makes_the_folder_keeps_lines_and_is_private(tmp_path):
    path = logfile.path(tmp_path, "hook.log")
    assert path == str(tmp_path / "logs" / "hook.log")
    logfile.append(path, logfile.line("first"))
    logfile.append(path, logfile.line("second é"))
    lines = open(path, encoding="utf-8").read().splitlines()
    assert [re.sub(r"^\S+ pid=\d+ ", "", line) for line in lines] == ["first", "second é"]
    assert lines[0].split()[1] == f"pid={os.getpid()}"
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600


def test_past_the_cap_the_log_is_rotated_once(tmp_path):
    path = str(tmp_path / "worker.log")
    logfile.append(path, "a" * 100 + "\n", cap=50)
    logfile.append(path, "b\n", cap=50)  # over the cap: a... goes to .1
    logfile.append(path, "c\n", cap=50)
    assert open(path).read() == "b\nc\n"
    assert open(path + ".1").read() == "a" * 100 + "\n"
    logfile.append(path, "d" * 60 + "\n", cap=50)
    logfile.append(path, "e\n", cap=50)  # one generation kept: .1 is replaced
    assert open(path + ".1").read() == "b\nc\n" + "d" * 60 + "\n"
    assert open(path).read() == "e\n"


def test_an_unwritable_log_raises_for_the_caller_to_report(tmp_path):
    blocker = tmp_path / "logs"
    blocker.write_text("a file where the folder should be")
    try:
        logfile.append(logfile.path(tmp_path, "hook.log"), "x\n")
    except OSError:
        pass
    else:
        raise AssertionError("expected OSError")


# Appends that are data, not logs (never rotated): the run records, Letta's transcript.
DATA_APPENDS = ["dualtrace/queue.py", "hooks/letta.py"]


def test_every_log_is_written_through_logfile():
    appends = re.compile(r"""open\([^)]*["']a["']|O_APPEND""")
    assert package_files_spelling(appends) == sorted(["dualtrace/logfile.py", *DATA_APPENDS])


def test_an_internal_error_report_lands_in_errors_log(state_dir):
    from dualtrace import cli

    try:
        raise RuntimeError("boom")
    except RuntimeError as exc:
        path = cli.log_error(exc, context="encode x")
    assert path == state_dir / "logs" / "errors.log"
    report = path.read_text(encoding="utf-8")
    assert report.startswith("--- ") and "\ncontext: encode x\n" in report
    assert report.rstrip().endswith("RuntimeError: boom")


def test_a_lazy_logger_imports_logging_at_its_first_message_and_logs_there(caplog):
    import subprocess
    import sys

    code = ("import sys; from dualtrace.logfile import LazyLogger; log = LazyLogger('x.y'); "
            "print('logging' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
    from dualtrace.memfs import index

    with caplog.at_level("INFO", logger="dualtrace.memfs.index"):
        index.log.warning("index %s corrupt (%s); rebuilding", "p", "bad")
        index.log.info("not indexing %s", "big.md")
    assert [(r.name, r.levelname, r.getMessage()) for r in caplog.records] == [
        ("dualtrace.memfs.index", "WARNING", "index p corrupt (bad); rebuilding"),
        ("dualtrace.memfs.index", "INFO", "not indexing big.md")]
