"""Compiled per-tick kernels of the built-in attacks (numba, ``cache=True``).

Plain functions over arrays; nothing compiles at import, each signature compiles on its first
call and is cached on disk beside this module (or under ``NUMBA_CACHE_DIR``, docs/benchmarks.md).
"""

from __future__ import annotations

import numba
import numpy as np


@numba.njit(cache=True, nogil=True, error_model="numpy")
def bayes_rows32(
    block: np.ndarray,
    outputs: np.ndarray,
    resets: np.ndarray,
    lik32: np.ndarray,
    prior32: np.ndarray,
    flush_below: float,
    top: np.ndarray,
) -> None:
    """Bayes' rule on float32 predicted rows ``block`` ``(B, N)``, in place, one pass a row.

    A reset row starts from ``prior32``; a row times its report's likelihood row
    (``lik32[outputs[u]]``) is normalised, a row of mass 0 restarting from the likelihood
    times the prior; entries below ``flush_below`` become 0. ``top[u]`` is the row's first
    most likely secret (the first NaN's, as ``argmax``). Masses are summed in float64
    (numpy's pairwise float32 sums differ by float32 rounding, about 1e-7 relative). The
    entropy stays numpy's: its vectorised float32 log beats a compiled scalar loop at
    1,000 points (675 against 950 us for 128 rows, measured).
    """
    n_rows, n = block.shape
    for u in range(n_rows):
        row = block[u]
        lik = lik32[outputs[u]]
        if resets[u]:
            row[:] = prior32
        for x in range(n):
            row[x] = row[x] * lik[x]
        mass = _sum8(row)
        if not mass > 0.0:
            for x in range(n):
                row[x] = lik[x] * prior32[x]
            mass = _sum8(row)
        scale = np.float32(mass)
        flush = np.float32(flush_below)
        zero = np.float32(0.0)
        for x in range(n):
            v = row[x] / scale
            row[x] = zero if v < flush else v
        top[u] = _first_argmax(row)


@numba.njit(cache=True, nogil=True)
def _sum8(row: np.ndarray) -> float:
    """The float64 sum of a float32 row over 8 running sums, in a fixed order (the same bits
    on every machine; 8 chains instead of one let the loop run at the adds' throughput)."""
    acc = np.zeros(8)
    n = len(row)
    full = n - n % 8
    for x in range(0, full, 8):
        for j in range(8):
            acc[j] += row[x + j]
    total = 0.0
    for x in range(full, n):
        total += row[x]
    return ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7])) + total


@numba.njit(cache=True, nogil=True)
def _first_argmax(row: np.ndarray) -> int:
    """``np.argmax``: the first largest entry's index, or the first NaN's."""
    best = 0
    best_value = row[0]
    if best_value != best_value:
        return 0
    for x in range(1, len(row)):
        v = row[x]
        if v != v:
            return x
        if v > best_value:
            best, best_value = x, v
    return best


@numba.njit(cache=True, nogil=True)
def predict_rows32(
    indptr: np.ndarray,
    indices: np.ndarray,
    data: np.ndarray,
    columns: np.ndarray,
    rows: np.ndarray,
) -> None:
    """The filter's prediction ``(A @ columns).T`` into ``rows`` ``(U, N)``, for a float32
    CSR matrix ``A`` ``(N, N)`` (``indptr, indices, data``) and float32 beliefs ``columns``
    ``(N, U)``: one secret's predictions for every user at a time, then written into the
    users' rows (no transposed copy). Each entry is summed from +0 in ``A``'s stored order,
    as scipy's ``csr_matvecs`` sums it, so the same bits as ``A @ columns``; numba contracts
    no multiply-add (no fastmath), so the same bits on every machine."""
    n, n_users = columns.shape
    acc = np.empty(n_users, dtype=np.float32)
    for i in range(n):
        acc[:] = np.float32(0.0)
        for jj in range(indptr[i], indptr[i + 1]):
            a = data[jj]
            belief = columns[indices[jj]]
            for u in range(n_users):
                acc[u] += a * belief[u]
        for u in range(n_users):
            rows[u, i] = acc[u]


