"""A project's own test targets, recipes and CI scripts are checks (review 8 F8): `make
integration`, `just test`, `./scripts/ci.sh`, `bin/rails test`, `npm run test:e2e`,
`cargo nextest run`, `go test ./...` failing, then passing after an edit, are a fixed
failure like `pytest`'s: the gates see the fix arc, the offline encoder stores a resolved
incident named after the failing test. Each runner's own output; Claude Code transcripts
written for the test."""

from __future__ import annotations

import pytest

from dualtrace.encoder import cues
from dualtrace.memfs.store import MemoryStore
from dualtrace.pipeline import encode_session
from tests.encoder.test_offline import claude
from tests.encoder.test_pasted_failures import bash, edit, said, user

PYTEST_FAIL = ("FAILED tests/test_cart.py::test_total_with_coupon - AssertionError: assert 90 == 85\n"
               "1 failed, 20 passed in 0.81s")
RUNS = {
    "make integration": (PYTEST_FAIL + "\nmake: *** [Makefile:12: integration] Error 1",
                         "21 passed in 0.74s", "test_total_with_coupon"),
    "just test": (PYTEST_FAIL + "\nerror: Recipe `test` failed on line 3 with exit code 1",
                  "21 passed in 0.74s", "test_total_with_coupon"),
    "./scripts/ci.sh": ("ruff: all checks passed\n" + PYTEST_FAIL, "ruff: all checks passed\n21 passed",
                        "test_total_with_coupon"),
    "bin/rails test": ("Failure:\nCartTest#test_total_with_coupon [test/models/cart_test.rb:12]:\n"
                       "Expected: 85\n  Actual: 90\n\n21 runs, 40 assertions, 1 failures, 0 errors, 0 skips",
                       "21 runs, 40 assertions, 0 failures, 0 errors, 0 skips", "test_total_with_coupon"),
    "npm run test:e2e": ("  1) [chromium] \u203a tests/cart.spec.ts:12:5 \u203a cart \u203a applies the coupon "
                         "before tax\n\n    Error: expect(received).toHaveText(expected)\n"
                         "    Expected: \"$85.00\"\n    Received: \"$90.00\"\n\n  1 failed\n  20 passed (12.1s)",
                         "  21 passed (11.8s)", "cart.spec.ts"),
    "cargo nextest run": ("        FAIL [   0.004s] shop cart::tests::total_with_coupon\n"
                          "thread 'cart::tests::total_with_coupon' panicked at src/cart.rs:40:9:\n"
                          "assertion `left == right` failed\n  left: 90\n right: 85\n"
                          "     Summary [   0.020s] 21 tests run: 20 passed, 1 failed, 0 skipped",
                          "     Summary [   0.019s] 21 tests run: 21 passed, 0 skipped", "total_with_coupon"),
    "go test ./...": ("--- FAIL: TestTotalWithCoupon (0.00s)\n    cart_test.go:14: got 90, want 85\nFAIL\n"
                      "FAIL\texample.com/shop/cart\t0.003s\nFAIL", "ok  \texample.com/shop/cart\t0.002s",
                      "TestTotalWithCoupon"),
}


@pytest.mark.parametrize("command", list(RUNS))
def test_a_projects_check_failing_then_passing_after_an_edit_is_a_resolved_incident(command, tmp_path):
    failing, passing, names = RUNS[command]
    assert cues.check_command(command) and cues.TEST_COMMAND.search(command)
    report = encode_session(claude(tmp_path / "s.jsonl", [
        user("Run the test suite and fix what breaks."),
        *bash(1, command, "Exit code 2\n" + failing, failed=True),
        said(2, "The total is wrong because the coupon is applied after tax instead of before."),
        *edit(3, "shop/cart.py"),
        *bash(4, command, passing),
        said(5, "Fixed: the coupon now applies before tax."),
    ]), memory_dir=tmp_path / "mem", backend="offline")
    assert report.gates["min_tier"] == "FULL", report.gates
    (inc,) = [f for f in MemoryStore(tmp_path / "mem").scan().facts() if f.type == "incident"]
    assert inc.status == "resolved" and f"`{command}` passed afterwards" in inc.body, inc.body
    assert names in inc.description, inc.description


@pytest.mark.parametrize(("command", "check"), [
    ("make -C services/api test", "make -c services/api test"), ("make -j4 test-unit", "make -j4 test-unit"),
    ("bash scripts/run-tests.sh", "run-tests.sh"), ("bundle exec rails test test/models", "rails test"),
    ("npx playwright test --project=chromium", "playwright test"), ("just e2e", "just e2e"),
])
def test_more_spellings_of_a_projects_checks(command, check):
    assert cues.check_command(command) == check


@pytest.mark.parametrize("command", ["make install", "make clean", "just fmt", "cat scripts/ci.sh",
                                     "vim tests/test_cart.py", "./scripts/deploy.sh"])
def test_what_runs_no_check_stays_no_check(command):
    assert cues.check_command(command) is None


def test_a_piped_go_test_run_is_named_as_it_ran(tmp_path):
    # the sentence reader cut "`go test ./... 2>&1 | tail -30` failed" after "./...": the
    # description backticked `go test ./`, a command the session never ran
    failing, passing, _names = RUNS["go test ./..."]
    command = "go test ./... 2>&1 | tail -30"
    encode_session(claude(tmp_path / "s.jsonl", [
        user("Run the test suite and fix what breaks."),
        *bash(1, command, failing),  # tail's exit status: the output is the verdict
        said(2, "The total is wrong because the coupon is applied after tax instead of before."),
        *edit(3, "shop/cart.go"),
        *bash(4, command, passing),
        said(5, "Fixed: the coupon now applies before tax."),
    ]), memory_dir=tmp_path / "mem", backend="offline")
    (inc,) = [f for f in MemoryStore(tmp_path / "mem").scan().facts() if f.type == "incident"]
    assert inc.description.startswith(f"`{command}` failed: test TestTotalWithCoupon"), inc.description
