"""Which outputs the optimal LP needs: pricing an output against the row-sum duals.

The optimal LP couples its outputs only through the row sums: each column ``Z[:,k]`` lies in
the same cone ``C = {z >= 0 : z_a <= e^{eps d(a,b)} z_b}`` (the chaining constraints). With
row-sum duals ``u`` (from an LP over a subset of the outputs), output k can lower the
objective iff its *reduced cost*

    rc_k(u) = min { (cost[:,k] - u) . z  :  z in C, sum(z) = 1 }

is negative (docs/lp.md). :class:`ConePricer` computes it exactly (a small LP: N rows, one
column per directed constraint); :func:`laplace_rays` gives cheap members of C (Laplace
shapes ``e^{-eps d(., s)}``) whose reduced costs bound ``rc_k`` from above, so a negative one
proves output k attractive without an LP.
"""

from __future__ import annotations

import numpy as np
from scipy import sparse
from scipy.sparse import csgraph

from mdpsim.errors import SolverError
from mdpsim.mechanisms.lp.highs import HighsLP, HighsOptions


def laplace_rays(pairs: np.ndarray, pair_dist_km: np.ndarray, n: int, epsilon: float):
    """N x N matrix whose column s is ``e^{-eps d(., x_s)}`` normalised to sum 1.

    ``d`` is the shortest-path distance over the chaining pairs (the true distance when they
    chain). Each column is in C up to underflow; the rays are only heuristics (which outputs
    to add first), never part of a certificate.
    """
    graph = sparse.csr_array(
        (np.asarray(pair_dist_km, dtype=np.float64), (pairs[:, 0], pairs[:, 1])), shape=(n, n)
    )
    dist = csgraph.dijkstra(graph, directed=False)
    rays = np.exp(-epsilon * (dist - dist.min(axis=0)))  # min is 0; guards isolated points
    return rays / rays.sum(axis=0)


def tight_constraints(z: np.ndarray, src, dst, gain, *, rtol: float = 1e-9) -> np.ndarray:
    """Indices of the directed constraints ``z[src] <= gain z[dst]`` that ``z`` meets with
    equality (relative ``rtol``) on positive entries: the ones that shape ``z``."""
    return np.flatnonzero((z[dst] > 0) & (z[src] >= gain * z[dst] * (1 - rtol)))


class ConePricer:
    """Exact reduced costs ``rc_k(u)`` of outputs (module docstring), one HiGHS model for all.

    The pricing LP is solved in its dual form: maximise ``t`` subject to
    ``t - sum_{src=i} f + sum_{dst=i} gain f <= cost[i,k] - u_i`` (``f >= 0``), whose row
    duals are the minimising ``z``. Outputs differ only in the right-hand side, so any
    optimal basis is dual feasible for every output and u: each output restarts the dual
    simplex from its own last basis (or the last one solved). Outputs whose last reduced cost
    minus ``max(u - u_last)`` is still at least ``-tol`` are not re-solved: that difference
    is a lower bound on the new reduced cost (``sum z = 1``).

    ``weights`` (N positive numbers, default ones) changes the normalisation to
    ``weights . z = 1`` (the prior: the Lagrangian lower bound of ``lp_multilevel``); the
    skip bound is then ``max((u - u_last) / weights)``.
    """

    def __init__(
        self, cost: np.ndarray, src, dst, gain, options: HighsOptions, *, weights=None
    ) -> None:
        self.cost = cost
        n, k = cost.shape
        m = len(src)
        self.weights = np.ones(n) if weights is None else np.asarray(weights, dtype=np.float64)
        rows = np.concatenate([np.arange(n), src, dst])
        cols = np.concatenate([np.zeros(n, dtype=np.int64), 1 + np.arange(m), 1 + np.arange(m)])
        vals = np.concatenate([self.weights, -np.ones(m), gain])
        A = sparse.csc_array((vals, (rows, cols)), shape=(n, m + 1))
        c = np.zeros(m + 1)
        c[0] = 1.0
        lower = np.zeros(m + 1)
        lower[0] = -np.inf
        self.model = HighsLP(c, A, -np.inf, 0.0, col_lower=lower, sense="max", options=options)
        self.bases: dict[int, object] = {}
        self.last_u = np.full((k, n), np.nan)
        self.last_rc = np.full(k, -np.inf)
        self.solves = self.iterations = 0

    def reduced_costs(self, outputs: np.ndarray, u: np.ndarray, tol: float):
        """``(rc, rays)`` for ``outputs``; rc is ``+inf`` where the bound shows ``>= -tol``
        without a solve, rays (N x len) are the minimising z (zero where not solved)."""
        rc = np.full(len(outputs), np.inf)
        rays = np.zeros((len(u), len(outputs)))
        seen = ~np.isnan(self.last_u[outputs, 0])
        step = (u[None, :] - self.last_u[outputs]) / self.weights[None, :]
        bound = self.last_rc[outputs] - np.max(step, axis=1)
        for pos in np.flatnonzero(~(seen & (bound >= -tol))):
            k = int(outputs[pos])
            self.model.set_row_bounds(-np.inf, self.cost[:, k] - u)
            try:
                sol = self.model.solve(basis=self.bases.get(k))
            except SolverError:  # 'Unknown' from a warm basis (3 secrets, 40 outputs, eps 4)
                self.model.clear_basis()
                sol = self.model.solve()  # once more from scratch; a second failure raises
            self.bases[k] = sol.basis
            self.solves += 1
            self.iterations += sol.iterations
            rc[pos] = self.last_rc[k] = sol.objective
            self.last_u[k] = u
            z = np.maximum(sol.row_dual, 0.0)
            mass = self.weights @ z
            rays[:, pos] = z / mass if mass > 0 else z
        return rc, rays
