"""Headless Claude Code (``claude -p``) as the encoder model, for users with a Claude
Code login and no API key.

One call: the system prompt (json mode: no tools, reply with a JSON plan) and the
user turn (digest + memory index) go to ``claude -p``; the reply's operations go
through the same validator as the tool-use backend. A rejected operation is
reported in the run notes (there is no second turn to correct it).

The child can never recurse into dualtrace: it runs with ``DUALTRACE_CHILD=1``
(our hooks exit at once when it is set), ``--settings '{"disableAllHooks": true}'``
(no hooks of any plugin fire), ``--no-session-persistence`` (no transcript for our
Stop hook to queue), ``--tools ""`` (text only), ``--max-turns 1``, in an empty
temporary working directory, under a wall-clock timeout that kills its process
group.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import tempfile
from typing import TYPE_CHECKING, Any

from dualtrace.config import Settings
from dualtrace.encoder.backends import EncodeRequest, Usage
from dualtrace.encoder.backends.anthropic import system_text, user_text
from dualtrace.encoder.backends.pricing import cost_usd
from dualtrace.errors import BackendError, DualtraceError

if TYPE_CHECKING:
    from dualtrace.encoder.plan import PlanBuilder

MAX_OPERATIONS = 40
_FENCE = re.compile(r"```(?:json)?\s*(\{.*\})\s*```", re.S)


def command(settings: Settings, system: str) -> list[str]:
    exe = shutil.which(settings.claude_cli) or settings.claude_cli
    return [
        exe, "-p",
        "--output-format", "json",
        "--model", settings.model,
        "--max-turns", "1",
        "--no-session-persistence",
        "--settings", json.dumps({"disableAllHooks": True}),
        "--tools", "",
        "--system-prompt", system,
    ]


def child_env() -> dict[str, str]:
    env = dict(os.environ)
    env["DUALTRACE_CHILD"] = "1"
    # The child is a fresh session, not a continuation of the hook's parent.
    for key in ("CLAUDE_CODE_SESSION_ID", "CLAUDE_PROJECT_DIR"):
        env.pop(key, None)
    return env


def extract_plan(text: str) -> dict[str, Any]:
    """The JSON object in the model's reply (bare, fenced, or surrounded by prose)."""
    text = text.strip()
    candidates = [text]
    fenced = _FENCE.search(text)
    if fenced:
        candidates.append(fenced.group(1))
    start, end = text.find("{"), text.rfind("}")
    if 0 <= start < end:
        candidates.append(text[start:end + 1])
    for candidate in candidates:
        try:
            value = json.loads(candidate)
        except ValueError:
            continue
        if isinstance(value, dict):
            return value
    raise BackendError("claude -p did not return a JSON plan")


class ClaudeCliBackend:
    name = "claude"

    def __init__(self, settings: Settings) -> None:
        self.settings = settings

    def run_cli(self, settings: Settings, system: str, prompt: str) -> dict[str, Any]:
        argv = command(settings, system)
        if shutil.which(argv[0]) is None and not os.path.isfile(argv[0]):
            raise BackendError(f"claude CLI not found ({settings.claude_cli!r}); install Claude "
                               "Code or set claude_cli in config")
        with tempfile.TemporaryDirectory(prefix="dualtrace-claude-") as cwd:
            try:
                proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                        stderr=subprocess.PIPE, cwd=cwd, env=child_env(),
                                        start_new_session=True, text=True, encoding="utf-8",
                                        errors="replace")
            except OSError as exc:
                raise BackendError(f"cannot start claude CLI: {exc}") from None
            try:
                out, err = proc.communicate(prompt, timeout=settings.timeout_seconds)
            except subprocess.TimeoutExpired:
                _kill_group(proc)
                proc.communicate()
                raise BackendError(
                    f"claude -p timed out after {settings.timeout_seconds:.0f}s") from None
        if proc.returncode != 0:
            detail = " ".join((err or out or "").split())[:300]
            raise BackendError(f"claude -p exited with {proc.returncode}: {detail}")
        try:
            result = json.loads(out)
        except ValueError:
            raise BackendError("claude -p printed no JSON result (is --output-format json "
                               "supported by this version?)") from None
        if not isinstance(result, dict):
            raise BackendError("claude -p printed an unexpected JSON value")
        if result.get("is_error") or result.get("subtype", "success") != "success":
            detail = str(result.get("result") or result.get("subtype"))[:300]
            raise BackendError(f"claude -p reported an error: {detail}")
        return result

    def encode(self, request: EncodeRequest, builder: PlanBuilder) -> Usage:
        from dualtrace.encoder.operations import parse_operation

        settings = request.settings
        usage = Usage(model=settings.model, requests=1, turns=1)
        result = self.run_cli(settings, system_text("json"), user_text(request))
        _add_usage(usage, result, settings.model)
        plan = extract_plan(str(result.get("result") or ""))
        operations = plan.get("operations")
        if not isinstance(operations, list):
            raise BackendError("claude -p plan has no 'operations' list")
        rejected = 0
        for i, raw in enumerate(operations[:MAX_OPERATIONS]):
            try:
                builder.add(parse_operation(raw))
            except DualtraceError as exc:  # Rejected, PathError: reported, not fatal
                rejected += 1
                usage.notes.append(f"operation {i + 1} rejected: {exc}")
        if len(operations) > MAX_OPERATIONS:
            usage.notes.append(f"{len(operations) - MAX_OPERATIONS} operation(s) over the cap ignored")
        if rejected:
            usage.notes.append(f"{rejected} of {len(operations)} operation(s) rejected by the validator")
        summary = plan.get("summary")
        if isinstance(summary, str) and summary.strip():
            usage.notes.append(f"model summary: {summary.strip()[:300]}")
        return usage


def _add_usage(usage: Usage, result: dict[str, Any], model: str) -> None:
    u = result.get("usage") if isinstance(result.get("usage"), dict) else {}
    usage.input_tokens = int(u.get("input_tokens") or 0)
    usage.output_tokens = int(u.get("output_tokens") or 0)
    usage.cache_read_tokens = int(u.get("cache_read_input_tokens") or 0)
    usage.cache_write_tokens = int(u.get("cache_creation_input_tokens") or 0)
    reported = result.get("total_cost_usd")
    if isinstance(reported, (int, float)):
        usage.cost_usd = round(float(reported), 6)  # Claude Code's own figure
    else:
        usage.cost_usd = cost_usd(model, input_tokens=usage.input_tokens,
                                  output_tokens=usage.output_tokens,
                                  cache_read_tokens=usage.cache_read_tokens,
                                  cache_write_tokens=usage.cache_write_tokens)


def _kill_group(proc: subprocess.Popen[str]) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError, AttributeError):
        proc.kill()
