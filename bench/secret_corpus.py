"""The adversarial secret corpus: real-shaped secrets in realistic session text, and
benign look-alikes that must survive redaction untouched.

Shapes follow public secret-scanner test data (gitleaks rule tests, trufflehog detector
tests, detect-secrets plugin tests, Microsoft's SEC101 patterns): the prefixes, lengths
and alphabets are the providers' real ones; every value is generated here from a seeded
RNG, so no literal credential is stored in the repository and every run sees the same
corpus. The corpus was written before the redactor was tuned against it; the samples of
every fourth variant (``held_out``) were never looked at while tuning.

A *secret sample* is one piece of session text (user text, a command, a tool output, a
file edit or assistant prose) that carries one secret; most samples also quote the value
again later in prose (the way people paste a token and then talk about it). A secret
*survives* when any 8-character piece of it (or the whole value, if shorter) is left in
the redacted text: that catches a redactor that removed only a prefix and left the tail.
A *benign sample* is text with a look-alike (a lockfile hash, a public key, an id) that
must be left byte-for-byte as it was.
"""

from __future__ import annotations

import base64
import hashlib
import json
import random
import string
from collections.abc import Callable
from dataclasses import dataclass

UP = string.ascii_uppercase
LOW = string.ascii_lowercase
DIG = string.digits
ALNUM = UP + LOW + DIG
HEX = "0123456789abcdef"
B64 = ALNUM + "+/"
URLSAFE = ALNUM + "_-"

WHERE = ("user", "command", "output", "edit", "prose")


@dataclass(frozen=True)
class SecretSample:
    kind: str
    value: str  # the secret itself (what must not survive)
    text: str  # the session text that carries it
    where: str  # user | command | output | edit | prose
    held_out: bool


@dataclass(frozen=True)
class BenignSample:
    kind: str
    keep: str  # must be present verbatim after redaction
    text: str
    where: str
    held_out: bool


class _Gen:
    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)

    def s(self, n: int, alphabet: str = ALNUM) -> str:
        # Realistic random: guarantee mixed classes when the alphabet has them.
        while True:
            v = "".join(self.rng.choice(alphabet) for _ in range(n))
            if n < 12 or alphabet not in (ALNUM, B64, URLSAFE) or (
                    any(c.isupper() for c in v) and any(c.islower() for c in v)
                    and any(c.isdigit() for c in v)):
                return v

    def password(self) -> str:
        words = ["Tr0ub4dor", "Autumn", "Zebra", "Kestrel", "Orbit", "Maple", "Quartz", "Falcon"]
        return (self.rng.choice(words) + self.s(4, DIG) + self.rng.choice("!#%&*@^")
                + self.s(3, LOW))

    def b64url(self, obj: dict) -> str:
        return base64.urlsafe_b64encode(json.dumps(obj).encode()).decode().rstrip("=")

    def pick(self, seq):
        return self.rng.choice(seq)


def _pem(g: _Gen, label: str, lines: int = 6) -> str:
    body = "\n".join(g.s(64, B64) for _ in range(lines)) + "\n" + g.s(24, B64) + "=="
    return f"-----BEGIN {label}-----\n{body}\n-----END {label}-----"


_SAS = "sv=2022-11-02&ss=b&srt=sco&sp=rwdlac&se=2026-12-31T23:59:59Z&st=2026-01-01T00:00:00Z&spr=https&sig="

# Each kind: (name, value maker, contexts). A context is a (where, template) pair; the
# template's {v} is the secret and may use {u} (a user name) and {h} (a host).
_Ctx = tuple[str, str]


