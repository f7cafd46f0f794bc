"""Who a moment quotes (review 10 LOW): "the user said" only for the user's words, the
agent's as the agent's, and a line the encoder composed from the session's runs ("`pytest`
failed: ...") stated as what happened, never as "the session said". A redacted value is no
identifier: a moment never says it "mentions `[REDACTED...]`"."""

from __future__ import annotations

from pathlib import Path

from dualtrace.pipeline import encode_session
from tests.encoder.test_offline import claude
from tests.encoder.test_pasted_failures import bash, edit, said, user

FAIL = ("FAILED tests/test_cart.py::test_total - AssertionError: assert 90 == 100\n"
        "1 failed, 4 passed in 0.21s")


def scenes(mem: Path) -> list[str]:
    return [p.read_text(encoding="utf-8") for p in sorted((mem / "scenes").rglob("*.md"))]


def test_an_incident_moment_states_the_failure_and_quotes_no_one(tmp_path):
    encode_session(claude(tmp_path / "s.jsonl", [
        user("The cart total is wrong when a coupon applies, please fix it."),
        *bash(1, "pytest tests/test_cart.py", FAIL, failed=True),
        said(2, "The coupon was subtracted twice in cart.py; I removed the second subtraction."),
        *edit(3, "app/cart.py"),
        *bash(4, "pytest tests/test_cart.py", "5 passed in 0.19s"),
        said(5, "Fixed: the coupon is applied once and the tests pass."),
    ]), memory_dir=tmp_path / "mem", backend="offline")
    moments = [s for s in scenes(tmp_path / "mem") if "incidents" in s or "failed" in s]
    assert moments, scenes(tmp_path / "mem")
    for scene in moments:
        assert "the session said" not in scene, scene
    assert any("): `pytest tests/test_cart.py` failed" in s for s in moments), moments


def test_the_users_decision_is_quoted_as_the_users_and_no_redacted_value_is_mentioned(tmp_path):
    decision = ("We decided to sign the webhooks with HMAC-SHA256 instead of a shared header, "
                "because a header can be replayed; the secret is `whsec_9f8e7d6c5b4a3f2e1d0c9b8a`.")
    encode_session(claude(tmp_path / "s.jsonl", [
        user(decision), said(1, "I'll switch the webhook signing to HMAC-SHA256."),
        *edit(2, "app/webhooks.py"),
        *bash(3, "pytest tests/test_webhooks.py", "3 passed in 0.12s"),
        said(4, "Webhooks are now signed with HMAC-SHA256."),
    ]), memory_dir=tmp_path / "mem", backend="offline")
    found = scenes(tmp_path / "mem")
    assert any("the user said: \"We decided to sign the webhooks" in s for s in found), found
    for scene in found:
        assert "whsec_9f8e7d6c" not in scene
        assert "mentions `[REDACTED" not in scene and "mentions `REDACTED" not in scene, scene
