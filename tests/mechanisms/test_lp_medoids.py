"""lp_medoids: the optimal LP over all secrets on k-medoid outputs, and its lower bound."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import sparse

from mdpsim.errors import InputError, SolverError
from mdpsim.geo.domain import Domain, farthest_points
from mdpsim.mechanisms import make
from mdpsim.mechanisms.lp import medoids as lp_medoids
from mdpsim.mechanisms.lp.highs import HighsOptions
from mdpsim.mechanisms.lp.solver import directed_constraints
from mdpsim.privacy.verifier import verify


@pytest.mark.parametrize("eps", [2.0, 6.0])
@pytest.mark.parametrize("n_outputs", [4, 12])
def test_bound_is_below_the_optimum_and_the_loss_above_it(
    exact_optimum, road_domain_small, eps, n_outputs
):
    domain = road_domain_small
    mech = make("lp_medoids", epsilon=eps, n_outputs=n_outputs).fit(domain)
    optimum = exact_optimum(domain, eps).objective
    assert 0 < mech.lower_bound <= optimum * (1 + 1e-7)
    assert mech.expected_loss() >= optimum * (1 - 1e-7)
    assert mech.info_["gap"] == pytest.approx(mech.expected_loss() / mech.lower_bound)
    assert verify(mech.matrix_, domain.dist_xx, eps, pairs=domain.constraint_pairs).passed


def test_uses_only_the_medoid_outputs_and_beats_the_exponential_mechanism(road_domain_small):
    domain = road_domain_small
    mech = make("lp_medoids", epsilon=4.0, n_outputs=8).fit(domain)
    used = np.flatnonzero(mech.matrix_.sum(axis=0) > 0)
    assert set(used) <= set(mech.info_["medoids"])
    assert mech.expected_loss() < make("em", epsilon=4.0).fit(domain).expected_loss()


def test_more_bound_rounds_never_lower_the_bound(road_domain_small):
    coarse = make(
        "lp_medoids", bound="relaxation", epsilon=4.0, n_outputs=6, bound_options={"rounds": 0}
    ).fit(road_domain_small)
    finer = make(
        "lp_medoids", bound="relaxation", epsilon=4.0, n_outputs=6, bound_options={"rounds": 3}
    ).fit(road_domain_small)
    assert finer.lower_bound >= coarse.lower_bound * (1 - 1e-9)


def test_medoids_lower_the_quantisation_loss_and_are_checked():
    rng = np.random.default_rng(4)
    domain = Domain.from_points(rng.uniform(0, 3000, (30, 2)), metric="l2")
    quant = [
        float(
            domain.prior
            @ domain.dist_xy[:, lp_medoids.prior_medoids(domain.prior, domain.dist_xy, k)].min(
                axis=1
            )
        )
        for k in (1, 3, 10, 30)
    ]
    assert quant == sorted(quant, reverse=True) and quant[-1] == 0.0
    with pytest.raises(InputError, match="n_outputs=31"):
        lp_medoids.prior_medoids(domain.prior, domain.dist_xy, 31)


def test_a_solver_failure_raises_with_its_status(road_domain_small):
    with pytest.raises(SolverError, match="Time limit"):
        make("lp_medoids", epsilon=4.0, n_outputs=6, time_limit_s=1e-6).fit(road_domain_small)


def test_a_failed_bound_lp_raises_with_its_status(road_domain_small, monkeypatch):
    real = lp_medoids.HighsLP

    def infeasible(cost, A, lo, up, **kw):  # row sums forced to 2 and to 0 at once (planted)
        n = A.shape[1]
        return real(cost, sparse.vstack([A, np.ones((2, n))]),
                    np.r_[lo, 2.0, 0.0], np.r_[up, 2.0, 0.0], **kw)  # fmt: skip

    monkeypatch.setattr(lp_medoids, "HighsLP", infeasible)
    with pytest.raises(SolverError, match="lower bound: HiGHS stopped with model status 'Inf"):
        make("lp_medoids", bound="relaxation", epsilon=4.0, n_outputs=6).fit(road_domain_small)


def _bound_inputs(domain, eps: float, n_groups: int):
    medoids = lp_medoids.prior_medoids(domain.prior, domain.dist_xy, n_groups)
    dist, _ = lp_medoids._group_distances(domain, medoids)
    group_cost = domain.prior[:, None] * dist
    pairs = domain.constraint_pairs
    src, dst, gain = directed_constraints(pairs, domain.dist_xx[pairs[:, 0], pairs[:, 1]], eps)
    return group_cost, src, dst, gain


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_any_non_negative_flows_give_a_bound_below_the_optimum(
    exact_optimum, road_domain_small, seed
):
    eps = 4.0
    group_cost, src, dst, gain = _bound_inputs(road_domain_small, eps, 6)
    rng = np.random.default_rng(seed)
    con = np.tile(np.arange(len(src)), group_cost.shape[1])
    col = np.repeat(np.arange(group_cost.shape[1]), len(src))
    flow = rng.exponential(rng.choice([1e-4, 1e-2, 1.0]), len(con)) * (rng.random(len(con)) < 0.3)
    value = lp_medoids.certified_bound(group_cost, src, dst, gain, con, col, flow)
    assert value <= exact_optimum(road_domain_small, eps).objective
    no_flow = lp_medoids.certified_bound(group_cost, src, dst, gain, con, col, 0 * flow)
    assert no_flow == pytest.approx(group_cost.min(axis=1).sum())  # every secret at its group


def test_the_certified_bound_matches_the_relaxation_optimum(road_domain_small):
    mech = make("lp_medoids", bound="relaxation", epsilon=6.0, n_outputs=6).fit(road_domain_small)
    info = mech.info_
    assert info["lower_bound_km"] == pytest.approx(info["lower_bound_relaxation_km"], rel=1e-6)
    assert info["lower_bound_km"] <= info["lower_bound_relaxation_km"] + 1e-12


def test_a_smaller_reach_keeps_fewer_entries_and_a_valid_bound(exact_optimum, road_domain_small):
    local = make(
        "lp_medoids", bound="relaxation", epsilon=6.0, n_outputs=6, bound_options={"reach": 1.0}
    ).fit(road_domain_small)
    every = make(
        "lp_medoids", bound="relaxation", epsilon=6.0, n_outputs=6, bound_options={"reach": np.inf}
    ).fit(road_domain_small)
    assert local.info_["lower_bound_variables"] < every.info_["lower_bound_variables"]
    optimum = exact_optimum(road_domain_small, 6.0).objective
    assert 0 < local.lower_bound <= optimum and 0 < every.lower_bound <= optimum


def test_without_the_bound_the_matrix_is_the_same(road_domain_small):
    full = make("lp_medoids", epsilon=4.0, n_outputs=6).fit(road_domain_small)
    bare = make("lp_medoids", epsilon=4.0, n_outputs=6, bound=None).fit(road_domain_small)
    np.testing.assert_array_equal(bare.matrix_, full.matrix_)
    assert bare.lower_bound is None and "gap" not in bare.info_
    assert make("lp_medoids", epsilon=4.0, bound="none").bound is None  # a scenario's spelling
    with pytest.raises(InputError, match="'with_bound' is gone; use bound=None"):
        make("lp_medoids", epsilon=4.0, bound="relaxation", with_bound=False)
    with pytest.raises(InputError, match="bound_options has 'rounds', not an option of bound=None"):
        make("lp_medoids", epsilon=4.0, bound=None, bound_options={"rounds": 2})


@pytest.mark.parametrize("eps", [2.0, 6.0])
@pytest.mark.parametrize("reach", [1.0, 2.0])
def test_the_localized_relaxation_optimum_is_its_certified_bound(
    exact_optimum, road_domain_small, eps, reach
):
    """The rest columns charge left-out entries as the bound does: the LP maximises B."""
    mech = make(
        "lp_medoids", bound="relaxation", epsilon=eps, n_outputs=6, bound_options={"reach": reach}
    ).fit(road_domain_small)
    info = mech.info_
    every = make(
        "lp_medoids", bound="relaxation", epsilon=eps, n_outputs=6, bound_options={"reach": np.inf}
    ).fit(road_domain_small)
    assert info["lower_bound_variables"] <= 2 / 3 * every.info_["lower_bound_variables"]
    assert info["lower_bound_km"] == pytest.approx(info["lower_bound_relaxation_km"], rel=1e-6)
    assert 0 < mech.lower_bound <= exact_optimum(road_domain_small, eps).objective * (1 + 1e-7)
    assert mech.expected_loss() >= mech.lower_bound


@pytest.mark.slow
@pytest.mark.parametrize(("n", "eps"), [(100, 4.0), (100, 10.0), (150, 7.0)])
def test_bound_below_the_exact_optimum_at_larger_sizes(walk_domain, exact_optimum, n, eps):
    """The bound never above the exact optimum where that is computable (N <= 150)."""
    domain = walk_domain(n, 1)
    mech = make(
        "lp_medoids", bound="relaxation", epsilon=eps, bound_options={"groups": n // 2}
    ).fit(domain)
    optimum = exact_optimum(domain, eps).objective
    assert 0 < mech.lower_bound <= optimum * (1 + 1e-7) <= mech.expected_loss() * (1 + 2e-7)


def test_priced_outputs_never_raise_the_loss_and_stay_exact(exact_optimum, road_domain_small):
    """Outputs priced against the restricted LP's duals: each round's optimum is feasible for
    the next model (idle outputs leave with zero mass), so the loss cannot rise."""
    domain, eps = road_domain_small, 6.0
    plain = make("lp_medoids", epsilon=eps, n_outputs=4).fit(domain)
    priced = make("lp_medoids", epsilon=eps, n_outputs=4, priced_outputs=6).fit(domain)
    assert priced.expected_loss() <= plain.expected_loss() * (1 + 1e-9)
    assert priced.expected_loss() >= exact_optimum(domain, eps).objective * (1 - 1e-7)
    assert priced.info_["outputs_used"] <= 10
    assert priced.expected_loss() >= priced.lower_bound * (1 - 1e-9)
    assert verify(priced.matrix_, domain.dist_xx, eps, pairs=domain.constraint_pairs).passed
    with pytest.raises(InputError, match="priced_outputs"):
        make("lp_medoids", epsilon=eps, priced_outputs=-1)


@pytest.mark.parametrize("eps", [2.0, 6.0])
@pytest.mark.parametrize("subsets", [2, 4])
def test_the_split_bound_is_below_the_optimum_and_the_loss_above_it(
    exact_optimum, road_domain_small, eps, subsets
):
    """OPT(X) >= sum of the parts' optima: the split bound never passes the exact optimum."""
    domain = road_domain_small
    mech = make(
        "lp_medoids",
        bound="relaxation",
        epsilon=eps,
        n_outputs=6,
        bound_options={"subsets": subsets},
    ).fit(domain)
    assert mech.info_["lower_bound_subsets"] == subsets
    assert 0 < mech.lower_bound <= exact_optimum(domain, eps).objective * (1 + 1e-7)
    assert mech.expected_loss() >= mech.lower_bound


