"""Interpolation-based lp-norm mDP (``interp``): correction, anchors, dense off-anchor checks."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from mdpsim.errors import InputError
from mdpsim.geo.domain import Domain
from mdpsim.mechanisms import make
from mdpsim.mechanisms.interp import InterpMechanism
from mdpsim.mechanisms.interp.correction import (
    AxisWarp,
    anchor_deltas,
    dual_norm,
    kl_bound,
    linear_slope_bound,
    normaliser_slope_bound,
    split_budget,
    step_rate,
)
from mdpsim.mechanisms.interp.dense_check import dense_check
from mdpsim.mechanisms.interp.grid import AnchorGrid
from mdpsim.privacy import verify

EPS = 10.0
P_NAMES = {1.0: "l1", 2.0: "l2", math.inf: "linf"}
BOX = (0.0, 0.0, 400.0, 600.0)  # metres


def _domain(metric: str) -> Domain:
    """Secrets on a 50 m grid, outputs on a 100 m grid, over a 400 m x 600 m box."""
    secrets = Domain.from_bbox(BOX, cell_m=50.0, metric=metric).x_xy
    outputs = Domain.from_bbox(BOX, cell_m=100.0, metric=metric).x_xy
    return Domain.from_points(secrets, outputs, metric=metric)


@pytest.fixture(scope="module")
def fitted():
    """Corrected and naive mechanisms for p = 1, 2, inf (anchors every <= 150 m)."""
    out = {}
    for p, metric in P_NAMES.items():
        dom = _domain(metric)
        for naive in (False, True):
            out[p, naive] = InterpMechanism(EPS, spacing_m=150.0, naive=naive).fit(dom)
    return out


def _pairs(n: int, rng: np.random.Generator, grid: AnchorGrid) -> tuple[np.ndarray, np.ndarray]:
    """Pairs of continuous locations: random, very close (1 mm up), on anchor lines, outside."""
    lo = np.array([grid.x0, grid.y0]) - 60.0
    hi = np.array([grid.x0 + (grid.nx - 1) * grid.hx, grid.y0 + (grid.ny - 1) * grid.hy]) + 60.0
    a = rng.uniform(lo, hi, size=(n, 2))
    quarter = n // 4
    # A quarter of the first points sit exactly on an anchor line (where naive rows bend most).
    a[:quarter, 0] = grid.x0 + grid.hx * rng.integers(0, grid.nx, quarter)
    a[quarter : 2 * quarter, 1] = grid.y0 + grid.hy * rng.integers(0, grid.ny, quarter)
    radius = 10.0 ** rng.uniform(-3.0, 3.0, n)  # 1 mm to 1 km
    angle = rng.uniform(0.0, 2.0 * np.pi, n)
    angle[2 * quarter : 3 * quarter] = rng.integers(0, 4, quarter) * (np.pi / 2)  # axis-aligned
    b = a + radius[:, None] * np.column_stack([np.cos(angle), np.sin(angle)])
    far = rng.uniform(lo, hi, size=(n - 3 * quarter, 2))
    b[3 * quarter :] = far  # the last quarter: independent random pairs
    return a, b


def _max_loss_ratio(mech: InterpMechanism, n: int, seed: int, eps: float) -> float:
    """max over pairs and outputs of |log P(a)(k) - log P(b)(k)| / (eps ||a - b||_p)."""
    rng = np.random.default_rng(seed)
    support = mech.distribution_at(mech.grid_.xy[:1])[0] > 0
    worst = 0.0
    for start in range(0, n, 50_000):
        a, b = _pairs(min(50_000, n - start), rng, mech.grid_)
        la = mech.log_distribution_at(a)[:, support]
        lb = mech.log_distribution_at(b)[:, support]
        loss = np.abs(la - lb).max(axis=1)
        dist_km = np.linalg.norm(a - b, ord=mech.p_, axis=1) / 1000.0
        worst = max(worst, float((loss / (eps * dist_km)).max()))
    return worst


# --------------------------------------------------------------------- the correction
def test_one_dimensional_bound_is_reached_by_two_outputs_so_naive_anchors_leak():
    delta = 1.0
    # Rows (1/(1+e^d), e^d/(1+e^d)) and its mirror: log-ratios exactly +-delta, both sum to 1.
    row_a = np.log([1.0 / (1.0 + math.e**delta), math.e**delta / (1.0 + math.e**delta)])
    log_rows = np.vstack([row_a, row_a[::-1]])
    grid = AnchorGrid(0.0, 0.0, 1000.0, 1.0, 2, 1)  # two anchors 1 km apart
    h = 1e-3  # metres
    la, lb = grid.interpolate_log(log_rows, np.array([[0.0, 0.0], [h, 0.0]]))
    slope = np.abs(lb - la).max() / (h / 1000.0)  # per km of the cell
    assert slope == pytest.approx(linear_slope_bound(delta, 0.0), rel=1e-5)
    assert slope > delta * 1.4  # the naive budget delta is broken near the anchor


@pytest.mark.parametrize("warped", [False, True])
def test_random_cells_never_exceed_the_corrected_slope_bound(warped):
    rng = np.random.default_rng(3)
    worst = 0.0
    for _ in range(160):
        k = int(rng.integers(2, 6))
        d1, d2 = rng.uniform(0.05, 2.0, 2)
        rows = _cell_rows(rng, k, d1, d2)
        if rows is None:
            continue
        if warped:
            wx, wy = AxisWarp.for_deltas(d1, d2), AxisWarp.for_deltas(d2, d1)
            grid, bound = AnchorGrid(0.0, 0.0, 1.0, 1.0, 2, 2, wx, wy), wx.rate
        else:
            grid, bound = AnchorGrid(0.0, 0.0, 1.0, 1.0, 2, 2), linear_slope_bound(d1, d2)
        # Points next to the anchor lines (where the normaliser moves most) and anywhere.
        t = np.concatenate([rng.uniform(0.0, 0.02, 32), rng.uniform(0.0, 1.0 - 1e-6, 32)])
        s = rng.uniform(0.0, 1.0, 64)
        a = np.column_stack([t, s])
        b = a + [1e-6, 0.0]
        slope = np.abs(grid.interpolate_log(rows, b) - grid.interpolate_log(rows, a)).max(axis=1)
        worst = max(worst, float((slope / 1e-6).max() / bound))
    assert 0.5 < worst <= 1.0 + 1e-6


def test_normaliser_slope_bound_is_the_end_bound_at_anchors_and_smaller_inside():
    k, v = 0.2, 0.5
    b = normaliser_slope_bound(np.array([0.0, 0.25, 0.5, 0.75, 1.0]), k, v)
    assert b[0] == pytest.approx(k) and b[-1] == pytest.approx(k)
    assert b[2] < b[1] < k and b[1] == pytest.approx(b[3], rel=1e-9)
    # m(tau) = k (2 tau - 1) is feasible when the ramp is steep enough: the bound covers it.
    tau = np.linspace(0.0, 1.0, 41)
    assert np.all(normaliser_slope_bound(tau, k, 2 * k) >= k * np.abs(2 * tau - 1) - 1e-12)


def test_warp_maps_the_cell_onto_itself_and_lowers_the_rate():
    warp = AxisWarp.for_deltas(0.7, 0.7)
    assert warp.t_knots[0] == 0.0 and warp.t_knots[-1] == 1.0
    assert np.all(np.diff(warp.t_knots) > 0) and np.all(np.diff(warp.tau_knots) > 0)
    assert warp(np.array([0.0, 1.0])).tolist() == [0.0, 1.0]
    assert warp.rate < linear_slope_bound(0.7, 0.7)
    assert warp.rate_for(0.7, 0.7) == pytest.approx(warp.rate, rel=1e-12)
    assert warp.rate_for(0.5, 0.5) < warp.rate  # smaller realised deltas: smaller rate


def _cell_rows(rng, k: int, d1: float, d2: float) -> np.ndarray | None:
    """Four normalised rows (x fastest) with x-edge log-ratios <= d1, y-edge <= d2."""
    sign = rng.choice([-1.0, 1.0], size=(3, k))
    base = rng.normal(0.0, 2.0, k)
    rows = [base, base + d1 * sign[0], base + d2 * sign[1], base + d2 * sign[1] + d1 * sign[2]]
    for _ in range(60):
        rows = [r - np.log(np.exp(r).sum()) for r in rows]
        a, b, c, d = rows
        b = np.clip(b, a - d1, a + d1)
        d = np.clip(d, c - d1, c + d1)
        c = np.clip(c, a - d2, a + d2)
        d = np.clip(d, b - d2, b + d2)
        rows = [a, b, c, d]
    rows = np.array([r - np.log(np.exp(r).sum()) for r in rows])
    ok = (
        np.abs(rows[1] - rows[0]).max() <= d1 * (1 + 1e-12)
        and np.abs(rows[3] - rows[2]).max() <= d1 * (1 + 1e-12)
        and np.abs(rows[2] - rows[0]).max() <= d2 * (1 + 1e-12)
        and np.abs(rows[3] - rows[1]).max() <= d2 * (1 + 1e-12)
    )
    return rows if ok else None


@pytest.mark.parametrize("warp", [False, True])
def test_anchor_deltas_meet_both_axis_targets_and_shrink_with_the_cell(warp):
    rate = step_rate if warp else linear_slope_bound
    for tx, ty in [(1.0, 1.0), (0.5, 1.5), (0.05, 0.05), (1.0, 0.0)]:
        dx, dy = anchor_deltas(tx, ty, warp=warp)
        assert rate(dx, dy) <= tx and rate(dy, dx) <= ty
        assert dx <= tx and dy <= ty
    small = anchor_deltas(0.05, 0.05, warp=warp)[0] / 0.05
    large = anchor_deltas(1.0, 1.0, warp=warp)[0] / 1.0
    assert 0.95 < small < 1.0 and 0.6 < large < 0.8
    assert kl_bound(0.0) == 0.0


def test_warped_steps_let_the_anchors_use_more_budget():
    for target in (0.1, 0.5, 1.0, 2.0):
        plain = anchor_deltas(target, target, warp=False)[0]
        warped = anchor_deltas(target, target, warp=True)[0]
        assert warped > plain


@pytest.mark.parametrize("p", [1.0, 2.0, math.inf])
def test_budget_split_composes_to_epsilon_in_the_dual_norm(p):
    for fraction in (0.1, 0.5, 0.9):
        assert dual_norm(split_budget(4.0, p, fraction), p) == pytest.approx(4.0, rel=1e-12)


def test_sequential_one_dimensional_steps_equal_the_bilinear_formula():
    rng = np.random.default_rng(5)
    rows = np.log(rng.dirichlet(np.ones(6), size=4))  # anchors (0,0), (1,0), (0,1), (1,1)
    grid = AnchorGrid(0.0, 0.0, 1.0, 1.0, 2, 2)
    t, s = 0.3, 0.8

    def step(r0, r1, w):
        f = (1 - w) * r0 + w * r1
        return f - np.log(np.exp(f).sum())

    x_then_y = step(step(rows[0], rows[1], t), step(rows[2], rows[3], t), s)
    y_then_x = step(step(rows[0], rows[2], s), step(rows[1], rows[3], s), t)
    direct = grid.interpolate_log(rows, np.array([[t, s]]))[0]
    np.testing.assert_allclose(x_then_y, direct, rtol=0, atol=1e-13)
    np.testing.assert_allclose(y_then_x, direct, rtol=0, atol=1e-13)


# --------------------------------------------------------------- fitted mechanisms
@pytest.mark.parametrize("p", [1.0, 2.0, math.inf])
def test_anchor_rows_pass_the_exact_check_at_epsilon(fitted, p):
    mech = fitted[p, False]
    anchors = mech.grid_.xy
    diff = (anchors[:, None, :] - anchors[None, :, :]) / 1000.0
    dist = np.linalg.norm(diff, ord=p, axis=2)
    result = verify(mech.distribution_at(anchors), dist, EPS)
    assert result.passed, str(result)
    assert mech.info_["certified_epsilon"] <= EPS * (1 + 1e-12)


@pytest.mark.parametrize("p", [1.0, 2.0, math.inf])
def test_dense_off_anchor_pairs_stay_within_epsilon_and_naive_breaks(fitted, p):
    corrected = _max_loss_ratio(fitted[p, False], 10_000, seed=11, eps=EPS)
    naive = fitted[p, True]
    naive_ratio = _max_loss_ratio(naive, 10_000, seed=11, eps=EPS)
    assert corrected <= 1.0 + 1e-9
    assert naive_ratio > 1.05  # violations show in the same check
    assert naive_ratio <= naive.guarantee.epsilon_per_km / EPS * (1 + 1e-9)


@pytest.mark.slow
@pytest.mark.parametrize("p", [1.0, 2.0, math.inf])
def test_a_million_off_anchor_pairs_stay_within_epsilon(fitted, p):
    assert _max_loss_ratio(fitted[p, False], 1_000_000, seed=29, eps=EPS) <= 1.0 + 1e-9
    assert _max_loss_ratio(fitted[p, True], 100_000, seed=29, eps=EPS) > 1.05


def test_plain_steps_also_stay_within_epsilon_but_lose_more_utility(fitted):
    warped = fitted[2.0, False]
    plain = InterpMechanism(EPS, spacing_m=150.0, warp=False).fit(warped.domain_)
    assert not plain.info_["warped"] and warped.info_["warped"]
    assert _max_loss_ratio(plain, 10_000, seed=13, eps=EPS) <= 1.0 + 1e-9
    assert plain.info_["delta_1"] < warped.info_["delta_1"]
    assert warped.expected_loss() < plain.expected_loss()


def test_fitted_matrix_is_the_interpolation_at_the_secrets(fitted):
    mech = fitted[2.0, False]
    np.testing.assert_allclose(
        mech.matrix_, mech.distribution_at(mech.domain_.x_xy), rtol=1e-12, atol=0
    )
    assert mech.guarantee.epsilon_per_km == EPS and mech.guarantee.kind == "pure"


def test_locations_outside_the_box_are_clamped(fitted):
    mech = fitted[1.0, False]
    inside = np.array([[0.0, 275.0], [400.0, 600.0]])
    outside = np.array([[-500.0, 275.0], [900.0, 1e6]])
    np.testing.assert_array_equal(mech.distribution_at(outside), mech.distribution_at(inside))


def test_beats_the_exponential_mechanism_at_equal_epsilon(fitted):
    for p in (1.0, 2.0):
        mech = fitted[p, False]
        em = make("em", epsilon=EPS).fit(mech.domain_)
        assert mech.expected_loss() < em.expected_loss()


def test_optimised_budget_split_is_no_worse_than_the_equal_split():
    dom = Domain.from_points(
        Domain.from_bbox((0.0, 0.0, 200.0, 800.0), cell_m=50.0).x_xy,
        Domain.from_bbox((0.0, 0.0, 200.0, 800.0), cell_m=100.0).x_xy,
        metric="linf",
    )
    equal = InterpMechanism(7.0, spacing_m=200.0).fit(dom)
    best = InterpMechanism(7.0, spacing_m=200.0, budget_split="optimize").fit(dom)
    assert best.info_["n_lp_solves"] > 2
    assert best.info_["surrogate_loss_km"] <= equal.info_["surrogate_loss_km"] + 1e-9
    assert dual_norm((best.info_["eps_1"], best.info_["eps_2"]), math.inf) == pytest.approx(7.0)


# -------------------------------------------------------------------------- sampling
def test_sample_at_draws_with_the_interpolated_frequencies(fitted):
    mech = fitted[2.0, False]
    where = np.array([123.4, 456.7])
    p = mech.distribution_at(where)
    draws = mech.sample_at(np.repeat(where[None, :], 20_000, axis=0), np.random.default_rng(4))
    counts = np.bincount(draws, minlength=len(p))
    assert counts[p == 0].sum() == 0
    keep = p * 20_000 >= 5
    rest = (p > 0) & ~keep
    observed, expected = counts[keep], p[keep] * 20_000
    if rest.any():
        observed = np.append(observed, counts[rest].sum())
        expected = np.append(expected, p[rest].sum() * 20_000)
    expected *= observed.sum() / expected.sum()
    assert stats.chisquare(observed, expected).pvalue > 1e-4
    one = mech.sample_at(where, np.random.default_rng(8))
    assert isinstance(one, int) and one == mech.sample_at(where, np.random.default_rng(8))


# ------------------------------------------------------------------------ bad input
@pytest.mark.parametrize(
    ("params", "word"),
    [
        ({"spacing_m": 0.0}, "spacing_m"),
        ({"spacing_m": "100"}, "spacing_m"),
        ({"p": 3}, "p="),
        ({"budget_split": 1.5}, "budget_split"),
        ({"budget_split": "best"}, "budget_split"),
        ({"naive": "yes"}, "naive"),
        ({"warp": 1}, "warp"),
    ],
)
def test_bad_parameters_raise_input_error(params, word):
    with pytest.raises(InputError, match=word):
        InterpMechanism(4.0, **params)


def test_unfitted_use_and_bad_locations_are_refused(fitted):
    with pytest.raises(RuntimeError, match="not fitted"):
        InterpMechanism(4.0).distribution_at([0.0, 0.0])
    with pytest.raises(InputError, match="NaN"):
        fitted[2.0, False].distribution_at([[0.0, np.nan]])


def test_dense_check_helper_reports_naive_violations_only(fitted):
    corrected = dense_check(fitted[2.0, False], 5_000, seed=3)
    naive = dense_check(fitted[2.0, True], 5_000, seed=3)
    assert corrected.violation_ratio == 0.0 and corrected.max_ratio <= 1.0 + 1e-9
    assert naive.violation_ratio > 0.01 and naive.max_ratio > 1.05