def _kinds(g: _Gen) -> list[tuple[str, Callable[[], str], list[_Ctx]]]:
    def jwt() -> str:
        head = g.b64url({"alg": "HS256", "typ": "JWT"})
        body = g.b64url({"sub": g.s(10, DIG), "name": "Jane Doe", "iat": 1716000000 + g.rng.randrange(10**6)})
        return f"{head}.{body}.{g.s(43, URLSAFE)}"

    return [
        ("aws-access-key", lambda: g.pick(["AKIA", "ASIA"]) + g.s(16, UP + "234567"), [
            ("command", "aws configure set aws_access_key_id {v}"),
            ("output", "[default]\naws_access_key_id = {v}\nregion = eu-west-1"),
            ("user", "the CI user is {v}, can you check its policy"),
            ("edit", "AWS_ACCESS_KEY_ID={v}\n"),
        ]),
        ("aws-secret-key", lambda: g.s(40, B64), [
            ("output", "[default]\naws_secret_access_key = {v}\n"),
            ("command", "AWS_SECRET_ACCESS_KEY={v} terraform plan"),
            ("edit", "  secret_access_key: \"{v}\"\n"),
            ("user", "aws secret is {v}"),
        ]),
        ("github-pat", lambda: g.pick(["ghp_", "gho_", "ghs_"]) + g.s(36), [
            ("command", "git remote set-url origin https://{u}:{v}@github.com/acme/api.git"),
            ("user", "use my token {v} for the release"),
            ("output", "GH_TOKEN={v}\nGH_HOST=github.com"),
            ("edit", "//npm.pkg.github.com/:_authToken={v}\n"),
            ("prose", "The workflow failed because {v} expired yesterday."),
        ]),
        ("github-fine-grained", lambda: "github_pat_11" + g.s(20, UP + DIG) + "_" + g.s(59, ALNUM), [
            ("command", "gh auth login --with-token <<< {v}"),
            ("edit", "GITHUB_TOKEN={v}\n"),
            ("user", "new fine-grained token: {v}"),
        ]),
        ("gitlab-pat", lambda: "glpat-" + g.s(20, URLSAFE), [
            ("command", "curl --header \"PRIVATE-TOKEN: {v}\" https://gitlab.example.com/api/v4/projects"),
            ("edit", "GITLAB_TOKEN={v}\n"),
            ("output", "Using token {v} for registry login"),
        ]),
        ("gitlab-pat-routable", lambda: "glpat-" + g.s(27, URLSAFE) + ".01." + g.s(9, LOW + DIG), [
            ("user", "gitlab token (new format) {v}"),
            ("command", "glab auth login --token {v}"),
            ("prose", "The runner now authenticates with {v}."),
        ]),
        ("slack-bot-token", lambda: "xoxb-" + g.s(12, DIG) + "-" + g.s(13, DIG) + "-" + g.s(24), [
            ("edit", "SLACK_BOT_TOKEN={v}\n"),
            ("output", "slack: authenticated as deploy-bot with {v}"),
            ("user", "the bot token is {v}"),
        ]),
        ("slack-webhook", lambda: "T" + g.s(8, UP + DIG) + "/B" + g.s(10, UP + DIG) + "/" + g.s(24), [
            ("command", "curl -X POST -d '{{\"text\":\"deployed\"}}' https://hooks.slack.com/services/{v}"),
            ("edit", "webhook_url: https://hooks.slack.com/services/{v}\n"),
            ("prose", "Alerts go to https://hooks.slack.com/services/{v}."),
        ]),
        ("stripe-live-key", lambda: g.pick(["sk_live_", "rk_live_"]) + g.s(g.pick([24, 34, 99])), [
            ("edit", "stripe.api_key = \"{v}\"\n"),
            ("user", "prod stripe key {v} - careful"),
            ("output", "STRIPE_SECRET_KEY={v}"),
        ]),
        ("google-api-key", lambda: "AIza" + g.s(35, URLSAFE), [
            ("command", "curl 'https://maps.googleapis.com/maps/api/geocode/json?address=x&key={v}'"),
            ("edit", "  \"apiKey\": \"{v}\",\n"),
            ("output", "firebase config: apiKey={v}"),
        ]),
        ("gcp-service-account", lambda: _pem(g, "PRIVATE KEY", 8).replace("\n", "\\n"), [
            ("output", "{{\n  \"type\": \"service_account\",\n  \"project_id\": \"acme-prod\",\n  \"private_key_id\": \"{u}\",\n  \"private_key\": \"{v}\",\n  \"client_email\": \"ci@acme-prod.iam.gserviceaccount.com\"\n}}"),
            ("edit", "{{\"type\": \"service_account\", \"private_key\": \"{v}\"}}"),
        ]),
        ("openai-api-key", lambda: "sk-proj-" + g.s(74, URLSAFE) + "T3BlbkFJ" + g.s(74, URLSAFE), [
            ("edit", "OPENAI_API_KEY={v}\n"),
            ("command", "OPENAI_API_KEY={v} python eval.py"),
            ("user", "openai key: {v}"),
        ]),
        ("anthropic-api-key", lambda: "sk-ant-api03-" + g.s(93, URLSAFE) + "AA", [
            ("command", "export ANTHROPIC_API_KEY={v}"),
            ("user", "my anthropic key {v}"),
            ("output", "Error: invalid x-api-key {v}"),
        ]),
        ("jwt", jwt, [
            ("command", "curl -H 'Authorization: Bearer {v}' https://api.internal/v1/me"),
            ("output", "Set-Cookie: session={v}; Path=/; HttpOnly"),
            ("user", "this token keeps failing validation: {v}"),
            ("prose", "Decoding {v} shows the `sub` claim is missing."),
        ]),
        ("private-key", lambda: _pem(g, g.pick(["RSA PRIVATE KEY", "OPENSSH PRIVATE KEY",
                                                 "EC PRIVATE KEY", "PRIVATE KEY"])), [
            ("output", "{v}"),
            ("edit", "{v}\n"),
            ("user", "here is the deploy key:\n{v}"),
        ]),
        ("sendgrid-key", lambda: "SG." + g.s(22, URLSAFE) + "." + g.s(43, URLSAFE), [
            ("edit", "SENDGRID_API_KEY={v}\n"),
            ("output", "mailer: using {v}"),
            ("user", "sendgrid: {v}"),
        ]),
        ("npm-token", lambda: "npm_" + g.s(36), [
            ("edit", "//registry.npmjs.org/:_authToken={v}\n"),
            ("command", "npm config set //registry.npmjs.org/:_authToken {v}"),
            ("prose", "Publishing used {v} from your ~/.npmrc."),
        ]),
        ("pypi-token", lambda: "pypi-AgEIcHlwaS5vcmc" + g.s(60, URLSAFE), [
            ("command", "twine upload -u __token__ -p {v} dist/*"),
            ("edit", "[pypi]\n  username = __token__\n  password = {v}\n"),
            ("output", "TWINE_PASSWORD={v}"),
        ]),
        ("huggingface-token", lambda: "hf_" + g.s(34, UP + LOW), [
            ("command", "huggingface-cli login --token {v}"),
            ("user", "HF token {v}"),
            ("output", "HF_TOKEN={v}"),
        ]),
        ("twilio-key", lambda: "SK" + g.s(32, HEX), [
            ("edit", "TWILIO_API_KEY={v}\n"),
            ("output", "twilio: api key {v} rejected"),
            ("user", "the twilio key {v} is for staging"),
        ]),
        ("telegram-bot-token", lambda: g.s(9, DIG) + ":AA" + g.s(33, URLSAFE), [
            ("command", "curl https://api.telegram.org/bot{v}/getMe"),
            ("edit", "TELEGRAM_TOKEN={v}\n"),
            ("user", "bot token {v}"),
        ]),
        ("digitalocean-token", lambda: g.pick(["dop_v1_", "doo_v1_"]) + g.s(64, HEX), [
            ("command", "doctl auth init -t {v}"),
            ("edit", "DIGITALOCEAN_TOKEN={v}\n"),
            ("output", "token: {v}"),
        ]),
        ("docker-pat", lambda: "dckr_pat_" + g.s(27, URLSAFE), [
            ("command", "echo {v} | docker login -u acmebot --password-stdin"),
            ("user", "docker hub token: {v}"),
            ("output", "DOCKERHUB_TOKEN={v}"),
            ("prose", "CI pushes images with {v}."),
        ]),
        ("azure-sas", lambda: g.s(38, ALNUM) + g.pick(["%2B", "%2F"]) + g.s(4) + "%3D", [
            ("command", "azcopy copy ./dist 'https://acmeprod.blob.core.windows.net/web?" + _SAS + "{v}' --recursive"),
            ("output", "Upload URL: https://acmeprod.blob.core.windows.net/backups/db.bak?" + _SAS + "{v}"),
            ("user", "SAS for the container: ?" + _SAS + "{v}"),
            ("edit", "BLOB_SAS_URL=https://acmelogs.blob.core.windows.net/logs?sp=r&st=2026-01-01T00:00:00Z&se=2027-01-01T00:00:00Z&spr=https&sv=2022-11-02&sr=c&sig={v}\n"),
        ]),
        ("azure-storage-key", lambda: g.s(86, B64) + "==", [
            ("edit", "\"AzureWebJobsStorage\": \"DefaultEndpointsProtocol=https;AccountName=acmeprod;AccountKey={v};EndpointSuffix=core.windows.net\"\n"),
            ("output", "connection: DefaultEndpointsProtocol=https;AccountName=acmelogs;AccountKey={v}"),
            ("command", "az storage blob list --account-name acmeprod --account-key {v} -c logs"),
        ]),
        ("sqlserver-connstring-password", g.password, [
            ("edit", "  \"ConnectionStrings\": {{ \"Default\": \"Server=tcp:sql.acme.internal,1433;Database=shop;User ID=app;Password={v};Encrypt=True;\" }}\n"),
            ("output", "Connection string: \"Data Source=db01;Initial Catalog=crm;User Id=sa;Password={v};\""),
            ("user", "use \"Server=localhost;Database=test;Uid=root;Pwd={v};\" locally"),
            ("command", "sqlcmd -S db01 -U sa -P '{v}' -Q 'SELECT 1'"),
        ]),
        ("curl-user-pass", g.password, [
            ("command", "curl -u {u}:{v} https://{h}/api/health"),
            ("command", "curl -s --user \"{u}:{v}\" -X POST https://{h}/deploy"),
            ("output", "+ curl -u admin:{v} http://localhost:9200/_cluster/health"),
            ("user", "try curl -u {u}:{v} https://{h}/status yourself"),
            ("prose", "I ran `curl -u {u}:{v} https://{h}/` and got 401."),
            ("edit", "curl -fsS -u \"deploy:{v}\" https://{h}/hook\n"),
        ]),
        ("mysql-password-flag", g.password, [
            ("command", "mysql -u root -p{v} -h {h} shop"),
            ("command", "mysqldump -uroot --password={v} shop > dump.sql"),
            ("output", "+ mysql -h {h} -u app -p'{v}' -e 'SHOW TABLES'"),
            ("user", "connect with mysql -u app -p\"{v}\" shop_dev"),
        ]),
        ("sshpass", g.password, [
            ("command", "sshpass -p '{v}' ssh {u}@{h} uptime"),
            ("command", "sshpass -p {v} scp backup.tgz {u}@{h}:/srv"),
            ("output", "running: sshpass -p \"{v}\" rsync -a ./ {u}@{h}:/opt/app"),
        ]),
        ("docker-login-password", g.password, [
            ("command", "docker login -u {u} -p {v} registry.acme.io"),
            ("command", "docker login registry.acme.io --username {u} --password '{v}'"),
            ("output", "WARNING! Using --password via the CLI is insecure.\n+ docker login -u ci -p {v} ghcr.io"),
        ]),
        ("ldapsearch-password", g.password, [
            ("command", "ldapsearch -x -H ldap://{h} -D 'cn=admin,dc=acme,dc=io' -w {v} -b 'dc=acme,dc=io'"),
            ("command", "ldapsearch -x -D cn=reader,dc=acme,dc=io -w '{v}' uid=jdoe"),
            ("user", "ldapsearch -w \"{v}\" -D cn=admin fails with 49"),
        ]),
        ("cli-password-flag", g.password, [
            ("command", "redis-cli -h {h} -a {v} PING"),
            ("command", "PGPASSWORD={v} psql -h {h} -U app shop"),
            ("command", "htpasswd -b -c .htpasswd {u} {v}"),
            ("command", "openssl pkcs12 -export -in c.pem -out c.p12 -passout pass:{v}"),
            ("command", "kubectl create secret generic db --from-literal=password={v}"),
            ("command", "mongosh \"mongodb://{h}\" -u admin -p '{v}'"),
            ("command", "rabbitmqctl add_user deploy {v}"),
            ("command", "psql \"host={h} user=app password={v} dbname=shop\""),
        ]),
        ("url-credentials", g.password, [
            ("edit", "DATABASE_URL=postgres://app:{v}@{h}:5432/shop\n"),
            ("output", "celery: broker amqp://guest:{v}@rabbit:5672//"),
            ("user", "the replica is mongodb+srv://reader:{v}@cluster0.ab1cd.mongodb.net/crm"),
            ("command", "git clone https://{u}:{v}@git.acme.io/infra/tf.git"),
            ("prose", "Celery connects through redis://:{v}@cache:6379/0 now."),
        ]),
        ("assignment-password", g.password, [
            ("edit", "DB_PASSWORD={v}\n"),
            ("edit", "database:\n  host: {h}\n  password: {v}\n"),
            ("edit", "{{\"smtp\": {{\"user\": \"mailer\", \"password\": \"{v}\"}}}}"),
            ("edit", "<property name=\"password\" value=\"{v}\"/>\n"),
            ("edit", "spring.datasource.password={v}\n"),
            ("edit", "define('DB_PASSWORD', '{v}');\n"),
            ("edit", "[database]\npassword = \"{v}\"\n"),
            ("edit", "cfg := Config{{User: \"app\", Password: \"{v}\"}}\n"),
            ("edit", "<password>{v}</password>\n"),
            ("output", "ADMIN_PASS={v}"),
            ("edit", "$env:DB_PASS = \"{v}\"\n"),
            ("edit", "set -x SMTP_PASSWORD '{v}'\n"),
        ]),
        ("secret-assignment", lambda: g.s(g.pick([32, 40, 50]), URLSAFE), [
            ("edit", "SECRET_KEY = '{v}'\n"),
            ("edit", "JWT_SIGNING_SECRET={v}\n"),
            ("edit", "client_secret: {v}\n"),
            ("output", "{{\"client_id\": \"web\", \"client_secret\": \"{v}\"}}"),
            ("edit", "export WEBHOOK_SECRET=\"{v}\"\n"),
        ]),
        ("password-in-prose", g.password, [
            ("user", "the staging db password is {v}, don't store it"),
            ("user", "log in as admin with password {v}"),
            ("prose", "The admin password `{v}` is in the vault now."),
            ("user", "pw for the jump host: {v}"),
            ("user", "Password: {v}"),
        ]),
        ("bearer-token", lambda: g.s(g.pick([32, 40, 64]), URLSAFE + ".~"), [
            ("command", "curl -H \"Authorization: Bearer {v}\" https://{h}/v2/items"),
            ("output", "> GET /v1/user HTTP/1.1\n> Authorization: Bearer {v}\n> Accept: */*"),
            ("edit", "headers = {{\"Authorization\": \"Bearer {v}\"}}\n"),
        ]),
        ("basic-auth-header", lambda: base64.b64encode(f"svc:{g.password()}".encode()).decode(), [
            ("command", "curl -H 'Authorization: Basic {v}' https://{h}/api"),
            ("output", "> Authorization: Basic {v}"),
        ]),
        ("api-key-header", lambda: g.s(32, HEX), [
            ("command", "curl -H 'X-API-Key: {v}' https://{h}/metrics"),
            ("command", "curl -H \"api-key: {v}\" https://acme.openai.azure.com/openai/deployments"),
            ("edit", "headers: {{ 'x-api-key': '{v}' }}\n"),
        ]),
        ("shopify-token", lambda: g.pick(["shpat_", "shpss_"]) + g.s(32, HEX), [
            ("edit", "SHOPIFY_ACCESS_TOKEN={v}\n"),
            ("user", "shopify admin token {v}"),
        ]),
        ("databricks-token", lambda: "dapi" + g.s(32, HEX), [
            ("command", "databricks configure --token {v}"),
            ("output", "DATABRICKS_TOKEN={v}"),
        ]),
        ("atlassian-token", lambda: "ATATT3xFfGF0" + g.s(174, URLSAFE) + "=" + g.s(8, HEX.upper()), [
            ("command", "curl -u me@acme.io:{v} https://acme.atlassian.net/rest/api/3/myself"),
            ("edit", "JIRA_API_TOKEN={v}\n"),
        ]),
        ("linear-key", lambda: "lin_api_" + g.s(40), [
            ("edit", "LINEAR_API_KEY={v}\n"),
            ("user", "linear key {v}"),
        ]),
        ("grafana-token", lambda: "glsa_" + g.s(32) + "_" + g.s(8, HEX), [
            ("edit", "GRAFANA_TOKEN={v}\n"),
            ("command", "curl -H 'Authorization: Bearer {v}' https://grafana.acme.io/api/search"),
        ]),
        ("age-secret-key", lambda: "AGE-SECRET-KEY-1" + g.s(58, "QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L"), [
            ("edit", "# created: 2026-01-01\n{v}\n"),
            ("output", "{v}"),
        ]),
        ("long-token-tail", lambda: g.pick(["ghp_" + g.s(40), "AIza" + g.s(45, URLSAFE),
                                            "xoxp-" + g.s(12, DIG) + "-" + g.s(12, DIG) + "-" + g.s(13, DIG) + "-" + g.s(32, HEX),
                                            "sk_live_" + g.s(120), "glpat-" + g.s(40, URLSAFE)]), [
            ("user", "token: {v}"),
            ("output", "using credential {v}"),
            ("edit", "TOKEN={v}\n"),
            ("prose", "The long token {v} was rotated."),
        ]),
    ]


