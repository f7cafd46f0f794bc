"""Redaction: a self-written corpus of secrets (must all go) and look-alikes (must stay).

Secrets are assembled from pieces at run time so this file itself never contains a
literal credential a scanner would flag.
"""

from __future__ import annotations

import json
import random
import string
from dataclasses import replace
from pathlib import Path

import pytest

from dualtrace.encoder.digest import build_digest
from dualtrace.encoder.redact import (
    INJECT_CLOSE,
    INJECT_OPEN,
    Redactor,
    home_to_tilde,
    redact_session,
)
from dualtrace.errors import DualtraceError
from dualtrace.hooks.transcripts import read_transcript
from dualtrace.pipeline import prepare
from tests.conftest import DATA

RNG = random.Random(1234)
ALNUM = string.ascii_letters + string.digits


def rnd(n: int, alphabet: str = ALNUM) -> str:
    return "".join(RNG.choice(alphabet) for _ in range(n))


def lower_hex(n: int) -> str:
    return rnd(n, "0123456789abcdef")


def secrets_by_kind() -> list[tuple[str, str, str]]:
    """(kind, secret value, text that carries it)."""
    out: list[tuple[str, str, str]] = []

    def add(kind: str, value: str, template: str = "{}") -> None:
        out.append((kind, value, template.format(value)))

    for _ in range(4):
        add("anthropic-api-key", "sk-" + "ant-api03-" + rnd(93) + "AA", "ANTHROPIC_API_KEY={}")
        add("openai-api-key", "sk-" + "proj-" + rnd(48), "client = OpenAI(api_key='{}')")
        add("aws-access-key", "AKIA" + rnd(16, string.ascii_uppercase + string.digits),
            "aws configure set aws_access_key_id {}")
        add("aws-secret-key", rnd(40, ALNUM + "/+"), "aws_secret_access_key = {}")
        add("github-token", "ghp_" + rnd(36), "git remote set-url origin https://x:{}@github.com/o/r")
        add("gitlab-token", "glpat-" + rnd(20), "export GITLAB_TOKEN={}")
        add("slack-token", "xoxb-" + rnd(12, string.digits) + "-" + rnd(13, string.digits) + "-"
            + rnd(24, string.ascii_lowercase + string.digits), "SLACK: {}")
        add("stripe-key", "sk_" + "live_" + rnd(24), "stripe.api_key = \"{}\"")
        add("google-api-key", "AIza" + rnd(35, ALNUM + "_-"), "https://maps.googleapis.com/x?key={}")
        add("jwt", "eyJ" + rnd(30, ALNUM) + ".eyJ" + rnd(40, ALNUM) + "." + rnd(43, ALNUM + "_-"),
            "cookie: session={}")
        add("bearer-token", rnd(32), "curl -H 'Authorization: Bearer {}' https://api.example.com")
        add("url-password", "P" + rnd(14) + "9", "DATABASE_URL=postgres://app:{}@db.internal:5432/app")
        add("secret-value", "hunter" + rnd(6) + "!", "DB_PASSWORD={}")
        add("high-entropy", rnd(32), 'SIGNING = "{}"')
        add("private-key", "-----BEGIN RSA PRIVATE KEY-----\n" + rnd(64) + "\n" + rnd(64)
            + "\n-----END RSA PRIVATE KEY-----", "key file:\n{}\n")
    add("slack-webhook", "https://hooks.slack.com/services/T" + rnd(8) + "/B" + rnd(8) + "/"
        + rnd(24))
    add("sendgrid-key", "SG." + rnd(22) + "." + rnd(43))
    add("npm-token", "npm_" + rnd(36), "//registry.npmjs.org/:_authToken={}")
    add("huggingface-token", "hf_" + rnd(34))
    add("twilio-key", "SK" + lower_hex(32))
    add("secret-value", "Pa55" + rnd(8) + "#", "Server=tcp:db;Database=app;User Id=sa;Password={};")
    add("secret-value", rnd(20), '{{"client_secret": "{}"}}')
    add("secret-value", rnd(18), "api_key: {}")
    add("google-oauth-secret", "GOCSPX-" + rnd(28))
    add("private-key", "-----BEGIN OPENSSH PRIVATE KEY-----\n" + rnd(70)
        + "\n-----END OPENSSH PRIVATE KEY-----")
    return out


