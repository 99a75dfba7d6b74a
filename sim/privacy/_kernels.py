"""Compiled kernels of the exact sampler (numba, ``cache=True``; docs/sampling.md).

Plain functions over arrays; nothing compiles at import, each signature compiles on its first
call and is cached on disk beside this module (or under ``NUMBA_CACHE_DIR``).
"""

from __future__ import annotations

import numba
import numpy as np


@numba.njit(cache=True, nogil=True)
def row_totals(matrix: np.ndarray) -> np.ndarray:
    """Each row's last CDF entry, summed left to right as ``np.cumsum`` sums (the same bits)."""
    n_rows, width = matrix.shape
    out = np.empty(n_rows)
    for i in range(n_rows):
        acc = 0.0
        for k in range(width):
            acc += matrix[i, k]
        out[i] = acc
    return out


@numba.njit(cache=True, nogil=True)
def fast_cells(
    matrix: np.ndarray,
    totals: np.ndarray,
    rows: np.ndarray,
    ticks: np.ndarray,
    scale_bits: float,
    eps: float,
    cells: np.ndarray,
    safe: np.ndarray,
) -> None:
    """The fast path of the exact sampler for non-negative rows, one draw per ``rows[j]``.

    ``_sample_block``'s arithmetic draw by draw without its ``(m, K)`` CDF block: the row's CDF
    is summed left to right (``np.cumsum``'s order) only up to the draw's cell, the first
    ``k`` with ``cdf[k] > lo`` (``(cdf <= lo).sum()`` for a sorted CDF), capped at ``K - 1``;
    ``safe[j]`` is its safety test, and an unsafe draw is finished exactly by the caller.
    """
    width = matrix.shape[1]
    for j in range(len(rows)):
        i = rows[j]
        total = totals[i]
        err = (width + 4) * eps * total
        step = total / scale_bits
        lo = ticks[j] * step
        hi = (ticks[j] + 1) * step
        left = 0.0
        cdf = 0.0
        k = 0
        while True:
            cdf = left + matrix[i, k]
            if cdf > lo or k == width - 1:
                break
            left = cdf
            k += 1
        cells[j] = k  # (past the last cell, the cap: left is still cdf[K - 2])
        safe[j] = (lo - err >= left) and (hi + err < cdf) and (matrix[i, k] > 0)
