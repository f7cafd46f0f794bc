"""A file written with the shell is a file edit (issue 12 item 2).

Codex edits with ``sed -i``, ``perl -pi``, ``cat > f <<EOF``, ``apply_patch`` run through
the shell and ``python - <<EOF`` scripts as often as with its patch tool; Claude Code's
Bash tool does the same. Only clear write forms count, on literal paths, so that the
failing check -> fix -> passing check arc sees the fix and yields a resolved incident.

Real rollout from ../shared/corpus (skipped when absent) and rollouts written here in the
shape Codex writes them (session_meta, response_item function_call / output)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dualtrace.encoder.session import written_files
from dualtrace.hooks.transcripts import read_transcript
from dualtrace.memfs.store import MemoryStore
from dualtrace.pipeline import encode_session
from tests.conftest import corpus_path


def test_a_heredoc_written_file_is_an_edit_in_a_real_codex_rollout():
    # agentlogs codex/crud: `cat <<'EOF' > .../JOKE.md`, then apply_patch, then rm
    session = read_transcript(corpus_path("agentlogs", "codex", "crud.jsonl"))
    edits = [(e.edit_kind, e.path.rsplit("/", 1)[-1]) for e in session.events if e.kind == "edit"]
    assert edits == [("create", "JOKE.md"), ("modify", "JOKE.md")]


@pytest.mark.parametrize(("command", "files"), [
    ("sed -i 's/timeout=5/timeout=30/' src/client.py", [("src/client.py", "modify")]),
    ("sed -i.bak -e 's/a/b/' -e 's/c/d/' a.py b.py", [("a.py", "modify"), ("b.py", "modify")]),
    ("sed -i '' -E 's/x+/y/' conf/app.ini", [("conf/app.ini", "modify")]),
    ("perl -pi -e 's/\\bfoo\\b/bar/g' lib/A.pm", [("lib/A.pm", "modify")]),
    ("perl -i.orig -pe 's/x/y/' c.pl", [("c.pl", "modify")]),
    ("cat > src/settings.py <<'EOF'\nDEBUG = False  # > 1\nEOF", [("src/settings.py", "create")]),
    ("cat <<EOF > README.md\n# Title\nEOF", [("README.md", "create")]),
    ("echo 'LOG_LEVEL=info' >> .env && make test", [(".env", "modify")]),
    ("python3 - <<'PY'\nfrom pathlib import Path\np = Path('app/models.py')\n"
     "Path('app/models.py').write_text(p.read_text().replace('a', 'b'))\nPY", [("app/models.py", "modify")]),
    ("python - <<'EOF'\nwith open(\"data/seed.json\", \"w\") as fh:\n    fh.write('[]')\nEOF",
     [("data/seed.json", "modify")]),
    ("apply_patch <<'EOF'\n*** Begin Patch\n*** Add File: src/new.py\n+x = 1\n*** End Patch\nEOF",
     [("src/new.py", "create")]),
    ("cd services/api && sed -i 's/8080/9090/' main.go", [("services/api/main.go", "modify")]),
])
def test_clear_write_forms_name_their_files(command, files):
    assert written_files(command) == files


@pytest.mark.parametrize("command", [
    "sed -n '1,40p' src/client.py",  # reads
    "sed 's/a/b/' in.txt",  # prints to stdout
    "perl -ne 'print if /x/' a.log",
    "grep -rn 'a > b' src",  # the '>' is inside the pattern
    "pytest -q > /dev/null 2>&1",
    "sed -i 's/a/b/' src/*.py",  # a glob: not a known file
    "cd $APP_DIR && sed -i 's/a/b/' main.go",  # a directory we cannot follow
    "python gen_models.py > out.py",  # a script's output, not a clear write form
    "python - <<'EOF'\nprint(open('a.txt').read())\nEOF",  # opened for reading
])
def test_other_commands_write_nothing(command):
    assert written_files(command) == []


def _rec(kind: str, payload: dict, n: int) -> str:
    return json.dumps({"timestamp": f"2026-06-01T09:{n:02d}:00.000Z", "type": kind, "payload": payload})


def rollout(path: Path, steps: list[tuple[str, str, int]], ask: str) -> Path:
    """A Codex rollout: the user's request, then each (command, output, exit code) as an
    exec_command call and its output, then the agent's closing message."""
    lines = [_rec("session_meta", {"id": "019d0000-bbbb-7000-8000-000000000003",
                                   "cwd": "/home/dev/shop", "cli_version": "0.98.0"}, 0),
             _rec("response_item", {"type": "message", "role": "user",
                                    "content": [{"type": "input_text", "text": ask}]}, 1)]
    for n, (command, output, code) in enumerate(steps, start=2):
        if command.startswith("SAY "):
            lines.append(_rec("response_item", {"type": "message", "role": "assistant", "content": [
                {"type": "output_text", "text": command[4:]}]}, n))
            continue
        call = f"call_{n}"
        lines.append(_rec("response_item", {"type": "function_call", "name": "exec_command",
                                            "arguments": json.dumps({"cmd": command}), "call_id": call}, n))
        lines.append(_rec("response_item", {"type": "function_call_output", "call_id": call, "output": (
            f"Chunk ID: {n}\nWall time: 0.2 seconds\nProcess exited with code {code}\nOutput:\n{output}")}, n))
    path.write_text("\n".join(lines) + "\n")
    return path


