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


@numba.njit(cache=True, nogil=True)
def all_finite(values: np.ndarray) -> bool:
    """Whether every value is finite (``np.isfinite(values).all()``)."""
    finite = True
    for x in values.flat:
        finite = finite and np.isfinite(x)
    return finite


@numba.njit(cache=True, nogil=True)
def all_finite_nonnegative(values: np.ndarray) -> bool:
    """Whether every value is finite and ``>= 0`` (NaN is neither)."""
    valid = True
    for x in values.flat:
        valid = valid and np.isfinite(x) and x >= 0.0
    return valid


@numba.njit(cache=True, nogil=True)
def band_rounds(
    values: np.ndarray,
    weighted_sum: np.ndarray,
    rho_total: np.ndarray,
    users: np.ndarray,
    parts: np.ndarray,
    std_km: np.ndarray,
    noise: np.ndarray,
    lam: float,
    point: np.ndarray,
    nu_low: float,
    nu_high: float,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, int]:
    """:func:`trial_sums` of the rows ``users`` of ``values``, ``weighted_sum`` and
    ``rho_total``, then PIE-NI's rule on each round's estimates: ``out0`` where
    ``est - h > nu_high``, ``out1`` where ``est + h < nu_low``, and the first round that
    settles somebody (-1: none).

    The estimate is the combined release itself (``dim`` 1, ``point`` empty) or its distance
    to ``point`` (``dim`` 2: ``sqrt(dx * dx + dy * dy)``, the sum ``np.add.reduce`` makes of
    two terms), with numpy's operations in numpy's order: the same bits.
    """
    sums, totals, mean, half = trial_sums(
        values[users], weighted_sum[users], rho_total[users], parts, std_km, noise, lam
    )
    rounds, users = totals.shape
    out0 = np.zeros((rounds, users), dtype=np.bool_)
    out1 = np.zeros((rounds, users), dtype=np.bool_)
    first = -1
    for r in range(rounds):
        for u in range(users):
            if len(point):
                dx = mean[r, u, 0] - point[0]
                dy = mean[r, u, 1] - point[1]
                est = np.sqrt(dx * dx + dy * dy)
            else:
                est = mean[r, u, 0]
            out0[r, u] = est - half[r, u] > nu_high
            out1[r, u] = est + half[r, u] < nu_low
            if first < 0 and (out0[r, u] or out1[r, u]):
                first = r
    return sums, totals, out0, out1, first
