"""WEM + LP (Imola et al. UAI'22; DistA-LP's server LP): the formulation and a direct solve.

For each output ``y_k`` some entries ``(i, k)`` are *exempt* and optimised freely; every other
entry follows the weighted exponential mechanism ``Z[i,k] = w_k a[i,k]`` with
``a[i,k] = exp(-eps d(x_i, y_k) / 2)`` and a shared weight ``w_k >= 0`` ("plain" form), or,
with ``log_row_norm``, ``a[i,k] = exp(-eps d(x_i, y_k) / 2) / S_i`` with the EM's normaliser
``S_i = sum_k exp(-eps d_ik / 2)`` ("em" form: ``w = 1`` with the exempt entries at their EM
values is then a feasible point, the EM itself; docs/copt.md).

A *block* is a set of rows (secrets) with its own exempt entries; blocks share ``w``. The
rows of a block are linear in the exempt entries ``z`` with bounds affine in ``w``::

    h_lo + G w  <=  A z  <=  h_up + G w

which is what Benders' subproblems need (``w`` fixed) and what the direct solve stacks.

mDP constraints inside a block, per output ``k`` (derivation in docs/dista_lp.md):

* two WEM entries: ``a[i,k] <= exp(eps d_ij) a[j,k]`` holds by the triangle inequality
  (plain form: with eps/2 to spare; em form: the EM's own proof, the normaliser ratio
  ``S_j / S_i`` takes the other eps/2); where the block's distances break it, ``w_k`` is
  fixed to 0;
* an exempt entry against *all* WEM entries of its column: exactly two rows,
  ``L[i,k] w_k <= z[i,k] <= U[i,k] w_k`` with ``U = min_j exp(eps d_ij) a[j,k]`` and
  ``L = max_j exp(-eps d_ij) a[j,k]`` over the WEM rows j;
* two exempt entries: ``z[i,k] <= exp(eps d_ij) z[j,k]`` on the given ``pairs`` only. Chaining
  is valid: along a chain path every edge with a WEM end is already enforced for every
  pair (above), and the exempt-exempt edges are imposed, so the whole path holds.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np
from scipy import sparse
from scipy.special import logsumexp

from mdpsim.errors import InputError, SolverError
from mdpsim.mechanisms.lp.highs import HighsLP, HighsOptions
from mdpsim.mechanisms.lp.repair import release_verified
from mdpsim.mechanisms.lp.solver import MAX_LOG_GAIN

# Relative slack (log space) when checking WEM-WEM pairs in the block's own distances.
_WEM_RTOL = 1e-12
_CHUNK = 4096


@dataclass(frozen=True)
class BlockLP:
    """One block of WEM+LP rows; see the module docstring for the row form.

    Attributes
    ----------
    wem
        ``(n, K)`` WEM factors ``a[i,k] = exp(-eps d_ik / 2)``.
    exempt_rows, exempt_cols
        Exempt entries ``(i, k)``, one LP variable ``z`` each, in row-major order.
    cost_z
        Objective coefficient of each exempt entry.
    alpha
        ``(K,)`` objective coefficient of ``w_k`` from this block's WEM entries.
    A, G, h_lo, h_up
        Rows ``h_lo + G w <= A z <= h_up + G w`` (``A``: R x E, ``G``: R x K, CSR).
    w_upper
        ``(K,)`` upper bound on ``w_k`` implied by this block (row sums; WEM pairs).
    w_rows, w_lo, w_up
        Necessary conditions on ``w`` alone, ``w_lo <= w_rows w <= w_up`` (per row: WEM
        mass at most 1; WEM mass plus the most the exempt entries can hold at least 1).
        Implied by the block's rows; Benders' master starts with them.
    """

    wem: np.ndarray
    exempt_rows: np.ndarray
    exempt_cols: np.ndarray
    cost_z: np.ndarray
    alpha: np.ndarray
    A: sparse.csr_matrix
    G: sparse.csr_matrix
    h_lo: np.ndarray
    h_up: np.ndarray
    w_upper: np.ndarray
    w_rows: sparse.csr_matrix
    w_lo: np.ndarray
    w_up: np.ndarray

    @property
    def n_rows(self) -> int:
        """Number of secrets (matrix rows) in the block."""
        return self.wem.shape[0]

    @property
    def n_z(self) -> int:
        """Number of exempt entries (LP variables besides ``w``)."""
        return len(self.exempt_rows)

    def assemble(self, z: np.ndarray, w: np.ndarray) -> np.ndarray:
        """The block's ``n x K`` matrix from exempt values ``z`` and weights ``w``."""
        Z = self.wem * np.maximum(w, 0.0)[None, :]
        Z[self.exempt_rows, self.exempt_cols] = np.maximum(z, 0.0)
        return Z

    def objective(self, z: np.ndarray, w: np.ndarray) -> float:
        """Block cost ``cost_z . z + alpha . w``."""
        return float(self.cost_z @ z + self.alpha @ w)


