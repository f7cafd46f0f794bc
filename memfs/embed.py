"""Embedders for the semantic half of recall (the optional ``dualtrace[semantic]`` extra).

Everything works lexically without an embedder: ``get_embedder()`` returns None when
the extra is not installed or when ``DUALTRACE_EMBEDDER=off``, and every caller then
falls back to FTS5 alone.

The shipped model is WordLlama's static "l2_supercat" 256-dimensional token table
(MIT, 16 MB fp16 inside the ``wordllama`` wheel). Chosen by measuring it against
MiniLM-L6 (docs/BENCHMARKS.md, "Choosing the embedder"): a static model is a table
lookup plus a mean, so a query costs ~0.05 ms and loading it ~40 ms, where a
transformer needs torch or onnxruntime (200+ MB) and tens of milliseconds per query.

The weights are read from the installed package directory directly: nothing is ever
downloaded (wordllama's own loader would fall back to a hub download, and its package
import pulls pydantic for ~150 ms), and the package is located without importing it.
"""

from __future__ import annotations

import importlib.util
import logging
import os
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    import numpy as np

log = logging.getLogger(__name__)

# Our matrices are small (a query against <= ~20k rows): BLAS worker threads only
# contend with the hook, the worker and the agent for the cores (measured: a 10k x 256
# product went from ~0.1 ms to ~18 ms per query on a loaded 2-core machine). Set before
# numpy is first imported; a host process that imported numpy already keeps its own.
for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

ENV = "DUALTRACE_EMBEDDER"  # "off" disables the semantic path (tests, the prompt hook)
WORDLLAMA_CONFIG = "l2_supercat"
WORDLLAMA_DIM = 256


class Embedder(Protocol):
    """Text -> unit-length float32 vectors. ``name`` identifies the vector space."""

    name: str
    dim: int

    def embed(self, texts: list[str]) -> np.ndarray:
        """A (len(texts), dim) float32 array of L2-normalised rows (zero rows for empty text)."""
        ...


class WordLlamaEmbedder:
    """Mean of WordLlama's static token vectors, normalised (what WordLlama's embed does)."""

    def __init__(self, weights: Path, tokenizer: Path, *, name: str) -> None:
        import numpy as np
        from safetensors.numpy import load_file
        from tokenizers import Tokenizer

        # fp16 as on disk (16 MB): converting the whole table costs ~30 ms per process,
        # converting the gathered rows of a batch almost nothing.
        table = load_file(str(weights))["embedding.weight"]
        self._table = table
        self._np = np
        self._tok = Tokenizer.from_file(str(tokenizer))
        self._tok.no_padding()
        self._tok.no_truncation()
        self.name = name
        self.dim = int(table.shape[1])

    def embed(self, texts: list[str]) -> np.ndarray:
        np = self._np
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        if not texts:
            return out
        encodings = self._tok.encode_batch([t or "" for t in texts], add_special_tokens=False)
        lengths = np.fromiter((len(e.ids) for e in encodings), dtype=np.int64,
                              count=len(encodings))
        if not lengths.sum():
            return out
        ids = np.fromiter((i for e in encodings for i in e.ids), dtype=np.int64,
                          count=int(lengths.sum()))
        np.clip(ids, 0, self._table.shape[0] - 1, out=ids)
        # One gather and one segmented sum for the whole batch (a loop of per-text
        # means costs more than the tokenizer on a few hundred lines).
        vecs = self._table[ids].astype(np.float32)
        rows = np.flatnonzero(lengths)
        starts = np.concatenate(([0], np.cumsum(lengths)[:-1]))[rows]
        sums = np.add.reduceat(vecs, starts, axis=0)
        norms = np.linalg.norm(sums, axis=1, keepdims=True)
        norms[norms == 0] = 1.0
        out[rows] = sums / norms
        return out


def _package_dir(name: str) -> Path | None:
    """An installed package's directory, found without importing (executing) it."""
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


def load_wordllama() -> WordLlamaEmbedder | None:
    """WordLlama from its installed wheel, or None when the extra is not installed."""
    pkg = _package_dir("wordllama")
    if pkg is None:
        return None
    weights = pkg / "weights" / f"{WORDLLAMA_CONFIG}_{WORDLLAMA_DIM}.safetensors"
    tokenizer = pkg / "tokenizers" / f"{WORDLLAMA_CONFIG}_tokenizer_config.json"
    if not weights.is_file() or not tokenizer.is_file():
        log.info("wordllama is installed but %s or %s is missing", weights, tokenizer)
        return None
    try:
        return WordLlamaEmbedder(weights, tokenizer,
                                 name=f"wordllama-{WORDLLAMA_CONFIG}-{WORDLLAMA_DIM}")
    except ImportError as exc:  # numpy / tokenizers / safetensors absent
        log.info("semantic recall unavailable: %s", exc)
        return None


_lock = threading.Lock()
_cached: list[Embedder | None] = []


def enabled() -> bool:
    return os.environ.get(ENV, "").strip().lower() not in ("off", "0", "none", "false")


def get_embedder() -> Embedder | None:
    """The process-wide embedder (loaded once; long-lived processes keep it), or None."""
    if not enabled():
        return None
    with _lock:
        if not _cached:
            _cached.append(load_wordllama())
        return _cached[0]


def set_embedder(embedder: Embedder | None) -> None:
    """Replace the process-wide embedder (tests, benchmarks)."""
    with _lock:
        _cached.clear()
        _cached.append(embedder)


def reset() -> None:
    with _lock:
        _cached.clear()
