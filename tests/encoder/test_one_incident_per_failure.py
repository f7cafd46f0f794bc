"""Another test failing with the same error type is another incident (review 8 F16, issue
12 item 2: "one incident per failure signature: test + error type + message").

A second AssertionError, in a different test of the same test file, used to be filed as a
recurrence of the first incident: unittest's "FAIL: test_x (module.Class)" and pytest's
section header (its summary cut off by `| head`) named no test, so both signatures were
"AssertionError", and the test file's name passed for the failing test. The same failure
in a later session still recurs (updated in place). Claude Code transcripts written for
the test."""

from __future__ import annotations

from pathlib import Path

import pytest

from dualtrace.memfs.store import MemoryStore
from dualtrace.pipeline import encode_session
from tests.encoder.test_offline import claude
from tests.encoder.test_pasted_failures import bash, edit, said, user


def unittest_failure(test: str, line: int, values: str) -> str:
    return (f"F.\n======================================================================\n"
            f"FAIL: {test} (tests.test_cart.CartTest)\n"
            f"----------------------------------------------------------------------\n"
            f"Traceback (most recent call last):\n  File \"/home/dev/app/tests/test_cart.py\", line {line}, "
            f"in {test}\n    self.assertEqual(*result)\nAssertionError: {values}\n\n"
            f"Ran 2 tests in 0.002s\n\nFAILED (failures=1)")


def pytest_head(test: str, line: int, values: str) -> str:
    return (f"F.\n=================================== FAILURES ===================================\n"
            f"___________________________ {test} ___________________________\n\n"
            f"    def {test}():\n>       assert {values}\nE       assert {values}\n\n"
            f"tests/test_cart.py:{line}: AssertionError")


CASES = {
    "unittest": ("python -m unittest tests.test_cart", unittest_failure),
    "pytest, summary cut off": ("python -m pytest tests/test_cart.py 2>&1 | head -12", pytest_head),
}
COUPON = ("test_total_applies_coupon", 9, "90 != 85", "shop/cart.py",
          "The total is 90 because the coupon is applied after tax instead of before.")
SHIPPING = ("test_shipping_free_over_fifty", 31, "4.99 != 0", "shop/shipping.py",
            "Shipping is charged because the threshold check uses > instead of >=.")


def episode(command, output, failure) -> list[dict]:
    test, line, values, path, cause = failure
    return [user("The cart tests fail, please fix them."),
            *bash(1, command, "Exit code 1\n" + output(test, line, values), failed=True),
            said(2, cause), *edit(3, path), *bash(4, command, "Ran 2 tests in 0.002s\n\nOK"),
            said(5, "Fixed: the cart tests pass.")]


def encode(tmp_path: Path, name: str, sid: str, records: list[dict]) -> list:
    path = claude(tmp_path / f"{name}.jsonl", records)
    path.write_text(path.read_text().replace("cafe0000-0000-4000-8000-000000000001", sid))
    encode_session(path, memory_dir=tmp_path / "mem", backend="offline")
    return [f for f in MemoryStore(tmp_path / "mem").scan().facts() if f.type == "incident"]


ONE, TWO = "aaaaaaaa-0000-4000-8000-000000000001", "bbbbbbbb-0000-4000-8000-000000000002"


@pytest.mark.parametrize("case", list(CASES))
def test_another_test_failing_with_the_same_error_type_is_a_new_incident(case, tmp_path):
    command, output = CASES[case]
    (first,) = encode(tmp_path, "s1", ONE, episode(command, output, COUPON))
    assert "test_total_applies_coupon" in first.description, first.description
    found = encode(tmp_path, "s2", TWO, episode(command, output, SHIPPING))
    assert len(found) == 2, [f.path for f in found]
    coupon = next(f for f in found if f.path == first.path)
    shipping = next(f for f in found if f.path != first.path)
    assert len(coupon.sessions) == 1 and "shipping" not in coupon.body.lower()
    assert "test_shipping_free_over_fifty" in shipping.description and shipping.status == "resolved"


@pytest.mark.parametrize("case", list(CASES))
def test_the_same_test_failing_again_later_still_recurs(case, tmp_path):
    command, output = CASES[case]
    (first,) = encode(tmp_path, "s1", ONE, episode(command, output, COUPON))
    (again,) = encode(tmp_path, "s2", TWO, episode(command, output, COUPON))
    assert again.path == first.path and len(again.sessions) == 2


def test_two_bare_assertion_errors_with_other_values_are_two_incidents_of_one_session(tmp_path):
    check = "python -m pytest -q tests/totals_check.py"

    def run(n: int, values: str) -> list[dict]:
        # no test named: the error type and its values are all the output says
        return bash(n, check, "Exit code 1\nTraceback (most recent call last):\n"
                    "  File \"tests/totals_check.py\", line 9, in <module>\n    assert ok\n"
                    f"AssertionError: {values}", failed=True)

    found = encode(tmp_path, "s1", ONE, [
        user("The totals check fails, please fix it."),
        *run(1, "90 != 85"),
        said(2, "The total is 90 because the coupon is applied after tax instead of before."),
        *edit(3, "shop/cart.py"),
        *run(4, "4.99 != 0"),
        said(5, "Now shipping is charged because the threshold check uses > instead of >=."),
        *edit(6, "shop/shipping.py"),
        *bash(7, check, "all totals ok"),
        said(8, "Fixed: both totals are right."),
    ])
    assert len(found) == 2, [(f.path, f.description) for f in found]
