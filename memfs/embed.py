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

import contextlib
import importlib.util
import json
import marshal
import mmap
import os
import re
import struct
import sys
import threading
from array import array
from bisect import bisect_left
from pathlib import Path

from dualtrace import atomic
from dualtrace.logfile import LazyLogger

TYPE_CHECKING = False  # typing: ~2-5 ms of a new recall process's imports
if TYPE_CHECKING:
    from typing import Any, Protocol

    from dualtrace.memfs.vectors import Vector

    class Embedder(Protocol):
        """Text -> unit-length float32 vectors. ``name`` identifies the vector space."""

        name: str
        dim: int

        def embed(self, texts: list[str]) -> list[Vector]:
            """One float32 vector of ``dim`` per text, L2-normalised (zeros for an empty
            text)."""
            ...

log = LazyLogger(__name__)  # logging's import: ~3 ms of a new recall process

# dualtrace's own vector work needs no numpy (memfs/vectors.py), but a library in the
# same process may import it (wordllama's package does): BLAS worker threads would only
# contend with the hook, the worker and the agent for the cores (measured: a 10k x 256
# product went from ~0.1 ms to ~18 ms per query on a loaded 2-core machine). Set before
# numpy is first imported; a host process that imported numpy already keeps its own.
BLAS_THREAD_VARS = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")
for _var in BLAS_THREAD_VARS:
    os.environ.setdefault(_var, "1")

ENV = "DUALTRACE_EMBEDDER"  # "off" disables the semantic path (tests, the prompt hook)
WORDLLAMA_CONFIG = "l2_supercat"
WORDLLAMA_DIM = 256


class WordLlamaEmbedder:
    """Mean of WordLlama's static token vectors, normalised (what WordLlama's embed does).

    Built for a new process that embeds one question and a few hundred lines (the
    ``dualtrace recall`` CLI): the token table is memory-mapped (only the rows a text
    uses are read and converted, ``_TokenTable``), the sums and norms are simsimd's
    (memfs/vectors.py: no numpy import), and the Rust tokenizer (~40-100 ms to build
    from its JSON) is loaded only for big batches. Small batches go through
    ``_PieceBPE``, the same BPE in Python, exact to the token (tests/memfs/test_embed.py
    compares the two).
    """

    # Below this many characters per call (and until the Rust tokenizer is loaded
    # anyway) the Python BPE is cheaper than building the Rust one.
    PYTHON_BPE_CHARS = 50_000

    def __init__(self, weights: Path, tokenizer: Path, *, name: str) -> None:
        from dualtrace.memfs import vectors  # simsimd: ImportError without the extra

        self._vectors = vectors
        self._table = _TokenTable(weights)
        self._tokenizer_path = tokenizer
        self._tok: Any = None
        self._bpe: _PieceBPE | None = None
        self.name = name
        self.dim = self._table.dim

    def _rust(self) -> Any:
        if self._tok is None:
            from tokenizers import Tokenizer

            tok = Tokenizer.from_file(str(self._tokenizer_path))
            tok.no_padding()
            tok.no_truncation()
            self._tok = tok
        return self._tok

    def token_ids(self, texts: list[str]) -> list[list[int]]:
        """Token ids of each text (no special tokens), as the model's tokenizer gives them."""
        texts = [t or "" for t in texts]
        if self._tok is None and sum(map(len, texts)) <= self.PYTHON_BPE_CHARS:
            if self._bpe is None:
                self._bpe = _PieceBPE.load(self._tokenizer_path)
            if self._bpe is not None:
                ids = [self._bpe.encode(t) for t in texts]
                if all(i is not None for i in ids):
                    return ids  # type: ignore[return-value]
        encodings = self._rust().encode_batch(texts, add_special_tokens=False)
        return [e.ids for e in encodings]

    def embed(self, texts: list[str]) -> list[Vector]:
        return self.embed_ids(self.token_ids(texts))

    def embed_ids(self, token_ids: list[list[int]]) -> list[Vector]:
        """``embed`` of texts already tokenized (``token_ids``' ids): the same vectors."""
        vectors, row, dim = self._vectors, self._table.row, self.dim
        # The mean of the text's token rows, normalised: the sum (in order, in float32,
        # as numpy's add.reduceat summed it) divided by its norm (a mean's direction).
        return [vectors.unit(vectors.sum_rows(map(row, ids), dim)) for ids in token_ids]


