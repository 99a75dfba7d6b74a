"""The exact mDP verifier (docs/design.md §1): trust only a matrix and the true distances.

``Z`` must be a mechanism: a dense, finite, non-negative N x K array whose every row sums to 1
within ``ROW_SUM_TOL = 1e-9`` (absolute, per row; the tolerance ``Mechanism.fit`` also applies).
Anything else (a row summing to 2, an all-zero matrix, a scipy sparse matrix, a ragged list,
strings, NaN/inf/negative entries, distances of the wrong shape, an asymmetric or non-zero-diagonal
distance matrix unless ``directed=True``: sim/geo/metric_checks.py) is refused with
:class:`~mdpsim.errors.InputError` before any ratio is looked at: the ratio test alone would pass
such a matrix, since scaling every row by the same factor changes no ratio.

``Z`` is eps-mDP iff ``Z[i,k] <= exp(eps d(i,j)) Z[j,k]`` for all ordered pairs i != j and
all outputs k. The check runs in log space: a constraint is broken when
``log Z[i,k] - log Z[j,k] > eps * d(i,j) * (1 + rtol)`` (a *relative* tolerance, never an
absolute slack). ``x / 0`` with ``x > 0`` is an infinite loss (broken); ``0 / 0`` is skipped
(counted as a constraint, never broken). ``d(i,j) = 0`` demands equal entries.

The full check visits all N (N-1) K constraints in blocks of rows, so memory stays bounded
(a few MB of work space besides the caller's matrix and distances). With ``pairs=`` only the
listed pairs are checked, in both directions (O(P K)); with ``domain.constraint_pairs`` this is
exact by chaining (docs/design.md §1), but the full check is the reference. See docs/mechanisms.md.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import sparse

from mdpsim._core.validation import check_epsilon, check_positive_int, check_scalar
from mdpsim.errors import InputError, PluginError
from mdpsim.geo.metric_checks import check_distances

DEFAULT_RTOL = 1e-9
ROW_SUM_TOL = 1e-9  # |sum_k Z[i,k] - 1| allowed per row
# log(0) is replaced by this finite sentinel: 0/0 gives 0 (never a violation), x/0 gives
# ~1e300 (read back as an infinite loss) and no NaN reaches the fast max/min reductions.
# Real log-probabilities of float64 lie in [-745, 0], far from both.
_ZERO_LOG = -1e300
_INF_CUT = 1e299
_BLOCK_ELEMS = 1 << 17  # elements of one work block (1 MiB): stays in cache


class PrivacyViolation(RuntimeError):
    """A released matrix failed the exact mDP check (fail closed)."""


class PluginPrivacyViolation(PluginError, PrivacyViolation):
    """A plug-in's matrix failed the exact check: the plug-in's mistake (one line, exit 2)."""


@dataclass(frozen=True)
class VerifyResult:
    """Outcome of :func:`verify`.

    Attributes
    ----------
    smallest_epsilon
        ``max ln(Z[i,k] / Z[j,k]) / d(i,j)`` over the checked constraints, per km
        (``inf`` for an infinite loss, 0 when no ratio exceeds 1).
    violation_ratio
        ``n_violations / n_constraints``.
    worst
        ``(i, j, k)`` attaining ``smallest_epsilon``, or ``None`` if it is 0.
    passed
        No checked constraint is broken at ``epsilon`` with relative tolerance ``rtol``.
    """

    smallest_epsilon: float
    violation_ratio: float
    n_violations: int
    n_constraints: int
    worst: tuple[int, int, int] | None
    passed: bool
    epsilon: float
    rtol: float
    mode: str

    def __str__(self) -> str:
        verdict = "passed" if self.passed else "FAILED"
        return (
            f"{verdict} at {self.epsilon:g}/km ({self.mode}): smallest epsilon "
            f"{self.smallest_epsilon:.12g}/km, {self.n_violations:,} of "
            f"{self.n_constraints:,} constraints broken (ratio {self.violation_ratio:.3g}), "
            f"worst (i, j, k) = {self.worst}"
        )


def verify(
    matrix,
    dist,
    epsilon: float,
    *,
    pairs=None,
    rtol: float = DEFAULT_RTOL,
    chunk_rows: int = 256,
    stochastic: bool = True,
    directed: bool = False,
) -> VerifyResult:
    """Check ``matrix`` (N x K) against the true distances ``dist`` (N x N, km) at ``epsilon``.

    Parameters
    ----------
    matrix
        Dense non-negative finite N x K matrix, ``Z[i,k] = Pr[y_k | x_i]``, each row summing
        to 1 within ``ROW_SUM_TOL`` (1e-9); otherwise :class:`InputError`.
    dist
        Non-negative finite N x N distances in km (the TRUE metric), zero on the diagonal and
        symmetric (relative 1e-9), else :class:`InputError`.
    epsilon
        Budget per km, finite and > 0.
    pairs
        Optional (P, 2) index pairs ``i != j``; each is checked in both directions.
    rtol
        Relative tolerance on ``eps * d`` (default 1e-9).
    chunk_rows
        Rows of the matrix whose logarithms are held at once in the full check.
    stochastic
        ``False`` skips the row-sum check and tests only the ratio condition, for non-negative
        matrices that are not mechanisms (e.g. an un-normalised Lipschitz envelope); never for
        a released matrix.
    directed
        ``True`` accepts an asymmetric ``dist`` (a directed metric, asked for by name): each
        ordered pair ``i -> j`` is then checked at ``eps * dist[i, j]``.
    """
    check_scalar(stochastic, "stochastic", kind=bool)
    Z = _as_matrix(matrix, stochastic=stochastic)
    D = _as_dist(dist, len(Z), directed=directed)
    eps = check_epsilon(epsilon)
    check_scalar(rtol, "rtol", min=0, max=1, include_boundaries="left")
    chunk_rows = check_positive_int(chunk_rows, "chunk_rows")
    acc = _Accumulator(eps, rtol)
    if pairs is None:
        _check_all(Z, D, acc, int(chunk_rows))
        n_constraints = len(Z) * (len(Z) - 1) * Z.shape[1]
        mode = "all pairs"
    else:
        p = _as_pairs(pairs, len(Z))
        _check_pairs(Z, D, p, acc)
        n_constraints = 2 * len(p) * Z.shape[1]
        mode = f"{len(p):,} pairs, both directions"
    return acc.result(Z, n_constraints, mode)


# --------------------------------------------------------------------- the two sweeps
def _check_all(Z: np.ndarray, D: np.ndarray, acc: _Accumulator, chunk_rows: int) -> None:
    """All pairs i < j (both directions at once: max gives i->j, -min gives j->i).

    The inner loop only reduces blocks of differences into the chunk's loss arrays
    (``chunk_rows x N``); the bookkeeping then runs once per chunk, vectorised.
    """
    n, k = Z.shape
    bj = int(np.clip(_BLOCK_ELEMS // k, 1, 1024))
    b1 = int(np.clip(_BLOCK_ELEMS // (bj * k), 1, chunk_rows))
    work = np.empty(b1 * bj * k)  # reused: fresh large arrays would page-fault every block
    for i0 in range(0, n, chunk_rows):
        i1 = min(i0 + chunk_rows, n)
        Li = _logs(Z[i0:i1])
        fwd = np.full((i1 - i0, n), -np.inf)
        rev = np.full((i1 - i0, n), -np.inf)
        for j0 in range(i0 + 1, n, bj):
            j1 = min(j0 + bj, n)
            Lj = Li[j0 - i0 : j1 - i0] if j1 <= i1 else _logs(Z[j0:j1])
            for s0 in range(i0, min(i1, j1 - 1), b1):
                s1 = min(s0 + b1, i1)
                diff = work[: (s1 - s0) * (j1 - j0) * k].reshape(s1 - s0, j1 - j0, k)
                np.subtract(Li[s0 - i0 : s1 - i0, None, :], Lj[None, :, :], out=diff)
                diff.max(axis=2, out=fwd[s0 - i0 : s1 - i0, j0:j1])
                diff.min(axis=2, out=rev[s0 - i0 : s1 - i0, j0:j1])
        np.negative(rev, out=rev)
        ii = np.arange(i0, i1)[:, None]
        jj = np.arange(n)[None, :]
        keep = ii < jj
        acc.add(
            Z, fwd, np.broadcast_to(ii, fwd.shape), np.broadcast_to(jj, fwd.shape), keep, D[i0:i1]
        )
        acc.add(
            Z,
            rev,
            np.broadcast_to(jj, rev.shape),
            np.broadcast_to(ii, rev.shape),
            keep,
            D[:, i0:i1].T,
        )


def _check_pairs(Z: np.ndarray, D: np.ndarray, pairs: np.ndarray, acc: _Accumulator) -> None:
    """Listed pairs, both directions. When rows recur (dense pair sets, e.g. lp metrics) the
    logarithms of the whole matrix are taken once (one matrix of extra memory)."""
    k = Z.shape[1]
    step = int(np.clip(_BLOCK_ELEMS // k, 1, 4096))
    L = _logs(Z) if 2 * len(pairs) > len(Z) else None
    for p0 in range(0, len(pairs), step):
        a, b = pairs[p0 : p0 + step, 0], pairs[p0 : p0 + step, 1]
        diff = L[a] - L[b] if L is not None else _logs(Z[a]) - _logs(Z[b])
        keep = np.ones(len(a), dtype=bool)
        acc.add(Z, diff.max(axis=1), a, b, keep, D[a, b])
        acc.add(Z, -diff.min(axis=1), b, a, keep, D[b, a])


class _Accumulator:
    """Running worst ratio, worst pair and violation count over batches of pair losses."""

    def __init__(self, eps: float, rtol: float) -> None:
        self.eps, self.rtol = eps, rtol
        self.best = 0.0
        self.best_pair: tuple[int, int] | None = None
        self.n_violations = 0

    def add(self, Z, loss, src, dst, keep, d) -> None:
        """``loss = max_k log Z[src,k] - log Z[dst,k]`` per pair (same-shape arrays)."""
        limit = self.eps * d * (1.0 + self.rtol)
        broken = keep & (loss > limit)
        if broken.any():
            self.n_violations += _count_broken(Z, src[broken], dst[broken], limit[broken])
        ratio = np.where(keep, _ratios(loss, d), 0.0)
        pos = np.unravel_index(int(np.argmax(ratio)), ratio.shape)
        if ratio[pos] > self.best:
            self.best = float(ratio[pos])
            self.best_pair = (int(src[pos]), int(dst[pos]))

    def result(self, Z: np.ndarray, n_constraints: int, mode: str) -> VerifyResult:
        worst = None
        if self.best_pair is not None:
            i, j = self.best_pair
            worst = (i, j, int(np.argmax(_logs(Z[i]) - _logs(Z[j]))))
        return VerifyResult(
            smallest_epsilon=self.best,
            violation_ratio=self.n_violations / n_constraints if n_constraints else 0.0,
            n_violations=self.n_violations,
            n_constraints=n_constraints,
            worst=worst,
            passed=self.n_violations == 0,
            epsilon=self.eps,
            rtol=self.rtol,
            mode=mode,
        )


def _count_broken(Z: np.ndarray, src, dst, limit) -> int:
    """Number of outputs k with ``log Z[src,k] - log Z[dst,k] > limit``, summed over pairs."""
    step = int(np.clip(_BLOCK_ELEMS // Z.shape[1], 1, 4096))
    total = 0
    for p0 in range(0, len(src), step):
        a, b = src[p0 : p0 + step], dst[p0 : p0 + step]
        diff = _logs(Z[a]) - _logs(Z[b])
        total += int((diff > limit[p0 : p0 + step, None]).sum())
    return total


def _ratios(loss: np.ndarray, d: np.ndarray) -> np.ndarray:
    """``loss / d`` per pair: infinite for x/0 or for a positive loss at distance 0."""
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(loss > 0, loss / d, 0.0)
    return np.where(loss >= _INF_CUT, np.inf, ratio)


def _logs(rows: np.ndarray) -> np.ndarray:
    with np.errstate(divide="ignore"):
        out = np.log(rows)
    out[rows == 0] = _ZERO_LOG
    return out


# --------------------------------------------------------------------- validation
def _as_matrix(matrix, *, stochastic: bool) -> np.ndarray:
    Z = _dense_numbers(matrix, "matrix")
    if Z.ndim != 2 or Z.shape[0] < 1 or Z.shape[1] < 1:
        raise InputError(f"matrix must be a non-empty N x K array, got shape {Z.shape}")
    if not np.all(np.isfinite(Z)) or np.any(Z < 0):
        raise InputError("matrix must be finite and non-negative")
    off = np.abs(Z.sum(axis=1) - 1.0)
    if stochastic and np.any(off > ROW_SUM_TOL):
        row = int(np.argmax(off))
        raise InputError(
            f"matrix row {row} sums to {Z[row].sum():.12g}, not 1 (tolerance {ROW_SUM_TOL:g}): "
            "not a mechanism; every row must be a probability distribution"
        )
    return Z


def _as_dist(dist, n: int, *, directed: bool) -> np.ndarray:
    D = _dense_numbers(dist, "dist")
    if D.shape != (n, n):
        raise InputError(f"dist must be {n} x {n} (km between secrets), got shape {D.shape}")
    if not np.all(np.isfinite(D)) or np.any(D < 0):
        raise InputError("dist must be finite and non-negative (km)")
    check_distances(D, "dist", directed=directed)
    return D


def _dense_numbers(value, name: str) -> np.ndarray:
    """``value`` as a float64 array, refusing sparse matrices, ragged lists and non-numbers."""
    if sparse.issparse(value):
        raise InputError(f"{name} is a scipy sparse matrix; pass {name}.toarray()")
    try:
        arr = np.asarray(value)
    except ValueError:
        raise InputError(
            f"{name} must be a rectangular array of numbers (rows of equal length)"
        ) from None
    if arr.dtype.kind not in "iuf":
        raise InputError(f"{name} must hold real numbers, got dtype {arr.dtype}")
    return arr.astype(np.float64, copy=False)


def _as_pairs(pairs, n: int) -> np.ndarray:
    if sparse.issparse(pairs):
        raise InputError("pairs is a scipy sparse matrix; pass an integer array of shape (P, 2)")
    try:
        p = np.asarray(pairs)
    except ValueError:
        raise InputError("pairs must be an integer array of shape (P, 2)") from None
    if p.ndim != 2 or p.shape[1] != 2 or not np.issubdtype(p.dtype, np.integer):
        raise InputError("pairs must be an integer array of shape (P, 2)")
    if len(p) and (p.min() < 0 or p.max() >= n):
        raise InputError(f"pairs must index secrets in [0, {n})")
    if np.any(p[:, 0] == p[:, 1]):
        raise InputError("pairs must not contain (i, i)")
    return p.astype(np.int64)
