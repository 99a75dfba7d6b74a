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

from fractions import Fraction

import numpy as np

_BITS = 53
_SCALE = float(2**_BITS)


def sample_rows(matrix: np.ndarray, rows: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """One exact draw of a column index for each row index in ``rows``."""
    rows = np.asarray(rows, dtype=np.int64)
    out = np.empty(len(rows), dtype=np.int64)
    if len(rows) == 0:
        return out
    ticks = rng.integers(0, 2**_BITS, size=len(rows), dtype=np.int64)
    order = np.argsort(rows, kind="stable")
    uniq, starts = np.unique(rows[order], return_index=True)
    bounds = np.append(starts, len(rows))
    for r, lo, hi in zip(uniq, bounds[:-1], bounds[1:], strict=True):
        idx = order[lo:hi]
        out[idx] = _sample_row(matrix[r], ticks[idx], rng)
    return out


def _sample_row(p: np.ndarray, ticks: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    cdf = np.cumsum(p)
    total = cdf[-1]
    if not total > 0:
        raise ValueError("cannot sample from a row whose entries sum to zero")
    # |cdf_float[k] - cdf_exact[k]| <= k * 2^-53 * total (cumsum of non-negative floats), and
    # the uniform's interval is [ticks, ticks + 1) * total / 2^53, itself rounded.
    err = (len(p) + 4) * np.finfo(float).eps * total
    lo = ticks * (total / _SCALE)
    hi = (ticks + 1) * (total / _SCALE)
    k = np.searchsorted(cdf, lo, side="right")
    k = np.minimum(k, len(p) - 1)
    left = np.where(k > 0, cdf[np.maximum(k - 1, 0)], 0.0)
    safe = (lo - err >= left) & (hi + err < cdf[k]) & (p[k] > 0)
    out = k.copy()
    if not np.all(safe):
        exact = _ExactRow(p)
        for m in np.nonzero(~safe)[0]:
            out[m] = exact.draw(int(ticks[m]), rng)
    return out


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
