"""A warm start for the optimal LP from the same LP on nested subsets of the secrets.

The exact LP's cost is its number of generation rounds (docs/lp.md); a model seeded with the
right outputs and constraints needs few. ``coarse_to_fine_warm_start`` solves the optimal LP on a
farthest-point subset of ``N / sqrt(2)^j`` secrets (coarsest first, each secret's prior
mass moved to its nearest kept secret, all K outputs), lifts each solution to the next subset
and returns the lifted seeds for the full solve. Lift: the subset's columns placed on its
secrets (zero elsewhere), their upper Lipschitz envelope over the next subset's chaining pairs
(``repair.envelope_parents``), and the constraints that envelope meets with equality
(``outputs.tight_constraints``): the shape the lifted columns would have if they decayed
as fast as mDP allows away from the coarse secrets. The seeds only choose where the full
solve starts; its certificate (every constraint checked, every output priced) is unchanged.
"""

from __future__ import annotations

import dataclasses
import time

import numpy as np

from mdpsim.errors import SolverError
from mdpsim.geo.domain import farthest_points
from mdpsim.mechanisms.lp.highs import HighsOptions
from mdpsim.mechanisms.lp.outputs import tight_constraints
from mdpsim.mechanisms.lp.repair import envelope_parents
from mdpsim.mechanisms.lp.solver import FEASIBILITY_TOL, directed_constraints, solve_optimal

SUBSET_RATIO = float(np.sqrt(2.0))  # secrets per subset: N / ratio^j (docs/lp.md)
SMALLEST_SUBSET = 100  # no subset below this many secrets (N < 141: no subsets; no gain at 100)
_LIFT_RTOL = 1e-7  # tight on the envelope (computed in log space) to this relative error


def subset_sizes(n: int, smallest: int | None = None) -> list[int]:
    """Secrets per subset, coarsest first: ``round(n / ratio^j)`` for j >= 1, each >= smallest."""
    smallest = SMALLEST_SUBSET if smallest is None else smallest
    sizes = []
    size = n / SUBSET_RATIO
    while round(size) >= smallest:
        sizes.append(round(size))
        size /= SUBSET_RATIO
    return sizes[::-1]


def farthest_point_order(dist: np.ndarray, prior: np.ndarray, m: int) -> np.ndarray:
    """``m`` secrets, each the farthest from those before it (first: the prior's 1-median)."""
    return farthest_points(dist, int(np.argmin(dist @ prior)), m)


def coarse_to_fine_warm_start(
    domain,
    epsilon: float,
    *,
    options: HighsOptions | None = None,
    smallest: int | None = None,
) -> tuple[np.ndarray | None, list[int]]:
    """Seeds ``(M, 3)`` rows ``(i, j, k)`` for ``solve_optimal(warm=...)`` on ``domain``, and the
    subset sizes solved (coarsest first); ``(None, [])`` when ``domain`` is too small
    (``smallest`` defaults to ``SMALLEST_SUBSET``).

    Each subset is ``solve_optimal`` at ``epsilon`` on a sub-domain, seeded from the subset
    below; ``options.time_limit_s`` bounds all subsets together (``SolverError`` past it).
    """
    sizes = subset_sizes(domain.n_x, smallest)
    if not sizes:
        return None, []
    start = time.perf_counter()
    opts = options or HighsOptions()
    order = farthest_point_order(domain.dist_xx, domain.prior, sizes[-1])
    warm, Z = None, np.zeros((0, domain.n_y))
    for pos, m in enumerate(sizes):
        subset = _sub_domain(domain, order[:m])  # subset j's secrets come first in subset j+1
        if pos:
            warm = _lifted_seeds(Z, np.arange(sizes[pos - 1]), subset, epsilon)
        left = None
        if opts.time_limit_s is not None:
            left = opts.time_limit_s - (time.perf_counter() - start)
            if left <= 0:
                raise SolverError(
                    "HiGHS stopped with model status 'Time limit reached' in the coarse-to-fine "
                    f"warm start ({opts.time_limit_s:g} s limit)"
                )
        pairs = subset.constraint_pairs
        Z, _ = solve_optimal(
            subset.prior[:, None] * subset.dist_xy,
            pairs,
            subset.dist_xx[pairs[:, 0], pairs[:, 1]],
            epsilon,
            options=dataclasses.replace(opts, time_limit_s=left),
            warm=warm,
            dual_restarts=True,
        )
    return _lifted_seeds(Z, order[: sizes[-1]], domain, epsilon), sizes


def _sub_domain(domain, rows: np.ndarray):
    """The secrets ``rows`` with every secret's prior mass on its nearest one of them."""
    nearest = np.argmin(domain.dist_xx[:, rows], axis=1)
    prior = np.bincount(nearest, weights=domain.prior, minlength=len(rows))
    return domain.restrict(rows).with_prior(prior=prior)


def _lifted_seeds(Z: np.ndarray, placed: np.ndarray, subset, epsilon: float) -> np.ndarray:
    """The constraints tight on the envelope of ``Z``'s used columns placed at rows ``placed``."""
    used = np.flatnonzero(Z.sum(axis=0) > FEASIBILITY_TOL)
    lifted = np.zeros((subset.n_x, len(used)))
    lifted[placed] = Z[:, used]
    pairs = subset.constraint_pairs
    pair_dist = subset.dist_xx[pairs[:, 0], pairs[:, 1]]
    upper, _ = envelope_parents(lifted, pairs[:, 0], pairs[:, 1], epsilon * pair_dist)
    src, dst, gain = directed_constraints(pairs, pair_dist, epsilon)
    seeds = []
    for c, out in enumerate(used):
        tight = tight_constraints(upper[:, c], src, dst, gain, rtol=_LIFT_RTOL)
        seeds.append(np.column_stack([src[tight], dst[tight], np.full(len(tight), out)]))
    return np.concatenate(seeds)
