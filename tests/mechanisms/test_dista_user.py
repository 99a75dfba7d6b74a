"""DistA-LP user side: blocks, budget split, upload, reconstruction, download, report."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mdpsim.errors import InputError, PrivacyBudgetError
from mdpsim.mechanisms.dista_lp.calibration import calibrate_upload
from mdpsim.mechanisms.dista_lp.user import (
    UploadConfig,
    finalize_block,
    local_blocks,
    prepare_upload,
    reconstruct,
    report,
)
from mdpsim.privacy.split import BudgetSplit, compose_pmdp
from mdpsim.privacy.verifier import verify


def test_local_blocks_are_the_nearest_secrets_and_their_distances(road_domain_small):
    d = road_domain_small
    lb = local_blocks(d, 5, n_neighbours=10)
    assert lb.neighbourhood[0] == 5 or d.dist_xx[5, lb.neighbourhood[0]] == 0
    assert 5 in lb.neighbourhood
    far = np.setdiff1d(np.arange(d.n_x), lb.neighbourhood)
    assert d.dist_xx[5, lb.neighbourhood].max() <= d.dist_xx[5, far].min()
    assert lb.dx.shape == (10, 10) and lb.dy.shape == (10, d.n_y) and lb.cy.shape == (10, d.n_y)
    np.testing.assert_array_equal(lb.dy, d.dist_xy[lb.neighbourhood])
    np.testing.assert_allclose(lb.cy, d.prior[lb.neighbourhood, None] * lb.dy)


@pytest.mark.parametrize("n", [0, 1, 10_000])
def test_empty_or_oversized_neighbourhoods_are_rejected(road_domain_small, n):
    with pytest.raises(InputError, match="n_neighbours"):
        local_blocks(road_domain_small, 0, n_neighbours=n)


def test_default_split_sums_to_the_total():
    cfg = UploadConfig(7.0)
    parts = (cfg.eps_dx, cfg.eps_dy, cfg.eps_cy, cfg.eps_pt)
    assert math.fsum(parts) == pytest.approx(7.0, rel=1e-12)
    assert cfg.eps_pt == pytest.approx(4.9)


@pytest.mark.parametrize(
    "parts",
    [(1.0, 1.0, 1.0, 1.5), (float("nan"), 0.1, 0.1, 1.0), (0.1, float("inf"), 0.1, 1.0),
     (-0.1, 0.1, 0.1, 1.0), (0.0, 0.1, 0.1, 1.0)],
)  # fmt: skip
def test_the_accountant_refuses_overspend_nan_inf_and_nonpositive_parts(parts):
    with pytest.raises(PrivacyBudgetError):
        UploadConfig(4.0, eps_dx=parts[0], eps_dy=parts[1], eps_cy=parts[2], eps_pt=parts[3])


@pytest.mark.parametrize(
    "kwargs",
    [{"rank": 0}, {"rank": 21}, {"n_neighbours": 1}, {"family": "spline"}, {"eps_dx": 0.1},
     {"delta": float("nan")}, {"confidence": 1.0}, {"noise": "gauss"}],
)  # fmt: skip
def test_bad_upload_parameters_are_rejected(kwargs):
    with pytest.raises(InputError):
        UploadConfig(4.0, **kwargs)


@settings(max_examples=200, deadline=None)
@given(
    total=st.floats(1e-3, 100.0),
    fr=st.lists(st.floats(0.0, 1.0, allow_subnormal=False), min_size=4, max_size=4),
    scale=st.floats(0.5, 1.5),
)
def test_composed_budget_never_exceeds_the_total(total, fr, scale):
    parts = [total * scale * f / max(sum(fr), 1e-12) for f in fr]
    try:
        split = BudgetSplit(total, *parts)
    except PrivacyBudgetError:
        assert math.fsum(parts) > total or min(parts) <= 0
        return
    assert split.spent <= total * (1 + 1e-12)
    eps, delta = compose_pmdp([(split.dx, 1e-5), (split.dy, 1e-5), (split.cy, 1e-5)])
    assert eps + split.pt <= total * (1 + 1e-12) and delta == pytest.approx(3e-5)


def test_upload_needs_a_calibration(road_domain_small, rng):
    with pytest.raises(InputError, match="calibrate_upload"):
        prepare_upload(road_domain_small, 0, UploadConfig(4.0, n_neighbours=10), None, rng)


@pytest.fixture(scope="module")
def calibrated():
    return UploadConfig(8.0, n_neighbours=10, rank=3, delta=1e-2, confidence=0.9)


@pytest.fixture(scope="module")
def cal(road_domain_small, calibrated):
    return calibrate_upload(road_domain_small, calibrated, rng=np.random.default_rng(3))


def test_calibration_reaches_the_requested_confidence(calibrated, cal):
    for t, c in cal.blocks.items():
        assert c.audit.passed, t
        assert c.audit.n_samples == c.audit.samples_needed
        assert c.epsilon == getattr(calibrated, f"eps_{t}")
    assert cal.confidence >= calibrated.confidence - 1e-12


def test_upload_round_trip_shapes_bytes_and_permuted_order(road_domain_small, calibrated, cal, rng):
    d = road_domain_small
    state, up = prepare_upload(d, 4, calibrated, cal, rng)
    blocks = reconstruct(up)
    assert blocks["dx"].shape == (10, 10)
    assert blocks["dy"].shape == blocks["cy"].shape == (10, d.n_y)
    n_params = 3 * (10 + 10 + 1) + 2 * 3 * (10 + d.n_y + 1)
    assert up.bytes_up == 8 * n_params
    assert set(state.neighbourhood) == set(local_blocks(d, 4, n_neighbours=10).neighbourhood)
    pb = state.permuted_blocks()
    np.testing.assert_array_equal(pb["dy"], state.blocks.dy[state.perm])


def _em_block(dist_local_to_y: np.ndarray, eps: float) -> np.ndarray:
    z = np.exp(-eps * dist_local_to_y / 2)
    return z / z.sum(axis=1, keepdims=True)


def test_finalize_unpermutes_and_keeps_a_private_block(road_domain_small, calibrated, cal, rng):
    state, _ = prepare_upload(road_domain_small, 9, calibrated, cal, rng)
    eps_pt = calibrated.eps_pt
    true_order = _em_block(state.blocks.dy, eps_pt)
    out = finalize_block(state, true_order[state.perm], epsilon_pt=eps_pt)
    np.testing.assert_array_equal(out, true_order)
    assert verify(out, state.blocks.dx, eps_pt).passed
    k = report(state, out, rng)
    assert 0 <= k < road_domain_small.n_y


def test_finalize_never_returns_a_block_that_fails_the_verifier(
    road_domain_small, calibrated, cal, rng
):
    state, _ = prepare_upload(road_domain_small, 9, calibrated, cal, rng)
    leaky = np.eye(10, road_domain_small.n_y)  # deterministic: infinitely leaky
    try:
        out = finalize_block(state, leaky, epsilon_pt=calibrated.eps_pt)
    except PrivacyBudgetError:
        return
    assert verify(out, state.blocks.dx, calibrated.eps_pt).passed


def test_finalize_refuses_a_report_budget_above_the_split(road_domain_small, calibrated, cal, rng):
    state, _ = prepare_upload(road_domain_small, 9, calibrated, cal, rng)
    block = _em_block(state.blocks.dy, calibrated.epsilon)
    with pytest.raises(PrivacyBudgetError):
        finalize_block(state, block, epsilon_pt=calibrated.epsilon)