def em_log_normaliser(dist_xy: np.ndarray, epsilon: float) -> np.ndarray:
    """``log S_i = log sum_k exp(-eps d_ik / 2)`` per secret (the EM's row normaliser)."""
    return logsumexp(-0.5 * epsilon * dist_xy, axis=1)


def nearest_secrets_exempt(dist_xy: np.ndarray, r: int) -> np.ndarray:
    """Exempt mask: for each output, its ``r`` nearest secrets (COPT's ``I(y_k)``)."""
    n = dist_xy.shape[0]
    r = min(r, n)
    idx = np.argpartition(dist_xy, r - 1, axis=0)[:r] if r < n else np.arange(n)[:, None]
    mask = np.zeros(dist_xy.shape, dtype=bool)
    if r < n:
        mask[idx, np.arange(dist_xy.shape[1])[None, :]] = True
    else:
        mask[:] = True
    return mask


def build_block(
    dist_xx: np.ndarray,
    dist_xy: np.ndarray,
    cost: np.ndarray,
    exempt: np.ndarray,
    epsilon: float,
    *,
    pairs: np.ndarray | None = None,
    check_wem_pairs: bool = True,
    log_row_norm: np.ndarray | None = None,
) -> BlockLP:
    """Rows of one WEM+LP block.

    Parameters
    ----------
    dist_xx, dist_xy
        ``(n, n)`` and ``(n, K)`` distances in km as the LP sees them (true or reconstructed).
    cost
        ``(n, K)`` objective coefficients (``prior_i * c(x_i, y_k)``).
    exempt
        ``(n, K)`` bool, the exempt entries.
    epsilon
        Budget in 1/km used in the constraints.
    pairs
        ``(P, 2)`` secret pairs whose exempt-exempt constraints are imposed (chaining pairs of
        a metric); ``None`` imposes every pair.
    check_wem_pairs
        Check WEM-WEM pairs in these distances and fix ``w_k = 0`` where they fail
        (``O(n^2 K)``; skip only when the distances are a metric on X and Y together).
    log_row_norm
        ``(n,)`` logs of per-row divisors of the WEM factors (``em_log_normaliser`` gives the
        EM's, which makes the EM a feasible point); ``None``: the plain form.
    """
    n, K = dist_xy.shape
    if dist_xx.shape != (n, n) or cost.shape != (n, K) or exempt.shape != (n, K):
        raise InputError("build_block: dist_xx, dist_xy, cost and exempt shapes disagree")
    log_a = -0.5 * epsilon * dist_xy
    if log_row_norm is not None:
        if np.shape(log_row_norm) != (n,) or not np.all(np.isfinite(log_row_norm)):
            raise InputError("build_block: log_row_norm must be n finite numbers")
        log_a = log_a - np.asarray(log_row_norm, dtype=float)[:, None]
    wem = np.exp(log_a)
    rows, cols = np.nonzero(exempt)
    n_z = len(rows)
    cost_z = cost[rows, cols].astype(float)
    alpha = np.where(exempt, 0.0, cost * wem).sum(axis=0)

    A_parts, G_parts, lo_parts, up_parts = [], [], [], []
    n_row = 0

    # 1. Row sums: sum_exempt z + sum_WEM a w = 1.
    A_parts.append(sparse.csr_matrix((np.ones(n_z), (rows, np.arange(n_z))), shape=(n, n_z)))
    G_parts.append(sparse.csr_matrix(np.where(exempt, 0.0, -wem)))
    lo_parts.append(np.ones(n))
    up_parts.append(np.ones(n))
    n_row += n
    with np.errstate(divide="ignore"):
        w_upper = np.min(np.where(exempt, np.inf, 1.0 / wem), axis=0)

    # 2. Exempt entry against every WEM entry of its column: L w <= z <= U w.
    log_u, log_l = _wem_bounds(dist_xx, log_a, exempt, rows, cols, epsilon)
    # A bound U > e^MAX_LOG_GAIN would pass HiGHS's largest matrix value (passModel kError).
    # Capped there, z <= U w is only tighter (still private), and a point with z <= 1 <= U w,
    # such as the EM's (w = 1), stays feasible.
    log_u = np.where(np.isfinite(log_u), np.minimum(log_u, MAX_LOG_GAIN), log_u)
    has_wem = np.nonzero(np.isfinite(log_u))[0]
    for sel, log_b, lo, up in (
        (has_wem, log_u, -np.inf, 0.0),
        (has_wem, log_l, 0.0, np.inf),
    ):
        m = len(sel)
        r_idx = np.arange(m)
        A_parts.append(sparse.csr_matrix((np.ones(m), (r_idx, sel)), shape=(m, n_z)))
        G_parts.append(sparse.csr_matrix((np.exp(log_b[sel]), (r_idx, cols[sel])), shape=(m, K)))
        lo_parts.append(np.full(m, lo))
        up_parts.append(np.full(m, up))
        n_row += m

    # Necessary conditions on w alone (for Benders' master): a_i . w <= 1, and, for rows
    # whose exempt entries are all capped by z <= U w, (a_i + U_i) . w >= 1.
    wem_mass = np.where(exempt, 0.0, wem)
    capped = np.zeros((n, K))
    capped[rows[has_wem], cols[has_wem]] = np.exp(log_u[has_wem])
    free = np.bincount(rows, weights=~np.isfinite(log_u), minlength=n) > 0
    w_rows = sparse.vstack(
        [sparse.csr_matrix(wem_mass), sparse.csr_matrix(wem_mass[~free] + capped[~free])],
        format="csr",
    )
    w_lo = np.concatenate([np.full(n, -np.inf), np.ones(int((~free).sum()))])
    w_up = np.concatenate([np.ones(n), np.full(int((~free).sum()), np.inf)])

    # 3. Exempt-exempt pairs: z_ik - exp(eps d_ij) z_jk <= 0, both directions. Pairs with
    # eps d_ij > MAX_LOG_GAIN are left out as in the optimal LP (their gain would pass HiGHS's
    # largest matrix value: passModel kError); the release repairs and verifies every pair.
    zi, zj, dij = _exempt_pairs(exempt, rows, cols, dist_xx, pairs)
    kept = epsilon * dij <= MAX_LOG_GAIN
    zi, zj, dij = zi[kept], zj[kept], dij[kept]
    m = len(zi)
    if m:
        r_idx = np.arange(m)
        A_parts.append(
            sparse.csr_matrix(
                (
                    np.concatenate([np.ones(m), -np.exp(epsilon * dij)]),
                    (np.concatenate([r_idx, r_idx]), np.concatenate([zi, zj])),
                ),
                shape=(m, n_z),
            )
        )
        G_parts.append(sparse.csr_matrix((m, K)))
        lo_parts.append(np.full(m, -np.inf))
        up_parts.append(np.zeros(m))

    # 4. WEM-WEM pairs that fail in these distances force w_k = 0.
    if check_wem_pairs:
        w_upper = np.where(_wem_pairs_fail(dist_xx, log_a, exempt, epsilon), 0.0, w_upper)

    return BlockLP(
        wem=wem,
        exempt_rows=rows,
        exempt_cols=cols,
        cost_z=cost_z,
        alpha=alpha,
        A=sparse.vstack(A_parts, format="csr"),
        G=sparse.vstack(G_parts, format="csr"),
        h_lo=np.concatenate(lo_parts),
        h_up=np.concatenate(up_parts),
        w_upper=w_upper,
        w_rows=w_rows,
        w_lo=w_lo,
        w_up=w_up,
    )


