"""The optimal mechanism (Bordenabe et al., CCS'14) as a sparse LP solved by HiGHS.

Variables ``Z[i,k]`` (row-major, ``i * K + k``); minimise ``sum_ik cost[i,k] Z[i,k]`` with
``cost = pi_i c(x_i, y_k)``, subject to row sums 1, ``Z >= 0`` and, for each constraint pair
``(i, j)`` of the domain (pairs whose constraints chain to all others, SPEC §1) and each
output k, ``Z[i,k] <= e^{eps d} Z[j,k]`` and ``Z[j,k] <= e^{eps d} Z[i,k]``. The matrix is
built directly in sparse form: ``2 P K`` rows with 2 entries each plus ``N`` row-sum rows.

Release (docs/lp.md): the LP is solved at ``eps (1 - margin)``, its solution repaired by the
Lipschitz envelope (sim/mechanisms/repair.py) and verified EXACTLY at ``eps``; if the check
fails the margin doubles (up to 1/2, where the repair is proven for any input) and the LP is
solved again, warm-started from the previous basis. A solver that does not reach optimality
raises :class:`~sim.errors.SolverError`; nothing unverified is released.
"""

from __future__ import annotations

import dataclasses

import numpy as np
from scipy import sparse

from sim.errors import InputError
from sim.mechanisms.base import Mechanism, check_epsilon, register
from sim.mechanisms.highs import HighsLP, HighsOptions, LPSolution
from sim.mechanisms.repair import SIDES, RepairResult, repair_verified
from sim.privacy.verify import PrivacyViolation

MAX_MARGIN = 0.5


MAX_LOG_GAIN = float(np.log(1e9))


def mdp_lp(weighted_cost: np.ndarray, pairs: np.ndarray, pair_dist_km: np.ndarray, epsilon: float):
    """Objective, sparse constraint matrix and row bounds of the optimal-mechanism LP.

    ``weighted_cost`` is N x K (``pi_i c(x_i, y_k)``), ``pairs`` (P, 2) with distances
    ``pair_dist_km`` (P,). Returns ``(c, A, row_lower, row_upper)`` with ``A`` in CSC form,
    ``2 P K + N`` rows: first the mDP rows (pair-major, both directions), then the row sums.

    Pairs with ``eps d > MAX_LOG_GAIN`` are left out: their gain ``e^{eps d}`` would pass
    HiGHS's largest matrix value, and their constraints bind only on probabilities below
    ``e^{-MAX_LOG_GAIN}`` (1e-9, the solver's own tolerance). The release step restores them
    exactly: the envelope repair runs over every chaining pair and the exact verifier checks.
    """
    n, k = weighted_cost.shape
    pair_dist_km = np.asarray(pair_dist_km, dtype=np.float64)
    kept = epsilon * pair_dist_km <= MAX_LOG_GAIN
    pairs, pair_dist_km = np.asarray(pairs)[kept], pair_dist_km[kept]
    p = len(pairs)
    gain = np.exp(epsilon * pair_dist_km)
    src = np.concatenate([pairs[:, 0], pairs[:, 1]])  # Z[src,k] - gain Z[dst,k] <= 0
    dst = np.concatenate([pairs[:, 1], pairs[:, 0]])
    outputs = np.arange(k)
    m = 2 * p * k
    rows = np.concatenate([np.arange(m), np.arange(m), m + np.repeat(np.arange(n), k)])
    cols = np.concatenate(
        [
            (src[:, None] * k + outputs).ravel(),
            (dst[:, None] * k + outputs).ravel(),
            np.arange(n * k),
        ]
    )
    vals = np.concatenate([np.ones(m), -np.repeat(np.concatenate([gain, gain]), k), np.ones(n * k)])
    A = sparse.csc_array((vals, (rows, cols)), shape=(m + n, n * k))
    row_lower = np.concatenate([np.full(m, -np.inf), np.ones(n)])
    row_upper = np.concatenate([np.zeros(m), np.ones(n)])
    return np.ascontiguousarray(weighted_cost, dtype=np.float64).ravel(), A, row_lower, row_upper


def solve_optimal(
    weighted_cost: np.ndarray,
    pairs: np.ndarray,
    pair_dist_km: np.ndarray,
    epsilon: float,
    *,
    options: HighsOptions | None = None,
    basis=None,
) -> tuple[np.ndarray, LPSolution]:
    """The raw LP optimum (NOT repaired, only eps-mDP up to the solver's tolerance).

    Returns the N x K matrix and the :class:`LPSolution`. With ``basis`` (from a model of the
    same shape) the dual simplex starts from it. Raises ``SolverError`` if not optimal.
    """
    n, k = weighted_cost.shape
    c, A, lo, hi = mdp_lp(weighted_cost, pairs, pair_dist_km, epsilon)
    opts = options or HighsOptions()
    if basis is not None:
        opts = dataclasses.replace(opts, solver="simplex")
    sol = HighsLP(c, A, lo, hi, options=opts).solve(basis=basis)
    return sol.x.reshape(n, k), sol


