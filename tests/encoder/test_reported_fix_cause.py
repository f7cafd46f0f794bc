"""A failure the user reports in words and the agent fixes keeps the cause the agent
stated (review 10 MED: "uploads over 1 MB fail with 413" was resolved, but nginx's 1 MB
limit, the cause the agent named, was not in the incident; its Fix line named only the file)."""

from __future__ import annotations

from dualtrace.memfs.store import MemoryStore
from dualtrace.pipeline import encode_session
from tests.encoder.test_offline import claude
from tests.encoder.test_pasted_failures import bash, edit, said, user

CAUSE = ("The cause is nginx's default client_max_body_size, which is 1 MB, so nginx "
         "rejects larger request bodies with 413 before they reach the app.")


def _incidents(tmp_path, records):
    encode_session(claude(tmp_path / "s.jsonl", records), memory_dir=tmp_path / "mem",
                   backend="offline")
    return [f for f in MemoryStore(tmp_path / "mem").scan().facts() if f.type == "incident"]


def test_a_reported_failure_fixed_in_the_session_keeps_the_stated_cause(tmp_path):
    [incident] = _incidents(tmp_path, [
        user("Uploading a photo over 1 MB fails with a 413 error on the profile page."),
        *bash(1, "grep -n client_max_body_size deploy/nginx.conf", ""),
        said(2, CAUSE),
        *edit(3, "deploy/nginx.conf"),
        said(4, "Fixed: I set client_max_body_size 20M in deploy/nginx.conf, so uploads up "
                "to 20 MB now reach the app."),
        user("Works now, thanks!"),
    ])
    assert incident.status == "resolved", incident.body
    assert "Cause (as the agent stated it): The cause is nginx's default client_max_body_size" \
        in incident.body, incident.body
    assert incident.body.count("client_max_body_size, which is 1 MB") == 1, incident.body
    # the agent's fix, not only the file, though the user's "works now" is the proof
    assert "Fix: \"Fixed: I set client_max_body_size 20M" in incident.body, incident.body
    assert incident.body.count("`deploy/nginx.conf`") == 1, incident.body  # listed once


def test_a_plan_is_no_cause(tmp_path):
    [incident] = _incidents(tmp_path, [
        user("Uploading a photo over 1 MB fails with a 413 error on the profile page."),
        said(1, "Let me check the nginx configuration for the body size limit."),
        *edit(2, "deploy/nginx.conf"),
        said(3, "Fixed: client_max_body_size is 20M in deploy/nginx.conf now."),
        user("Works now, thanks!"),
    ])
    assert incident.status == "resolved", incident.body
    assert "Cause" not in incident.body, incident.body