def _wem_bounds(dist_xx, log_a, exempt, rows, cols, epsilon):
    """Log of ``U`` and ``L`` per exempt entry (``inf``/``-inf`` if its column has no WEM)."""
    log_u = np.empty(len(rows))
    log_l = np.empty(len(rows))
    for s in range(0, len(rows), _CHUNK):
        r, c = rows[s : s + _CHUNK], cols[s : s + _CHUNK]
        ed = epsilon * dist_xx[r]  # (chunk, n)
        la = log_a[:, c].T  # (chunk, n)
        wem_row = ~exempt[:, c].T
        log_u[s : s + _CHUNK] = np.min(np.where(wem_row, ed + la, np.inf), axis=1)
        log_l[s : s + _CHUNK] = np.max(np.where(wem_row, la - ed, -np.inf), axis=1)
    return log_u, log_l


def _exempt_pairs(exempt, rows, cols, dist_xx, pairs):
    """Ordered exempt-exempt pairs in the same column: (z index i, z index j, d_ij)."""
    n = exempt.shape[0]
    order = np.lexsort((rows, cols))
    c_sorted = cols[order]
    starts = np.flatnonzero(np.r_[True, c_sorted[1:] != c_sorted[:-1]])
    ends = np.r_[starts[1:], len(order)]
    counts = ends - starts
    allowed = None
    if pairs is not None:
        p = np.asarray(pairs, dtype=np.int64)
        allowed = np.unique(np.concatenate([p[:, 0] * n + p[:, 1], p[:, 1] * n + p[:, 0]]))
    out_i, out_j = [], []
    for size in np.unique(counts[counts >= 2]):
        grp = starts[counts == size]
        a, b = np.nonzero(~np.eye(size, dtype=bool))
        zi = order[grp[:, None] + a[None, :]].ravel()
        zj = order[grp[:, None] + b[None, :]].ravel()
        out_i.append(zi)
        out_j.append(zj)
    if not out_i:
        return np.empty(0, np.int64), np.empty(0, np.int64), np.empty(0)
    zi, zj = np.concatenate(out_i), np.concatenate(out_j)
    if allowed is not None:
        keep = np.isin(rows[zi] * n + rows[zj], allowed)
        zi, zj = zi[keep], zj[keep]
    return zi, zj, dist_xx[rows[zi], rows[zj]]


