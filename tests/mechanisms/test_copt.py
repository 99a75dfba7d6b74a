"""COPT (WEM + LP): formulation against a naive all-pairs LP, exact release, bad params."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import sparse
from scipy.optimize import linprog

from mdpsim.errors import InputError, SolverError
from mdpsim.mechanisms import make
from mdpsim.mechanisms.copt import domain_block
from mdpsim.mechanisms.em import exponential_matrix
from mdpsim.mechanisms.lp.wem import (
    em_log_normaliser,
    nearest_secrets_exempt,
    solve_direct,
)
from mdpsim.privacy.verifier import verify


def _naive_wem_lp(domain, exempt, eps, log_norm=None):
    """Every entry a variable, every ordered pair constrained, WEM entries as equalities."""
    n, K = domain.n_x, domain.n_y
    log_norm = np.zeros(n) if log_norm is None else log_norm
    nv = n * K + K
    cost = np.concatenate([(domain.prior[:, None] * domain.dist_xy).ravel(), np.zeros(K)])
    r, c, v = [], [], []
    row = 0
    for k in range(K):
        for i in range(n):
            for j in range(n):
                if i != j:
                    r += [row, row]
                    c += [i * K + k, j * K + k]
                    v += [1.0, -np.exp(eps * domain.dist_xx[i, j])]
                    row += 1
    a_ub = sparse.csr_matrix((v, (r, c)), shape=(row, nv))
    r, c, v, b_eq = [], [], [], []
    for i in range(n):
        r += [len(b_eq)] * K
        c += [i * K + k for k in range(K)]
        v += [1.0] * K
        b_eq.append(1.0)
    for i, k in zip(*np.nonzero(~exempt), strict=True):
        r += [len(b_eq)] * 2
        c += [i * K + k, n * K + k]
        v += [1.0, -np.exp(-eps * domain.dist_xy[i, k] / 2 - log_norm[i])]
        b_eq.append(0.0)
    a_eq = sparse.csr_matrix((v, (r, c)), shape=(len(b_eq), nv))
    res = linprog(cost, A_ub=a_ub, b_ub=np.zeros(row), A_eq=a_eq, b_eq=b_eq, method="highs")
    assert res.status == 0
    return res.fun


@pytest.fixture(scope="module")
def tiny_road(road_domain_small):
    return road_domain_small.restrict(np.arange(0, 40, 2))


@pytest.mark.parametrize("em_form", [False, True])
@pytest.mark.parametrize("r", [3, 8])
def test_reduced_formulation_matches_naive_all_pairs_lp(tiny_road, r, em_form):
    eps = 4.0
    exempt = nearest_secrets_exempt(tiny_road.dist_xy, r)
    log_norm = em_log_normaliser(tiny_road.dist_xy, eps) if em_form else None
    block = domain_block(tiny_road, exempt, eps, em_form=em_form)
    assert solve_direct([block]).objective == pytest.approx(
        _naive_wem_lp(tiny_road, exempt, eps, log_norm), rel=1e-7
    )


@pytest.mark.parametrize("eps", [0.5, 4.0, 10.0])
def test_em_form_has_the_em_as_a_feasible_point(road_domain_small, eps):
    # w = 1 and every exempt entry at its EM value meets every row of the block.
    d = road_domain_small
    exempt = nearest_secrets_exempt(d.dist_xy, 4)
    block = domain_block(d, exempt, eps, em_form=True)
    em = exponential_matrix(d.dist_xy, eps)
    Az = block.A @ em[block.exempt_rows, block.exempt_cols]
    Gw = block.G @ np.ones(d.n_y)
    tol = 1e-12 * np.maximum(1.0, np.abs(Gw))
    assert np.all(Az >= block.h_lo + Gw - tol)
    assert np.all(Az <= block.h_up + Gw + tol)
    assert np.allclose(block.assemble(em[block.exempt_rows, block.exempt_cols], np.ones(d.n_y)), em)


@pytest.mark.parametrize("domain_name", ["road_domain_small", "l2_domain_small"])
def test_copt_release_passes_exact_verifier_and_beats_em(domain_name, request):
    domain = request.getfixturevalue(domain_name)
    mech = make("copt", epsilon=4.0, n_exempt=16).fit(domain)
    assert verify(mech.matrix_, domain.dist_xx, 4.0).passed
    em = make("em", epsilon=4.0).fit(domain)
    assert mech.expected_loss() < em.expected_loss()


def test_more_exempt_entries_never_hurt(road_domain_small):
    losses = [
        make("copt", epsilon=4.0, n_exempt=r).fit(road_domain_small).info_["lp_objective"]
        for r in (8, 16, 40)
    ]
    assert losses[0] >= losses[1] - 1e-9 >= losses[2] - 2e-9


def test_copt_all_exempt_is_the_optimal_lp(tiny_road):
    lp = _naive_wem_lp(tiny_road, np.ones((tiny_road.n_x, tiny_road.n_y), bool), 4.0)
    mech = make("copt", epsilon=4.0, n_exempt=tiny_road.n_x, margin=0.0).fit(tiny_road)
    assert mech.info_["lp_objective"] == pytest.approx(lp, rel=1e-6)


def test_infeasible_plain_wem_lp_raises_solver_error_with_hint(road_domain_small):
    with pytest.raises(SolverError, match="n_exempt=4.*infeasible.*wem_form"):
        make("copt", epsilon=0.5, n_exempt=4, wem_form="plain").fit(road_domain_small)


@pytest.mark.parametrize("eps", [0.5, 4.0, 10.0])
def test_em_form_is_feasible_where_plain_is_not_and_beats_em(road_domain_small, eps):
    mech = make("copt", epsilon=eps, n_exempt=4).fit(road_domain_small)
    assert mech.info_["lp_objective"] <= mech.info_["em_point_objective"] + 1e-9
    assert verify(mech.matrix_, road_domain_small.dist_xx, eps).passed
    assert mech.expected_loss() <= make("em", epsilon=eps).fit(road_domain_small).expected_loss()


@pytest.mark.parametrize(
    "params",
    [
        {"epsilon": 0.0},
        {"epsilon": 4.0, "n_exempt": 0},
        {"epsilon": 4.0, "wem_form": "normalised"},
        {"epsilon": 4.0, "margin": 0.7},
        {"epsilon": 4.0, "margin": -0.1},
        {"epsilon": 4.0, "time_limit_s": 0},
    ],
)
def test_copt_rejects_bad_parameters(params):
    with pytest.raises(InputError):
        make("copt", **params)


def test_copt_solves_after_the_optimal_lp_in_the_same_process(helsinki_walk):
    # HiGHS's thread pool is process-global: mismatched "threads" options made COPT fail
    # with status "Not Set" once the optimal LP had run first.
    from mdpsim.geo.domain import Domain

    domain = Domain.from_network(helsinki_walk, n_points=15, seed=2)
    make("lp", epsilon=4.0).fit(domain)
    mech = make("copt", epsilon=4.0, n_exempt=15).fit(domain)
    assert mech.info_["verified_epsilon"] <= 4.0 * (1 + 1e-9)


@pytest.mark.slow
def test_copt_is_feasible_on_a_200_point_helsinki_road_domain(helsinki_walk):
    # The plain form is infeasible here (SolverError); the EM-normalised form solves. HiGHS
    # 1.16 reports the infeasible plain LP as model status 'Unknown' (earlier: 'Infeasible').
    from mdpsim.geo.domain import Domain

    domain = Domain.from_network(helsinki_walk, n_points=200, metric="road", seed=0)
    with pytest.raises(SolverError, match="Infeasible|'Unknown'.*infeasible plain WEM"):
        make("copt", epsilon=4.0, wem_form="plain").fit(domain)
    mech = make("copt", epsilon=4.0).fit(domain)
    assert verify(mech.matrix_, domain.dist_xx, 4.0).passed
    assert mech.expected_loss() < make("em", epsilon=4.0).fit(domain).expected_loss()
