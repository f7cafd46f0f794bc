"""Two failures in one run are two incidents, and the agent's diagnosis of them is no
decision (review 8 F3, issue 12 item 2: "one incident per failure signature").

A pytest run reporting "2 failed" used to give one incident named after the first test, with
the whole diagnosis (about both) as its cause and both fixes' files; the second failure was
lost. A diagnosis opening "Confirmed: ..." or "Summary: ..." right after the failing run was
stored as a decision the conversation settled. Tests that all fail with one specific error
(a module every test imports is broken) stay one failure. Claude Code transcripts written
for the test."""

from __future__ import annotations

from pathlib import Path

import pytest

from dualtrace.memfs.store import MemoryStore
from dualtrace.pipeline import encode_session
from tests.encoder.test_offline import claude
from tests.encoder.test_pasted_failures import bash, edit, said, user

PYTEST_TWO = """..F..F..                                                                 [100%]
=================================== FAILURES ===================================
___________________________ test_total_applies_coupon ___________________________

    def test_total_applies_coupon():
>       assert total(cart_with_coupon()) == 85
E       assert 90 == 85

tests/test_cart.py:9: AssertionError
__________________________ test_invoice_number_format __________________________

    def test_invoice_number_format():
>       assert invoice_number(7) == "INV-0007"

shop/invoice.py:14: in invoice_number
    prefix = settings["prefix"]
E   KeyError: 'prefix'
=========================== short test summary info ============================
FAILED tests/test_cart.py::test_total_applies_coupon - assert 90 == 85
FAILED tests/test_invoice.py::test_invoice_number_format - KeyError: 'prefix'
2 failed, 6 passed in 0.12s"""
EXUNIT_TWO = """..

  1) test total applies the coupon before tax (Shop.CartTest)
     test/shop/cart_test.exs:12
     Assertion with == failed
     code:  assert Cart.total(cart) == 85
     left:  90
     right: 85

  2) test invoice number is zero padded (Shop.InvoiceTest)
     test/shop/invoice_test.exs:8
     ** (KeyError) key :prefix not found in: %{}

10 tests, 2 failures"""
DIAGNOSIS = ("Confirmed: two separate bugs. test_total_applies_coupon fails because the coupon is "
             "applied after tax. test_invoice_number_format fails because settings no longer has a "
             "'prefix' key.")
RUNS = {"pytest": ("python -m pytest -q", PYTEST_TWO, "8 passed in 0.10s", "shop/cart.py", "shop/invoice.py"),
        "ExUnit": ("mix test", EXUNIT_TWO, "10 tests, 0 failures", "lib/shop/cart.ex", "lib/shop/invoice.ex")}


def _facts(tmp_path: Path, records: list[dict]):
    encode_session(claude(tmp_path / "s.jsonl", records), memory_dir=tmp_path / "mem", backend="offline")
    return MemoryStore(tmp_path / "mem").scan().facts()


@pytest.mark.parametrize("runner", list(RUNS))
def test_two_failures_in_one_run_fixed_are_two_incidents_each_with_its_own_fix(runner, tmp_path):
    command, failing, passing, cart, invoice = RUNS[runner]
    facts = _facts(tmp_path, [
        user("Run the tests and fix the failures."),
        *bash(1, command, "Exit code 1\n" + failing, failed=True),
        said(2, DIAGNOSIS),
        *edit(3, cart), *edit(4, invoice),
        *bash(5, command, passing),
        said(6, "Fixed both: the coupon applies before tax, and the invoice prefix has a default."),
    ])
    assert not [f for f in facts if f.type == "decision"], [f.description for f in facts]
    incidents = [f for f in facts if f.type == "incident"]
    assert len(incidents) == 2, [f.description for f in incidents]
    (coupon,) = [f for f in incidents if "coupon" in f.description]
    (prefix,) = [f for f in incidents if "prefix" in f.description]
    assert coupon.status == prefix.status == "resolved"
    assert f"`{cart}`" in coupon.body and f"`{invoice}`" not in coupon.body
    assert f"`{invoice}`" in prefix.body and f"`{cart}`" not in prefix.body
    if runner == "pytest":  # the cause the agent stated for each test, not both at once
        assert "Cause (as the agent stated): test_total_applies_coupon fails because" in coupon.body
        assert "'prefix' key" not in coupon.body and "after tax" not in prefix.body


def test_the_diagnosis_of_a_failing_run_left_unfixed_is_no_decision(tmp_path):
    facts = _facts(tmp_path, [
        user("Run the tests."),
        *bash(1, "python -m pytest -q", "Exit code 1\n" + PYTEST_TWO, failed=True),
        said(2, "Summary: the coupon is applied after tax instead of before, and invoice_number "
                "must not read settings['prefix'] without a default."),
    ])
    assert not [f for f in facts if f.type == "decision"], [f.description for f in facts]


def test_tests_failing_with_one_specific_error_are_one_incident(tmp_path):
    broken = "\n".join(f"FAILED tests/test_{m}.py::test_{m}_loads - ModuleNotFoundError: No module named "
                       "'shop.money'" for m in ("cart", "invoice", "refund"))
    facts = _facts(tmp_path, [
        user("Run the tests and fix the failures."),
        *bash(1, "python -m pytest -q", f"Exit code 1\n{broken}\n3 failed in 0.05s", failed=True),
        said(2, "Every test fails because shop/money.py was renamed to shop/currency.py."),
        *edit(3, "shop/__init__.py"),
        *bash(4, "python -m pytest -q", "8 passed in 0.10s"),
        said(5, "Fixed: the package imports shop.currency again."),
    ])
    incidents = [f for f in facts if f.type == "incident"]
    assert len(incidents) == 1 and incidents[0].status == "resolved", [f.description for f in incidents]


def test_a_pasted_run_with_two_failures_is_two_incidents(tmp_path):
    facts = _facts(tmp_path, [
        user(f"I get this when I run the tests:\n```\n$ python -m pytest -q\n{PYTEST_TWO}\n```\ncan you fix it?"),
        said(1, DIAGNOSIS),
        *edit(2, "shop/cart.py"), *edit(3, "shop/invoice.py"),
        *bash(4, "python -m pytest -q", "8 passed in 0.10s"),
        said(5, "Fixed both."),
    ])
    incidents = [f for f in facts if f.type == "incident"]
    assert len(incidents) == 2, [f.description for f in incidents]
    (coupon,) = [f for f in incidents if "coupon" in f.description]
    (prefix,) = [f for f in incidents if "prefix" in f.description]
    assert coupon.status == prefix.status == "resolved"
    assert "`shop/invoice.py`" not in coupon.body and "`shop/cart.py`" not in prefix.body
