"""Secret redaction, applied before text reaches a backend, a prompt or a file.

Provider-token shapes come from detect-secrets (its maintained plugin regexes, used
directly for speed: its line scanner is built for files, not megabytes of
transcript); our own patterns cover what it lacks (Anthropic, Google, full private
key blocks, bearer tokens, URL passwords, secret-looking keys in .env/YAML/JSON,
high-entropy values in assignments). Each hit becomes ``[REDACTED:<kind>]``.

Two kinds of text are removed outright: ``<private>...</private>`` (the user asked
for it never to be stored) and dualtrace's own injected memory blocks
(``INJECT_OPEN ... INJECT_CLOSE``), so recalled memories are never re-encoded.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, fields, replace
from typing import Any

from dualtrace.encoder.session import Event, Session
from dualtrace.errors import DualtraceError
from dualtrace.markers import INJECT_CLOSE, INJECT_OPEN  # noqa: E402  (re-exported)

_SEP = "\x00\x1e\x00"  # joins event fields for a one-pass scan; no pattern matches it


def placeholder(kind: str) -> str:
    return f"[REDACTED:{kind}]"


@dataclass(frozen=True)
class _Rule:
    kind: str
    pattern: re.Pattern[str]
    group: int = 0  # the part of the match that is secret (the rest is kept)
    hint: tuple[str, ...] = ()  # cheap substring prefilter: skip the regex if none occurs
    check: Callable[[str], bool] | None = None  # extra validation of the secret part
    # Require a token boundary before the match. Checked in Python instead of a regex
    # lookbehind: a leading lookbehind disables the regex engine's fast literal-prefix
    # scan and made every rule ~10x slower on transcript-sized text.
    boundary: bool = False


def _ds_patterns(secret_type: str) -> list[str]:
    """The regex sources of one detect-secrets plugin (empty if the library changes)."""
    try:
        from detect_secrets.core.plugins.util import get_mapping_from_secret_type_to_class
    except ImportError:  # pragma: no cover - it is a declared dependency
        return []
    cls: Any = get_mapping_from_secret_type_to_class().get(secret_type)
    denylist = getattr(cls, "denylist", None) or ()
    return [p.pattern for p in denylist]


_B = r"(?<![A-Za-z0-9_])"  # token boundary: not inside a longer word
_WORD = re.compile(r"[A-Za-z0-9_]")
_E = r"(?![A-Za-z0-9_])"


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
    settings\.|config\.|self\.|this\.|ENV\[|\d+(\.\d+)?$)""",
    re.I | re.X,
)
# Code, not a credential: `password: str`, `token: Optional[Token]`, `key: string`.
_TYPE_LIKE = re.compile(
    r"^(?:[A-Z][a-z]+(?:[A-Z][a-z]*)*|[a-z]{1,15}|[a-z]+(?:_[a-z]+)+)(?:\[[^\]]*\])?\??$")


def _secret_value(value: str) -> bool:
    """A value of a secret-looking key that is a real secret, not code or a placeholder."""
    if len(value) < 6 or _PLACEHOLDER_VALUES.match(value):
        return False
    if "(" in value or ")" in value:  # a call: token = get_token()
        return False
    if _TYPE_LIKE.match(value):
        # An identifier (`password: str`, `token: TokenType`) is code, unless it is
        # long and random enough to be a credential itself.
        return len(value) >= 16 and _looks_random(value)
    if re.fullmatch(r"[a-z_][a-z0-9_]*(\.[a-z_][a-z0-9_]*)+", value):  # attribute access
        return False
    return True


