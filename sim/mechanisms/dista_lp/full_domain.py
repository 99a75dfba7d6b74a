"""An exactly ``eps``-mDP matrix over ALL of X, improved block by block from the EM.

DistA-LP's server optimises rows around a few places (the users' neighbourhoods as it
locates them, or tiles covering X). The released matrix must still be exactly ``eps``-mDP
for every pair of secrets of the domain, including rows nobody optimised. This module keeps
that invariant at every step:

1. start from the EM over X (exactly ``eps``-mDP);
2. re-optimise the rows of one block ``R`` with every other row fixed. Per row ``i`` of ``R``
   the ``near`` outputs (the ``n_near`` closest to some row of ``R``) are LP variables
   ``z_ik``; the other outputs keep the row's current shape scaled by one variable
   ``mu_i >= 0`` (``Z[i,k] = mu_i T_ik``: the far tail can shrink or grow as a whole);
3. constraints only on the domain's chaining pairs (``Domain.constraint_pairs``) that touch
   ``R``: inside ``R`` both directions for every near output and, for the tails, one row
   per ordered pair (``mu_i <= e^{eps d} min_k (T_jk / T_ik) mu_j``); across the boundary
   ``e^{-eps d} Z_jk <= Z_ik <= e^{eps d} Z_jk`` against the fixed neighbour ``j`` (column
   bounds). Chaining is exact: any pair's chain path has edges inside ``R`` (imposed),
   crossing edges (imposed) and edges outside ``R`` (untouched, already mDP);
4. the current rows are a feasible point (``z`` as now, ``mu = 1``), so the weighted loss
   ``sum_i q_i sum_k Z_ik c_ik`` never rises: the result is never worse than the EM for the
   weights ``q`` the server plans for.

The LPs run at ``eps (1 - margin)``; :func:`~mdpsim.mechanisms.lp.wem.released_matrix` then
absorbs the solver's round-off and the exact verifier certifies ``eps`` over all of X.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

import numpy as np
from scipy import sparse

from mdpsim.errors import InputError, SolverError
from mdpsim.mechanisms.lp.highs import HighsLP
from mdpsim.mechanisms.lp.repair import FIRST_MARGIN
from mdpsim.mechanisms.lp.wem import released_matrix, wem_options

_SLACK = 1e-8


def em_matrix(dist_xy: np.ndarray, epsilon: float) -> np.ndarray:
    """The exponential mechanism ``Z[i,k] ∝ exp(-eps d_ik / 2)`` (exactly ``eps``-mDP)."""
    log_z = -0.5 * epsilon * np.asarray(dist_xy, dtype=float)
    log_z -= log_z.max(axis=1, keepdims=True)
    Z = np.exp(log_z)
    return Z / Z.sum(axis=1, keepdims=True)


def tiles(points_xy: np.ndarray, size: int) -> list[np.ndarray]:
    """A partition of the secrets into cells of at most ``size`` (and more than ``size / 2``)
    by recursive median splits along the longer side; public (a function of X only)."""
    xy = np.asarray(points_xy, dtype=float)
    size = max(1, int(size))
    out, stack = [], [np.arange(len(xy))]
    while stack:
        idx = stack.pop()
        if len(idx) <= size:
            out.append(np.sort(idx))
            continue
        span = xy[idx].max(axis=0) - xy[idx].min(axis=0)
        order = idx[np.argsort(xy[idx, int(np.argmax(span))], kind="stable")]
        half = len(order) // 2
        stack += [order[half:], order[:half]]
    return out


class BlockImprover:
    """Re-optimises blocks of rows of an exactly mDP matrix (module docstring)."""

    def __init__(
        self,
        domain,
        epsilon: float,
        weights: np.ndarray,
        *,
        cost: np.ndarray | None = None,
        n_near: int = 30,
        start: np.ndarray | None = None,
    ) -> None:
        self.domain = domain
        self.eps = float(epsilon)
        self.cost = domain.dist_xy if cost is None else np.asarray(cost, dtype=float)
        q = np.asarray(weights, dtype=float)
        if q.shape != (domain.n_x,) or not np.all(np.isfinite(q)) or np.any(q < 0):
            raise InputError(f"weights must be {domain.n_x} finite numbers >= 0")
        self.q = q
        self.n_near = max(1, min(int(n_near), domain.n_y))
        self.Z = em_matrix(domain.dist_xy, self.eps) if start is None else np.array(start)
        pairs = np.asarray(domain.constraint_pairs, dtype=np.int64).reshape(-1, 2)
        self.pairs = np.concatenate([pairs, pairs[:, ::-1]])  # ordered, both directions
        order = np.argsort(self.pairs[:, 0], kind="stable")
        self.pairs = self.pairs[order]
        self.starts = np.searchsorted(self.pairs[:, 0], np.arange(domain.n_x + 1))
        self.lp_seconds = 0.0
        self.n_lps = 0
        self.n_skipped = 0

    def weighted_loss(self) -> float:
        """``sum_i q_i sum_k Z_ik c_ik`` of the current matrix."""
        return float(self.q @ np.einsum("ik,ik->i", self.Z, self.cost))

    def improve(self, rows: np.ndarray) -> None:
        """Re-optimise the rows ``rows`` (one block), every other row fixed.

        The LP's variables are ratios to the current values (``z_ik = r_ik Z_ik``, tails
        ``mu_i T_ik``), so HiGHS's absolute tolerances are relative ones on the entries.
        """
        R = np.unique(np.asarray(rows, dtype=np.int64))
        if not np.any(self.q[R] > 0):
            return
        dom, eps, Z = self.domain, self.eps, self.Z
        n, K = len(R), dom.n_y
        near_idx = np.argpartition(dom.dist_xy[R], self.n_near - 1, axis=1)[:, : self.n_near]
        C = np.unique(near_idx)
        far = np.ones(K, dtype=bool)
        far[C] = False
        nc = len(C)
        pos = np.full(dom.n_x, -1)
        pos[R] = np.arange(n)
        cur = Z[R][:, C]
        S = np.where(cur > 0, cur, 1.0)  # the ratios' scale: the current value (1 where 0)
        T = Z[R][:, far]  # current far tails (mu = 1 keeps them)
        log_s = np.log(S)
        with np.errstate(divide="ignore"):
            log_t = np.where(T > 0, np.log(np.where(T > 0, T, 1.0)), -np.inf)

        # Chaining pairs touching R: inside (both ends in R) and crossing (i in R, j outside).
        sel = np.concatenate([np.arange(self.starts[i], self.starts[i + 1]) for i in R])
        pi, pj = self.pairs[sel, 0], self.pairs[sel, 1]
        d = dom.dist_xx[pi, pj]
        inside = pos[pj] >= 0
        # Column bounds of the ratios from the fixed neighbours: e^{-eps d} Z_jk <= Z_ik <= ...
        lo, up = np.zeros((n, nc)), 1.0 / S
        has_far = bool(far.any())
        # No far outputs: mu multiplies nothing and stays 1.
        mu_lo, mu_up = (np.zeros(n), np.full(n, np.inf)) if has_far else (np.ones(n), np.ones(n))
        a, b, dc = pos[pi[~inside]], pj[~inside], d[~inside]
        if len(a):
            with np.errstate(divide="ignore"):
                log_zj = np.log(Z[b])
            near_ratio = log_zj[:, C] - log_s[a]  # log Z_jk - log Z_ik
            np.maximum.at(lo, a, np.exp(-eps * dc[:, None] + near_ratio))
            np.minimum.at(up, a, np.exp(eps * dc[:, None] + near_ratio))
            if has_far:
                pos_t = np.isfinite(log_t[a])  # only outputs where the tail is positive
                with np.errstate(invalid="ignore"):
                    far_ratio = log_zj[:, far] - log_t[a]
                lo_r = np.where(pos_t, far_ratio, -np.inf).max(axis=1)
                up_r = np.where(pos_t, far_ratio, np.inf).min(axis=1)
                np.minimum.at(mu_up, a, np.exp(eps * dc + up_r))
                np.maximum.at(mu_lo, a, np.exp(-eps * dc + lo_r))
        # The current point (all ratios 1) satisfies these up to round-off: _SLACK keeps it in.
        lo, mu_lo = lo * (1.0 - _SLACK), mu_lo * (1.0 - _SLACK)
        up, mu_up = up * (1.0 + _SLACK), mu_up * (1.0 + _SLACK)
        lo, mu_lo = np.minimum(lo, up), np.minimum(mu_lo, mu_up)

        # Variables: r (n * nc, row-major), then mu (n).
        nz = n * nc
        cost = np.concatenate(
            [(self.q[R, None] * self.cost[R][:, C] * S).ravel(),
             self.q[R] * np.einsum("ik,ik->i", T, self.cost[R][:, far])]
        )  # fmt: skip
        r_idx = np.repeat(np.arange(n), nc)
        parts = [
            sparse.csr_matrix(
                (
                    np.concatenate([S.ravel(), T.sum(axis=1)]),
                    (np.concatenate([r_idx, np.arange(n)]), np.arange(nz + n)),
                ),
                shape=(n, nz + n),
            )
        ]
        lo_rows, up_rows = [np.ones(n)], [np.ones(n)]
        ii, jj, di = pos[pi[inside]], pos[pj[inside]], d[inside]
        m = len(ii)
        if m:  # (inside pairs)
            # Near outputs: r_ik - e^{eps d} (Z_jk / Z_ik) r_jk <= 0 for every k in C.
            k = np.tile(np.arange(nc), m)
            e = np.repeat(np.arange(m * nc), 2)
            coef = np.exp(eps * di[:, None] + log_s[jj] - log_s[ii]).ravel() * (1.0 + _SLACK)
            cols = np.stack([ii.repeat(nc) * nc + k, jj.repeat(nc) * nc + k], axis=1).ravel()
            vals = np.stack([np.ones(m * nc), -coef], axis=1).ravel()
            parts.append(sparse.csr_matrix((vals, (e, cols)), shape=(m * nc, nz + n)))
            lo_rows.append(np.full(m * nc, -np.inf))
            up_rows.append(np.zeros(m * nc))
        if m and has_far:
            # Tails: mu_i - e^{eps d} min_k (T_jk / T_ik) mu_j <= 0.
            with np.errstate(invalid="ignore"):
                gap = np.where(np.isfinite(log_t[ii]), log_t[jj] - log_t[ii], np.inf)
            gap = gap.min(axis=1)
            keep = np.isfinite(gap) | (gap < 0)  # +inf: row i has no tail, nothing to bound
            ii, jj, di, gap = ii[keep], jj[keep], di[keep], gap[keep]
            m = len(ii)
            coef = np.exp(eps * di + gap) * (1.0 + _SLACK)
            e = np.repeat(np.arange(m), 2)
            cols = np.stack([nz + ii, nz + jj], axis=1).ravel()
            vals = np.stack([np.ones(m), -coef], axis=1).ravel()
            parts.append(sparse.csr_matrix((vals, (e, cols)), shape=(m, nz + n)))
            lo_rows.append(np.full(m, -np.inf))
            up_rows.append(np.zeros(m))
        A = sparse.vstack(parts, format="csr")
        bounds = (lo, up, mu_lo, mu_up, cost, A.data)
        if any(np.isnan(b).any() for b in bounds) or not np.all(np.isfinite(cost)):
            raise SolverError("DistA-LP block improvement: NaN in the LP data")
        t0 = time.perf_counter()
        try:
            res = HighsLP(
                cost,
                A,
                np.concatenate(lo_rows),
                np.concatenate(up_rows),
                col_lower=np.concatenate([lo.ravel(), mu_lo]),
                col_upper=np.concatenate([up.ravel(), mu_up]),
                options=wem_options(),
                name="DistA-LP block improvement",
            ).solve()
        except SolverError:  # round-off made the current point infeasible: keep it (counted)
            self.n_skipped += 1
            return
        finally:
            self.lp_seconds += time.perf_counter() - t0
            self.n_lps += 1
        x = np.maximum(res.x, 0.0)
        new = np.empty((n, K))
        new[:, C] = x[:nz].reshape(n, nc) * S
        new[:, far] = x[nz:, None] * T
        new /= new.sum(axis=1, keepdims=True)
        self.Z[R] = new


def release_full_domain(
    domain,
    epsilon: float,
    blocks: Sequence[np.ndarray],
    weights: np.ndarray,
    *,
    cost: np.ndarray | None = None,
    n_near: int = 30,
    sweeps: int = 1,
    margin: float = FIRST_MARGIN,
    who: str = "DistA-LP",
) -> tuple[np.ndarray, dict]:
    """The EM at ``eps (1 - margin)`` improved on ``blocks`` (``sweeps`` passes, in order),
    then lifted and verified exactly at ``epsilon`` over all of X (fail closed).

    Returns the ``N x K`` matrix and an info dict (weighted losses before and after, LP
    counts and seconds, and the release's repair record).
    """
    eps_lp = epsilon * (1.0 - margin)
    imp = BlockImprover(domain, eps_lp, weights, cost=cost, n_near=n_near)
    em_loss = imp.weighted_loss()
    for _ in range(int(sweeps)):
        for rows in blocks:
            imp.improve(rows)
    t0 = time.perf_counter()
    Z, lift = released_matrix(
        imp.Z, domain.dist_xx, epsilon, pairs=domain.constraint_pairs, margin=margin, who=who
    )
    info = {
        "planner_em_weighted_loss": em_loss,
        "planner_weighted_loss": imp.weighted_loss(),
        "planner_lps": imp.n_lps,
        "planner_lp_seconds": imp.lp_seconds,
        "planner_skipped_lps": imp.n_skipped,
        "release_seconds": time.perf_counter() - t0,
        **lift,
    }
    return Z, info
