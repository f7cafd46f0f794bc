"""The real Claude Code finds and connects to the `dualtrace mcp` that install registered."""

from __future__ import annotations

import pytest

from tests.e2e.e2e_hosts import DUALTRACE

pytestmark = pytest.mark.e2e


@pytest.mark.parametrize("scope", ["user", "local"])
def test_claude_mcp_list_connects_to_our_server(sandbox, claude_bin, scope):
    from dualtrace.hooks import mcp_registration

    mcp_registration.register("claude-code", scope, sandbox.project)
    proc = sandbox.run(claude_bin, "mcp", "list", timeout=120)
    line = next((x for x in proc.stdout.splitlines() if x.startswith("dualtrace:")), "")
    assert str(DUALTRACE) in line and "mcp" in line, proc.stdout
    assert "Connected" in line, proc.stdout  # Claude Code started it and shook hands
    mcp_registration.unregister("claude-code", scope, sandbox.project)
    proc = sandbox.run(claude_bin, "mcp", "list", timeout=120)
    assert "dualtrace:" not in proc.stdout