FAIL = ("FAILED tests/test_cart.py::test_discount_is_capped - AssertionError: assert 60 == 50\n"
        "1 failed, 8 passed in 0.12s\n")


@pytest.mark.parametrize("fix", [
    "sed -i 's/min(total, cap)/min(discount, cap)/' shop/cart.py",
    "perl -pi -e 's/min\\(total, cap\\)/min(discount, cap)/' shop/cart.py",
    "cat > shop/cart.py <<'EOF'\ndef discount(total, cap):\n    return min(total * 0.1, cap)\nEOF",
    "python - <<'EOF'\nfrom pathlib import Path\np = Path('shop/cart.py')\n"
    "p.write_text(p.read_text().replace('total, cap', 'discount, cap'))\nEOF",
])
def test_a_shell_fix_between_a_failing_and_a_passing_run_is_a_resolved_incident(tmp_path, fix):
    path = rollout(tmp_path / "rollout-2026-06-01T09-00-00-019d0000.jsonl", [
        ("uv run pytest tests/test_cart.py", FAIL, 1),
        ("SAY The test fails because the cap is applied to the total instead of the discount.", "", 0),
        (fix, "", 0),
        ("uv run pytest tests/test_cart.py", "9 passed in 0.10s\n", 0),
        ("SAY Fixed: the cap now applies to the discount.", "", 0),
    ], ask="The cart tests fail since yesterday, please fix them.")
    session = read_transcript(path)
    assert [e.path for e in session.events if e.kind == "edit"] == ["shop/cart.py"]
    encode_session(path, memory_dir=tmp_path / "mem", backend="offline")
    (inc,) = [f for f in MemoryStore(tmp_path / "mem").scan().facts() if f.type == "incident"]
    assert inc.status == "resolved"
    assert "test_discount_is_capped" in inc.description
    assert "Fix: edited `shop/cart.py`" in inc.body
    assert inc.description.endswith(
        "cause: the test fails because the cap is applied to the total instead of the discount.")


def test_a_failed_shell_write_is_no_fix(tmp_path):
    path = rollout(tmp_path / "rollout-2026-06-01T09-00-00-019d0000.jsonl", [
        ("uv run pytest tests/test_cart.py", FAIL, 1),
        ("sed -i 's/a/b/' shop/cart.py", "sed: can't read shop/cart.py: No such file or directory", 2),
        ("uv run pytest tests/test_cart.py", "9 passed in 0.10s\n", 0),
    ], ask="The cart tests fail since yesterday, please fix them.")
    (edit,) = [e for e in read_transcript(path).events if e.kind == "edit"]
    assert edit.is_error
    encode_session(path, memory_dir=tmp_path / "mem", backend="offline")
    assert not [f for f in MemoryStore(tmp_path / "mem").scan().facts() if f.type == "incident"]
