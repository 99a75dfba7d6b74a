"""The anchor LP: optimal anchor rows under per-axis log-ratio bounds, solved with HiGHS.

Variables ``P[a, k]`` (anchor a, output k). Constraints: rows sum to 1, and on every x-edge
``(a, b)`` and output k, ``P[b,k] <= e^delta_1 P[a,k]`` and ``P[a,k] <= e^delta_1 P[b,k]``
(``delta_2`` on y-edges). Objective: a linear surrogate of the utility loss on the secrets,
``sum_{a,k} C[a,k] P[a,k]`` with ``C[a,k] = sum_i pi_i w_ia c(x_i, y_k)`` and ``w_ia`` the
bilinear weight of anchor a at secret i (docs/interp.md).

The solver satisfies constraints only up to its feasibility tolerance, which is an absolute
slack and would break ratios of small probabilities. The rows are therefore repaired in log
space (the smallest per-column majorant that is exactly ``delta``-Lipschitz on the grid) and
renormalised; the realised log-ratio bounds are measured and must stay within the targets.
The deltas of the LP sit a margin below the targets, ``FIRST_MARGIN`` (1e-6) first; only when
the repaired rows miss a target is the LP solved again at the next margin (tenfold, up to 1/2,
where the repair alone meets the targets: ``repair.next_margin``, docs/lp.md).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import sparse

from mdpsim.errors import SolverError
from mdpsim.mechanisms.interp.grid import AnchorGrid
from mdpsim.mechanisms.lp.highs import HighsLP, HighsOptions
from mdpsim.mechanisms.lp.repair import FIRST_MARGIN, MAX_MARGIN, next_margin


@dataclass(frozen=True)
class AnchorSolution:
    """Anchor rows and what the solve realised."""

    log_rows: np.ndarray  # (A, K_support) finite log-probabilities
    support: np.ndarray  # (K,) bool: outputs with positive probability
    objective: float  # surrogate loss of the repaired rows, km
    delta_x: float  # realised max |log-ratio| on x-edges
    delta_y: float
    status: str
    margin: float  # the LP ran at deltas (1 - margin)


def solve_anchor_lp(
    grid: AnchorGrid, cost: np.ndarray, *, delta_x: float, delta_y: float
) -> AnchorSolution:
    """Solve the anchor LP for an ``(A, K)`` cost and per-edge bounds; repair; check.

    The LP runs at ``deltas (1 - margin)``, margin ``FIRST_MARGIN`` first and the next one
    (tenfold) while the repaired rows miss a bound; raises ``SolverError`` if they still do
    at ``MAX_MARGIN``.
    """
    n_a, k = cost.shape
    ex, ey = grid.edges()
    margin = FIRST_MARGIN
    while True:
        dx, dy = delta_x * (1 - margin), delta_y * (1 - margin)
        A, lower, upper = _constraints(n_a, k, ex, ey, dx, dy)
        # Interior point without crossover: several times faster than simplex on these
        # degenerate LPs, and the repair below does not need a vertex.
        options = HighsOptions(solver="ipm", extra={"run_crossover": "off"})
        lp = HighsLP(cost.ravel(), A, lower, upper, col_upper=1.0, options=options)
        solution = lp.solve()  # raises SolverError unless optimal
        P = np.asarray(solution.x, dtype=float).reshape(n_a, k)
        log_rows, support = _repair(grid, P, dx, dy)
        real_x = _max_edge_ratio(log_rows, ex)
        real_y = _max_edge_ratio(log_rows, ey)
        if real_x <= delta_x and real_y <= delta_y:
            break
        if margin >= MAX_MARGIN:
            raise SolverError(
                f"anchor LP: repaired rows reach log-ratios {real_x:.12g} (x) and "
                f"{real_y:.12g} (y) above the bounds {delta_x:.12g} and {delta_y:.12g} "
                f"at margin {margin:g}"
            )
        margin = next_margin(margin)
    objective = float((np.exp(log_rows) * cost[:, support]).sum())
    return AnchorSolution(log_rows, support, objective, real_x, real_y, solution.status, margin)


def _constraints(n_a, k, ex, ey, dx, dy):
    """Rows: ``n_a`` equalities (row sums), then ``P_head - e^delta P_tail <= 0`` per edge,
    direction and output. Returns the sparse matrix and the row bounds."""
    var = np.arange(n_a * k).reshape(n_a, k)
    heads, tails, factors = [], [], []
    for edges, delta in ((ex, dx), (ey, dy)):
        if len(edges):
            a, b = var[edges[:, 0]].ravel(), var[edges[:, 1]].ravel()
            heads += [b, a]
            tails += [a, b]
            factors += [np.full(2 * len(a), math.exp(delta))]
    head = np.concatenate(heads) if heads else np.empty(0, dtype=np.int64)
    tail = np.concatenate(tails) if tails else np.empty(0, dtype=np.int64)
    fac = np.concatenate(factors) if factors else np.empty(0)
    m = len(head)
    rows = np.concatenate([np.repeat(np.arange(n_a), k), n_a + np.arange(m), n_a + np.arange(m)])
    cols = np.concatenate([var.ravel(), head, tail])
    vals = np.concatenate([np.ones(n_a * k), np.ones(m), -fac])
    A = sparse.csr_array((vals, (rows, cols)), shape=(n_a + m, n_a * k))
    lower = np.concatenate([np.ones(n_a), np.full(m, -np.inf)])
    upper = np.concatenate([np.ones(n_a), np.zeros(m)])
    return A, lower, upper


def _repair(grid: AnchorGrid, P: np.ndarray, dx: float, dy: float):
    """Exactly Lipschitz log rows (per output, on the grid), renormalised; drop zero columns."""
    P = np.clip(P, 0.0, None)
    support = P.max(axis=0) > 0
    with np.errstate(divide="ignore"):
        L: np.ndarray = np.log(P[:, support]).reshape(grid.ny, grid.nx, -1)
    # Smallest majorant M >= L with |M[a] - M[b]| <= delta on grid edges: the max-plus
    # distance transform, separable for the weighted l1 grid metric.
    for axis, delta in ((1, dx), (0, dy)):
        n = L.shape[axis]
        for idx in range(1, n):
            _raise_slice(L, axis, idx, idx - 1, delta)
        for idx in range(n - 2, -1, -1):
            _raise_slice(L, axis, idx, idx + 1, delta)
    L = L.reshape(grid.n_anchors, -1)
    L -= L.max(axis=1, keepdims=True)
    L -= np.log(np.exp(L).sum(axis=1, keepdims=True))
    return L, support


def _raise_slice(L: np.ndarray, axis: int, idx: int, src: int, delta: float) -> None:
    cur = np.take(L, idx, axis=axis)
    new = np.maximum(cur, np.take(L, src, axis=axis) - delta)
    if axis == 0:
        L[idx] = new
    else:
        L[:, idx] = new


def _max_edge_ratio(log_rows: np.ndarray, edges: np.ndarray) -> float:
    if len(edges) == 0:
        return 0.0
    return float(np.abs(log_rows[edges[:, 1]] - log_rows[edges[:, 0]]).max())