@numba.njit(cache=True, nogil=True)
def pair_leakage(
    logz: np.ndarray, dist_xx: np.ndarray, ii: np.ndarray, jj: np.ndarray, out: np.ndarray
) -> None:
    """``out[k] = max(out[k], |logz[i, k] - logz[j, k]| / d(i, j))`` over the pairs
    ``(ii, jj)``, in place; a pair whose difference is not positive (equal logs, both
    ``-inf``, a NaN) adds nothing: the numpy formula's ``where(diff > 0, diff / d, 0)``.
    Subtraction, ``abs`` and division are the same IEEE operations, and a maximum has no
    order: the same bits."""
    n_out = len(out)
    for p in range(len(ii)):
        a, b = logz[ii[p]], logz[jj[p]]
        d = dist_xx[ii[p], jj[p]]
        for k in range(n_out):
            diff = abs(a[k] - b[k])
            if diff > 0.0:  # False for NaN: -inf - -inf, and any NaN entry
                ratio = diff / d
                if ratio > out[k]:
                    out[k] = ratio


@numba.njit(cache=True, nogil=True, boundscheck=True)
def location_scores(
    secrets: np.ndarray,
    guess: np.ndarray,
    dist: np.ndarray,
    risk: np.ndarray,
    risk_col: np.ndarray,
    top: np.ndarray,
    entropy: np.ndarray,
    leak: np.ndarray,
    bound_above: float,
    table: np.ndarray,
    totals: np.ndarray,
    counts: np.ndarray,
) -> None:
    """A location estimate's ``(M, R)`` score table (``base._LOCATION_METRICS``' rows), then
    each row's :func:`finite_totals`. Per user u with truth ``s = secrets[u]``: the guess's
    distance ``dist[s, guess[u]]``; the expected error ``risk[s, risk_col[u]]`` (a tabulated
    posterior's risk table; a point estimate's distances and guesses), or, with no
    ``risk_col``, what the caller wrote in row 1 (a dense posterior's); the hit
    ``top[u] == s``; ``entropy[u]`` and ``leak[u]`` (NaN where not given); with a sixth
    row, whether ``leak[u] > bound_above``. An empty input is one not given (with no users,
    every row is empty). Gathers and comparisons: the numpy formula's bits
    (``base._score_location_numpy``); out-of-range indices raise ``IndexError`` as numpy's."""
    n = len(secrets)
    for u in range(n):
        s = secrets[u]
        table[0, u] = dist[s, guess[u]]
        if len(risk_col):
            table[1, u] = risk[s, risk_col[u]]
        table[2, u] = 1.0 if top[u] == s else 0.0
        table[3, u] = entropy[u] if len(entropy) else np.nan
        table[4, u] = leak[u] if len(leak) else np.nan
        if len(table) > 5:
            table[5, u] = 1.0 if table[4, u] > bound_above else 0.0
    finite_totals(table, totals, counts)


@numba.njit(cache=True, nogil=True)
def finite_totals(table: np.ndarray, totals: np.ndarray, counts: np.ndarray) -> None:
    """Per row of ``table``, numpy's float64 sum of its non-NaN entries (``0.0 +`` the
    pairwise sum, as ``np.add.reduce`` from its identity) and their count."""
    n = table.shape[1]
    finite = np.empty(n)
    for m in range(len(table)):
        row = table[m]
        k = 0
        for u in range(n):
            if row[u] == row[u]:
                finite[k] = row[u]
                k += 1
        totals[m] = 0.0 + pairwise_sum(finite, 0, k)
        counts[m] = k


