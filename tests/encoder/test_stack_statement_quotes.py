"""A stack statement's subjects quote the user's statement (review 8 F4, issue 12 item 3:
"a stack or architecture statement is a decision, one fact per subject").

"I want to use Django with MySQL, Celery for background jobs, Kubernetes, Node 20" is one
decision per technology; each used to say "The user stated: Use Kubernetes." (and its moment
"the user said: \"Use Kubernetes.\""), words the user never wrote. The user's sentence is the
quote; the subject is said as what it is. Wording of its own."""

from __future__ import annotations

from dualtrace.memfs.store import MemoryStore
from dualtrace.pipeline import encode_session
from tests.encoder.test_offline import chat, claude
from tests.encoder.test_pasted_failures import bash, edit, said, user

STACK = "I want to use Django with MySQL, Celery for background jobs, Kubernetes, Node 20."
SUBJECTS = ("Django", "MySQL", "Celery for background jobs", "Kubernetes", "Node 20")


def test_each_subject_of_a_stack_statement_quotes_the_users_statement(tmp_path):
    path = chat(tmp_path / "c.jsonl", [("user", STACK), ("assistant", "Noted, I'll set it up that way.")])
    encode_session(path, memory_dir=tmp_path / "mem", backend="offline")
    decisions = [f for f in MemoryStore(tmp_path / "mem").scan().facts() if f.type == "decision"]
    assert sorted(f.description for f in decisions) == sorted(f"Use {s}." for s in SUBJECTS)
    for fact in decisions:
        subject = fact.description[len("Use "):-1]
        assert f": \"{STACK}\"" in fact.body, fact.body
        assert f"): Use {subject}." not in fact.body  # never words the user did not write
        assert f"Decision: use {subject} (one subject of that statement)." in fact.body
        assert fact.body.count(STACK) == 1, fact.body  # quoted once, not again as context


def test_a_stack_subjects_moment_quotes_the_users_statement(tmp_path):
    encode_session(claude(tmp_path / "s.jsonl", [
        user(STACK), said(1, "I'll scaffold the project."),
        *edit(2, "k8s/deployment.yaml"), *edit(3, "app/settings.py"),
        *bash(4, "kubectl apply --dry-run=client -f k8s/", "deployment.apps/web created (dry run)"),
        said(5, "The scaffold is in place."),
    ]), memory_dir=tmp_path / "mem", backend="offline")
    scene = (tmp_path / "mem" / "scenes" / "decisions" / "kubernetes.md").read_text(encoding="utf-8")
    assert f"the user said: \"{STACK}\"" in scene, scene
    assert "said: \"Use Kubernetes.\"" not in scene