class _TokenTable:
    """The safetensors file's one tensor, memory-mapped (no copy, no import of safetensors
    or numpy): 8 bytes of header length, a JSON header, then the raw little-endian data.

    A row is converted to float32 (exactly: every float16 is a float32) the first time a
    text uses it and kept: a recall uses a few hundred distinct tokens (~20 us each), a
    long-lived process converts each token once. Ids out of range are clipped, as
    before (a tokenizer and a table of the same model never produce one).
    """

    def __init__(self, weights: Path) -> None:
        with weights.open("rb") as fh:
            size = int.from_bytes(fh.read(8), "little")
            header = json.loads(fh.read(size))
            info = header.get("embedding.weight")
            codes = {"F16": "e", "F32": "f"}
            if not isinstance(info, dict) or info.get("dtype") not in codes:
                raise ImportError(f"unexpected tensor layout in {weights}")
            begin, end = info["data_offsets"]
            self.rows, self.dim = (int(n) for n in info["shape"])
            self._row = struct.Struct(f"<{self.dim}{codes[info['dtype']]}")
            if end - begin != self._row.size * self.rows or self.rows < 1:
                raise ImportError(f"tensor size does not match its shape in {weights}")
            self._offset = 8 + size + begin
            self._map = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)
        if len(self._map) < self._offset + self._row.size * self.rows:
            raise ImportError(f"{weights} is truncated")
        self._memo: dict[int, Vector] = {}

    def row(self, token: int) -> Vector:
        vec = self._memo.get(token)
        if vec is None:
            i = min(max(token, 0), self.rows - 1)
            vec = self._memo[token] = array(
                "f", self._row.unpack_from(self._map, self._offset + i * self._row.size))
        return vec