def lookalikes() -> list[str]:
    items = []
    for _ in range(10):
        items.append(lower_hex(40))  # git SHA
        items.append(lower_hex(8) + "-" + lower_hex(4) + "-4" + lower_hex(3) + "-a"
                     + lower_hex(3) + "-" + lower_hex(12))  # UUID
    for _ in range(5):
        items.append("sha512-" + rnd(86, ALNUM + "+/") + "==")  # lockfile integrity
        items.append("sha256:" + lower_hex(64))  # docker digest / lockfile hash
        items.append("iVBORw0KGgoAAAANSUhEUgAA" + rnd(120, ALNUM + "+/"))  # base64 PNG
    for _ in range(5):
        items.append(lower_hex(7))  # short SHA
        items.append(lower_hex(64))  # sha256 hex
    return items


def lookalike_text(value: str, i: int) -> str:
    contexts = [
        "commit {} fixes the refresh race",
        '"integrity": "{}"',
        "id: {}",
        '{{"data": "{}", "media_type": "image/png"}}',
        "checksum = \"{}\"",
        "resolved {}",
        "see {}",
    ]
    return contexts[i % len(contexts)].format(value)


def _claude_line(kind: str, content, minute: int, extra: dict | None = None) -> str:
    rec = {"type": kind, "uuid": f"u{minute}-{kind}-{RNG.random()}", "sessionId": "s-redact",
           "cwd": "/home/dev/proj", "gitBranch": "main",
           "timestamp": f"2026-03-03T09:{minute % 60:02d}:00.000Z",
           "message": {"role": kind, "content": content}}
    if kind == "assistant":
        rec["message"]["id"] = f"msg{minute}"
    rec.update(extra or {})
    return json.dumps(rec)


def write_corpus(path: Path, secrets, looks) -> None:
    """Place every secret in a different spot: user text, tool input, tool output,
    written file contents and JSON payloads."""
    lines = []
    n = 0
    for i, (_kind, _value, text) in enumerate(secrets + [("look", v, lookalike_text(v, j))
                                                          for j, v in enumerate(looks)]):
        spot = i % 5
        n += 1
        tid = f"toolu_{n}"
        if spot == 0:
            lines.append(_claude_line("user", f"please use this: {text}", n))
        elif spot in (1, 2):
            command = f"echo setup && {text}" if spot == 1 else "cat config.env"
            lines.append(_claude_line("assistant", [{"type": "tool_use", "id": tid, "name": "Bash",
                                                     "input": {"command": command}}], n))
            output = "ok" if spot == 1 else f"loaded config\n{text}\ndone"
            lines.append(_claude_line("user", [{"type": "tool_result", "tool_use_id": tid,
                                                "content": output}], n))
        elif spot == 3:
            lines.append(_claude_line("assistant", [{"type": "tool_use", "id": tid, "name": "Edit",
                                                     "input": {"file_path": "/home/dev/proj/.env",
                                                               "old_string": "# config",
                                                               "new_string": text}}], n))
            lines.append(_claude_line("user", [{"type": "tool_result", "tool_use_id": tid,
                                                "content": "updated"}], n))
        else:
            payload = json.dumps({"request": {"headers": {"x": 1}, "body": text}})
            lines.append(_claude_line("assistant", [{"type": "tool_use", "id": tid,
                                                     "name": "mcp__http__post",
                                                     "input": {"payload": payload}}], n))
            lines.append(_claude_line("user", [{"type": "tool_result", "tool_use_id": tid,
                                                "content": f"response: {payload}"}], n))
    path.write_text("\n".join(lines) + "\n")


def _all_text(session) -> str:
    return "\n".join(session.texts())


