"""The upload-stage inference (sim/mechanisms/dista_lp/locate.py): known answers, modes seen."""

from __future__ import annotations

import numpy as np
import pytest

from mdpsim.errors import InputError
from mdpsim.mechanisms import make
from mdpsim.mechanisms.dista_lp.locate import (
    error_summary,
    locate_location_upload,
    locate_surrogate_upload,
    location_posterior,
    match_profiles,
    prior_guess,
)
from mdpsim.mechanisms.dista_lp.user import local_blocks

N_LOCAL = 8


def _radius(domain, x: int) -> float:
    hood = local_blocks(domain, x, n_neighbours=N_LOCAL).neighbourhood
    return float(domain.dist_xx[x, hood].max())


@pytest.mark.parametrize("x", [0, 13, 27, 39])
def test_noise_free_rows_are_located_within_the_neighbourhood(x, road_domain_small):
    lb = local_blocks(road_domain_small, x, n_neighbours=N_LOCAL)
    perm = np.random.default_rng(x).permutation(N_LOCAL)
    dy = lb.dy[perm]  # what a noise-free upload reconstructs (rows permuted)
    np.testing.assert_array_equal(
        np.sort(match_profiles(dy, road_domain_small.dist_xy)), np.sort(lb.neighbourhood)
    )
    guess = locate_surrogate_upload(dy, road_domain_small, N_LOCAL)
    assert road_domain_small.dist_xx[x, guess] <= _radius(road_domain_small, x) + 1e-12


@pytest.mark.parametrize("x", [0, 13, 27, 39])
def test_an_exact_svd_factor_locates_the_user_whatever_the_singular_values(x, road_domain_small):
    lb = local_blocks(road_domain_small, x, n_neighbours=N_LOCAL)
    _, _, vt = np.linalg.svd(lb.dy, full_matrices=False)
    zeroed = np.zeros_like(lb.dy)  # the singular values thresholded to 0
    guess = locate_surrogate_upload(zeroed, road_domain_small, N_LOCAL, v_factor=vt[:5].T)
    assert road_domain_small.dist_xx[x, guess] <= _radius(road_domain_small, x) + 1e-12


def test_location_posterior_is_the_em_likelihood_times_the_prior(road_domain_small):
    post = location_posterior(5, road_domain_small, 2.0)
    assert post.sum() == pytest.approx(1.0) and post.argmax() == 5
    # a very large budget: the posterior sits on the released secret
    assert locate_location_upload(5, road_domain_small, 1e4) == 5
    # no information: the prior's own guess
    assert locate_location_upload(5, road_domain_small, 1e-9) == prior_guess(road_domain_small)


def test_error_summary_and_bad_shapes():
    s = error_summary([0.1, 0.2, 0.3, 0.4, 1.0])
    assert s["median_km"] == pytest.approx(0.3) and s["p10_km"] == pytest.approx(0.14)
    assert np.isnan(error_summary([])["median_km"])
    with pytest.raises(InputError):
        match_profiles(np.ones((2, 3)), np.ones((4, 5)))


@pytest.mark.slow
def test_paper_uploads_leak_and_say_they_are_not_certified(road_domain_small):
    users = [3, 20, 33]
    mech = make(
        "dista_lp", epsilon=7.0, upload="paper", n_neighbours=N_LOCAL,
        delta=0.05, audit_records=20, tile_size=20, sweeps=1,
    ).fit(road_domain_small, users=np.array(users))  # fmt: skip
    assert "NOT certified" in mech.upload_guarantee.note
    assert "NOT certified" in str(mech.guarantee)
    for x, err in zip(users, mech.info_["upload_attack_error_km"], strict=True):
        assert err <= _radius(road_domain_small, x) + 1e-12
    # the report part is still exact over all of X
    assert mech.report_guarantee.kind == "pure"


def test_fidelity_noise_is_smaller_than_the_papers_rule_and_its_audit_says_so(road_domain_small):
    from mdpsim.mechanisms.dista_lp.paper_upload import calibrate_paper

    records = np.arange(road_domain_small.n_x)
    budgets = {"dx": 0.7, "dy": 0.7, "cy": 0.7}

    def cal(noise):
        return calibrate_paper(
            road_domain_small, budgets, rank=3, n_neighbours=N_LOCAL, tau_c=0.5, delta=1e-4,
            records=records, rng=np.random.default_rng(0), noise=noise,
        )  # fmt: skip

    rule, fidelity = cal("lipschitz"), cal("fidelity:0.03")
    assert fidelity.noise == "fidelity:0.03"
    for t in ("dx", "dy"):
        assert fidelity.scales[t] < rule.scales[t]
        assert fidelity.p_hat[t] >= rule.p_hat[t]
    assert max(fidelity.p_hat.values()) > 0.1  # the audit sees the violations