_PROSE_QUOTES = (
    "\n\n(assistant) Noted: I will not echo `{v}` into any file.",
    "\n\nuser: wait, did {v} end up in the logs?",
    "\n\nassistant: Rotate {v} after the release.",
    "",  # some samples carry the secret only once
)
_USERS = ("deploy", "admin", "jdoe", "svc_ci", "ops")
_HOSTS = ("db.internal", "api.acme.io", "10.0.3.17", "staging.acme.io", "ldap.corp.acme.io")


def secret_samples(seed: int = 1313) -> list[SecretSample]:
    g = _Gen(seed)
    out: list[SecretSample] = []
    for kind, make, contexts in _kinds(g):
        reps = max(4, len(contexts))
        for i in range(reps):
            where, tmpl = contexts[i % len(contexts)]
            v = make()
            text = tmpl.format(v=v, u=g.pick(_USERS), h=g.pick(_HOSTS))
            if "\n" not in v:
                text += g.pick(_PROSE_QUOTES).format(v=v)
            out.append(SecretSample(kind, v, text, where, held_out=i % 4 == 3))
    return out


def benign_samples(seed: int = 4242) -> list[BenignSample]:
    g = _Gen(seed)
    items: list[tuple[str, str, str, str]] = []  # kind, keep, text, where

    def add(kind: str, keep: str, text: str, where: str = "output") -> None:
        items.append((kind, keep, text, where))

    for _ in range(4):
        v = "sha512-" + base64.b64encode(g.rng.randbytes(64)).decode()
        add("npm-integrity", v, f'    "node_modules/left-pad": {{\n      "version": "1.3.0",\n      "integrity": "{v}"\n    }}', "edit")
    for _ in range(4):
        v = "h1:" + base64.b64encode(g.rng.randbytes(32)).decode()
        add("go-sum", v, f"github.com/stretchr/testify v1.9.0 {v}")
    for _ in range(3):
        v = "sha256:" + g.s(64, HEX)
        add("pip-hash", v, f"requests==2.32.3 \\\n    --hash={v}", "edit")
    for _ in range(3):
        v = g.s(64, HEX)
        add("cargo-checksum", v, f'[[package]]\nname = "serde"\nversion = "1.0.203"\nchecksum = "{v}"', "edit")
    for _ in range(3):
        v = "sha256:" + g.s(64, HEX)
        add("docker-digest", v, f"Digest: {v}\nStatus: Downloaded newer image for python:3.12-slim")
    for _ in range(5):
        v = g.s(40, HEX)
        add("git-sha", v, f"commit {v}\nAuthor: Jane <jane@acme.io>\n\n    fix token refresh race")
    for _ in range(3):
        v = g.s(7, HEX)
        add("short-sha", v, f"[main {v}] rotate password handling to the vault client")
    for _ in range(5):
        v = str(__import__("uuid").UUID(int=g.rng.getrandbits(128), version=4))
        add("uuid", v, g.pick([f"request_id={v} status=500", f"X-Request-Id: {v}",
                               f"session {v} resumed", f'"trace_id": "{v}"']))
    for _ in range(3):
        v = "AAAAC3NzaC1lZDI1NTE5AAAAI" + g.s(43, B64)
        add("ssh-public-key", v, f"ssh-ed25519 {v} jane@laptop", "user")
    for _ in range(2):
        v = "AAAAB3NzaC1yc2EAAAADAQABAAABAQ" + g.s(340, B64)
        add("ssh-public-key", v, f"ssh-rsa {v} ci@build", "edit")
    for _ in range(2):
        body = "\n".join(g.s(64, B64) for _ in range(4))
        v = f"-----BEGIN PUBLIC KEY-----\n{body}\n-----END PUBLIC KEY-----"
        add("pem-public-key", body.splitlines()[1], v, "output")
    body = "\n".join(g.s(64, B64) for _ in range(5))
    add("certificate", body.splitlines()[2], f"-----BEGIN CERTIFICATE-----\n{body}\n-----END CERTIFICATE-----")
    for cred in ("github-deploy-token", "aws-prod-credentials", "dockerhub-password", "slack-webhook-secret"):
        add("jenkins-credentials-id", cred,
            f"withCredentials([string(credentialsId: '{cred}', variable: 'TOKEN')]) {{\n  sh 'make deploy'\n}}",
            "edit")
    add("jenkins-credentials-id", "nexus-admin-password",
        "environment {\n    NEXUS = credentials('nexus-admin-password')\n}", "edit")
    for name in ("NPM_TOKEN", "PYPI_API_TOKEN", "DOCKERHUB_PASSWORD"):
        add("actions-secret-ref", f"${{{{ secrets.{name} }}}}", f"      password: ${{{{ secrets.{name} }}}}", "edit")
    add("k8s-secret-ref", "name: db-password",
        "env:\n  - name: DB_PASSWORD\n    valueFrom:\n      secretKeyRef:\n        name: db-password\n        key: password", "edit")
    add("env-lookup", 'os.environ["DB_PASSWORD"]', 'password = os.environ["DB_PASSWORD"]', "edit")
    add("env-lookup", "process.env.STRIPE_SECRET_KEY", "const key = process.env.STRIPE_SECRET_KEY;", "edit")
    add("terraform-var", "var.db_password", "  password = var.db_password", "edit")
    add("type-annotation", "token: Optional[AccessToken]", "def refresh(self, token: Optional[AccessToken]) -> None:", "edit")
    add("type-annotation", "password: str", "class Login(BaseModel):\n    password: str\n    remember: bool", "edit")
    add("placeholder", "API_KEY=${API_KEY}", "API_KEY=${API_KEY}\nREGION=us-east-1", "edit")
    add("placeholder", "<your-token-here>", "export GITHUB_TOKEN=<your-token-here>", "prose")
    add("password-stdin", "--password-stdin", "echo \"$CR_PAT\" | docker login ghcr.io -u jane --password-stdin", "command")
    add("mysql-prompt", "-p shop", "mysql -u root -p shop < schema.sql", "command")
    add("curl-env-creds", '"$USER:$TOKEN"', 'curl -u "$USER:$TOKEN" https://api.acme.io', "command")
    add("secret-names", "rotate the STRIPE_SECRET_KEY and the DB password",
        "Next step: rotate the STRIPE_SECRET_KEY and the DB password before Friday.", "user")
    add("prose-password-word", "password reset emails", "Users are not receiving password reset emails since the SMTP change.", "user")
    add("prose-token-word", "token refresh endpoint", "The token refresh endpoint returns 401 after 15 minutes.", "prose")
    for _ in range(2):
        v = g.s(8, HEX)
        add("webpack-asset", f"main.{v}.js", f"dist/static/js/main.{v}.js  183.4 KiB")
    add("pod-name", "api-7c5b8d9f4-x2k9p", "api-7c5b8d9f4-x2k9p   1/1   Running   0   3h")
    v = "SHA256:" + base64.b64encode(g.rng.randbytes(32)).decode().rstrip("=")
    add("ssh-fingerprint", v, f"256 {v} jane@laptop (ED25519)")
    add("gpg-keyid", "4AEE18F83AFDEB23", "gpg: using RSA key 4AEE18F83AFDEB23")
    add("aws-arn", "arn:aws:iam::123456789012:role/deploy", "assumed arn:aws:iam::123456789012:role/deploy")
    v = "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAA" + g.s(120, B64)
    add("data-uri", v, f'<img src="{v}">', "edit")
    add("sri", "sha384-" + (s := base64.b64encode(g.rng.randbytes(48)).decode()),
        f'<script src="/app.js" integrity="sha384-{s}" crossorigin="anonymous"></script>', "edit")
    add("etag", (e := g.s(32, HEX)), f'ETag: "{e}"')
    add("go-pseudo-version", (pv := "v0.0.0-20240312152231-" + g.s(12, HEX)), f"require golang.org/x/exp {pv}", "edit")
    add("python-call", "secrets.token_urlsafe(32)", "SECRET_KEY = secrets.token_urlsafe(32)", "edit")
    add("md5sum", (m := hashlib.md5(g.rng.randbytes(8)).hexdigest()), f"{m}  release.tar.gz")
    add("yarn-resolved", (r := "https://registry.yarnpkg.com/lodash/-/lodash-4.17.21.tgz#" + g.s(40, HEX)),
        f'lodash@^4.17.21:\n  version "4.17.21"\n  resolved "{r}"', "edit")
    add("jwks-kid", (k := g.s(43, URLSAFE)), f'{{"keys": [{{"kty": "RSA", "kid": "{k}", "use": "sig"}}]}}')
    add("base64-test-fixture-name", "test_password_is_hashed_with_argon2",
        "PASSED tests/test_auth.py::test_password_is_hashed_with_argon2")
    add("css-color", "#3fa9f5", ".btn { color: #3fa9f5; }", "edit")
    add("semver-range", "^4.17.21", '"lodash": "^4.17.21"', "edit")
    add("account-id", "123456789012", "AWS account 123456789012 in eu-west-1", "user")
    add("github-run-url", "https://github.com/acme/api/actions/runs/9876543210",
        "see https://github.com/acme/api/actions/runs/9876543210 for the failing job", "user")
    add("s3-url", "s3://acme-backups/2026/01/db.dump", "aws s3 cp s3://acme-backups/2026/01/db.dump .", "command")
    add("kid-header", (kh := g.s(40, HEX)), f"x-amz-request-id: {kh}")
    add("password-policy", "min_password_length = 12", "min_password_length = 12", "edit")
    add("token-count", "max_tokens: 4096", "max_tokens: 4096", "edit")
    out = [BenignSample(k, keep, text, where, held_out=i % 4 == 3)
           for i, (k, keep, text, where) in enumerate(items)]
    return out


def survives(value: str, text: str) -> bool:
    """True if the secret (or any 8-char piece of it) is still in ``text``."""
    pieces = [p for p in value.replace("\\n", "\n").splitlines()
              if p and not p.startswith("-----")]
    for p in pieces:
        if len(p) <= 8:
            if p in text and len(p) >= 6:
                return True
            continue
        for i in range(0, len(p) - 7):
            if p[i:i + 8] in text:
                return True
    return False


if __name__ == "__main__":
    s, b = secret_samples(), benign_samples()
    print(len(s), "secrets of", len({x.kind for x in s}), "kinds;", len(b), "benign")