def test_secret_corpus_never_survives(tmp_path: Path):
    secrets = secrets_by_kind()
    looks = lookalikes()
    assert len(secrets) >= 60 and len({k for k, _, _ in secrets}) >= 15
    assert len(looks) >= 40
    path = tmp_path / "t.jsonl"
    write_corpus(path, secrets, looks)
    raw = read_transcript(path)
    raw_text = _all_text(raw)
    # Every secret really reached the session (otherwise the test proves nothing)...
    for kind, value, _ in secrets:
        assert value.splitlines()[1 if "\n" in value else 0] in raw_text, kind
    got = prepare(str(path), budget=200_000)
    red_text = _all_text(got.session)
    for kind, value, _ in secrets:
        for piece in value.splitlines():
            if len(piece) >= 8 and "PRIVATE KEY" not in piece:
                assert piece not in red_text, f"{kind} survived in the session"
                assert piece not in got.digest.text, f"{kind} survived in the digest"
    assert red_text.count("[REDACTED:") >= len(secrets)
    kept = sum(1 for v in looks if v in red_text)
    assert kept / len(looks) >= 0.9, f"only {kept}/{len(looks)} look-alikes kept"


def test_default_budget_digest_has_no_secret(tmp_path: Path):
    secrets = secrets_by_kind()
    path = tmp_path / "t.jsonl"
    write_corpus(path, secrets, [])
    got = prepare(str(path))
    for _kind, value, _ in secrets:
        for piece in value.splitlines():
            if len(piece) >= 8 and "PRIVATE KEY" not in piece:
                assert piece not in got.digest.text
    assert sum(got.redactions.values()) >= len(secrets)


def test_private_and_injected_blocks_removed():
    r = Redactor()
    text = (f"keep this <private>my home address 12 Elm St</private> and this "
            f"{INJECT_OPEN}\nremembered: use JSON logs\n{INJECT_CLOSE} end")
    out, counts = r.redact_with_counts(text)
    assert out == "keep this  and this  end"
    assert counts == {"private": 1, "injected-memory": 1}
    # An unclosed block is removed to the end rather than leaked.
    assert r.redact("a <private>secret stuff") == "a "


def test_code_is_not_redacted():
    r = Redactor()
    code = [
        "def login(password: str, token: Optional[str] = None) -> Session:",
        "token = get_token()", "max_tokens=4096", '"input_tokens": 3',
        "api_key = settings.api_key", "password = os.environ['DB_PASSWORD']",
        "secret: ${{ secrets.DEPLOY_KEY }}", "export TOKEN=$GITHUB_TOKEN",
        "tokenizer: bert-base-uncased", "key: value", "commit 3f786850e387550fdab836ed7e6dc881de23001b",
    ]
    for line in code:
        assert r.redact(line) == line, line


def test_user_patterns_from_settings(tmp_path: Path):
    r = Redactor(extra_patterns=[r"ACME-\d{6}"])
    out, counts = r.redact_with_counts("ticket ACME-123456 opened")
    assert out == "ticket [REDACTED:custom] opened" and counts["custom"] == 1
    with pytest.raises(DualtraceError, match="redact_patterns"):
        Redactor(extra_patterns=["(unclosed"])


def test_settings_redact_patterns_reach_cli(tmp_path: Path, monkeypatch):
    from click.testing import CliRunner

    from dualtrace.cli import cli

    project = tmp_path / "proj"
    project.mkdir()
    (project / "dualtrace.toml").write_text('redact_patterns = ["ACME-[0-9]{6}"]\n')
    t = project / "t.jsonl"
    t.write_text(json.dumps({"role": "user", "content": "ticket ACME-654321 is ours"}) + "\n")
    monkeypatch.chdir(project)
    result = CliRunner().invoke(cli, ["digest", str(t)])
    assert result.exit_code == 0, result.output
    assert "ACME-654321" not in result.output and "[REDACTED:custom]" in result.output


def test_redact_session_keeps_structure():
    s = read_transcript(DATA / "claude_session.jsonl")
    red, counts = redact_session(s)
    assert counts == {}  # nothing secret in it: nothing changed but the home paths
    assert len(red.events) == len(s.events)
    for a, b in zip(red.events, s.events, strict=True):
        assert a == replace(b, **{f: home_to_tilde(getattr(b, f)) for f in
                                  ("text", "path", "command", "result", "detail")
                                  if getattr(b, f)})
    assert red.cwd == "~/proj" and s.cwd == "/home/dev/proj"
    assert "/home/dev" not in build_digest(red).text


