"""Constraint and output generation of the optimal LP: same optimum as the full LP, exact
output pricing, warm starts, envelope parents, HiGHS model edits."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import sparse
from scipy.optimize import linprog

from mdpsim.errors import SolverError
from mdpsim.geo.domain import Domain
from mdpsim.mechanisms.lp.highs import HighsLP, HighsOptions
from mdpsim.mechanisms.lp.outputs import ConePricer, laplace_rays, tight_constraints
from mdpsim.mechanisms.lp.repair import envelope_parents, lipschitz_envelope
from mdpsim.mechanisms.lp.solver import directed_constraints, solve_optimal


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
def road_24(walk_domain):
    return walk_domain(24, 3)


@pytest.fixture(scope="module")
def l2_24(walk_domain):
    return walk_domain(24, 3, "l2")


@pytest.fixture(scope="module")
def l2_skewed():
    rng = np.random.default_rng(7)
    xy = rng.uniform(0, 2000, (25, 2))
    prior = rng.dirichlet(np.ones(25))
    return Domain.from_points(xy, metric="l2", prior=prior)


@pytest.fixture(scope="module")
def road_40_coarse_y(walk_domain):
    """40 secrets, 15 outputs that are not secrets (K != N, Y not in X)."""
    return walk_domain(40, 5, n_outputs=15)


@pytest.mark.parametrize(
    ("which", "eps"),
    [
        ("road_24", 0.5),
        ("road_24", 4.0),
        ("road_24", 10.0),
        ("l2_24", 1.0),
        ("l2_24", 4.0),
        ("l2_skewed", 7.0),
        pytest.param("road_domain_small", 2.0, marks=pytest.mark.slow),
        pytest.param("road_domain_small", 4.0, marks=pytest.mark.slow),
        ("road_40_coarse_y", 3.0),
    ],
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
    assert sol.outputs <= domain.n_y


def test_unused_outputs_stay_out_of_the_model_and_are_priced(road_domain_small):
    Z, sol = _solve(road_domain_small, 2.0)
    used = int(np.sum(Z.max(axis=0) > 1e-9))
    assert used <= sol.outputs < road_domain_small.n_y  # the model never held every output
    assert sol.priced > 0  # the outputs left out were priced exactly, not assumed away


def _pricing_lp(domain, eps, w):
    """min w.z over the cone of the chaining constraints with sum z = 1 (scipy's HiGHS)."""
    pairs = domain.constraint_pairs
    src, dst, gain = directed_constraints(pairs, domain.dist_xx[pairs[:, 0], pairs[:, 1]], eps)
    m, n = len(src), domain.n_x
    A = sparse.csr_array(
        (
            np.concatenate([np.ones(m), -gain]),
            (np.tile(np.arange(m), 2), np.concatenate([src, dst])),
        ),
        shape=(m, n),
    )
    res = linprog(w, A_ub=A, b_ub=np.zeros(m), A_eq=np.ones((1, n)), b_eq=[1.0], method="highs")
    assert res.status == 0
    return res.fun


def test_cone_pricer_matches_a_direct_lp_and_skips_only_when_proven(l2_skewed):
    eps = 3.0
    pairs = l2_skewed.constraint_pairs
    src, dst, gain = directed_constraints(pairs, l2_skewed.dist_xx[pairs[:, 0], pairs[:, 1]], eps)
    cost = l2_skewed.prior[:, None] * l2_skewed.dist_xy
    pricer = ConePricer(cost, src, dst, gain, HighsOptions(solver="simplex"))
    rng = np.random.default_rng(1)
    outputs = np.array([0, 3, 11, 20])
    for _ in range(3):
        u = rng.uniform(0, 2 * cost.max(), cost.shape[0])
        rc, rays = pricer.reduced_costs(outputs, u, 1e-9)
        for pos, k in enumerate(outputs):
            direct = _pricing_lp(l2_skewed, eps, cost[:, k] - u)
            assert rc[pos] == pytest.approx(direct, abs=1e-9)
            z = rays[:, pos]
            assert z.sum() == pytest.approx(1.0) and z.min() >= 0
            assert np.max(z[src] - gain * z[dst]) <= 1e-9  # the ray is in the cone
            assert (cost[:, k] - u) @ z == pytest.approx(rc[pos], abs=1e-9)
    solves = pricer.solves
    u_lower = u - 1.0  # every reduced cost rises: bound proves them without a solve
    rc_lower, _ = pricer.reduced_costs(outputs, u_lower, 1e-9)
    assert pricer.solves == solves and np.all(np.isinf(rc_lower))


def test_laplace_rays_lie_in_the_cone_and_their_tight_constraints_hold_with_equality(road_24):
    eps = 4.0
    pairs = road_24.constraint_pairs
    dist = road_24.dist_xx[pairs[:, 0], pairs[:, 1]]
    rays = laplace_rays(pairs, dist, road_24.n_x, eps)
    np.testing.assert_allclose(rays.sum(axis=0), 1.0)
    src, dst, gain = directed_constraints(pairs, dist, eps)
    assert np.max(rays[src] - gain[:, None] * rays[dst]) <= 1e-12
    tight = tight_constraints(rays[:, 5], src, dst, gain)
    assert len(tight) >= road_24.n_x - 1  # a shortest-path tree from secret 5
    np.testing.assert_allclose(rays[src[tight], 5], gain[tight] * rays[dst[tight], 5], rtol=1e-9)


def test_deleting_basic_rows_and_nonbasic_columns_keeps_the_basis():
    # max x + y  s.t.  x <= 1, y <= 2, x + y <= 10 (slack basic), z column unused
    A = sparse.csc_array(np.array([[1.0, 0, 1], [0, 1.0, 1], [1.0, 1.0, 0]]))
    lp = HighsLP(np.array([1.0, 1.0, -1.0]), A, -np.inf, [1.0, 2.0, 10.0], sense="max")
    assert lp.solve().objective == pytest.approx(3.0)
    lp.delete(rows=[2], cols=[2])
    again = lp.solve()
    assert again.objective == pytest.approx(3.0)
    assert again.iterations == 0
    lp.add_rows(-np.inf, [2.5], sparse.csr_array(np.array([[1.0, 1.0]])))
    assert lp.solve().objective == pytest.approx(2.5)
    lp.set_row_bounds(-np.inf, [1.0, 1.0, 5.0])
    assert lp.solve().objective == pytest.approx(2.0)


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
        _solve(road_24, 4.0, options=HighsOptions(time_limit_s=1e-3))


def test_a_solve_error_in_the_warm_basis_is_retried_once_from_scratch(road_24, monkeypatch):
    _, clean = _solve(road_24, 4.0)
    real = HighsLP.solve
    calls = {"n": 0, "cleared": 0}
    real_clear = HighsLP.clear_basis

    def flaky(self, **kw):
        calls["n"] += 1
        if calls["n"] == 3:
            raise SolverError("HiGHS stopped with model status 'Solve error' (planted)")
        return real(self, **kw)

    def clear(self):
        calls["cleared"] += 1
        real_clear(self)

    monkeypatch.setattr(HighsLP, "solve", flaky)
    monkeypatch.setattr(HighsLP, "clear_basis", clear)
    _, sol = _solve(road_24, 4.0)
    assert calls["cleared"] == 1
    assert sol.objective == pytest.approx(clean.objective, rel=1e-9)

    def broken(self, **kw):
        raise SolverError("HiGHS stopped with model status 'Solve error' (planted)")

    monkeypatch.setattr(HighsLP, "solve", broken)
    with pytest.raises(SolverError, match="Solve error"):
        _solve(road_24, 4.0)