def release_optimal(
    weighted_cost: np.ndarray,
    dist_xx: np.ndarray,
    pairs: np.ndarray,
    epsilon: float,
    *,
    margin: float,
    side: str = "upper",
    options: HighsOptions | None = None,
    basis=None,
) -> tuple[RepairResult, LPSolution, float]:
    """Solve at ``eps (1 - margin)``, repair, verify at ``eps``; double the margin on failure.

    ``pairs`` must chain (``Domain.constraint_pairs``). Returns the verified repair result,
    the last LP solution and the margin that passed.
    """
    pair_dist = dist_xx[pairs[:, 0], pairs[:, 1]]
    theta = margin
    while True:
        raw, sol = solve_optimal(
            weighted_cost, pairs, pair_dist, epsilon * (1 - theta), options=options, basis=basis
        )
        try:
            result = repair_verified(raw, dist_xx, epsilon, margin=theta, pairs=pairs, side=side)
        except PrivacyViolation:
            if theta >= MAX_MARGIN:
                raise
            theta = min(2 * theta, MAX_MARGIN)
            basis = sol.basis
            continue
        return result, sol, theta


@register("lp")
class OptimalLP(Mechanism):
    """The optimal eps-mDP mechanism for the domain's prior and loss (an LP, HiGHS).

    Parameters
    ----------
    epsilon
        Budget per km.
    margin
        The LP is solved at ``epsilon (1 - margin)`` so the repaired matrix verifies at
        ``epsilon``; doubled on failure up to 1/2. Default 1e-3.
    side
        Envelope side of the repair, ``"upper"`` (default) or ``"lower"``.
    solver, time_limit, threads
        HiGHS algorithm (``"ipm"`` default, ``"simplex"``, ``"choose"``), wall-clock limit per
        solve in seconds, worker threads. Hitting the limit raises ``SolverError``.
    """

    def __init__(
        self,
        epsilon: float,
        *,
        margin: float = 1e-3,
        side: str = "upper",
        solver: str = "ipm",
        time_limit: float | None = None,
        threads: int | None = None,
    ) -> None:
        super().__init__(epsilon)
        if isinstance(margin, bool) or not isinstance(margin, (int, float)):
            raise InputError(f"margin={margin!r} must be a number in (0, {MAX_MARGIN}]")
        if not (0 < margin <= MAX_MARGIN):
            raise InputError(f"margin={margin!r} must be in (0, {MAX_MARGIN}]")
        if side not in SIDES:
            raise InputError(f"side={side!r} must be one of {', '.join(SIDES)}")
        self.margin = float(margin)
        self.side = side
        self.solver = solver
        self.time_limit = time_limit
        self.threads = threads
        self._options()  # validates solver, time_limit, threads

    def _options(self) -> HighsOptions:
        return HighsOptions(solver=self.solver, time_limit=self.time_limit, threads=self.threads)

    def _fit(self, domain) -> tuple[np.ndarray, dict]:
        basis = getattr(self, "warm_basis_", None)  # set by lp_path
        weighted = domain.prior[:, None] * domain.dist_xy
        result, sol, theta = release_optimal(
            weighted,
            domain.dist_xx,
            domain.constraint_pairs,
            self.epsilon,
            margin=self.margin,
            side=self.side,
            options=self._options(),
            basis=basis,
        )
        self.basis_ = sol.basis
        info = {
            "solver_status": sol.status,
            "lp_objective_km": sol.objective,
            "lp_epsilon": self.epsilon * (1 - theta),
            "margin_used": theta,
            "iterations": sol.iterations,
            "solve_seconds": sol.seconds,
            "warm_started": basis is not None,
            "lp_rows": 2 * len(domain.constraint_pairs) * domain.n_y + domain.n_x,
            "repair_max_change": result.max_change,
            "verified_smallest_epsilon": result.verification.smallest_epsilon,
        }
        return result.matrix, info


def lp_path(domain, epsilons, **params) -> list[OptimalLP]:
    """Fit ``OptimalLP`` at each budget in ``epsilons``, each warm-started from the last basis."""
    fitted, basis = [], None
    for eps in epsilons:
        mech = OptimalLP(check_epsilon(eps), **params)
        mech.warm_basis_ = basis
        mech.fit(domain)
        basis = mech.basis_
        fitted.append(mech)
    return fitted