def test_password_in_prose():
    r = Redactor()
    for text, secret in [
        ("keep the staging password Sup3rS3cretPw!x out of commits.", "Sup3rS3cretPw!x"),
        ("the db password is hunter2hunter2, rotate it", "hunter2hunter2"),
        ("Passphrase: `correct-Horse-9battery`", "correct-Horse-9battery"),
        ("my password was 'p@ssW0rd2024'.", "p@ssW0rd2024"),
    ]:
        out = r.redact(text)
        assert secret not in out and "[REDACTED:" in out, text
    for prose in ["the password reset flow", "password authentication failed for user app",
                  "password hashing uses argon2id", "if password is None:", "password is required",
                  "a Password Manager", "the password_hash column", "set a password 'changeme'"]:
        assert r.redact(prose) == prose, prose


def test_more_credential_shapes():
    r = Redactor()
    for text, secret in [
        ("the API key is 8f3kD9xK2mQ7vL1pZ4", "8f3kD9xK2mQ7vL1pZ4"),
        ("use token Xk29dLq81mZpQ7vT3nB6 for the webhook", "Xk29dLq81mZpQ7vT3nB6"),
        ("the client secret is Q7vL1pZ48f3kD9xK2m", "Q7vL1pZ48f3kD9xK2m"),
        ("export DB_PASS=hunter2Xy9", "hunter2Xy9"),
        ("REDIS_URL=redis://:hunter2Xy9@localhost:6379", "hunter2Xy9"),
    ]:
        out = r.redact(text)
        assert secret not in out and "[REDACTED:" in out, text
    for prose in ["the token budget is 8000", "token count_tokens_for_message_history",
                  "secret 3f786850e387550fdab836ed7e6dc881de23001b", "bypass=cache_only",
                  "the API key is stored in Vault", "see http://:8080/ for docs"]:
        assert r.redact(prose) == prose, prose


def test_google_oauth_token_and_login_pairs():
    """New-user review 5: a `ya29.` access token in a failed command's output and a login
    pair in the agent's prose reached a committed session record."""
    r = Redactor()
    token = "ya29." + "a0AfH6SMBx3kQ7Lm9Np2Rs4Tu6Vw8Xy0Za1Bc3De5Fg7Hi9Jk-LmNoPqRs"
    for text, secret in [
        (f"AccessDeniedException: 403. Token used: {token}", token),
        ("and the admin login is admin / " + "Adm1nPanel" + "Pass!", "Adm1nPanelPass"),
        ("creds are bob / " + "hunter2" + "Xy9", "hunter2Xy9"),
        ("the login is test@example.com / " + "Passw0rd!", "Passw0rd"),
    ]:
        out = r.redact(text)
        assert secret not in out and "[REDACTED:" in out, text
    for prose in ["the login is email / password", "login is required", "the login page: /login/form",
                  "login handler: auth/login.py", "Login is POST /api/v1/login",
                  "the login flow is user / session / token", "the login is user / user_id",
                  "credentials are user:pass"]:
        assert r.redact(prose) == prose, prose


def test_a_login_pair_with_a_password_of_plain_letters():
    """Session 12's named limit: "the login is admin / hunter" kept the password (the pair
    rule wanted a digit or a symbol in it). Only after "is" / ":" / "="; a word naming a
    field or a sign-in method is prose."""
    r = Redactor()
    for text, secret in [
        ("the staging login is admin / " + "hunter", "hunter"),
        ("creds: bob / " + "tulips", "tulips"),
        ("login: deploy/" + "letmein", "letmein"),
        ("the login is root / " + "admin", "admin"),
    ]:
        out = r.redact(text)
        assert secret not in out.split("/")[-1] and "[REDACTED:password]" in out, (text, out)
    for prose in ["the login is email / password", "sign in with Google/GitHub", "the login is SSO/OIDC",
                  "login with Google / GitHub", "credentials are user:pass", "the login is user / token",
                  "the login is LDAP/SAML", "login: views/login"]:
        assert r.redact(prose) == prose, prose


