"""The price certificate: a lower bound on the optimal LP from per-output flows."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import sparse

from mdpsim.errors import InputError, SolverError
from mdpsim.mechanisms import make
from mdpsim.mechanisms.lp import certificate as lp_certificate
from mdpsim.privacy.verifier import verify


def _certify(domain, eps: float, prices, rounds: int = 1):
    return lp_certificate.price_certificate(
        domain.prior,
        domain.dist_xy,
        domain.dist_xx,
        domain.constraint_pairs,
        eps,
        prices,
        rounds=rounds,
    )


@pytest.mark.parametrize("eps", [2.0, 6.0])
def test_the_exact_duals_certify_the_optimum(exact_optimum, road_domain_small, eps):
    """With the optimum's own prices every deficit is covered: the bound is the optimum."""
    sol = exact_optimum(road_domain_small, eps)
    optimum, duals = sol.objective, sol.row_duals
    bound = _certify(road_domain_small, eps, duals)
    assert bound.value <= optimum
    assert bound.value == pytest.approx(optimum, rel=1e-6)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_any_prices_give_a_bound_below_the_optimum(exact_optimum, road_domain_small, seed):
    eps = 4.0
    sol = exact_optimum(road_domain_small, eps)
    optimum, duals = sol.objective, sol.row_duals
    rng = np.random.default_rng(seed)
    prices = duals * rng.uniform(0, 3, len(duals)) + rng.normal(0, 1e-3, len(duals))
    assert _certify(road_domain_small, eps, prices, rounds=2).value <= optimum


def test_more_rounds_keep_the_best_round(exact_optimum, road_domain_small):
    eps = 6.0
    mech = make("lp_medoids", epsilon=eps, n_outputs=4, bound_options={"rounds": 1}).fit(
        road_domain_small
    )
    more = make("lp_medoids", epsilon=eps, n_outputs=4, bound_options={"rounds": 3}).fit(
        road_domain_small
    )
    assert more.lower_bound >= mech.lower_bound
    assert more.info_["lower_bound_kind"] == "prices"
    assert (
        more.lower_bound <= exact_optimum(road_domain_small, eps).objective <= more.expected_loss()
    )


@pytest.mark.slow
def test_tighter_than_the_relaxation_bound(relaxation_fit_200):
    """At 200 secrets the certificate beats the split / grouped relaxations (docs/lp.md)."""
    relaxation = relaxation_fit_200
    prices = make("lp_medoids", epsilon=7.0).fit(relaxation.domain_)
    assert prices.lower_bound > 1.1 * relaxation.lower_bound
    assert prices.expected_loss() >= prices.lower_bound


@pytest.mark.parametrize("which", ["lp_medoids price certificate", "lp_medoids ray prices"])
def test_a_failed_certificate_lp_raises_with_its_status(road_domain_small, monkeypatch, which):
    class Infeasible(lp_certificate.HighsLP):
        """Two planted rows force a sum to 2 and to 0 at once, whatever the row bounds."""

        def __init__(self, cost, A, lo, up, **kw):
            self.planted = kw.get("name") == which
            if self.planted:
                A = sparse.vstack([A, np.ones((2, A.shape[1]))])
                lo, up = (
                    np.r_[np.broadcast_to(lo, A.shape[0] - 2), 2.0, 0.0],
                    np.r_[np.broadcast_to(up, A.shape[0] - 2), 2.0, 0.0],
                )
            super().__init__(cost, A, lo, up, **kw)

        def set_row_bounds(self, lower, upper):
            if self.planted:
                lower, upper = (
                    np.r_[lower, 2.0, 0.0],
                    np.r_[np.broadcast_to(upper, len(lower)), 2.0, 0.0],
                )
            super().set_row_bounds(lower, upper)

    monkeypatch.setattr(lp_certificate, "HighsLP", Infeasible)
    with pytest.raises(SolverError, match=f"{which}: HiGHS stopped with model status 'Inf"):
        make("lp_medoids", epsilon=4.0, n_outputs=6).fit(road_domain_small)


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"bound_options": {"groups": 3}}, "'groups', not an option of bound='prices'"),
        ({"bound_options": {"subsets": 2}}, "'subsets', not an option of bound='prices'"),
        ({"bound": "relaxation", "bound_options": {"scale": 3}}, "'scale', not an option"),
        ({"bound": "exact"}, "bound="),
        ({"bound_options": {"scale": 0.0}}, "bound_options scale"),
        ({"bound_options": {"rounds": 0}}, "bound_options rounds"),
        ({"bound_options": 3}, "must be a dict"),
        ({"price_rounds": 3}, "bound_options="),
        ({"bound_reach": 3}, "bound_options="),
        ({"laplace_outputs": True, "priced_outputs": 2}, "laplace_outputs"),
    ],
)
def test_parameters_of_the_other_bound_are_refused(params, field):
    with pytest.raises(InputError, match=field):
        make("lp_medoids", epsilon=4.0, **params)


def test_laplace_outputs_lower_the_loss_and_stay_exact(exact_optimum, road_domain_small):
    """Laplace rays of the other outputs: the medoid LP is a restriction of this one."""
    domain, eps = road_domain_small, 6.0
    plain = make("lp_medoids", epsilon=eps, n_outputs=4).fit(domain)
    rays = make("lp_medoids", epsilon=eps, n_outputs=4, laplace_outputs=True).fit(domain)
    assert rays.expected_loss() < plain.expected_loss()
    assert rays.expected_loss() >= exact_optimum(domain, eps).objective * (1 - 1e-7)
    assert rays.info_["outputs_used"] > 4
    assert rays.expected_loss() >= rays.lower_bound
    assert verify(rays.matrix_, domain.dist_xx, eps, pairs=domain.constraint_pairs).passed


@pytest.mark.slow
@pytest.mark.parametrize("eps", [4.0, 7.0, 10.0])
def test_the_certificate_is_below_the_exact_optimum_at_150(walk_domain, exact_optimum, eps):
    domain = walk_domain(150, 1)
    mech = make("lp_medoids", epsilon=eps).fit(domain)
    optimum = exact_optimum(domain, eps).objective
    assert 0 < mech.lower_bound <= optimum * (1 + 1e-7) <= mech.expected_loss() * (1 + 2e-7)
    assert mech.lower_bound > 0.75 * optimum  # tight (docs/lp.md: 0.80-0.88 of it)
