"""lp_medoids: the optimal LP over all secrets on k-medoid outputs, and its lower bound."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import sparse

from sim.domain import Domain
from sim.errors import InputError, SolverError
from sim.mechanisms import lp_medoids, make
from sim.mechanisms.lp import solve_optimal
from sim.privacy.verify import verify


def _optimum(domain: Domain, eps: float) -> float:
    """The full optimal LP's value (every output), solved directly at eps."""
    pairs = domain.constraint_pairs
    _, sol = solve_optimal(
        domain.prior[:, None] * domain.dist_xy,
        pairs,
        domain.dist_xx[pairs[:, 0], pairs[:, 1]],
        eps,
    )
    return sol.objective


@pytest.mark.parametrize("eps", [2.0, 6.0])
@pytest.mark.parametrize("n_outputs", [4, 12])
def test_bound_is_below_the_optimum_and_the_loss_above_it(road_domain_small, eps, n_outputs):
    domain = road_domain_small
    mech = make("lp_medoids", epsilon=eps, n_outputs=n_outputs).fit(domain)
    optimum = _optimum(domain, eps)
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
    coarse = make("lp_medoids", epsilon=4.0, n_outputs=6, bound_rounds=0).fit(road_domain_small)
    finer = make("lp_medoids", epsilon=4.0, n_outputs=6, bound_rounds=3).fit(road_domain_small)
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
        make("lp_medoids", epsilon=4.0, n_outputs=6, time_limit=1e-6).fit(road_domain_small)


def test_a_failed_bound_lp_raises_with_its_status(road_domain_small, monkeypatch):
    real = lp_medoids.HighsLP

    def infeasible(cost, A, lo, up, **kw):  # row sums forced to 2 and to 0 at once (planted)
        n = A.shape[1]
        return real(cost, sparse.vstack([A, np.ones((2, n))]),
                    np.r_[lo, 2.0, 0.0], np.r_[up, 2.0, 0.0], **kw)  # fmt: skip

    monkeypatch.setattr(lp_medoids, "HighsLP", infeasible)
    with pytest.raises(SolverError, match="lower bound: HiGHS stopped with model status 'Inf"):
        make("lp_medoids", epsilon=4.0, n_outputs=6).fit(road_domain_small)
