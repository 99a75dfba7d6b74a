"""A certified lower bound on the optimal LP from prices and per-output flows (docs/lp.md).

The optimal eps-mDP LP ``min sum_iy c[i,y] Z[i,y]`` (``c = pi_i d(x_i, y)``, row sums 1,
``Z[s,y] <= g Z[t,y]`` on the constraint pairs, ``g = e^{eps d(s,t)}``) has, for ANY flows
``f_y >= 0`` on the directed pairs of each output y, the lower bound

    ``B(f) = sum_i min_y (c[i,y] + a_y[i])``,  ``a_y[i] = sum_{s=i} f_y - sum_{t=i} g f_y``

(the argument of ``medoids.certified_bound`` with one group per output: for the optimum
``Z*``, ``sum_i a_y[i] Z*[i,y] <= 0`` for each y, and each row of ``Z*`` is a probability
vector). Nothing about the flows is assumed beyond ``f >= 0``, so no solver tolerance enters.

Where the flows come from (:func:`price_certificate`): prices ``u`` say what each secret should
be able to pay. The first are :func:`ray_prices`: the largest prices below the mechanism's own
LP duals (those of a restricted LP, too high: its loss is above the optimum) at which no
output's Laplace ray ``exp(-eps d(., y))`` has a negative reduced cost (a condition every
dual-feasible price meets, and one cheap LP over N prices and |Y| rays). For each output
y, one small LP finds the flows that cover the "deficits" ``u_i - c[i,y] > 0`` as far as the
constraints allow (``min sum_i s_i`` subject to ``c[i,y] - u_i + a_y[i] + s_i >= 0``,
``f, s >= 0``). With the exact LP's duals every deficit is covered and ``B`` is the optimum;
with a restricted LP's duals (too high: that LP's loss is above the optimum) deficits stay,
so each round after the first aims at ``(u + b) / 2``, ``b_i = min_y (c[i,y] + a_y[i])`` of
the last round. The per-output LPs differ only in their row bounds, so one HiGHS model is
re-solved warm (dual simplex) along a chain of nearby outputs.
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass

import numpy as np
from scipy import sparse

from mdpsim.errors import SolverError
from mdpsim.mechanisms.lp.highs import HighsLP, HighsOptions
from mdpsim.mechanisms.lp.solver import DUAL_SIMPLEX, directed_constraints, simplex_options

# The computed gain exp(eps d) may be below the real one by a few ulps (exp, and eps d itself
# rounded); a larger gain only makes the certificate more conservative (docs/lp.md).
_GAIN_SAFETY = 1 + 64 * 2.0**-53
_RETRY = ("Solve error", "Unknown")  # a warm basis in numerical trouble: solved again cold
_RAY_FLOOR = 1e-12  # ray entries left out of the ray-price LP (a heuristic; docs/lp.md)


@dataclass(frozen=True)
class LowerBound:
    """A certified lower bound on the optimal LP's loss (km) and how it was obtained.

    ``value`` is the certified bound; ``relaxation`` the objective of what it certifies (the
    relaxation's as HiGHS reports it, or the prices' sum for :func:`price_certificate`;
    reported, never used as the bound); ``rounds``, ``constraints`` (directed constraint
    pairs with a flow), ``variables`` (of the LP, or of each per-output LP) and ``seconds``.
    """

    value: float
    relaxation: float
    rounds: int
    constraints: int
    variables: int
    seconds: float


def price_certificate(
    prior: np.ndarray,
    dist_xy: np.ndarray,
    dist_xx: np.ndarray,
    pairs: np.ndarray,
    epsilon: float,
    prices: np.ndarray,
    *,
    rounds: int,
    options: HighsOptions | None = None,
) -> LowerBound:
    """The certified bound ``B(f)`` of the module docstring from ``rounds`` rounds of flows.

    ``prices`` (N) start the first round (e.g. :func:`ray_prices`; any values give a valid
    bound, good ones a tight one). Returns the largest certified bound of the rounds. A
    per-output LP that is not solved to optimality (after one cold retry) raises
    ``SolverError``.
    """
    start = time.perf_counter()
    n, k = dist_xy.shape
    prior = np.asarray(prior, dtype=np.float64)
    src, dst, gain = directed_constraints(pairs, dist_xx[pairs[:, 0], pairs[:, 1]], epsilon)
    m = len(src)
    flows_to = sparse.csc_array(
        (
            np.concatenate([np.ones(m), -gain * _GAIN_SAFETY]),
            (np.concatenate([src, dst]), np.concatenate([np.arange(m), np.arange(m)])),
        ),
        shape=(n, m),
    )
    magnitude = abs(flows_to)
    terms = int(np.bincount(np.concatenate([src, dst]), minlength=n).max(initial=0))
    lp = HighsLP(
        np.concatenate([np.zeros(m), np.ones(n)]),
        sparse.hstack([flows_to, sparse.eye(n)]),
        0.0,
        np.inf,
        options=dataclasses.replace(
            simplex_options(options), extra={"simplex_strategy": DUAL_SIMPLEX}
        ),
        name="lp_medoids price certificate",
    )
    order = _output_chain(dist_xy, dist_xx)
    target = np.asarray(prices, dtype=np.float64)
    value, relaxation, used = -np.inf, np.nan, 0
    for _ in range(rounds):
        best = np.full(n, np.inf)
        error = np.zeros(n)  # rounding allowance of each secret's best entry (see below)
        with_flow = np.zeros(m, dtype=bool)
        for y in order:
            cost = prior * dist_xy[:, y]
            lp.set_row_bounds(target - cost, np.inf)
            flow = np.maximum(_solve(lp).x[:m], 0.0)
            with_flow |= flow > 0
            entry = cost + flows_to @ flow
            np.minimum(best, entry, out=best)
            # each entry: a sum of at most terms + 1 values, error <= (terms + 2) 2^-53 sum|.|
            np.maximum(error, cost + magnitude @ flow, out=error)
        bound = float(best.sum()) - (terms + n + 4) * 2.0**-53 * float((np.abs(best) + error).sum())
        if bound > value:
            value, relaxation, used = bound, float(target.sum()), int(with_flow.sum())
        target = 0.5 * (target + best)
    return LowerBound(
        value=value,
        relaxation=relaxation,
        rounds=rounds,
        constraints=used,
        variables=m + n,
        seconds=time.perf_counter() - start,
    )


def ray_prices(
    prior: np.ndarray,
    dist_xy: np.ndarray,
    epsilon: float,
    cap: np.ndarray,
    *,
    options: HighsOptions | None = None,
) -> np.ndarray:
    """``argmax sum u`` subject to ``u <= cap`` and ``sum_i (pi_i d(x_i, y) - u_i)
    exp(-eps d(x_i, y)) >= 0`` for every output y (its Laplace ray's reduced cost).

    A heuristic for the certificate's first prices (it never enters the bound's validity):
    ray entries below ``_RAY_FLOOR`` are left out of this LP. ``cap``: e.g. the row-sum duals
    of the mechanism's own LP. Raises ``SolverError`` if HiGHS does not reach an optimum.
    """
    rays = np.exp(-epsilon * dist_xy)
    reduced = np.einsum("ik,ik->k", prior[:, None] * dist_xy, rays)
    rays[rays < _RAY_FLOOR] = 0.0
    lp = HighsLP(
        -np.ones(dist_xy.shape[0]),
        sparse.csr_array(rays.T),
        -np.inf,
        reduced,
        col_lower=-np.inf,
        col_upper=np.asarray(cap, dtype=np.float64),
        options=dataclasses.replace(options or HighsOptions(), solver="ipm"),
        name="lp_medoids ray prices",
    )
    return lp.solve().x


def _solve(lp: HighsLP):
    try:
        return lp.solve()
    except SolverError as err:
        if not any(f"'{s}'" in str(err) for s in _RETRY):
            raise
        lp.clear_basis()
        return lp.solve()


def _output_chain(dist_xy: np.ndarray, dist_xx: np.ndarray) -> np.ndarray:
    """The outputs in a nearest-neighbour chain (by their nearest secrets), so that each
    per-output LP starts from the basis of a nearby output's."""
    near = np.argmin(dist_xy, axis=0)
    k = len(near)
    left = np.ones(k, dtype=bool)
    chain = np.empty(k, dtype=np.int64)
    chain[0] = 0
    left[0] = False
    for pos in range(1, k):
        d = np.where(left, dist_xx[near[chain[pos - 1]], near], np.inf)
        chain[pos] = int(np.argmin(d))
        left[chain[pos]] = False
    return chain