def test_the_split_bound_sums_the_parts_bounds(road_domain_small):
    """Each part bounded on its own (prior restricted, renormalised), weighted by its mass."""
    domain, eps = road_domain_small, 6.0
    opts = HighsOptions(solver="ipm")
    split = lp_medoids.split_lower_bound(domain, eps, subsets=3, rounds=2, reach=6.0, options=opts)
    order = farthest_points(domain.dist_xx, int(np.argmax(domain.prior)), domain.n_x)
    total = 0.0
    for part in range(3):
        rows = np.sort(order[part::3])
        sub = domain.restrict(rows)
        medoids = np.unique(np.argmin(sub.dist_xy, axis=1))
        bound = lp_medoids.cluster_lower_bound(sub, medoids, eps, rounds=2, reach=6.0, options=opts)
        total += domain.prior[rows].sum() * bound.value
    assert split.value == pytest.approx(total, rel=1e-9)
    assert split.value < total  # the rounding allowance is subtracted


def test_too_many_bound_subsets_are_refused(road_domain_small):
    with pytest.raises(InputError, match="subsets"):
        make(
            "lp_medoids",
            bound="relaxation",
            epsilon=4.0,
            n_outputs=4,
            bound_options={"subsets": 41},
        ).fit(road_domain_small)
    with pytest.raises(InputError, match="subsets"):
        make("lp_medoids", bound="relaxation", epsilon=4.0, bound_options={"subsets": 0})


@pytest.mark.slow
@pytest.mark.parametrize("eps", [4.0, 10.0])
def test_the_split_bound_is_below_the_exact_optimum_at_150(walk_domain, exact_optimum, eps):
    domain = walk_domain(150, 1)
    mech = make("lp_medoids", bound="relaxation", epsilon=eps, bound_options={"subsets": 2}).fit(
        domain
    )
    optimum = exact_optimum(domain, eps).objective
    assert 0 < mech.lower_bound <= optimum * (1 + 1e-7) <= mech.expected_loss() * (1 + 2e-7)


def test_from_two_parts_on_the_bound_is_the_larger_of_split_and_grouped(relaxation_fit_200):
    mech = relaxation_fit_200
    info = mech.info_
    assert info["lower_bound_subsets"] == 2
    both = (info["lower_bound_split_km"], info["lower_bound_grouped_km"])
    assert mech.lower_bound == max(both) > 0
    assert info["lower_bound_kind"] == ("split" if both[0] >= both[1] else "grouped")
    assert mech.expected_loss() >= mech.lower_bound
