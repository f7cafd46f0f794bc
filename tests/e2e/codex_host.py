"""Driving the real ``codex exec`` against the fake Responses API."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.e2e.e2e_hosts import Sandbox
from tests.fake_openai import FakeResponses

CODEX_UA = "codex_exec/"


@dataclass
class Run:
    thread_id: str
    messages: list[str]
    requests: list[dict[str, Any]]
    stderr: str
    seconds: float


class Codex:
    """``codex exec`` in a sandbox; its model provider is the fake at ``api``."""

    def __init__(self, exe: Path, box: Sandbox, api: FakeResponses) -> None:
        self.exe, self.box, self.api = exe, box, api
        home = box.home / ".codex"
        home.mkdir(parents=True, exist_ok=True)
        (home / "config.toml").write_text(
            'model = "gpt-5"\nmodel_provider = "fake"\n\n[model_providers.fake]\n'
            f'name = "fake"\nbase_url = "{api.url}"\nwire_api = "responses"\n'
            'env_key = "OPENAI_API_KEY"\n', encoding="utf-8")
        box.env.update(OPENAI_API_KEY="sk-e2e-person-openai-key-0000")

    def exec(self, prompt: str, *args: str, timeout: float = 90) -> Run:
        before = len(self.api.requests)
        started = time.monotonic()
        # A person trusts dualtrace's hooks once in /hooks; a test cannot, so it uses the
        # flag Codex provides for automation that vets its hooks itself.
        proc = self.box.run(self.exe, "exec", "--json", "--skip-git-repo-check",
                            "--dangerously-bypass-hook-trust", *args, prompt, timeout=timeout)
        seconds = time.monotonic() - started
        events = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
        thread = next(e["thread_id"] for e in events if e.get("type") == "thread.started")
        texts = [e["item"].get("text", "") for e in events if e.get("type") == "item.completed"
                 and e["item"].get("type") == "agent_message"]
        made = [r.body for r in self.api.requests[before:] if r.method == "POST"]
        return Run(thread, texts, made, proc.stderr, seconds)

    def foreign_requests(self) -> list[str]:
        return [f"{r.method} {r.path} ({r.headers.get('user-agent')})" for r in self.api.requests
                if not (r.headers.get("user-agent") or "").startswith(CODEX_UA)]

    def rollouts(self) -> list[Path]:
        return sorted((self.box.home / ".codex" / "sessions").rglob("rollout-*"))