class _PieceBPE:
    """WordLlama's tokenizer (a SentencePiece-style BPE) in Python, for short texts.

    The tokenizer JSON says: normalise by prepending "▁" and replacing every space
    with "▁"; no pre-tokenizer; BPE with byte fallback. Two properties of its
    vocabulary make a small, exact Python version possible (both are checked against
    the JSON before it is used, ``_verified_vocab``):
    - no token has a "▁" after another character, so no merge crosses the start of
      a "▁"-run: a text's BPE is the BPE of each "▁+word" piece in turn, and
      pieces repeat, so they are memoised;
    - the merges are exactly the splits of a token into two tokens, ranked by the
      merged token's id, then the left part's id (runs of "▁" last), so the
      vocabulary alone gives every rank and the 61k merges need not be loaded;
    - every token that starts with "▁" is its own BPE, so a piece found in the
      vocabulary is one token (most words are).
    Texts holding a special token's literal text (``<s>``) return None: the Rust
    tokenizer handles those.
    """

    MEMO_CAP = 200_000

    def __init__(self, vocab: dict[str, int] | _SortedVocab, specials: tuple[str, ...]) -> None:
        self.vocab = vocab
        self.specials = specials
        self.memo: dict[str, list[int]] = {}
        self._unk = self.vocab.get("<unk>", 0)

    @classmethod
    def from_tokens(cls, tokens: list[str], specials: tuple[str, ...]) -> _PieceBPE:
        return cls(dict(zip(tokens, range(len(tokens)), strict=True)), specials)

    @classmethod
    def load(cls, tokenizer: Path) -> _PieceBPE | None:
        """From the cached, verified vocabulary; built (and verified) once per tokenizer.

        The cache holds the vocabulary sorted (``_SortedVocab``: the tokens as one
        newline-joined string, no token holds a newline, and their ids), in
        ``marshal``'s format. A new process (the recall CLI) splits it and looks its few
        hundred pieces up by ``bisect`` instead of building the 32,000-entry dict first
        (~1.7 against ~5.7 ms at load 3, session 10); a process that looks up many
        pieces (the worker) gets the dict after ``_SortedVocab.PROMOTE`` lookups. It is
        derived data in the person's own state directory (~0.4 MB), rebuilt when it is
        missing, unreadable, or written by another tokenizer file or Python.
        """
        try:
            st = tokenizer.stat()
            stamp = (f"{CACHE_FORMAT} marshal {marshal.version} {sys.version_info[:2]} "
                     f"{tokenizer.resolve()} {st.st_size} {st.st_mtime_ns}")
        except OSError:
            return None
        head = stamp.encode("utf-8", "surrogateescape") + b"\n"
        cache = _cache_file(tokenizer)
        if cache is not None:
            try:
                with cache.open("rb") as fh:
                    if fh.read(len(head)) == head:
                        return cls._from_cache(marshal.loads(fh.read()))
            except (OSError, ValueError, EOFError, TypeError):
                pass  # rebuilt below
        found = _verified_vocab(tokenizer)
        bpe = None if found is None else cls.from_tokens(*found)
        if cache is not None:
            body = marshal.dumps(None if found is None else (
                *_SortedVocab.pack(found[0]), found[1]))
            with contextlib.suppress(OSError):  # a cache: rebuilt when lost
                atomic.write_bytes(cache, head + body, fsync=False)
                cache.with_suffix(".txt").unlink(missing_ok=True)  # the JSON one it replaces
        return bpe

    @classmethod
    def _from_cache(cls, data: object) -> _PieceBPE | None:
        if data is None:
            return None  # the tokenizer is not one this BPE reproduces (checked once)
        if not isinstance(data, tuple) or len(data) != 3 or not isinstance(data[2], tuple):
            raise ValueError("not a vocabulary cache")
        return cls(_SortedVocab.unpack(data[0], data[1]), data[2])

    def encode(self, text: str) -> list[int] | None:
        if not text:
            return []
        if any(s in text for s in self.specials):
            return None
        out: list[int] = []
        memo = self.memo
        if len(memo) > self.MEMO_CAP:
            memo.clear()
        for piece in _PIECE.findall(SPACE + text.replace(" ", SPACE)):
            ids = memo.get(piece)
            if ids is None:
                ids = memo[piece] = self._bpe(piece)
            out.extend(ids)
        return out

    def _bpe(self, piece: str) -> list[int]:
        vocab = self.vocab
        if piece[:1] == SPACE and piece in vocab:
            return [vocab[piece]]  # every such token is its own BPE (checked, see above)
        return self._merge(piece)

    def _merge(self, piece: str) -> list[int]:
        vocab = self.vocab
        size = len(vocab)
        never = 3 * size * size  # above every rank

        def rank_of(left: str, right: str) -> int:
            merged = left + right
            rid = vocab.get(merged)
            if rid is None:
                return never
            return (rid + size if not merged.strip(SPACE) else rid) * size + vocab[left]

        symbols: list[str] = []
        for ch in piece:
            if ch in vocab:
                symbols.append(ch)
            else:  # byte fallback: the character's UTF-8 bytes as <0xNN> tokens
                symbols.extend(f"<0x{b:02X}>" for b in ch.encode("utf-8"))
        # Merge the lowest-ranked adjacent pair (leftmost on ties) until none is left:
        # the order the Rust BPE's priority queue merges in. ranks[i] is the rank of
        # (symbols[i], symbols[i + 1]); a merge changes only its two neighbours.
        ranks = [rank_of(a, b) for a, b in zip(symbols, symbols[1:], strict=False)]
        while ranks:
            best = min(ranks)
            if best == never:
                break
            i = ranks.index(best)
            symbols[i:i + 2] = [symbols[i] + symbols[i + 1]]
            del ranks[i]
            if i > 0:
                ranks[i - 1] = rank_of(symbols[i - 1], symbols[i])
            if i < len(ranks):
                ranks[i] = rank_of(symbols[i], symbols[i + 1])
        return [vocab.get(s, self._unk) for s in symbols]


CACHE_FORMAT = "dualtrace-piece-bpe-4"  # 3: the tokens newline-joined; 4: sorted, searched


class _SortedVocab:
    """token -> id without a dict: the tokens sorted (code point order, as ``str``
    compares), found with ``bisect`` (C), their ids in an array beside them.

    Built from the cache by one split (~1.1 ms at load 3, session 10) where the
    32,000-entry dict took ~4 ms more; a lookup costs ~0.4 us against a dict's ~0.05,
    so after ``PROMOTE`` lookups (a long-lived process, a big batch) the dict is
    built once and used from then on. Answers exactly what the dict answers: the
    same tokens with the same ids (tests/memfs/test_embed.py).
    """

    __slots__ = ("_tokens", "_ids", "_size", "_dict", "_lookups")
    PROMOTE = 2_000

    def __init__(self, tokens: list[str], ids: array[int]) -> None:
        self._tokens = tokens  # sorted
        self._ids = ids  # the i-th sorted token's id
        self._size = len(ids)
        self._dict: dict[str, int] | None = None
        self._lookups = 0

    @staticmethod
    def pack(tokens: list[str]) -> tuple[str, bytes]:
        """(the sorted tokens newline-joined, their ids) of the tokens in id order."""
        order = sorted(range(len(tokens)), key=tokens.__getitem__)
        return "\n".join(tokens[i] for i in order), array("I", order).tobytes()

    @classmethod
    def unpack(cls, text: object, ids: object) -> _SortedVocab:
        if not isinstance(text, str) or not isinstance(ids, bytes):
            raise ValueError("not a vocabulary cache")
        order = array("I")
        order.frombytes(ids)
        tokens = text.split("\n")
        if len(tokens) != len(order) or not order:
            raise ValueError("a cut vocabulary cache")
        return cls(tokens, order)

    def _promote(self) -> dict[str, int]:
        self._dict = dict(zip(self._tokens, self._ids, strict=True))
        return self._dict

    def get(self, token: str, default: Any = None) -> Any:  # int, or the default
        found = self._dict
        if found is not None:
            return found.get(token, default)
        self._lookups += 1
        if self._lookups > self.PROMOTE:
            return self._promote().get(token, default)
        i = bisect_left(self._tokens, token)
        if i < self._size and self._tokens[i] == token:
            return self._ids[i]
        return default

    def __getitem__(self, token: str) -> int:
        found = self.get(token)
        if found is None:
            raise KeyError(token)
        return found

    def __contains__(self, token: object) -> bool:
        return isinstance(token, str) and self.get(token) is not None

    def __len__(self) -> int:
        return self._size

    def items(self) -> list[tuple[str, int]]:
        return list((self._dict or self._promote()).items())


