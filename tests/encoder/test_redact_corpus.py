"""The adversarial corpus: every secret goes, every look-alike stays, whole tokens only."""

from __future__ import annotations

from collections import Counter

from dualtrace.encoder.plan import Context, Grounding, PlanBuilder, parse_store
from dualtrace.encoder.redact import Redactor, home_to_tilde, redact_session
from dualtrace.hooks.transcripts import read_transcript
from dualtrace.memfs.store import MemoryStore
from tests.secret_corpus_helpers import corpus, write_transcript

SC = corpus()
NAMED = ("curl-user-pass", "mysql-password-flag", "sshpass", "docker-login-password",
         "ldapsearch-password", "docker-pat", "azure-sas", "sqlserver-connstring-password",
         "long-token-tail", "password-in-prose")


def test_corpus_is_large_and_covers_the_named_survivors():
    secrets, benign = SC.secret_samples(), SC.benign_samples()
    kinds = Counter(s.kind for s in secrets)
    assert len(secrets) >= 150 and len(kinds) >= 30 and len(benign) >= 60
    assert set(NAMED) <= set(kinds)
    assert {s.where for s in secrets} == set(SC.WHERE)
    assert sum(s.held_out for s in secrets) >= 40


def test_no_secret_survives_and_look_alikes_stay():
    r = Redactor()
    survived = [(s.kind, s.where, r.redact(s.text)) for s in SC.secret_samples()
                if SC.survives(s.value, r.redact(s.text))]
    assert survived == []
    changed = [(b.kind, r.redact(b.text)) for b in SC.benign_samples() if b.keep not in r.redact(b.text)]
    assert len(changed) <= 2, changed


def test_survives_judges_tails():
    # The judge itself: a redactor that removed only a prefix must count as a leak.
    token = "ghp_" + "aB3dE5fG7hI9jK1lM3nO5pQ7rS9tU1vW3xY5zZ9q"
    assert SC.survives(token, "[REDACTED]" + token[20:])
    assert not SC.survives(token, "[REDACTED:github-pat]")


def test_whole_token_never_a_prefix():
    r = Redactor()
    for token in ("ghp_" + "Zq8" * 14, "AIza" + "Xk9_-" * 9, "glpat-" + "Ab3Cd5Ef7Gh9Ij1Kl3Mn5Op" + ".01.a1b2c3d4e",
                  "xoxp-" + "1234567890-1234567890-1234567890123-" + "a1" * 16):
        out = r.redact(f"token: {token}.")
        assert out == "token: " + out.split("token: ")[1] and token[-6:] not in out, out
        assert out.endswith("].") and out.count("[REDACTED:") == 1, out


def test_secret_quoted_elsewhere_in_the_session_goes_everywhere(tmp_path):
    pw = "Kestrel3906!kpg"
    path = tmp_path / "t.jsonl"
    write_transcript(path, [SC.SecretSample("x", pw, f"sshpass -p '{pw}' ssh ops@db1 uptime", "command", False),
                            SC.SecretSample("x", pw, f"did {pw} leak?", "user", False)])
    red, counts = redact_session(read_transcript(path))
    assert all(pw not in t for t in red.texts()) and counts["cli-password"] >= 2


def test_home_directories_become_tilde():
    r = Redactor()
    assert r.redact("open /home/jdoe/shop/app.py and /Users/Jane.Doe/x") == "open ~/shop/app.py and ~/x"
    assert home_to_tilde("cd /home/") == "cd /home/" and home_to_tilde("/srv/home/x/y") == "/srv/home/x/y"
    assert home_to_tilde("/Users/Shared/x") == "/Users/Shared/x"


def test_what_a_backend_proposes_is_redacted_before_it_is_written(tmp_path):
    store = MemoryStore(tmp_path / "mem", author=("t", "t@example.com"), project="p")
    token = "dckr_pat_" + "Qw3Er5Ty7Ui9Op1As3Df5Gh7Jk"
    body = (f"CI pushes images with {token}; the admin password is Zebra8776*llq and the "
            "repo lives in /home/jdoe/shop.")
    ctx = Context("s1", "test", "2026-05-02", Grounding(body, "2026-05-02"), "p", ())
    builder = PlanBuilder(store, ctx)
    builder.add(parse_store({
        "type": "decision", "anchor": "ci-image-push", "description": f"CI pushes with {token}",
        "body": body, "scores": {"durability": 3, "scope": 2, "rationale": 2, "retrieval": 2}}))
    from dualtrace.memfs import transaction

    sha = transaction.commit(store, builder.changeset())
    assert sha
    written = "".join(p.read_text() for p in (tmp_path / "mem").rglob("*.md"))
    assert token not in written and "Zebra8776*llq" not in written and "/home/jdoe" not in written
    assert "[REDACTED:" in written and "~/shop" in written
    store.close()
