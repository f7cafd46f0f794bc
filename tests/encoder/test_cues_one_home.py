"""Phrase cues and the test-command pattern have one home: encoder/cues.py."""

from __future__ import annotations

import re

from dualtrace.encoder import cues, records
from tests.conftest import package_files_spelling


def test_the_test_command_pattern_is_spelled_only_in_cues():
    spelled = re.compile(r"py\\\\?\.test")  # the regex text r"py\.test" of a test-runner list
    assert package_files_spelling(spelled) == ["encoder/cues.py"]


def test_every_test_runner_the_digest_knew_is_a_test_command():
    for command in ("pytest -q", "python -m py.test", "tox -e py311", "nox -s tests",
                    "python -m unittest", "mix test", "go test ./...", "cargo test",
                    "npx jest", "pnpm run test", "make check", "./gradlew test"):
        assert cues.TEST_COMMAND.search(command), command
    assert not cues.TEST_COMMAND.search("ls tests/")


def test_one_check_command_pattern_lives_in_cues_and_records_and_offline_use_it():
    from dualtrace.encoder import records
    from dualtrace.encoder.backends import work

    assert records.CHECK_COMMAND is cues.CHECK_COMMAND is work.CHECK_COMMAND
    spelled = re.compile(r"golangci-lint|dialyzer")
    assert package_files_spelling(spelled) == ["encoder/cues.py"]


def test_a_check_is_a_test_lint_type_or_build_command_in_any_case():
    checks = ["pytest -q", "uv run mypy dualtrace", "ruff check .", "npx tsc --noEmit", "make",
              "pre-commit run --all-files", "cargo build", "golangci-lint run",
              "mix credo --strict", "uv run ty check", "just lint", "act -j test", "MYPY src"]
    for command in checks:
        assert cues.CHECK_COMMAND.search(command), command
        assert records.is_check(command), command
    for command in ("ls tests/", "git status", "make install", "rm .dialyzerignore"):
        assert not cues.CHECK_COMMAND.search(command), command