def _wem_pairs_fail(dist_xx, log_a, exempt, epsilon) -> np.ndarray:
    """Columns where some WEM-WEM pair breaks ``a_ik <= exp(eps d_ij) a_jk``."""
    n, K = log_a.shape
    fail = np.zeros(K, dtype=bool)
    ed = epsilon * dist_xx
    for i in range(n):
        gap = log_a[i][None, :] - log_a - ed[i][:, None]  # (n, K): log a_ik - log a_jk - eps d_ij
        tol = _WEM_RTOL * np.maximum(np.abs(log_a[i])[None, :], ed[i][:, None])
        bad = (gap > tol) & ~exempt[i][None, :] & ~exempt
        bad[i] = False
        fail |= bad.any(axis=0)
    return fail


@dataclass(frozen=True)
class WemSolution:
    """Solution of a WEM+LP over one or more blocks sharing ``w``."""

    w: np.ndarray
    z: list[np.ndarray]
    objective: float
    info: dict


def solve_direct(
    blocks: list[BlockLP],
    *,
    time_limit_s: float | None = None,
) -> WemSolution:
    """Solve the integrated WEM+LP (all blocks and ``w`` at once) with HiGHS.

    Raises ``SolverError`` when HiGHS does not report an optimum.
    """
    if not blocks:
        raise InputError("solve_direct: need at least one block")
    K = blocks[0].wem.shape[1]
    start = time.perf_counter()
    sizes = [b.n_z for b in blocks]
    A = sparse.bmat(
        [
            [-b.G, *(b.A if j == m else None for j in range(len(blocks)))]
            for m, b in enumerate(blocks)
        ],
        format="csr",
    )
    cost = np.concatenate([sum(b.alpha for b in blocks)] + [b.cost_z for b in blocks])
    w_upper = np.min([b.w_upper for b in blocks], axis=0)
    upper = np.concatenate([w_upper, np.full(sum(sizes), np.inf)])
    lp = HighsLP(
        cost,
        A,
        np.concatenate([b.h_lo for b in blocks]),
        np.concatenate([b.h_up for b in blocks]),
        col_upper=upper,
        options=wem_options(time_limit_s=time_limit_s),
        name="WEM+LP (direct)",
    )
    try:
        res = lp.solve()
    except SolverError:
        # HiGHS's presolve misjudges some of these badly scaled LPs (gains up to 1e9, WEM
        # factors down to 1e-13): 'Infeasible' on COPT's LP, whose EM point is feasible
        # (tests/sim/test_scenario_runs.py found it). The same LP again without presolve; a
        # truly infeasible one fails again, with that solve's status.
        lp.set_option("presolve", "off")
        lp.clear_basis()
        res = lp.solve()
    x = res.x
    w = x[:K]
    offsets = np.cumsum([K] + sizes)
    z = [x[offsets[m] : offsets[m + 1]] for m in range(len(blocks))]
    info = {
        "lp_seconds": time.perf_counter() - start,
        "lp_variables": len(cost),
        "lp_constraints": A.shape[0],
        "lp_status": res.status,
    }
    return WemSolution(w=w, z=z, objective=res.objective, info=info)