def _cache_file(tokenizer: Path) -> Path | None:
    """Where the verified token list is kept: the state directory's cache (derived data)."""
    try:
        from dualtrace.paths import state_dir

        return Path(state_dir()) / "cache" / f"bpe-{tokenizer.parent.parent.name}-{tokenizer.stem}.bin"
    except Exception:  # noqa: BLE001 - no state directory: parse the JSON every time
        return None


# sha256 of wordllama 0.4.0.post1's l2_supercat tokenizer JSON, whose merges were checked
# against the rule in _PieceBPE (tests/memfs/test_embed.py checks it again, and the
# Python BPE against the Rust tokenizer). Any other file gets the full check, once.
VERIFIED_TOKENIZERS = frozenset({
    "93248f2a9ec36c7b35f700a033d5f36228aae48db61aee31007fa49062cdeb68",
})


def _verified_vocab(tokenizer: Path, *, trust_known: bool = True,
                    ) -> tuple[list[str], tuple[str, ...]] | None:
    """(tokens by id, special tokens) when the JSON is the BPE ``_PieceBPE`` reproduces."""
    import hashlib

    try:
        raw = tokenizer.read_bytes()
        known = trust_known and hashlib.sha256(raw).hexdigest() in VERIFIED_TOKENIZERS
        data = json.loads(raw.decode("utf-8"))
        model = data["model"]
        expected = {"type": "Sequence", "normalizers": [
            {"type": "Prepend", "prepend": SPACE},
            {"type": "Replace", "pattern": {"String": " "}, "content": SPACE}]}
        if (model.get("type") != "BPE" or not model.get("byte_fallback")
                or data.get("pre_tokenizer") is not None or data.get("normalizer") != expected
                or model.get("dropout") or model.get("continuing_subword_prefix")
                or model.get("end_of_word_suffix") or model.get("ignore_merges")):
            return None
        vocab: dict[str, int] = model["vocab"]
        tokens = sorted(vocab, key=vocab.__getitem__)
        if [vocab[t] for t in tokens] != list(range(len(tokens))) or any(
                "\n" in t or SPACE in t.lstrip(SPACE) for t in tokens):
            return None
        specials = tuple(t["content"] for t in data.get("added_tokens", []))
        if known:
            return tokens, specials
        merges = [tuple(m.split(" ")) if isinstance(m, str) else tuple(m)
                  for m in model["merges"]]
        splits = {(t[:i], t[i:]) for t in tokens for i in range(1, len(t))
                  if t[:i] in vocab and t[i:] in vocab}
        if set(merges) != splits or len(merges) != len(splits):
            return None

        def rank(m: tuple[str, ...]) -> tuple[bool, int, int]:
            merged = m[0] + m[1]
            return (not merged.strip(SPACE), vocab[merged], vocab[m[0]])

        if sorted(merges, key=rank) != merges:
            return None
        bpe = _PieceBPE.from_tokens(tokens, specials)
        if any(bpe._merge(t) != [i] for i, t in enumerate(tokens) if t[:1] == SPACE):
            return None
        return tokens, specials
    except (OSError, ValueError, KeyError, TypeError):
        return None


SPACE = "\u2581"
_PIECE = re.compile(SPACE + "+[^" + SPACE + "]*|[^" + SPACE + "]+")


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
    except (ImportError, OSError, ValueError) as exc:  # simsimd absent, weights unreadable
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
