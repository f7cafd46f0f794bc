"""The numeric side of semantic recall (memfs/vectors.py, the embedder's sums) against a
plain-Python reference on real embeddings, and a cold ``dualtrace recall`` that never
imports numpy."""

from __future__ import annotations

import json
import os
import struct
import subprocess
import sys
from array import array
from pathlib import Path

import pytest

from dualtrace.memfs import embed
from dualtrace.pipeline import encode_session
from tests.conftest import EXAMPLES

MODEL = embed.load_wordllama()
needs_semantic = pytest.mark.skipif(MODEL is None, reason="dualtrace[semantic] not installed")


def _texts() -> list[str]:
    """Real lines: every line of text the pilot sessions hold (requests, answers, tool
    output), as recall embeds record lines."""
    out: list[str] = []

    def walk(value: object) -> None:
        if isinstance(value, str):
            out.extend(ln.strip()[:600] for ln in value.splitlines() if len(ln.strip()) > 20)
        elif isinstance(value, dict):
            for v in value.values():
                walk(v)
        elif isinstance(value, list):
            for v in value:
                walk(v)

    for path in sorted(EXAMPLES.glob("pilot-*.jsonl")):
        for line in path.read_text(encoding="utf-8").splitlines():
            walk(json.loads(line).get("message"))
    out = list(dict.fromkeys(out))
    assert len(out) > 40, len(out)
    return out


class Reference:
    """WordLlama's embedding the straightforward way: read the safetensors file with
    ``struct`` (its own parse of the header), average the token rows in double
    precision, divide by the norm."""

    def __init__(self, weights: Path) -> None:
        raw = weights.read_bytes()
        size = int.from_bytes(raw[:8], "little")
        info = json.loads(raw[8:8 + size])["embedding.weight"]
        self.rows, self.dim = info["shape"]
        self.raw, self.base = raw, 8 + size + info["data_offsets"][0]

    def row(self, i: int) -> tuple[float, ...]:
        return struct.unpack_from(f"<{self.dim}e", self.raw, self.base + 2 * self.dim * i)

    def embed(self, ids: list[int]) -> list[float]:
        total = [0.0] * self.dim
        for i in ids:
            total = [a + b for a, b in zip(total, self.row(i), strict=True)]
        n = sum(x * x for x in total) ** 0.5
        return [x / n for x in total] if n else total


def _dot(a, b) -> float:
    return sum(x * y for x, y in zip(a, b, strict=True))


@pytest.fixture(scope="module")
def real():
    assert MODEL is not None
    texts = _texts()
    return texts, MODEL.embed(texts)


@needs_semantic
def test_the_embedder_equals_the_reference_mean_on_real_text(real):
    texts, vecs = real
    pkg = embed._package_dir("wordllama")
    assert pkg is not None
    ref = Reference(pkg / "weights" / f"{embed.WORDLLAMA_CONFIG}_{embed.WORDLLAMA_DIM}.safetensors")
    ids = MODEL.token_ids(texts)
    worst = 0.0
    for tokens, vec in zip(ids, vecs, strict=True):
        assert isinstance(vec, array) and vec.typecode == "f" and len(vec) == MODEL.dim
        expected = ref.embed(tokens)
        worst = max(worst, max(abs(a - b) for a, b in zip(vec, expected, strict=True)))
    assert worst < 1e-6, worst
    empty = MODEL.embed(["", "ok"])
    assert not any(empty[0]) and abs(_dot(empty[1], empty[1]) - 1) < 1e-6


@needs_semantic
def test_products_top_and_windows_match_the_reference_on_real_vectors(real):
    from dualtrace.memfs import vectors

    texts, vecs = real
    matrix = vectors.Matrix.of(vecs, MODEL.dim)
    assert (matrix.rows, matrix.dim) == (len(vecs), MODEL.dim)
    assert matrix.row(3).tobytes() == vecs[3].tobytes()
    for q in vecs[:10]:
        got = matrix.dots(q)
        expected = [_dot(v, q) for v in vecs]
        assert max(abs(a - b) for a, b in zip(got, expected, strict=True)) < 1e-6
        n = 12
        best = sorted(range(len(expected)), key=lambda i: -expected[i])
        chosen = vectors.top(got, n)
        assert len(chosen) == n and set(chosen) == set(best[:n]) or (
            # a tie at the cut may pick either of two equal cosines
            sorted(expected[i] for i in chosen) == pytest.approx(
                sorted(expected[i] for i in best[:n]), abs=1e-6))
    for start in range(0, len(vecs) - 12, 5):
        block, q = vecs[start:start + 9], vecs[start + 11]
        expected = max(
            _dot(run, q) / (_dot(run, run) ** 0.5 or 1.0)
            for k in (1, 2, 5)
            for i in range(len(block) - min(k, len(block)) + 1)
            for run in [[sum(col) for col in zip(*block[i:i + min(k, len(block))], strict=True)]])
        assert vectors.best_window(block, q, (1, 2, 5)) == pytest.approx(expected, abs=1e-6)
    assert vectors.best_window([], vecs[0], (1,)) == -1.0


@needs_semantic
def test_a_vector_snapshot_reads_back_what_was_written(real, tmp_path):
    from dualtrace.memfs import index as index_mod
    from dualtrace.memfs import vectors

    _texts_, vecs = real
    ids = [7 * i + 3 for i in range(len(vecs))]
    path = tmp_path / f"vectors.memories.m-1{index_mod.SNAPSHOT_SUFFIX}"
    index_mod._write_snapshot(path, ids, vectors.Matrix.of(vecs, MODEL.dim))
    got_ids, matrix = index_mod._read_snapshot(path)
    assert got_ids == ids and matrix.tobytes() == b"".join(v.tobytes() for v in vecs)
    path.write_bytes(path.read_bytes()[:-4])
    with pytest.raises(ValueError):
        index_mod._read_snapshot(path)


@needs_semantic
def test_a_cold_recall_cli_answers_by_meaning_without_importing_numpy(memdir, tmp_path):
    """A new `dualtrace recall` process, no warm server, the semantic extra on: the
    hybrid read path runs (the vector module and simsimd are loaded, the index gets its
    vectors) and numpy is never imported (``-X importtime`` lists every import)."""
    assert encode_session(EXAMPLES / "pilot-5-session-storage.jsonl", memory_dir=memdir,
                          backend="offline").commit
    env = {k: v for k, v in os.environ.items() if k != "DUALTRACE_EMBEDDER"}
    env["DUALTRACE_MCP_WARM"] = "0"
    proc = subprocess.run(
        [sys.executable, "-X", "importtime", "-c",
         "import sys; sys.argv = ['dualtrace', *sys.argv[1:]]; "
         "from dualtrace.hookcmd import entry; entry()",
         "recall", "--memory-dir", str(memdir), "where do we keep user sessions"],
        capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "(STATE A" in proc.stdout and "session" in proc.stdout.lower(), proc.stdout
    imported = {line.rsplit("|", 1)[-1].strip() for line in proc.stderr.splitlines()
                if line.startswith("import time:")}
    assert {"simsimd", "dualtrace.memfs.vectors", "dualtrace.memfs.embed"} <= imported
    assert not {m for m in imported if m.split(".")[0] == "numpy"}
