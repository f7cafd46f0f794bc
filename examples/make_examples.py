"""Regenerate the example transcripts (Claude Code 2.1 JSONL) for the pilot scenarios.

Run: python examples/make_examples.py. The transcripts are written by this project
(no real session data) and cover docs/PROTOCOL.md §12: routing (1A, 1B), an incident that
recurs (4, two sessions), a Redis -> Postgres decision (5) and a noise-only session.
"""

from __future__ import annotations

import json
from pathlib import Path

HERE = Path(__file__).resolve().parent
CWD = "/home/dev/shop-api"


class Transcript:
    def __init__(self, session_id: str, start: str, branch: str = "main") -> None:
        self.session_id = session_id
        self.branch = branch
        self.lines: list[dict] = []
        self.parent: str | None = None
        self.n = 0
        self.minute = 0
        self.day = start
        self.tool = 0

    def _ts(self) -> str:
        self.minute += 1
        return f"{self.day}T10:{self.minute:02d}:00.000Z"

    def _env(self, kind: str) -> dict:
        self.n += 1
        uuid = f"{self.session_id[:8]}-{self.n:04d}"
        env = {"parentUuid": self.parent, "isSidechain": False, "userType": "external",
               "cwd": CWD, "sessionId": self.session_id, "version": "2.1.38",
               "gitBranch": self.branch, "type": kind, "uuid": uuid, "timestamp": self._ts()}
        self.parent = uuid
        return env

    def noise(self) -> None:
        self.lines.append({**self._env("progress"), "data": {"type": "hook_progress"}})

    def user(self, text: str) -> None:
        self.lines.append({**self._env("user"), "message": {"role": "user", "content": text}})

    def say(self, text: str) -> None:
        self.n += 1
        self.lines.append({**self._env("assistant"), "message": {
            "id": f"msg_{self.session_id[:6]}{self.n}", "role": "assistant", "model": "claude-sonnet-4-5",
            "type": "message", "content": [{"type": "text", "text": text}],
            "usage": {"input_tokens": 900, "output_tokens": 120}}})

    def tool_call(self, name: str, tool_input: dict, result: str, *, is_error: bool = False,
                  structured: dict | None = None) -> None:
        self.tool += 1
        tid = f"toolu_{self.session_id[:6]}_{self.tool:03d}"
        self.lines.append({**self._env("assistant"), "message": {
            "id": f"msg_{self.session_id[:6]}t{self.tool}", "role": "assistant",
            "model": "claude-sonnet-4-5", "type": "message",
            "content": [{"type": "tool_use", "id": tid, "name": name, "input": tool_input}],
            "usage": {"input_tokens": 1000, "output_tokens": 60}}})
        line = {**self._env("user"), "message": {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": tid, "content": result, "is_error": is_error}]}}
        if structured is not None:
            line["toolUseResult"] = structured
        self.lines.append(line)

    def edit(self, rel: str, old: str, new: str) -> None:
        path = f"{CWD}/{rel}"
        self.tool_call("Edit", {"file_path": path, "old_string": old, "new_string": new},
                       f"The file {path} has been updated.",
                       structured={"filePath": path, "oldString": old, "newString": new})

    def bash(self, command: str, output: str, code: int = 0) -> None:
        text = output if code == 0 else f"Exit code {code}\n{output}"
        self.tool_call("Bash", {"command": command, "description": "run"}, text, is_error=code != 0,
                       structured={"stdout": output, "stderr": "", "interrupted": False})

    def write(self, name: str) -> None:
        body = "".join(json.dumps(line, separators=(",", ":")) + "\n" for line in self.lines)
        (HERE / name).write_text(body, encoding="utf-8")


def pilot_1a() -> None:
    t = Transcript("1a000000-0000-4000-8000-000000000001", "2026-03-10")
    t.noise()
    t.user("I like to keep my functions under 30 lines. If it's getting longer I break it up.")
    t.say("Noted - I'll keep functions short and split them when they grow past that.")
    t.write("pilot-1a-preference.jsonl")


def pilot_1b() -> None:
    t = Transcript("1b000000-0000-4000-8000-000000000002", "2026-03-12", branch="feat/json-logs")
    t.noise()
    t.user("We're switching to JSON structured logging instead of plain text. The main driver was "
           "that our Datadog pipeline couldn't parse free-form strings reliably. We looked at keeping "
           "plain text and adding a log shipper to transform it, but that felt like adding complexity "
           "to fix a problem we'd created ourselves.")
    t.say("Makes sense. I'll switch the formatter in src/shop/logging_config.py to a JSON formatter "
          "and update the test.")
    t.tool_call("Read", {"file_path": f"{CWD}/src/shop/logging_config.py"},
                "1\timport logging\n2\tFORMAT = '%(asctime)s %(levelname)s %(message)s'\n")
    t.noise()
    t.edit("src/shop/logging_config.py", "FORMAT = '%(asctime)s %(levelname)s %(message)s'",
           "FORMATTER = JsonFormatter(fields=['timestamp', 'level', 'message', 'request_id'])")
    t.edit("tests/test_logging.py", "assert 'INFO' in line", "assert json.loads(line)['level'] == 'INFO'")
    t.bash("pytest -q tests/test_logging.py", "3 passed in 0.21s")
    t.bash("git commit -am 'Switch to JSON structured logging for Datadog'",
           "[feat/json-logs 4e1f2ab] Switch to JSON structured logging for Datadog\n 2 files changed")
    t.say("Done: logs are JSON now (commit 4e1f2ab), and the logging tests pass.")
    t.write("pilot-1b-structured-logging.jsonl")


def pilot_4() -> None:
    t = Transcript("40000000-0000-4000-8000-000000000041", "2026-03-15", branch="fix/auth-401")
    t.user("The auth middleware is throwing 401s intermittently -- passes locally but fails in "
           "staging. Looks like a race condition in the token refresh.")
    t.say("I'll look at the refresh path in src/shop/auth/middleware.py.")
    t.tool_call("Grep", {"pattern": "refresh_token", "path": f"{CWD}/src"},
                "src/shop/auth/middleware.py:42: def refresh_token(session):")
    t.bash("pytest -q tests/test_auth.py", "1 failed, 11 passed\nFAILED tests/test_auth.py::test_concurrent_refresh - AssertionError: 401 != 200", code=1)
    t.say("test_concurrent_refresh fails with 401 != 200 when two requests refresh at once, which fits "
          "the race condition theory. I haven't confirmed it in staging yet.")
    t.write("pilot-4-auth-401-session1.jsonl")

    t = Transcript("40000000-0000-4000-8000-000000000042", "2026-03-18", branch="fix/auth-401")
    t.user("The 401 issue is back, different endpoint this time -- the user session service. I "
           "confirmed the root cause by checking logs: two simultaneous requests both see an expired "
           "token and both try to refresh. The token refresh function isn't idempotent.")
    t.say("I'll make refresh_token idempotent with a per-session lock in src/shop/auth/middleware.py.")
    t.edit("src/shop/auth/middleware.py", "def refresh_token(session):",
           "def refresh_token(session):\n    with session.refresh_lock:")
    t.bash("pytest -q tests/test_auth.py", "12 passed in 0.40s")
    t.say("refresh_token now takes the session's refresh lock, so concurrent refreshes run once.")
    t.write("pilot-4-auth-401-session2.jsonl")


def pilot_5() -> None:
    t = Transcript("50000000-0000-4000-8000-000000000005", "2026-04-02", branch="feat/pg-sessions")
    t.user("We decided to move session storage from Redis to Postgres for all services. The reason "
           "is that Redis evicted sessions under memory pressure and users were logged out, while "
           "Postgres already backs every other table and gives us durability and backups. We "
           "considered keeping Redis as a cache in front of Postgres, but keeping both systems "
           "seemed like the worst of both worlds: two sources of truth and twice the ops work. The "
           "tradeoff is slightly slower session reads, which we accept.")
    t.say("Understood. I'll add a sessions table migration and switch the session store.")
    t.edit("migrations/0007_sessions.sql", "", "CREATE TABLE sessions (id text primary key, data jsonb, expires_at timestamptz);")
    t.edit("src/shop/sessions/store.py", "class RedisSessionStore:", "class PostgresSessionStore:")
    t.edit("src/shop/settings.py", "SESSION_BACKEND = 'redis'", "SESSION_BACKEND = 'postgres'")
    t.bash("pytest -q tests/test_sessions.py", "8 passed in 1.02s")
    t.bash("git commit -am 'Move session storage from Redis to Postgres'",
           "[feat/pg-sessions 9c3d5e7] Move session storage from Redis to Postgres\n 3 files changed")
    t.write("pilot-5-session-storage.jsonl")


def noise_only() -> None:
    t = Transcript("00000000-0000-4000-8000-00000000000e", "2026-04-05")
    t.user("Rename get_usr to get_user in src/shop/users.py.")
    t.edit("src/shop/users.py", "def get_usr(", "def get_user(")
    t.user("Also reorder the imports there and remove that debug print.")
    t.edit("src/shop/users.py", "import sys\nimport os", "import os\nimport sys")
    t.edit("src/shop/users.py", "    print(user)\n", "")
    t.say("Renamed, imports sorted, print removed.")
    t.write("noise-only.jsonl")


if __name__ == "__main__":
    pilot_1a()
    pilot_1b()
    pilot_4()
    pilot_5()
    noise_only()
