"""Secrets the user names in plain words (review 8 F13): "the API key is V", "the admin
PIN is V", "login with admin / V", "the VPN passphrase: V" are redacted like "the
password is V", end to end: no memory file, session record, index, commit or model
request holds the value; ordinary prose around the same labels is kept."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from dualtrace import config
from dualtrace.encoder.redact import Redactor
from tests.conftest import encode_chat, write_chat
from tests.encoder.test_backend_anthropic import cli
from tests.fake_anthropic import FakeAnthropic, message, tool_use

LABELLED = [
    ("the API key is 3f9a8b7c6d5e4f3a", "3f9a8b7c6d5e4f3a"),
    ("the token is abc123XYZ789tok", "abc123XYZ789tok"),
    ("our secret is 'blue42omaha'", "blue42omaha"),
    ("the recovery code is 7H2K-9Q4M-X8ZP", "7H2K-9Q4M-X8ZP"),
    ("login with admin / S3cretAdm1n", "S3cretAdm1n"),
    ("the admin PIN is 483920", "483920"),
    ("the VPN passphrase: correct horse battery staple", "correct horse battery staple"),
    # kept until session 10: a quoted letters-only value, a quoted two-word passphrase, a
    # code written in groups
    ("our secret is 'bluemoonrising'", "bluemoonrising"),
    ("the wifi passphrase is 'purple elephant'", "purple elephant"),
    ("the door code is 4 8 3 9", "4 8 3 9"),
    # review 10: a plain-letters password, a 4-digit PIN, a safe's combination
    ("the password for the db is swordfish", "swordfish"),
    ("my PIN: 2468", "2468"),
    ("the combination to the safe is 12 34 56", "12 34 56"),
]

PROSE = [
    "the token is expired", "the key is to keep it simple", "the secret is good tests",
    "the PIN pad", "the API key is in Vault", "the access token: expired", "the PIN is wrong",
    "the passphrase is stored in the vault", "the recovery code is printed on the card",
    "the license key is sha256", "the token is valid for 3600s", "the key is v1.2.3",
    "the secret is 42", "login with your SSO account", "key: v1-deps-cache",
    "the VPN passphrase: ask Dana for it", "tokens: 1500",
    "the token is 'expired'", "the PIN is 4 digits", "the PIN is 4-6 digits",
    "the passphrase is 'too short'", "the API key is '<your-key>'",
    "set the password to '${DB_PASS}'", "the auth header is 'Bearer'",
    "the password is hashed", "the password is incorrect", "password = getpass()",
    "reset the password to something stronger", "the security code is 3 digits",
    "the lock code expires in 2025", "switch the password to env vars",
]


def _line(phrase: str) -> str:
    return f"We decided to deploy from the jump host; {phrase}, use it for the deploy."


def test_labelled_values_are_redacted_and_prose_is_kept():
    r = Redactor()
    for phrase, value in LABELLED:
        out = r.redact(_line(phrase))
        assert value not in out and "[REDACTED:" in out, phrase
        assert "jump host" in out and "use it for the deploy" in out, out
    for more, value in [("the Stripe secret key: k9Fq2LmX7pZ", "k9Fq2LmX7pZ"),
                        ("the wifi PIN code = 90210417", "90210417"),
                        ("the 2FA backup codes: 48-WQ-7731", "48-WQ-7731"),
                        ("the token for the staging box is t0k3nStaging", "t0k3nStaging"),
                        ("the key was 9b1deb4d3b7d", "9b1deb4d3b7d"),
                        ("seed phrase is apple river candle orbit", "apple river candle orbit")]:
        assert value not in r.redact(more), more
    for prose in PROSE:
        assert r.redact(prose) == prose, prose
        assert r.redact(_line(prose)) == _line(prose), prose


def _leaks(mem: Path, state: Path, value: str) -> list[str]:
    """Where ``value`` is found: any file of the memory dir (files, records, the index)
    or the state dir, or the memory repo's `git log -p`."""
    found = [str(p) for root in (mem, state) for p in root.rglob("*")
             if p.is_file() and ".git" not in p.relative_to(root).parts
             and value.encode() in p.read_bytes()]
    log = subprocess.run(["git", "log", "-p", "--all"], cwd=mem, capture_output=True,
                         text=True, check=True).stdout
    return found + (["git log -p"] if value in log else [])


@pytest.mark.parametrize("phrase,value", LABELLED, ids=[v for _p, v in LABELLED])
def test_offline_encode_keeps_no_labelled_secret(run_cli, tmp_path, phrase, value):
    mem = encode_chat(run_cli, tmp_path, "nl", ("user", _line(phrase)), ("assistant", "OK."))
    decisions = list((mem / "decisions").glob("*.md"))
    assert decisions, "the decision was stored"
    assert "jump host" in decisions[0].read_text()
    assert list((mem / "sessions").rglob("*.md")), "a session record was written"
    assert _leaks(mem, config.state_dir(), value) == []


def test_prose_about_credentials_is_stored_as_written(run_cli, tmp_path):
    line = "We decided to deploy from the jump host; the API key is in Vault, the token is expired."
    mem = encode_chat(run_cli, tmp_path, "prose", ("user", line), ("assistant", "OK."))
    text = "".join(p.read_text() for p in (mem / "decisions").glob("*.md"))
    assert "REDACTED" not in text and "in Vault" in text


def test_anthropic_request_holds_no_labelled_secret(tmp_path):
    transcript = write_chat(tmp_path / "nl.jsonl",
                            *[("user", _line(p)) for p, _v in LABELLED], ("assistant", "OK."))
    with FakeAnthropic() as api:
        api.default = lambda body: message(tool_use("finish", {}))
        proc = cli(["encode", "--backend", "anthropic", "--memory-dir", str(tmp_path / "mem"),
                    str(transcript)], tmp_path, api)
        assert proc.returncode == 0, proc.stderr
        raw = b"\n".join(r.raw for r in api.requests).decode()
    assert api.message_requests() and "jump host" in raw and "REDACTED" in raw
    assert [v for _p, v in LABELLED if v in raw or json.dumps(v)[1:-1] in raw] == []


def test_a_code_redacted_once_is_redacted_in_any_spacing():
    """Review 10: the agent's later "4839" kept the code the user wrote "4 8 3 9"."""
    r = Redactor()
    out = r.redact("the door code is 4 8 3 9. I typed the code 4839 and then 4-8-3-9.")
    assert "4839" not in out and "4 8 3 9" not in out and "4-8-3-9" not in out, out