@numba.njit(cache=True, nogil=True)
def pairwise_sum(a: np.ndarray, start: int, n: int) -> float:
    """numpy's float64 pairwise sum of ``a[start:start + n]`` (``DOUBLE_pairwise_sum``): a
    range above 128 entries is the sum of its halves (split at a multiple of 8), left plus
    right, each summed alike down to :func:`_block_sum`. The recursion runs on a stack of
    ranges (numba's disk cache cannot load a recursive function)."""
    if n <= _BLOCK:
        return _block_sum(a, start, n)
    starts, sizes = np.empty(64, np.int64), np.empty(64, np.int64)  # 64 halvings: any n
    lefts, has_left = np.empty(64), np.zeros(64, np.bool_)
    depth, starts[0], sizes[0] = 0, start, n
    while True:
        first, size = starts[depth], sizes[depth]
        while size > _BLOCK:  # down the left halves to a block
            size = _half(size)
            depth += 1
            starts[depth], sizes[depth], has_left[depth] = first, size, False
        value = _block_sum(a, first, size)
        while True:  # up: a left half waits for its right half, a right half is added
            depth -= 1
            if depth < 0:
                return value
            if not has_left[depth]:
                lefts[depth], has_left[depth] = value, True
                half = _half(sizes[depth])
                starts[depth + 1], sizes[depth + 1] = starts[depth] + half, sizes[depth] - half
                has_left[depth + 1] = False
                depth += 1
                break
            value = lefts[depth] + value


_BLOCK = 128  # numpy's PW_BLOCKSIZE


@numba.njit(cache=True, nogil=True)
def _half(n: int) -> int:
    """Where numpy's pairwise sum splits ``n`` entries: half of them, down to a multiple of 8."""
    half = n // 2
    return half - half % 8


@numba.njit(cache=True, nogil=True)
def _block_sum(a: np.ndarray, start: int, n: int) -> float:
    """numpy's pairwise sum of at most 128 entries: below 8 one left-to-right loop, else eight
    running sums over the blocks of 8, combined in a fixed tree, then the rest."""
    if n < 8:
        res = 0.0
        for i in range(start, start + n):
            res += a[i]
        return res
    r0, r1, r2, r3 = a[start], a[start + 1], a[start + 2], a[start + 3]
    r4, r5, r6, r7 = a[start + 4], a[start + 5], a[start + 6], a[start + 7]
    end = start + n - n % 8
    for i in range(start + 8, end, 8):
        r0 += a[i]
        r1 += a[i + 1]
        r2 += a[i + 2]
        r3 += a[i + 3]
        r4 += a[i + 4]
        r5 += a[i + 5]
        r6 += a[i + 6]
        r7 += a[i + 7]
    res = ((r0 + r1) + (r2 + r3)) + ((r4 + r5) + (r6 + r7))
    for i in range(end, start + n):
        res += a[i]
    return res


@numba.njit(cache=True, nogil=True)
def reach_csr(
    dist_xx: np.ndarray, reach: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The reach kernel's CSR arrays ``(data, indices, indptr)`` of the forward matrix, then
    of its transpose: row ``i`` uniform over ``{j : dist_xx[i, j] <= reach[i]}`` (weight
    ``1 / degree``; 0 rows when the degree is 0, for the caller to refuse), the forward
    rows' columns descending, the transposed rows' ascending."""
    n = dist_xx.shape[0]
    degree = np.zeros(n, dtype=np.int64)
    in_degree = np.zeros(n, dtype=np.int64)
    for i in range(n):
        for j in range(n):
            if dist_xx[i, j] <= reach[i]:
                degree[i] += 1
                in_degree[j] += 1
    indptr = np.zeros(n + 1, dtype=np.int64)
    t_indptr = np.zeros(n + 1, dtype=np.int64)
    indptr[1:] = np.cumsum(degree)
    t_indptr[1:] = np.cumsum(in_degree)
    nnz = indptr[n]
    data, indices = np.empty(nnz), np.empty(nnz, dtype=np.int64)
    t_data, t_indices = np.empty(nnz), np.empty(nnz, dtype=np.int64)
    t_at = t_indptr[:n].copy()
    for i in range(n):
        weight = 1.0 / degree[i] if degree[i] else 0.0
        at = indptr[i]
        for j in range(n - 1, -1, -1):
            if dist_xx[i, j] <= reach[i]:
                data[at], indices[at] = weight, j
                at += 1
        for j in range(n):
            if dist_xx[i, j] <= reach[i]:
                t_data[t_at[j]], t_indices[t_at[j]] = weight, i
                t_at[j] += 1
    return data, indices, indptr, t_data, t_indices, t_indptr
