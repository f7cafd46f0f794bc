"""A failure report that names two failures is two incidents, each about the command that
showed it and resolved when that same command passes later (review 7 finding 25, issue 12
item 2: "one incident per failure signature"). The command counts as the same when only
the variables set before it changed (a new password, a token). Written Claude Code
transcripts, wording of their own."""

from __future__ import annotations

from pathlib import Path

from dualtrace.memfs.store import MemoryStore
from dualtrace.pipeline import encode_session
from tests.encoder.test_offline import claude
from tests.encoder.test_pasted_failures import bash, said, user


def _facts(tmp_path: Path, records: list[dict]):
    encode_session(claude(tmp_path / "s.jsonl", records), memory_dir=tmp_path / "mem", backend="offline")
    return MemoryStore(tmp_path / "mem").scan().facts()


def test_two_failures_reported_together_are_two_incidents_each_resolved_by_its_own_rerun(tmp_path):
    facts = _facts(tmp_path, [
        user("The nightly backup script fails and the Redis cache warmup is failing too; please sort "
             "both out."),
        *bash(1, "AWS_PROFILE=ops ./scripts/backup.sh --bucket nightly",
              "upload failed: AccessDenied when calling the PutObject operation", failed=True),
        *bash(2, "python -m warmup --target redis://cache:6379",
              "ConnectionRefusedError: [Errno 111] Connection refused", failed=True),
        *bash(3, "AWS_PROFILE=backup-writer ./scripts/backup.sh --bucket nightly", "uploaded 14 files"),
        said(4, "The backup works with the backup-writer profile; the warmup still cannot reach Redis."),
    ])
    incidents = {f.path: f for f in facts if f.type == "incident"}
    assert len(incidents) == 2
    (backup,) = [f for f in incidents.values() if "backup" in f.description.lower()]
    (warmup,) = [f for f in incidents.values() if "warmup" in f.description.lower()]
    assert backup.status == "resolved" and "AccessDenied" in backup.body
    assert "passed afterwards" in backup.body
    assert warmup.status != "resolved" and "Connection refused" in warmup.body
    assert "AccessDenied" not in warmup.body


def test_one_reported_failure_is_one_incident_resolved_by_the_same_command(tmp_path):
    facts = _facts(tmp_path, [
        user("The staging smoke check is failing since this morning."),
        *bash(1, "TOKEN=abc123old ./smoke.sh staging", "smoke failed: 401 Unauthorized from /health", failed=True),
        *bash(2, "TOKEN=def456new ./smoke.sh staging", "smoke ok: 12/12 endpoints"),
        said(3, "The token had expired; with a fresh one the smoke check passes."),
    ])
    (incident,) = [f for f in facts if f.type == "incident"]
    assert incident.status == "resolved" and "401 Unauthorized" in incident.body


def test_a_reported_failure_no_command_names_stays_as_the_user_said_it(tmp_path):
    facts = _facts(tmp_path, [
        user("The invoice PDF export is failing for Safari users."),
        *bash(1, "npm run lint", "src/app.js: 1 error", failed=True),
        said(2, "I could not reproduce the PDF problem here."),
    ])
    (incident,) = [f for f in facts if f.type == "incident"]
    assert incident.status != "resolved" and "npm run lint" not in incident.body
