"""DistA-LP server side: conservative repairs, quality metrics, the registered mechanism."""

from __future__ import annotations

import numpy as np
import pytest

from sim.errors import InputError
from sim.mechanisms import make
from sim.mechanisms.dista_lp import block_repair as server
from sim.privacy.verify import verify


def _noisy(block, rng, scale=0.05):
    return block + rng.normal(0.0, scale, size=block.shape)


def test_metric_closure_gives_a_metric_below_the_input(road_domain_small, rng):
    d_hat = _noisy(road_domain_small.dist_xx[:12, :12], rng)
    d = server.metric_closure(d_hat)
    assert np.all(d >= 0) and np.allclose(d, d.T) and np.all(np.diag(d) == 0)
    assert np.all(d <= np.maximum(np.minimum(d_hat, d_hat.T), 0) + 1e-15)
    assert np.all(d[:, None, :] <= d[:, :, None] + d[None, :, :] + 1e-12)  # d_ij <= d_ik + d_kj


def test_triangle_tightening_makes_wem_pairs_consistent(road_domain_small, rng):
    dx = server.metric_closure(_noisy(road_domain_small.dist_xx[:10, :10], rng))
    dy_hat = _noisy(road_domain_small.dist_xy[:10], rng)
    dy = server.triangle_tighten(dx, dy_hat)
    assert np.all(dy <= np.maximum(dy_hat, 0) + 1e-15)
    # B(i,k) <= dx(i,j) + B(j,k) for every i, j, k
    assert np.all(dy[:, None, :] <= dx[:, :, None] + dy[None, :, :] + 1e-12)


def test_gamma_repair_is_conservative_once_gamma_covers_the_overestimate(road_domain_small, rng):
    true = road_domain_small.dist_xx[:15, :15]
    d_hat = _noisy(true, rng)
    gamma = float(np.max(d_hat - true))
    assert np.all(server.gamma_repair(d_hat, gamma) <= true + 1e-15)
    assert server.violation_ratio(true, server.gamma_repair(d_hat, gamma)) == 0.0


def test_quality_metrics_on_known_values():
    a = np.array([[0.0, 3.0], [4.0, 0.0]])
    b = np.array([[0.0, 3.0], [5.0, 0.0]])
    assert server.relative_error(a, b) == pytest.approx(1 / 5)
    assert server.violation_ratio(a, b, exclude_diagonal=True) == pytest.approx(0.5)
    assert server.violation_ratio(a, b) == pytest.approx(0.25)


@pytest.mark.parametrize(
    "call",
    [
        lambda: server.gamma_repair(np.ones(2), -1.0),
        lambda: server.gamma_repair(np.ones(2), float("nan")),
        lambda: server.metric_closure(np.ones((2, 3))),
        lambda: server.relative_error(np.zeros((2, 2)), np.ones((2, 2))),
        lambda: server.repair_blocks({"dx": np.zeros((2, 2))}),
    ],
)
def test_server_helpers_reject_bad_input(call):
    with pytest.raises(InputError):
        call()


SMALL = {"n_users": 3, "n_neighbours": 8, "audit_records": 20, "delta": 0.05, "confidence": 0.9}


@pytest.fixture(scope="module")
def fitted(road_domain_small):
    return make("dista_lp", epsilon=4.0, seed=3, **SMALL).fit(road_domain_small)


def test_final_pure_part_passes_exact_verifier_under_true_distances(fitted, road_domain_small):
    rows = fitted.info_["union_rows"]
    true = road_domain_small.dist_xx[np.ix_(rows, rows)]
    eps_pt = fitted.info_["epsilon_pt"]
    assert verify(fitted.matrix_, true, eps_pt).passed  # all pairs of U, not only chaining
    for blocks, final in zip(
        fitted.info_["user_blocks"], fitted.info_["final_blocks"], strict=True
    ):
        assert verify(final, blocks.dx, eps_pt).passed


def test_guarantee_is_pmdp_with_the_total_budget(fitted):
    g = fitted.guarantee
    assert g.kind == "pmdp" and g.epsilon_per_km == pytest.approx(4.0)
    assert g.delta == pytest.approx(0.05) and g.confidence is not None
    assert fitted.info_["epsilon_pt"] < 4.0


def test_bytes_are_counted_per_user(fitted):
    assert len(fitted.info_["bytes_up"]) == 3 and min(fitted.info_["bytes_up"]) > 0
    assert fitted.info_["bytes_down"] == [8 * 8 * 40] * 3


def test_same_seed_gives_same_matrix(fitted, road_domain_small):
    again = make("dista_lp", epsilon=4.0, seed=3, **SMALL).fit(road_domain_small)
    np.testing.assert_array_equal(again.matrix_, fitted.matrix_)


@pytest.mark.parametrize(
    "params",
    [
        {"n_users": 0},
        {"n_neighbours": 1},
        {"family": "spline"},
        {"gap": 0.0},
        {"margin": 0.9},
        {"gamma_km": -1.0},
        {"user_indices": [1, 1]},
        {"eps_dx": 1.0},  # the split needs all four parts or none
        {"eps_dx": 1.0, "eps_dy": 1.0, "eps_cy": 1.0, "eps_pt": 2.0},  # overspends 4/km
    ],
)
def test_dista_lp_rejects_bad_parameters(params):
    with pytest.raises((InputError, ValueError)):
        make("dista_lp", epsilon=4.0, **params)
