"""Exact sampling from rows of a float64 probability matrix.

Inverse-CDF sampling with a 53-bit uniform and a float ``cumsum`` realises a *rounded*
distribution: an entry of 1e-20 may come out as 0 or as 2^-53, and either can break an mDP
ratio. This sampler realises exactly ``Z[i, k] / sum_k Z[i, k]`` with every float64 taken as
the exact rational it denotes: the fast path (a vectorised ``searchsorted``) is used only when
the uniform's interval lies, with a proven error margin, inside one CDF cell; otherwise the
sample is finished in exact rational arithmetic, drawing further random bits as needed.
The slow path is taken with probability about ``K * 2^-50`` per draw. See docs/sampling.md.
"""

from __future__ import annotations

import bisect
from fractions import Fraction
from functools import cached_property

import numpy as np

_BITS = 53
_SCALE = float(2**_BITS)


def sample_rows(matrix: np.ndarray, rows: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """One exact draw of a column index for each row index in ``rows`` (vectorised)."""
    rows = np.asarray(rows, dtype=np.int64)
    out = np.empty(len(rows), dtype=np.int64)
    if len(rows) == 0:
        return out
    ticks = ticks_of(rng, len(rows))
    if rows.min() == rows.max() and matrix[rows[0]].min() >= 0:
        return _sample_one_row(matrix[rows[0]], ticks, rng)  # many draws of one secret
    chunk = max(1, _CHUNK_ENTRIES // matrix.shape[1])
    for start in range(0, len(rows), chunk):
        part = slice(start, start + chunk)
        out[part] = _sample_block(matrix, rows[part], ticks[part], rng)
    return out


_CHUNK_ENTRIES = 2**20
#: Bit generators whose raw output is their ``next_uint64`` (not MT19937's 32-bit words).
_RAW_UINT64 = (np.random.PCG64, np.random.PCG64DXSM, np.random.Philox, np.random.SFC64)


def ticks_of(rng: np.random.Generator, n: int) -> np.ndarray:
    """``rng.integers(0, 2**53, size=n, dtype=np.int64)``: the same numbers and the same
    draws, read faster. For a range of ``2^53`` numpy's bounded draw (Lemire's method) is
    ``next_uint64() >> 11`` with no rejection, so a 64-bit generator's raw words give it
    (tests/privacy/test_sampling.py checks both against each other)."""
    bits = getattr(rng, "bit_generator", None)  # None: a test's stand-in generator
    if bits is not None and type(bits) in _RAW_UINT64:
        return (bits.random_raw(n) >> (64 - _BITS)).astype(np.int64)
    return rng.integers(0, 2**_BITS, size=n, dtype=np.int64)


class RowSampler:
    """:func:`sample_rows` for repeated draws from one matrix (a mechanism's certified one,
    which never changes): the same draws, found faster for a few rows at a time.

    A handful of rows (the reports of one tick in a small game) are drawn one by one in
    Python floats from each row's cached CDF: the same float64 operations as
    :func:`_sample_block` (a tick below 2^53 and the products are exact conversions and
    single roundings either way), so the same cells, safety test and slow path. More rows
    of a non-negative matrix (every certified one) are drawn by a compiled pass that sums
    each row's CDF only up to the draw's cell; anything else goes to :func:`sample_rows`."""

    #: Rows per call drawn one by one (above: the vectorised block).
    SCALAR_ROWS = 16

    def __init__(self, matrix: np.ndarray) -> None:
        self.matrix = matrix
        self._width = matrix.shape[1]
        self._rows: dict[int, tuple[list[float], list[float], float, float] | None] = {}

    def draw(self, rows: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """One exact draw of a column index for each row index in ``rows``."""
        rows = np.asarray(rows, dtype=np.int64)
        if len(rows) > self.SCALAR_ROWS and rows.min() != rows.max() and self._totals is not None:
            return self._draw_compiled(rows, rng)
        if not 0 < len(rows) <= self.SCALAR_ROWS:
            return sample_rows(self.matrix, rows, rng)
        listed = rows.tolist()
        tables = [self._table(r) for r in listed]
        if None in tables:  # a negative entry: sample_rows' block handles it
            return sample_rows(self.matrix, rows, rng)
        ticks = ticks_of(rng, len(rows)).tolist()
        cells = [
            self._cell(tick, table, row, rng)
            for tick, table, row in zip(ticks, tables, listed, strict=True)
        ]
        return np.array(cells, dtype=np.int64)

    @cached_property
    def _totals(self) -> np.ndarray | None:
        """Each row's total as ``np.cumsum`` sums it (None: a negative entry somewhere, left
        to :func:`sample_rows`)."""
        if not self.matrix.min() >= 0:
            return None
        return _compiled().row_totals(np.ascontiguousarray(self.matrix, dtype=np.float64))

    def _draw_compiled(self, rows: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """:func:`sample_rows` for many rows of a non-negative matrix: the same ticks, cells,
        safety test and slow path, in one compiled pass without a CDF block
        (``_kernels.fast_cells``; tests/privacy/test_sampling.py checks it against
        :func:`_sample_block`)."""
        ticks = ticks_of(rng, len(rows))
        totals = self._totals
        assert totals is not None
        if not np.all(totals[rows] > 0):
            raise ValueError("cannot sample from a row whose entries sum to zero")
        cells = np.empty(len(rows), dtype=np.int64)
        safe = np.empty(len(rows), dtype=np.bool_)
        matrix = np.ascontiguousarray(self.matrix, dtype=np.float64)
        eps = float(np.finfo(float).eps)
        _compiled().fast_cells(matrix, totals, rows, ticks, _SCALE, eps, cells, safe)
        for j in np.nonzero(~safe)[0]:
            cells[j] = _ExactRow(matrix[rows[j]]).draw(int(ticks[j]), rng)
        return cells

    def _table(self, row: int) -> tuple[list[float], list[float], float, float] | None:
        """Row ``row``'s entries, CDF, ``total / 2^53`` and error margin (None: a negative
        entry, left to :func:`sample_rows`)."""
        if row not in self._rows:
            p = self.matrix[row]
            cdf = np.cumsum(p)
            total = cdf[-1]
            if not total > 0:
                raise ValueError("cannot sample from a row whose entries sum to zero")
            err = (self._width + 4) * np.finfo(float).eps * total
            table = (p.tolist(), cdf.tolist(), float(total / _SCALE), float(err))
            self._rows[row] = table if p.min() >= 0 else None
        return self._rows[row]

    def _cell(self, tick: int, table, row: int, rng: np.random.Generator) -> int:
        """:func:`_sample_block`'s cell for one draw of ``row`` (its ``table``)."""
        p, cdf, scale, err = table
        lo, hi = tick * scale, (tick + 1) * scale
        k = min(bisect.bisect_right(cdf, lo), self._width - 1)  # a CDF of p >= 0 is sorted
        left = cdf[k - 1] if k > 0 else 0.0
        if lo - err >= left and hi + err < cdf[k] and p[k] > 0:
            return k
        return _ExactRow(self.matrix[row]).draw(tick, rng)


def _sample_row(p: np.ndarray, ticks: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Draws from one row ``p`` for the given 53-bit ``ticks`` (tests drive the ticks)."""
    return _sample_block(p[None, :], np.zeros(len(ticks), dtype=np.int64), ticks, rng)


def _sample_block(matrix, rows, ticks, rng) -> np.ndarray:
    p = matrix[rows]  # (m, K)
    cdf = np.cumsum(p, axis=1)
    total = cdf[:, -1]
    if not np.all(total > 0):
        raise ValueError("cannot sample from a row whose entries sum to zero")
    # |cdf_float[k] - cdf_exact[k]| <= k * 2^-53 * total (cumsum of non-negative floats), and
    # the uniform's interval is [ticks, ticks + 1) * total / 2^53, itself rounded.
    err = (p.shape[1] + 4) * np.finfo(float).eps * total
    lo = ticks * (total / _SCALE)
    hi = (ticks + 1) * (total / _SCALE)
    k = np.minimum((cdf <= lo[:, None]).sum(axis=1), p.shape[1] - 1)
    m = np.arange(len(rows))
    left = np.where(k > 0, cdf[m, np.maximum(k - 1, 0)], 0.0)
    safe = (lo - err >= left) & (hi + err < cdf[m, k]) & (p[m, k] > 0)
    for j in np.nonzero(~safe)[0]:
        k[j] = _ExactRow(p[j]).draw(int(ticks[j]), rng)
    return k


def _sample_one_row(p: np.ndarray, ticks: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """The draws of :func:`_sample_block` for many draws of one non-negative row.

    The same cells, error bounds and slow path, so the same bytes, found faster: the ticks are
    cut into ``2^_GUIDE_BITS`` buckets, and a bucket whose whole interval passes the safety test
    in one cell gives that cell to every draw in it (the test is monotone in the tick). Only
    draws in buckets that straddle a CDF boundary are searched one by one.
    """
    cdf = np.cumsum(p)
    total = cdf[-1]
    if not total > 0:
        raise ValueError("cannot sample from a row whose entries sum to zero")
    shift = _BITS - _GUIDE_BITS
    buckets = np.arange(2**_GUIDE_BITS, dtype=np.int64) << shift
    table, _ = _safe_cells(p, cdf, total, buckets, buckets + (1 << shift))
    k = table[ticks >> shift]
    todo = np.nonzero(k < 0)[0]
    k_todo, safe = _safe_cells(p, cdf, total, ticks[todo], ticks[todo] + 1)
    k[todo] = k_todo
    unsafe = todo[~safe]
    if len(unsafe):
        exact = _ExactRow(p)
        for j in unsafe:
            k[j] = exact.draw(int(ticks[j]), rng)
    return k


def _safe_cells(p, cdf, total, start_ticks, end_ticks) -> tuple[np.ndarray, np.ndarray]:
    """Cell of each tick interval ``[start, end)`` and whether it provably lies in it (-1 if
    not), with the error bound of :func:`_sample_block`."""
    err = (len(p) + 4) * np.finfo(float).eps * total
    lo = start_ticks * (total / _SCALE)
    hi = end_ticks * (total / _SCALE)
    k = np.minimum(np.searchsorted(cdf, lo, side="right"), len(p) - 1)
    left = np.where(k > 0, cdf[np.maximum(k - 1, 0)], 0.0)
    safe = (lo - err >= left) & (hi + err < cdf[k]) & (p[k] > 0)
    return np.where(safe, k, -1), safe


_GUIDE_BITS = 14


class _ExactRow:
    """A row as exact rationals, for the rare draws that land near a CDF boundary."""

    def __init__(self, p: np.ndarray) -> None:
        cum = []
        acc = Fraction(0)
        for value in p.tolist():
            acc += Fraction(value)
            cum.append(acc)
        self.cum = cum
        self.total = acc

    def draw(self, ticks: int, rng: np.random.Generator) -> int:
        """Finish a draw whose first 53 bits are ``ticks``: refine until one cell holds it."""
        lo, width = Fraction(ticks, 2**_BITS), Fraction(1, 2**_BITS)
        while True:
            a, b = lo * self.total, (lo + width) * self.total
            k_lo = self._cell(a)
            if k_lo == self._cell_upper(b):
                return k_lo
            extra = int(rng.integers(0, 2**32))
            width /= 2**32
            lo += extra * width

    def _cell(self, u: Fraction) -> int:
        """First k with u < cum[k]."""
        lo, hi = 0, len(self.cum) - 1
        while lo < hi:
            mid = (lo + hi) // 2
            if u < self.cum[mid]:
                hi = mid
            else:
                lo = mid + 1
        return lo

    def _cell_upper(self, u: Fraction) -> int:
        """Cell of points just below u (the interval is half-open)."""
        lo, hi = 0, len(self.cum) - 1
        while lo < hi:
            mid = (lo + hi) // 2
            if u <= self.cum[mid]:
                hi = mid
            else:
                lo = mid + 1
        return lo


def _compiled():
    """The compiled kernels' module, imported on the first large draw (numba's import is not
    paid by ``import mdpsim``)."""
    from mdpsim.privacy import _kernels

    return _kernels
