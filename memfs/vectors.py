"""The vector arithmetic of semantic recall: float32 buffers and simsimd's kernels, no numpy.

A new ``dualtrace recall`` process does little vector work (one question, ~17 lines,
two products against <= ~20k stored vectors), and ``import numpy`` cost it more than all
of that work: ~50-120 ms of a ~220 ms cold recall (docs/BENCHMARKS.md, issue 11, session
6 and 7). simsimd (Apache-2.0, a C extension with no dependencies) imports in ~1 ms and
gives the products, sums and norms this module needs on plain buffers: ``array('f')``
rows, and memory-mapped float32 matrices viewed through ``memoryview``.

Every result is computed in float32 like numpy's (sums of float32 rows) or more
precisely (dot products accumulated past float32), so scores agree with the numpy
version within ~1e-6 (tests/memfs/test_vectors.py checks the kernels against a plain
Python reference on real embeddings). simsimd's ``out=`` argument is never used: in
6.5 it returns ``None`` without a reference, which crashes the interpreter after a few
thousand calls.
"""

from __future__ import annotations

import heapq
import math
import mmap
import sys
from array import array
from collections.abc import Iterable, Sequence
from pathlib import Path

import simsimd as _simsimd

TYPE_CHECKING = False  # typing: ~2-5 ms of a new recall process's imports
if TYPE_CHECKING:
    from typing import Any, TypeAlias

# simsimd's stubs accept only numpy arrays and integer memoryviews, and type results as
# unions of scalars and tensors; what is passed here are float32 buffers (the kernels
# take any buffer), so the module is used untyped.
simsimd: Any = _simsimd

if TYPE_CHECKING:
    Vector: TypeAlias = "array[float]"  # typecode "f": float32, native byte order
LITTLE = sys.byteorder == "little"


def zeros(dim: int) -> Vector:
    return array("f", bytes(4 * dim))


def as_vector(buf: Any) -> Vector:
    """A float32 buffer (a simsimd result, a matrix row, a numpy row) as an ``array('f')``."""
    out = array("f")
    out.frombytes(memoryview(buf).cast("B"))
    return out


def add(a: Any, b: Any) -> Vector:
    """a + b in float32 (each element rounded once, as numpy's float32 add)."""
    return as_vector(simsimd.wsum(a, b, alpha=1.0, beta=1.0))


def sub(a: Any, b: Any) -> Vector:
    return as_vector(simsimd.wsum(a, b, alpha=1.0, beta=-1.0))


def dot(a: Any, b: Any) -> float:
    return float(simsimd.dot(a, b))


def norm(a: Any) -> float:
    return math.sqrt(max(dot(a, a), 0.0))


def unit(v: Vector) -> Vector:
    """v / |v| in float32 (a zero vector stays zero)."""
    n = norm(v)
    if n == 0.0:
        return v
    # Divided in double precision and rounded to float32 once: the correctly rounded
    # float32 quotient, as numpy's float32 division gives it.
    n32 = array("f", (n,))[0]
    return array("f", [x / n32 for x in v])


def sum_rows(rows: Iterable[Any], dim: int) -> Vector:
    """The float32 sum of ``rows``, added in order (as numpy's ``add.reduce`` over axis 0)."""
    acc: Any = None
    for row in rows:
        acc = row if acc is None else simsimd.wsum(acc, row, alpha=1.0, beta=1.0)
    return zeros(dim) if acc is None else as_vector(acc)


class Matrix:
    """``rows`` x ``dim`` float32 row vectors in one buffer (bytes or a memory map)."""

    def __init__(self, data: Any, rows: int, dim: int, *, keep: Any = None) -> None:
        self.rows = rows
        self.dim = dim
        self._keep = keep  # the mmap the view points into
        view = memoryview(data).cast("B")
        if view.nbytes != 4 * rows * dim:
            raise ValueError(f"{view.nbytes} bytes is not a {rows} x {dim} float32 matrix")
        self._bytes = view
        self._view = view.cast("f", (rows, dim)) if rows else None

    @classmethod
    def of(cls, vectors: Sequence[Any], dim: int) -> Matrix:
        return cls(b"".join(memoryview(v).cast("B") for v in vectors), len(vectors), dim)

    @classmethod
    def mapped(cls, path: Path, offset: int, rows: int, dim: int) -> Matrix:
        """A read-only memory map of the file's float32 rows at ``offset`` (little-endian).

        Only the pages a product touches are read: a new process does not copy the matrix.
        """
        if not rows:
            return cls(b"", 0, dim)
        if not LITTLE:  # the file is little-endian: read and swap (never on x86/ARM hosts)
            data = array("f", path.read_bytes()[offset:offset + 4 * rows * dim])
            data.byteswap()
            return cls(data, rows, dim)
        with path.open("rb") as fh:
            mapped = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)
        return cls(memoryview(mapped)[offset:offset + 4 * rows * dim], rows, dim, keep=mapped)

    def row(self, i: int) -> Vector:
        if not 0 <= i < self.rows:
            raise IndexError(i)
        size = 4 * self.dim
        return as_vector(self._bytes[i * size:(i + 1) * size])

    def dots(self, q: Any) -> list[float]:
        """Every row's dot product with ``q`` (one simsimd call)."""
        if not self.rows:
            return []
        qrow = memoryview(q).cast("B").cast("f", (1, self.dim))
        out = simsimd.cdist(self._view, qrow, metric="dot", out_dtype="float64")
        sims: Any = memoryview(out).cast("B").cast("d").tolist()  # floats ("d")
        return list(sims)

    def tobytes(self) -> bytes:
        return self._bytes.tobytes()


def top(values: Sequence[float], n: int) -> list[int]:
    """Indices of the ``n`` largest values, largest first, equal values by index.

    The ``n``-th largest value is found among the bare floats (compared in C), then only
    the indices at or above it are sorted: the same list as ``heapq.nlargest(n,
    range(len(values)), key=values.__getitem__)`` at ~2/3 of its cost on 15k cosines.
    """
    if n <= 0 or not values:
        return []
    if n >= len(values) or math.isnan(sum(values)):  # (NaN orders nothing: as before)
        return heapq.nlargest(n, range(len(values)), key=values.__getitem__)
    least = heapq.nlargest(n, values)[-1]
    above = [i for i, v in enumerate(values) if v >= least]
    above.sort(key=values.__getitem__, reverse=True)  # stable: equal values by index
    return above[:n]


def best_window(block: Sequence[Any], q: Any, windows: Iterable[int]) -> float:
    """The highest cosine of ``q`` with the sum of any run of ``k`` consecutive rows of
    ``block``, over the window sizes ``k`` (a size above the block's length is the block)."""
    if not block:
        return -1.0
    dim = len(memoryview(block[0]).cast("B")) // 4
    prefix = [zeros(dim)]
    for row in block:  # running float32 sums, as numpy's cumsum
        prefix.append(add(prefix[-1], row))
    best = -1.0
    for k in windows:
        k = min(k, len(block))
        for i in range(len(prefix) - k):
            run = sub(prefix[i + k], prefix[i])
            n = norm(run)
            best = max(best, dot(run, q) / (n if n else 1.0))
    return best