def wem_options(*, time_limit_s: float | None = None) -> HighsOptions:
    """HiGHS settings of the WEM+LP models (direct and Benders): tolerances 1e-9.

    ``threads`` stays unset: HiGHS's thread pool is process-global, and an instance asking
    for a different count than the pool was started with fails to run (status "Not Set"),
    e.g. COPT after the optimal LP in one process.
    """
    return HighsOptions(
        time_limit_s=time_limit_s,
        primal_feasibility_tolerance=1e-9,
        dual_feasibility_tolerance=1e-9,
    )


def released_matrix(
    Z: np.ndarray,
    dist: np.ndarray,
    epsilon: float,
    *,
    pairs: np.ndarray,
    margin: float,
    who: str,
    max_rounds: int = 5,
) -> tuple[np.ndarray, dict]:
    """A WEM+LP matrix made exactly ``epsilon``-mDP under ``dist`` and verified (fail closed).

    The LP ran at ``eps' = epsilon * (1 - margin)``. Rows are normalised, released as they
    are if they verify, else repaired by :func:`~mdpsim.mechanisms.lp.repair.release_verified`
    (``max_rounds`` envelope rounds per margin on the chaining ``pairs``, then the margin
    doubles). Returns the matrix and its ``info_`` entries.
    """
    Z = np.maximum(np.asarray(Z, dtype=float), 0.0)
    Z = Z / Z.sum(axis=1, keepdims=True)
    released = release_verified(
        Z,
        dist,
        epsilon,
        margin=margin,
        pairs=np.asarray(pairs, dtype=np.int64).reshape(-1, 2),
        rounds_per_margin=max_rounds,
        check_first=True,
        who=who,
    )
    return released.matrix, released.info
