"""`dualtrace remote add` / `remote` / `sync` end to end, on real encodes of the examples."""

from __future__ import annotations

import json
import subprocess
import sys

from dualtrace.memfs.merge import has_conflict_markers
from dualtrace.memfs.store import MemoryStore
from tests.conftest import EXAMPLES


def test_two_people_encode_then_sync_and_both_recall_everything(tmp_path, run_cli):
    bare = tmp_path / "team-memory.git"
    subprocess.run(["git", "init", "-q", "--bare", "-b", "main", str(bare)], check=True)
    alice, bob = tmp_path / "alice", tmp_path / "bob"
    sessions = {alice: ["pilot-1b-structured-logging.jsonl", "pilot-4-auth-401-session1.jsonl"],
                bob: ["pilot-5-session-storage.jsonl", "pilot-4-auth-401-session2.jsonl"]}
    for memdir, names in sessions.items():
        for name in names:
            result = run_cli("encode", "--memory-dir", str(memdir), str(EXAMPLES / name),
                             "--backend", "offline")
            assert result.exit_code == 0, result.output
        # A local path is resolved where it is typed (alice types a relative one).
        url = "team-memory.git" if memdir == alice else str(bare)
        result = run_cli("remote", "add", url, "--memory-dir", str(memdir), cwd=tmp_path)
        assert result.exit_code == 0, result.output
        assert "added remote origin" in result.output
    listed = run_cli("remote", "--memory-dir", str(alice))
    assert f"origin\t{bare}" in listed.output

    stored = {m: set(MemoryStore(m, create=False).iter_files()) for m in sessions}
    assert run_cli("sync", "--memory-dir", str(alice)).exit_code == 0   # the first push
    # bob's memory was started on its own: joining alice's is a deliberate step.
    refused = subprocess.run([sys.executable, "-m", "dualtrace", "sync", "--memory-dir",
                              str(bob)], capture_output=True, text=True, timeout=120)
    assert refused.returncode == 1, refused.stderr
    line, = refused.stderr.strip().splitlines()
    assert line.startswith("Error: origin/main is another memory (") and \
        "`dualtrace sync --allow-unrelated`" in line
    for memdir, flags in ((bob, ["--allow-unrelated"]), (alice, [])):
        result = run_cli("sync", "--memory-dir", str(memdir), "--json", *flags)
        assert result.exit_code == 0, result.output
        report = json.loads(result.output)
        assert report["remote"] == "origin" and report["branch"] == "main"
    everything = stored[alice] | stored[bob]
    for memdir in (alice, bob):
        store = MemoryStore(memdir, create=False)
        assert set(store.iter_files()) == everything
        for rel in everything:
            store.read(rel)  # parses
            assert not has_conflict_markers(store.read_text(rel))
    # Each side's recall answers the other side's memories, from the updated index.
    for memdir in (alice, bob):
        answer = run_cli("recall", "--memory-dir", str(memdir), "--json",
                         "why did we switch to structured logging?")
        assert "structured-logging" in answer.output, answer.output
        answer = run_cli("recall", "--memory-dir", str(memdir), "--json",
                         "where do we store sessions?")
        assert "session" in answer.output and json.loads(answer.output)["state"] in ("A", "B")
    text = run_cli("sync", "--memory-dir", str(bob))
    assert text.exit_code == 0 and "synced with origin/main: 0 commits in" in text.output


def test_sync_without_a_remote_is_one_clear_error(tmp_path):
    memdir = tmp_path / "mem"
    MemoryStore(memdir)
    run = subprocess.run([sys.executable, "-m", "dualtrace", "sync", "--memory-dir", str(memdir)],
                         capture_output=True, text=True, timeout=60)
    assert run.returncode == 1
    assert run.stderr.strip().splitlines() == [
        f"Error: the memory repository {memdir} has no remote; add one with "
        "`dualtrace remote add URL`"]


def test_status_sync_line_without_a_remote(tmp_path, run_cli):
    memdir = tmp_path / "mem"
    MemoryStore(memdir)
    result = run_cli("status", "--memory-dir", str(memdir))
    line = next(ln for ln in result.output.splitlines() if ln.startswith("sync:"))
    assert line == ("sync:       off (no remote; share this memory with "
                    "`dualtrace remote add URL`)")
