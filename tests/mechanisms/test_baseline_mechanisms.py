"""EM, planar Laplace, RMP and PAnDA: behaviour beyond the shared conformance suite."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats
from scipy.spatial import cKDTree

from mdpsim.errors import InputError
from mdpsim.geo.domain import Domain
from mdpsim.mechanisms import make
from mdpsim.privacy import verify


def test_laplace_matrix_matches_the_continuous_mechanism(l2_domain_small):
    # Monte Carlo of noise + nearest output; chi-square false-alarm rate 1e-4 (fixed seed).
    d = l2_domain_small
    mech = make("laplace", epsilon=4.0).fit(d)
    eps = mech.info_["epsilon_effective"]
    rng = np.random.default_rng(8)
    n, i = 200_000, 11
    r = rng.gamma(2.0, 1.0 / eps, n)
    theta = rng.uniform(0, 2 * np.pi, n)
    noisy = d.x_xy[i] / 1000 + np.column_stack([r * np.cos(theta), r * np.sin(theta)])
    _, k = cKDTree(d.y_xy / 1000).query(noisy)
    observed = np.bincount(k, minlength=d.n_y)
    expected = mech.matrix_[i] * n
    big = expected >= 5
    if not big.all():
        observed = np.append(observed[big], observed[~big].sum())
        expected = np.append(expected[big], expected[~big].sum())
    assert stats.chisquare(observed, expected).pvalue > 1e-4


def test_laplace_cell_masses_sum_to_one_before_renormalisation(road_domain_small):
    for eps in (0.5, 10.0):
        info = make("laplace", epsilon=eps).fit(road_domain_small).info_
        assert info["mass_defect"] < 1e-11


def test_laplace_shrinks_epsilon_when_the_metric_is_below_euclidean():
    pts = np.array([[0.0, 0.0], [300.0, 300.0], [600.0, 0.0], [0.0, 500.0], [450.0, 650.0]])
    d = Domain.from_points(pts, metric="linf")
    mech = make("laplace", epsilon=4.0).fit(d)
    e = np.hypot(*(pts[:, None] - pts[None]).transpose(2, 0, 1)) / 1000
    off = ~np.eye(len(pts), dtype=bool)
    rho = (d.dist_xx[off] / e[off]).min()
    assert rho < 1
    assert mech.info_["metric_ratio"] == pytest.approx(rho, rel=1e-12)
    assert mech.info_["epsilon_effective"] == pytest.approx(4.0 * rho * (1 - 1e-6), rel=1e-12)
    assert verify(mech.matrix_, d.dist_xx, 4.0).passed


def test_rmp_reports_the_posterior_optimal_output(road_domain_small):
    d = road_domain_small
    base = make("em", epsilon=4.0).fit(d).matrix_
    mech = make("rmp", epsilon=4.0).fit(d)
    used = np.nonzero(mech.matrix_.sum(axis=0) > 0)[0]
    posterior_cost = (base * d.prior[:, None]).T @ d.dist_xy
    assert set(used) <= set(np.argmin(posterior_cost, axis=1))
    assert mech.expected_loss() <= make("em", epsilon=4.0).fit(d).expected_loss() + 1e-12


def test_rmp_rejects_an_unknown_base():
    with pytest.raises(InputError, match="base"):
        make("rmp", epsilon=1.0, base="gaussian")


def test_panda_is_pure_on_the_full_domain_and_uses_the_anchor_lp(road_domain_small):
    d = road_domain_small
    mech = make("panda", epsilon=4.0, n_anchors=10).fit(d)
    assert len(set(mech.info_["anchors"].tolist())) == 10
    assert mech.info_["anchor_set_size_median"] >= 1
    assert verify(mech.matrix_, d.dist_xx, 4.0).passed
    assert mech.info_["lp_objective_km"] == pytest.approx(mech.expected_loss(), rel=1e-6)


@pytest.mark.parametrize("n_anchors", [0, -3, 2.5, True])
def test_panda_rejects_bad_anchor_counts(n_anchors):
    with pytest.raises(InputError, match="n_anchors"):
        make("panda", epsilon=1.0, n_anchors=n_anchors)


def test_panda_rejects_more_anchors_than_secrets(l2_domain_small):
    with pytest.raises(InputError, match="n_anchors"):
        make("panda", epsilon=1.0, n_anchors=41).fit(l2_domain_small)
