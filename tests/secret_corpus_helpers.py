"""The adversarial secret corpus (bench/secret_corpus.py) as a Claude Code transcript.

Each sample goes where its ``where`` says: user text, a Bash command, a tool output,
a file edit, or assistant prose.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

from tests.conftest import REPO_ROOT


def corpus():
    spec = importlib.util.spec_from_file_location("secret_corpus",
                                                  REPO_ROOT / "bench" / "secret_corpus.py")
    assert spec and spec.loader
    if "secret_corpus" in sys.modules:
        return sys.modules["secret_corpus"]
    mod = importlib.util.module_from_spec(spec)
    sys.modules["secret_corpus"] = mod  # dataclasses look their module up by name
    spec.loader.exec_module(mod)
    return mod


def write_transcript(path: Path, samples, *, session_id: str = "5ec7e700-0000-4000-8000-000000000013",
                     cwd: str = "/home/jdoe/shop", tail: tuple[str, ...] = ()) -> None:
    lines: list[str] = []
    n = 0

    def rec(kind: str, content) -> None:
        nonlocal n
        n += 1
        msg = {"role": kind, "content": content}
        if kind == "assistant":
            msg["id"] = f"msg{n}"
        lines.append(json.dumps({
            "type": kind, "uuid": f"u{n}", "sessionId": session_id, "cwd": cwd,
            "gitBranch": "main", "timestamp": f"2026-05-02T{8 + n // 3600:02d}:{n // 60 % 60:02d}:{n % 60:02d}.000Z",
            "message": msg}))

    for s in samples:
        tid = f"toolu_{n}"
        if s.where == "user":
            rec("user", s.text)
        elif s.where == "prose":
            rec("assistant", [{"type": "text", "text": s.text}])
        elif s.where == "command":
            rec("assistant", [{"type": "tool_use", "id": tid, "name": "Bash",
                               "input": {"command": s.text}}])
            rec("user", [{"type": "tool_result", "tool_use_id": tid, "content": "exit 0"}])
        elif s.where == "output":
            rec("assistant", [{"type": "tool_use", "id": tid, "name": "Bash",
                               "input": {"command": "cat config/settings.txt"}}])
            rec("user", [{"type": "tool_result", "tool_use_id": tid, "content": s.text}])
        else:  # edit
            rec("assistant", [{"type": "tool_use", "id": tid, "name": "Edit",
                               "input": {"file_path": f"{cwd}/config/app.env",
                                         "old_string": "# settings", "new_string": s.text}}])
            rec("user", [{"type": "tool_result", "tool_use_id": tid, "content": "updated"}])
    for t in tail:
        rec("user", t)
    path.write_text("\n".join(lines) + "\n")
