"""Compiled kernels of the iterative elimination (numba, ``cache=True``).

Plain functions over arrays; nothing compiles at import, each signature compiles on its first
call and is cached on disk beside this module (or under ``NUMBA_CACHE_DIR``).
"""

from __future__ import annotations

import numba
import numpy as np


@numba.njit(cache=True, nogil=True)
def trial_sums(
    values: np.ndarray,
    weighted_sum: np.ndarray,
    rho_total: np.ndarray,
    parts: np.ndarray,
    std_km: np.ndarray,
    noise: np.ndarray,
    lam: float,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The elimination rounds of ``users`` drawn at once (``_Triple.trial_rounds``).

    ``values``, ``weighted_sum``: the users' ``(users, dim)``; ``rho_total``: ``(users,)``;
    ``parts``, ``std_km``: ``(rounds, users)``; ``noise``: ``(rounds, users, dim)``. Returns the
    running weighted sums and rho totals after each round, the combined releases (their
    quotient) and the half-widths ``lam / sqrt(2 total)``, element by element with numpy's
    operations in numpy's order (``parts * (values + noise * std)``, the first round's term
    plus the kept sum, then the running sums of ``np.add.accumulate``): the same bits.
    """
    rounds, users, dim = noise.shape
    sums = np.empty((rounds, users, dim))
    mean = np.empty((rounds, users, dim))
    totals = np.empty((rounds, users))
    half = np.empty((rounds, users))
    for u in range(users):
        total = parts[0, u] + rho_total[u]
        for r in range(rounds):
            if r:
                total = totals[r - 1, u] + parts[r, u]
            totals[r, u] = total
            half[r, u] = lam / np.sqrt(2.0 * total)
            for d in range(dim):
                term = parts[r, u] * (values[u, d] + noise[r, u, d] * std_km[r, u])
                acc = term + weighted_sum[u, d] if r == 0 else sums[r - 1, u, d] + term
                sums[r, u, d] = acc
                mean[r, u, d] = acc / total
    return sums, totals, mean, half
