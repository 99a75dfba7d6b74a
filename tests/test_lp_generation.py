"""Constraint generation of the optimal LP: same optimum as the full LP, warm starts, parents."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import sparse
from scipy.optimize import linprog

from sim.domain import Domain
from sim.errors import SolverError
from sim.mechanisms.highs import HighsOptions
from sim.mechanisms.lp import directed_constraints, solve_optimal
from sim.mechanisms.repair import envelope_parents, lipschitz_envelope


def _full_lp_optimum(domain: Domain, eps: float) -> float:
    """Every chaining constraint of every output at once (sparse), scipy's HiGHS."""
    n, k = domain.n_x, domain.n_y
    pairs = domain.constraint_pairs
    src, dst, gain = directed_constraints(pairs, domain.dist_xx[pairs[:, 0], pairs[:, 1]], eps)
    m = len(src) * k
    out = np.tile(np.arange(k), len(src))
    rows = np.concatenate([np.arange(m), np.arange(m)])
    cols = np.concatenate([np.repeat(src, k) * k + out, np.repeat(dst, k) * k + out])
    vals = np.concatenate([np.ones(m), -np.repeat(gain, k)])
    A = sparse.csr_array((vals, (rows, cols)), shape=(m, n * k))
    A_eq = sparse.kron(sparse.eye(n), np.ones((1, k))).tocsr()
    c = (domain.prior[:, None] * domain.dist_xy).ravel()
    res = linprog(c, A_ub=A, b_ub=np.zeros(m), A_eq=A_eq, b_eq=np.ones(n), method="highs")
    assert res.status == 0
    return float(res.fun)


def _solve(domain: Domain, eps: float, **kw):
    pairs = domain.constraint_pairs
    weighted = domain.prior[:, None] * domain.dist_xy
    return solve_optimal(weighted, pairs, domain.dist_xx[pairs[:, 0], pairs[:, 1]], eps, **kw)


@pytest.fixture(scope="module")
def road_24(helsinki_walk):
    return Domain.from_network(helsinki_walk, n_points=24, seed=3)


@pytest.fixture(scope="module")
def l2_24(helsinki_walk):
    return Domain.from_network(helsinki_walk, n_points=24, seed=3, metric="l2")


@pytest.fixture(scope="module")
def l2_skewed():
    rng = np.random.default_rng(7)
    xy = rng.uniform(0, 2000, (25, 2))
    prior = rng.dirichlet(np.ones(25))
    return Domain.from_points(xy, metric="l2", prior=prior)


@pytest.mark.parametrize(
    ("which", "eps"),
    [("road_24", 0.5), ("road_24", 4.0), ("road_24", 10.0), ("l2_24", 4.0), ("l2_skewed", 7.0)],
)
def test_generation_reaches_the_full_lp_optimum(which, eps, request):
    domain = request.getfixturevalue(which)
    Z, sol = _solve(domain, eps)
    full = _full_lp_optimum(domain, eps)
    assert abs(sol.objective - full) <= 1e-7 * full
    weighted = domain.prior[:, None] * domain.dist_xy
    assert abs(float((weighted * Z).sum()) - full) <= 1e-7 * full
    np.testing.assert_allclose(Z.sum(axis=1), 1.0, atol=1e-9)
    assert Z.min() >= -1e-9
    pairs = domain.constraint_pairs
    src, dst, gain = directed_constraints(pairs, domain.dist_xx[pairs[:, 0], pairs[:, 1]], eps)
    assert np.max(Z[src] - gain[:, None] * Z[dst]) <= 1e-7  # the full set holds
    assert sol.status == "Optimal"
    assert sol.generated < sol.full


def test_warm_start_from_binding_constraints_keeps_the_optimum(road_24):
    _, first = _solve(road_24, 4.0)
    assert len(first.binding) > 0
    _, cold = _solve(road_24, 5.0)
    _, warm = _solve(road_24, 5.0, warm=first.binding)
    assert warm.objective == pytest.approx(cold.objective, rel=1e-9)
    assert warm.rounds <= cold.rounds
    _, again = _solve(road_24, 4.0, warm=first.binding)  # its own binding set: one round
    assert again.rounds == 1
    assert again.objective == pytest.approx(first.objective, rel=1e-9)


def test_warm_start_ignores_constraints_the_domain_does_not_have(road_24):
    _, cold = _solve(road_24, 4.0)
    foreign = np.array([[0, 0, 0], [0, 1, 10**6], [10**6, 0, 0]])
    _, warm = _solve(road_24, 4.0, warm=foreign)
    assert warm.objective == pytest.approx(cold.objective, rel=1e-9)


def test_envelope_parents_lie_on_the_path_that_attains_the_envelope(l2_skewed):
    rng = np.random.default_rng(0)
    Z = rng.uniform(0, 1, (l2_skewed.n_x, 6)) ** 8
    Z[rng.uniform(size=Z.shape) < 0.3] = 0.0
    eps = 3.0
    pairs = l2_skewed.constraint_pairs
    w = eps * l2_skewed.dist_xx[pairs[:, 0], pairs[:, 1]]
    U, parent = envelope_parents(Z, pairs[:, 0], pairs[:, 1], w)
    np.testing.assert_allclose(
        U, lipschitz_envelope(Z, l2_skewed.dist_xx, eps, pairs=pairs), rtol=1e-12
    )
    i, k = np.nonzero(parent >= 0)
    j = parent[i, k]
    np.testing.assert_allclose(U[i, k], U[j, k] * np.exp(-eps * l2_skewed.dist_xx[i, j]), rtol=1e-9)
    own = parent < 0
    np.testing.assert_allclose(U[own], Z[own], rtol=1e-12)


def test_time_limit_bounds_the_whole_generation_loop(road_24):
    with pytest.raises(SolverError, match="Time limit"):
        _solve(road_24, 4.0, options=HighsOptions(time_limit=1e-3))