def test_login_pairs_review_13():
    """Review 13 F16/F17: the plain-letter pair rule redacted prose ("the login is
    client/server") and kept real pairs ("bob / secret", an all-caps or -ed password, the
    second pair of a list). The first half decides: an account name (admin, root, a name
    with digits or an @) makes the second word the password; a state, side or platform
    word makes the pair prose."""
    r = Redactor()
    for text, secrets in [
        ("creds: bob / " + "secret", ["secret"]),
        ("the login is admin / " + "pass", ["pass"]),
        ("creds: bob / " + "TULIPS", ["TULIPS"]),
        ("the login is admin / " + "darling", ["darling"]),
        ("the login is admin / " + "tested", ["tested"]),
        ("Login: admin / " + "Holly", ["Holly"]),
        ("The test login is alice / " + "wonderland and bob / " + "builder.", ["wonderland", "builder"]),
        ("creds are alice/" + "wonderland, bob/" + "builder", ["wonderland", "builder"]),
    ]:
        out = r.redact(text)
        assert out.count("[REDACTED:password]") == len(secrets), (text, out)
        assert not any(s in out.replace("[REDACTED:password]", "") for s in secrets), (text, out)
    for prose in ["the login is broken / flaky on Safari", "the login is client/server",
                  "login: frontend/backend split", "the login is fast/slow depending on cache",
                  "creds: local/remote", "the login is web/mobile", "the login is OK/fine now",
                  "credentials are read/write", "login: admin/settings page", "login: user/pass",
                  "the login is enabled/disabled", "login: form/redirect"]:
        assert r.redact(prose) == prose, prose


def test_login_pairs_review_14():
    """Review 14 G14, G16, G17: quoted halves, an environment or adverb before the pair,
    '=>', 'sign in as', three pairs and ';'/'or' lists; a prose word after an account name
    is still the password; a noun after the pair (tests, suite, only) makes it prose."""
    cases = [
        ("The staging login is `admin` / `" + "hunter2" + "`", 1),
        ('The login is "admin" / "' + "tulips" + '"', 1),
        ("Login (staging): admin / " + "Tulips99", 1),
        ("The creds for staging: admin / " + "hunter2", 1),
        ("The login is now admin / " + "tulips", 1),
        ("DB creds => postgres / " + "tulips", 1),
        ("sign in as admin / " + "tulips", 1),
        ("creds: alice/" + "wonderland; bob/" + "builder", 2),
        ("login: admin / " + "tulips, bob / " + "daisies, carol / " + "roses", 3),
        ("The login is admin / " + "private", 1),
    ]
    for text, n in cases:
        out = Redactor().redact(text)
        assert out.count("[REDACTED:password]") == n, (text, out)
    for prose in ["The login is e2e/smoke tests", "The login is test/mock only in CI",
                  "login: qa/regression suite", "The login is root/sudo only", "The login is admin/settings",
                  "account is read/write", "my account: billing/invoices page"]:
        assert Redactor().redact(prose) == prose, prose


def test_credentials_in_a_urls_query():  # review 16b H2
    for text, secret in [
        ("The deploy hook is https://api.render.com/deploy/srv-abc123?key=ZYXW9876secretkey", "ZYXW9876secretkey"),
        ("https://maps.googleapis.com/maps/api/js?key=AIzaSyD-abcdefghijklmnopqrstu", "AIzaSyD-abcdefghijklmnopqrstu"),
        ("get https://b.s3.amazonaws.com/f.png?X-Amz-Signature=deadbeefcafe1234&X-Amz-Date=1", "deadbeefcafe1234"),
        ("curl 'https://gitlab.example.com/api/v4/projects?private_token=glpat1234567890abcd'", "glpat1234567890abcd"),
    ]:
        out = Redactor().redact(text)
        assert secret not in out and "[REDACTED:" in out, text
    for plain in ["https://example.com/search?key=value&q=hello", "https://x.com/?sort_key=created_at_desc",
                  "https://x.com/?token=<your-token>"]:
        assert Redactor().redact(plain) == plain, plain
