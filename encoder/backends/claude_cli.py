"""Headless Claude Code (``claude -p``) as the encoder sub-agent, for users with a Claude
Code login and no API key. Each encode is one Claude Code request on the user's own
account (plan usage or API credit, whatever that login pays with).

The child works only through our encoder tools, over MCP: ``claude -p`` starts
``dualtrace mcp --encoder`` from an MCP config we write, and that server forwards each
call (search_memory, read_memory, store_memory, update_memory, skip, finish) to the
``Broker`` in this process, where the session's ``PlanBuilder`` validates it. A
rejected call comes back to the model as a tool error with the validator's reason,
so it can correct itself, exactly as with the Anthropic backend. Nothing is written
until the pipeline applies the accepted plan after ``encode`` returns.

What the child gets, and nothing more (flags checked against Claude Code 2.1.x):
- ``--tools ""`` (no built-in tool: no Bash, Read, Edit, web), ``--strict-mcp-config
  --mcp-config <ours>`` (no other MCP server), ``--allowedTools`` our six tools and
  ``--permission-mode dontAsk`` (anything else is denied, never prompted),
  ``--disable-slash-commands`` (no skills);
- ``--setting-sources ""`` and ``--settings '{"disableAllHooks": true}'``: no user or
  project settings, no hooks of any plugin - so no recursion into our own Stop hook;
  ``DUALTRACE_CHILD=1`` in its environment makes our hooks exit at once even so;
- ``--no-session-persistence`` (no transcript for a Stop hook to queue);
- bounded: ``--max-turns``, a tool-call cap in the broker, ``--max-budget-usd`` when a
  spending budget applies, and a wall clock (``timeout_seconds``) that kills the
  child's whole process group (its MCP server included);
- an empty temporary working directory.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dualtrace.config import Settings
from dualtrace.encoder.backends import EncodeRequest, Usage, api_tokens, spend
from dualtrace.encoder.backends.anthropic import NUDGE, MemoryTools, system_text, user_text
from dualtrace.encoder.backends.pricing import cost_usd
from dualtrace.errors import BackendError

if TYPE_CHECKING:
    from dualtrace.encoder.plan import PlanBuilder

SERVER = "dualtrace"
TOOL_NAMES = ("search_memory", "read_memory", "store_memory", "update_memory", "skip", "finish")
ALLOWED = tuple(f"mcp__{SERVER}__{name}" for name in TOOL_NAMES)
CALLS_PER_TURN = 8  # the broker's cap is max_turns * this

_TOOL_NOTE = (
    "\n\nYour tools are the dualtrace MCP tools: " + ", ".join(ALLOWED) + ". They are the "
    "only tools you have; there is no shell and no file access. Every proposal is checked "
    "by a validator: when a call comes back as an error, read the reason and correct the "
    "call or skip the event. Call finish when done."
)


def dualtrace_argv() -> list[str]:
    """How the child starts our MCP server: the installed script, else the interpreter."""
    script = Path(sys.executable).parent / ("dualtrace.exe" if os.name == "nt" else "dualtrace")
    found = str(script) if script.is_file() else shutil.which("dualtrace")
    if found:
        return [found]
    return [sys.executable, "-c", "import sys; from dualtrace.hookcmd import entry; "
            "sys.argv[0] = 'dualtrace'; entry()"]


def mcp_config(address: str, token: str) -> dict[str, Any]:
    argv = dualtrace_argv() + ["mcp", "--encoder"]
    return {"mcpServers": {SERVER: {
        "type": "stdio", "command": argv[0], "args": argv[1:],
        "env": {"DUALTRACE_CHILD": "1", "DUALTRACE_BROKER": address,
                "DUALTRACE_BROKER_TOKEN": token},
    }}}


def command(settings: Settings, system: str, config_path: str, *,
            max_budget_usd: float | None = None) -> list[str]:
    exe = shutil.which(settings.claude_cli) or settings.claude_cli
    argv = [
        exe, "-p",
        "--output-format", "json",
        "--model", settings.model,
        "--max-turns", str(max(1, settings.max_turns)),
        "--no-session-persistence",
        "--setting-sources", "",
        "--settings", json.dumps({"disableAllHooks": True}),
        "--strict-mcp-config", "--mcp-config", config_path,
        "--tools", "",
        "--allowedTools", ",".join(ALLOWED),
        "--permission-mode", "dontAsk",
        "--disable-slash-commands",
        "--system-prompt", system,
    ]
    if max_budget_usd is not None:
        argv[-2:-2] = ["--max-budget-usd", f"{max(max_budget_usd, 0.0):.4f}"]
    return argv


def child_env() -> dict[str, str]:
    env = dict(os.environ)
    env["DUALTRACE_CHILD"] = "1"
    # The child is a fresh session, not a continuation of the hook's parent.
    for key in ("CLAUDE_CODE_SESSION_ID", "CLAUDE_PROJECT_DIR", "CLAUDECODE"):
        env.pop(key, None)
    return env


class ClaudeCliBackend:
    name = "claude"

    def __init__(self, settings: Settings) -> None:
        self.settings = settings

    def encode(self, request: EncodeRequest, builder: PlanBuilder) -> Usage:
        from dualtrace.encoder.backends.broker import Broker

        settings = request.settings
        usage = Usage(model=settings.model)  # requests: one per claude -p run
        tools = MemoryTools(builder)
        prompt = user_text(request)
        with Broker(tools, max_calls=max(1, settings.max_turns) * CALLS_PER_TURN) as broker, \
                tempfile.TemporaryDirectory(prefix="dualtrace-claude-") as cwd:
            config_path = os.path.join(cwd, ".dualtrace-mcp.json")
            fd = os.open(config_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                json.dump(mcp_config(broker.address, broker.token), fh)
            result = self._request(settings, config_path, prompt, cwd, usage)
            if self._text_only(result, tools):
                # It answered in text and proposed nothing: nothing would be stored and no
                # one would know (as with the anthropic backend). One more run, with its
                # text and the request to use the tools; claude -p has no tool_choice.
                usage.notes.append("the model answered in text without using its tools: "
                                   "asked once more to use them")
                said = str(result.get("result") or "")[:2000]
                result = self._request(
                    settings, config_path, prompt + "\n\nYour answer to this session was "
                    "text only:\n<your-answer>\n" + said + "\n</your-answer>\n\n" + NUDGE,
                    cwd, usage)
        usage.turns = int(result.get("num_turns") or 0)
        subtype = str(result.get("subtype") or "success")
        why = {"error_max_turns": f"max_turns ({settings.max_turns}) reached",
               "error_max_budget_usd": "the spending budget was reached"}.get(subtype)
        if self._text_only(result, tools):
            why = "it answered in text again"
        if why and not tools.proposals:
            # Never a silent empty result: the hooks' fallback encodes offline instead.
            raise BackendError(f"claude -p proposed nothing for the session ({why}; no "
                               "store, update, skip or finish call)")
        if subtype == "error_max_turns":
            usage.notes.append(f"max_turns ({settings.max_turns}) reached before finish: "
                               f"{tools.accepted} accepted operation(s) kept")
        elif subtype == "error_max_budget_usd":
            usage.notes.append(f"spending budget reached during the run: {tools.accepted} "
                               "accepted operation(s) kept")
        elif result.get("is_error") or subtype != "success":
            detail = str(result.get("result") or subtype)[:300]
            raise BackendError(f"claude -p reported an error: {detail}")
        if broker.calls > broker.max_calls:
            usage.notes.append(f"tool-call cap ({broker.max_calls}) reached")
        if tools.rejected:
            usage.notes.append(f"{tools.rejected} tool call(s) rejected by the validator")
        if tools.summary:
            usage.notes.append(f"model summary: {tools.summary}")
        return usage

    def _request(self, settings: Settings, config_path: str, prompt: str, cwd: str,
                 usage: Usage) -> dict[str, Any]:
        """One ``claude -p`` run within what the spending guard allows; its usage added."""
        spend.check(settings, self.name)  # one claude -p run is one request to us
        budget = spend.remaining_usd(settings)  # and it may not spend more than is left
        argv = command(settings, system_text("tools") + _TOOL_NOTE, config_path,
                       max_budget_usd=budget)
        result = self._run(argv, prompt, cwd)
        run = Usage(model=settings.model, requests=1)
        _add_usage(run, result, settings.model)
        spend.record_usage(self.name, run)
        for key in ("input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens"):
            setattr(usage, key, getattr(usage, key) + getattr(run, key))
        usage.cost_usd = round(usage.cost_usd + run.cost_usd, 6)
        usage.requests += 1
        return result

    @staticmethod
    def _text_only(result: dict[str, Any], tools: MemoryTools) -> bool:
        """A run that ended on its own (success) with no store/update/skip/finish call."""
        return not tools.proposals and not result.get("is_error") \
            and str(result.get("subtype") or "success") == "success"

    def _run(self, argv: list[str], prompt: str, cwd: str) -> dict[str, Any]:
        settings = self.settings
        if shutil.which(argv[0]) is None and not os.path.isfile(argv[0]):
            raise BackendError(f"claude CLI not found ({settings.claude_cli!r}); install Claude "
                               "Code or set claude_cli in config")
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
        finally:
            _kill_group(proc)  # the MCP server it started, if it outlived its parent
        try:
            result = json.loads(out)
        except ValueError:
            result = None
        if not isinstance(result, dict):
            if proc.returncode != 0:
                detail = " ".join((err or out or "").split())[:300]
                raise BackendError(f"claude -p exited with {proc.returncode}: {detail}")
            raise BackendError("claude -p printed no JSON result (is --output-format json "
                               "supported by this version?)")
        return result


def _add_usage(usage: Usage, result: dict[str, Any], model: str) -> None:
    # Claude Code reports the whole run at once: its counts replace ours.
    for key, count in api_tokens(result.get("usage")).items():
        setattr(usage, key, count)
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
        if proc.poll() is None:
            proc.kill()