_HASH_KEYS = re.compile(
    r"(?i)(integrity|hash|checksum|sha\d*|digest|etag|commit|rev|revision|id|uuid|guid|"
    r"version|resolved|data|url|path|file|name|nonce|signature|image|src|href|key_id|"
    r"fingerprint|request_?id|trace_?id|span_?id|message_?id)$"
)
_UUID = re.compile(r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$")
_HEX = re.compile(r"^[0-9a-fA-F]+$")
_HASH_PREFIX = re.compile(r"^(sha1|sha256|sha384|sha512|md5|blake2b?)[-:]", re.I)
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




def _build_rules() -> list[_Rule]:
    rules: list[_Rule] = []

    def add(kind: str, pattern: str, group: int = 0, hint: tuple[str, ...] = (),
            flags: int = 0, check: Callable[[str], bool] | None = None) -> None:
        boundary = pattern.startswith(_B)
        if boundary:
            pattern = pattern[len(_B):]
        rules.append(_Rule(kind, re.compile(pattern, flags), group, hint, check, boundary))

    # Whole blocks first, so the token rules never see half a key.
    add("private-key",
        r"-----BEGIN[A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----(?:(?!\x00\x1e).)*?"
        r"(?:-----END[A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----|(?=\x00\x1e)|\Z)",
        hint=("PRIVATE KEY",), flags=re.S)
    add("private-key", r"PuTTY-User-Key-File-\d+:(?:(?!\x00\x1e).)*?Private-MAC: *\S+",
        hint=("PuTTY-User-Key-File",), flags=re.S)
    # Provider tokens with a recognizable prefix.
    add("anthropic-api-key", _B + r"sk-ant-[A-Za-z0-9]{2,8}\d{0,2}-[A-Za-z0-9_\-]{20,}", hint=("sk-ant-",))
    for src in _ds_patterns("OpenAI Token"):
        add("openai-api-key", src, hint=("T3BlbkFJ",))
    add("openai-api-key", _B + r"sk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_\-]{32,}" + _E,
        hint=("sk-",), check=_looks_random)
    aws = _ds_patterns("AWS Access Key")
    add("aws-access-key", _B + (aws[0] if aws else r"(?:AKIA|ASIA)[0-9A-Z]{16}") + _E,
        hint=("AKIA", "ASIA", "ABIA", "ACCA", "A3T"))
    add("aws-secret-key",
        r"(?i)aws.{0,20}?(?:secret|key|pwd|pw|password|pass|token).{0,20}?[=:\s\"']\s*[\"']?"
        r"([0-9a-zA-Z/+]{40})(?![0-9a-zA-Z/+])", group=1, hint=("aws", "AWS", "Aws"))
    for src in _ds_patterns("GitHub Token") or [r"(ghp|gho|ghu|ghs|ghr)_[A-Za-z0-9_]{36}"]:
        add("github-token", _B + r"(?:" + src + r")", hint=("ghp_", "gho_", "ghu_", "ghs_", "ghr_"))
    add("github-token", _B + r"github_pat_[A-Za-z0-9_]{22,}", hint=("github_pat_",))
    for src in _ds_patterns("GitLab Token") or [r"glpat-[A-Za-z0-9_\-]{20,50}"]:
        add("gitlab-token", _B + r"(?:" + src + r")", hint=("gl", "GR1348941"))
    slack = _ds_patterns("Slack Token")
    add("slack-token", _B + (slack[0] if slack else r"xox[abposr]-(?:\d+-)+[a-z0-9]+")
        + r"[A-Za-z0-9\-]*", hint=("xox",))
    add("slack-webhook", r"https://hooks\.slack\.com/services/[A-Za-z0-9_/]+",
        hint=("hooks.slack.com",))
    # One rule per literal prefix: a leading alternation defeats the regex engine's
    # literal-prefix scan (3-10x slower per rule on transcript text).
    for prefix in ("sk_live_", "rk_live_", "sk_test_", "rk_test_"):
        add("stripe-key", _B + prefix + r"[0-9a-zA-Z]{16,}" + _E, hint=(prefix,))
    add("stripe-key", _B + r"whsec_[0-9a-zA-Z]{24,}" + _E, hint=("whsec_",))
    add("google-api-key", _B + r"AIza[0-9A-Za-z_\-]{35}" + _E, hint=("AIza",))
    add("google-oauth-secret", _B + r"GOCSPX-[A-Za-z0-9_\-]{20,}", hint=("GOCSPX-",))
    add("jwt", _B + r"eyJ[A-Za-z0-9_\-]{8,}\.eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}",
        hint=("eyJ",))
    for kind, secret_type, hints in (
        ("sendgrid-key", "SendGrid API Key", ("SG.",)),
        ("npm-token", "NPM tokens", ("_authToken",)),
        ("pypi-token", "PyPI Token", ("pypi-",)),
        ("square-secret", "Square OAuth Secret", ("sq0csp-",)),
        ("azure-storage-key", "Azure Storage Account access key", ("AccountKey=",)),
        ("discord-token", "Discord Bot Token", (".",)),
    ):
        for src in _ds_patterns(secret_type):
            add(kind, _B + r"(?:" + src + r")", hint=hints)
    add("npm-token", _B + r"npm_[A-Za-z0-9]{36}" + _E, hint=("npm_",))
    add("huggingface-token", _B + r"hf_[A-Za-z0-9]{30,}" + _E, hint=("hf_",))
    add("twilio-key", _B + r"(?:SK|AC)[0-9a-f]{32}" + _E, hint=("SK", "AC"))
    add("telegram-token", _B + r"\d{8,10}:AA[0-9A-Za-z_\-]{33}" + _E, hint=(":AA",))
    add("digitalocean-token", _B + r"do[opr]_v1_[a-f0-9]{64}" + _E, hint=("_v1_",))
    # Context patterns.
    for word in ("Bearer", "bearer", "BEARER"):
        add("bearer-token", word + r"\s+([A-Za-z0-9_\-.=:+/~]{16,})", group=1, hint=(word,),
            check=_looks_random)
    for word in ("Authorization", "authorization", "AUTHORIZATION"):
        add("bearer-token", word + r"[\"']?\s*[:=]\s*[\"']?(?:[Tt]oken\s+)?"
            r"([A-Za-z0-9_\-.=+/~]{16,})", group=1, hint=(word,), check=_looks_random)
    for word in ("Basic", "basic", "BASIC"):
        add("basic-auth", word + r"\s+([A-Za-z0-9+/]{8,}={0,2})(?![A-Za-z0-9+/=])", group=1,
            hint=(word + " ",), check=lambda v: _looks_random(v) and len(v) >= 12)
    # A password typed in prose ("the staging password is X"), not an assignment: the
    # value must look like a credential (_secret_value), so "password reset" stays.
    add("password",
        r"\b(?:passw(?:or)?d|passwd|passphrase)\b(?:\s+(?:is|was))?\s*:?\s+[\"'`]?"
        r"([^\s\"'`]{5,127}[^\s\"'`.,;:!?)\]])",
        group=1, flags=re.I, check=_secret_value,
        hint=("password", "Password", "PASSWORD", "passwd", "passphrase", "Passphrase"))
    # The same for a random-looking token after a key word ("the API key is X").
    add("secret-value",
        r"\b(?:api[ _\-]?key|access[ _\-]?key|token|secret)\b(?:\s+(?:is|was))?\s*:?\s+[\"'`]?"
        r"([A-Za-z0-9_\-+/=]{16,200})(?![A-Za-z0-9_\-+/=])",
        group=1, flags=re.I, check=_random_token,
        hint=("key", "Key", "KEY", "token", "Token", "TOKEN", "secret", "Secret", "SECRET"))
    add("url-password",
        r"://[^\s:/@\"'<>]{0,64}:([^\s@/\"'<>]{1,128})@",
        group=1, hint=("://",), check=lambda v: not _PLACEHOLDER_VALUES.match(v))
    return rules


# Assignments: .env (KEY=v), YAML (key: v), JSON ("key": "v"), code (key = "v"),
# connection strings (Password=v;). Found from the separator, with the key read
# backwards, because a key-first regex has no literal prefix and was the slowest rule.
_ASSIGN = re.compile(
    r"(?:=>|[=:])[ \t]*(?:\"([^\"\n\x00]{6,200})\"|'([^'\n\x00]{6,200})'|"
    r"([^\s\"'`,;{}()=\x00]{6,200}={0,2}))"
)
# Matched against the *reversed* text before the separator: one anchored attempt
# instead of a search over every start position of a window.
_KEY_TAIL_REV = re.compile(r"[ \t]*[\"']?([A-Za-z0-9_.\-]{1,61})")
_SECRET_KEY_RE = re.compile(
    r"(?i:secret|passw(?:or)?d|passwd|pwd|(?:(?<=[_.\-])|^)pass|passphrase|api[_\-]?key|apikey|access[_\-]?key|"
    r"private[_\-]?key|token|credentials?|session[_\-]?key|signing[_\-]?key|encryption[_\-]?key|"
    r"master[_\-]?key|dsn)(?=\Z|[_.\-]|[A-Z])"
)
_B64ISH = re.compile(r"[A-Za-z0-9+/=_\-]{20,200}")


def _scan_assignments(text: str, counts: Counter[str]) -> str:
    out: list[str] = []
    last = 0
    for m in _ASSIGN.finditer(text):
        idx = next(i for i in (1, 2, 3) if m.group(i) is not None)
        value = m.group(idx)
        start = m.start()
        key_m = _KEY_TAIL_REV.match(text[max(0, start - 64):start][::-1])
        if key_m is None:
            continue
        key = key_m.group(1)[::-1].lstrip("0123456789.-")
        if not key:
            continue
        if _SECRET_KEY_RE.search(key):
            if not _secret_value(value):
                continue
            kind = "secret-value"
        elif _B64ISH.fullmatch(value) and _high_entropy_value(key, value):
            kind = "high-entropy"
        else:
            continue
        start, end = m.span(idx)
        out.append(text[last:start])
        out.append(placeholder(kind))
        last = end
        counts[kind] += 1
    if not out:
        return text
    out.append(text[last:])
    return "".join(out)


_RULES: list[_Rule] | None = None


def _rules() -> list[_Rule]:
    global _RULES
    if _RULES is None:
        _RULES = _build_rules()
    return _RULES


_PRIVATE = re.compile(r"<private>(?:(?!\x00\x1e).)*?(?:</private>|(?=\x00\x1e)|\Z)", re.S)
_INJECTED = re.compile(re.escape(INJECT_OPEN) + r"(?:(?!\x00\x1e).)*?(?:"
                       + re.escape(INJECT_CLOSE) + r"|(?=\x00\x1e)|\Z)", re.S)


class Redactor:
    """Replaces secrets with typed placeholders; counts what it replaced, by kind."""

    def __init__(self, extra_patterns: Sequence[str] = ()) -> None:
        self.rules = list(_rules())
        self._builtin = len(self.rules)
        for i, src in enumerate(extra_patterns):
            try:
                compiled = re.compile(src)
            except re.error as exc:
                raise DualtraceError(f"invalid redact_patterns entry #{i + 1} {src!r}: {exc}") from None
            self.rules.append(_Rule("custom", compiled, 0))

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
        for rule in self.rules[: self._builtin]:
            if rule.hint and not any(h in text for h in rule.hint):
                continue
            text = self._apply(rule, text, counts)
        if "=" in text or ":" in text:
            text = _scan_assignments(text, counts)
        for rule in self.rules[self._builtin:]:  # user patterns see the final text
            text = self._apply(rule, text, counts)
        return text, counts

    @staticmethod
    def _apply(rule: _Rule, text: str, counts: Counter[str]) -> str:
        out: list[str] = []
        last = 0
        for m in rule.pattern.finditer(text):
            start, end = m.span(rule.group)
            value = m.group(rule.group)
            if start < 0 or not value or value.startswith("[REDACTED"):
                continue
            if rule.boundary and m.start() > 0 and _WORD.match(text, m.start() - 1):
                continue
            if rule.check is not None and not rule.check(value):
                continue
            out.append(text[last:start])
            out.append(placeholder(rule.kind))
            last = end
            counts[rule.kind] += 1
        if not out:
            return text
        out.append(text[last:])
        return "".join(out)


_TEXT_FIELDS = tuple(f.name for f in fields(Event)
                     if f.name in ("text", "path", "command", "result", "detail"))


def redact_session(session: Session, redactor: Redactor | None = None) -> tuple[Session, Counter[str]]:
    """A copy of ``session`` with every text field redacted, and the counts by kind.

    All fields are joined with a separator no rule can match across and scanned in
    one pass: hundreds of regex calls per event would dominate the ingest time.
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
