"""Driving the real ``claude`` CLI headless (``claude -p``) against the fake Messages API."""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.e2e.e2e_hosts import Sandbox
from tests.fake_anthropic import FakeAnthropic, message, text

CLAUDE_UA = "claude-cli/"


def last_user_text(body: dict[str, Any]) -> str:
    """The text of the last user message of a Messages request (hook context included)."""
    for msg in reversed(body.get("messages") or []):
        if msg.get("role") != "user":
            continue
        content = msg.get("content")
        if isinstance(content, str):
            return content
        return "\n".join(block.get("text", "") for block in content or []
                         if isinstance(block, dict) and block.get("type") == "text")
    return ""


def request_text(body: dict[str, Any]) -> str:
    return json.dumps(body, ensure_ascii=False)


def last_prompt(body: dict[str, Any]) -> str:
    """The person's own words: the last text block of the last user message (hook
    context and reminders come before it)."""
    lines = last_user_text(body).split("\n</system-reminder>")
    return lines[-1]


def scripted_assistant(replies: dict[str, str], default: str = "OK.") -> Callable[[dict], dict]:
    """A model that answers the last user prompt: first keyword found in it wins."""

    def respond(body: dict) -> dict:
        prompt = last_prompt(body)
        for key, reply in replies.items():
            if key.lower() in prompt.lower():
                return message(text(reply))
        return message(text(default))

    return respond


@dataclass
class Turn:
    session_id: str
    result: str
    requests: list[dict[str, Any]]  # the Messages requests this turn made


class Claude:
    """``claude -p`` in a sandbox, its model at ``api``."""

    def __init__(self, exe: Path, box: Sandbox, api: FakeAnthropic) -> None:
        self.exe, self.box, self.api = exe, box, api
        # What a person who set Claude Code up with an API key has in the environment:
        # the hooks (and the worker they start) inherit both.
        box.env.update(ANTHROPIC_BASE_URL=api.url, ANTHROPIC_API_KEY="sk-ant-e2e-person-key-0000")

    def turn(self, prompt: str, *args: str, resume: str | None = None,
             timeout: float = 90) -> Turn:
        before = len(self.api.requests)
        argv = [self.exe, "-p", prompt, "--output-format", "json", *args]
        if resume:
            argv += ["--resume", resume]
        proc = self.box.run(*argv, timeout=timeout)
        out = json.loads(proc.stdout)
        assert not out.get("is_error"), out
        made = [r.body for r in self.api.requests[before:] if r.path.startswith("/v1/messages")]
        return Turn(out["session_id"], out.get("result", ""), made)

    def foreign_requests(self) -> list[str]:
        """Requests that did not come from Claude Code itself (dualtrace's would)."""
        return [f"{r.method} {r.path} ({r.headers.get('user-agent')})" for r in self.api.requests
                if not (r.headers.get("user-agent") or "").startswith(CLAUDE_UA)]

    def transcript(self, session_id: str) -> Path:
        found = list((self.box.home / ".claude" / "projects").glob(f"*/{session_id}.jsonl"))
        assert found, f"no transcript for {session_id}"
        return found[0]


class LiveSession:
    """One long-lived ``claude -p --input-format stream-json`` session: the interactive
    case (one SessionStart; UserPromptSubmit and Stop every turn; SessionEnd at close)."""

    def __init__(self, exe: Path, box: Sandbox) -> None:
        self.proc = subprocess.Popen(
            [str(exe), "-p", "--input-format", "stream-json", "--output-format", "stream-json",
             "--verbose"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL, env=box.env, cwd=box.project, text=True, bufsize=1)

    def turn(self, prompt: str) -> tuple[float, dict[str, Any]]:
        """(seconds from writing the prompt to the ``result`` event, that event)."""
        assert self.proc.stdin is not None and self.proc.stdout is not None
        started = time.perf_counter()
        self.proc.stdin.write(json.dumps({"type": "user", "message": {
            "role": "user", "content": prompt}}) + "\n")
        self.proc.stdin.flush()
        for line in self.proc.stdout:
            event = json.loads(line) if line.startswith("{") else {}
            if event.get("type") == "result":
                return time.perf_counter() - started, event
        raise AssertionError("claude ended before answering")

    def close(self, timeout: float = 60) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        self.proc.wait(timeout=timeout)
