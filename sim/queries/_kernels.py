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
def band_elimination(
    values: np.ndarray,
    weighted_sum: np.ndarray,
    rho_total: np.ndarray,
    split: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray],
    noise: np.ndarray,
    rule: tuple[float, float, float],
    point: np.ndarray,
    progress: tuple[int, int, np.ndarray],
    record: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray],
) -> tuple[int, int, int]:
    """PIE-NI's rounds one after the other while ``noise`` lasts (``_Triple.band_elimination``).

    ``split = (users, parts, cum, std_km)``: the asked users and their ``(c, asked)`` parts,
    running sums and noise stds; ``progress = (round, left, cols)``: the next round, and the
    columns of the split still active (the first ``left`` entries of ``cols``). Each round every
    active user, in order, releases ``parts * (values + noise * std)`` with the next ``dim``
    normals of ``noise`` (its weighted sum and rho total grow by it, as ``trial_sums``' first
    round), and PIE-NI's ``rule = (lam, nu_low, nu_high)`` on the combined release (or its
    distance to ``point``, ``sqrt(dx * dx + dy * dy)``) and its half-width
    ``lam / sqrt(2 total)`` settles it into ``s0`` or ``s1`` of ``record = (s0, s1, active,
    rounds, spent)``, or keeps it ``active``. Stops after ``c`` rounds, with nobody active, or
    when ``noise`` cannot pay the next round; updates the arrays in place and returns how many
    normals it used and the new ``round`` and ``left``. Numpy's operations in numpy's order:
    the same bits as the numpy rounds one at a time.
    """
    users, parts, cum, std_km = split
    s0, s1, active, rounds, spent = record
    lam, nu_low, nu_high = rule
    j, left, cols = progress
    c, dim = parts.shape[0], values.shape[1]
    mean = np.empty(dim)
    used = 0
    while j < c and left > 0 and used + left * dim <= len(noise):
        kept = 0
        for a in range(left):
            col = cols[a]
            u, part, std = users[col], parts[j, col], std_km[j, col]
            total = rho_total[u] + part
            rho_total[u] = total
            for d in range(dim):
                acc = weighted_sum[u, d] + part * (values[u, d] + noise[used] * std)
                weighted_sum[u, d] = acc
                mean[d] = acc / total
                used += 1
            if len(point):
                dx, dy = mean[0] - point[0], mean[1] - point[1]
                est = np.sqrt(dx * dx + dy * dy)
            else:
                est = mean[0]
            half = lam / np.sqrt(2.0 * total)
            rounds[u], spent[u] = j + 1, cum[j, col]
            out0, out1 = est - half > nu_high, est + half < nu_low
            s0[u] |= out0
            s1[u] |= out1
            active[u] = not (out0 or out1)
            if active[u]:
                cols[kept] = col
                kept += 1
        j, left = j + 1, kept
    return used, j, left
