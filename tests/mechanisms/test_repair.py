"""The Lipschitz-envelope repair: exact mDP after the fix, proven bound, fail closed."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from mdpsim._core.validation import check_margin
from mdpsim.errors import InputError
from mdpsim.geo.domain import Domain
from mdpsim.mechanisms.lp import repair as repair_mod
from mdpsim.mechanisms.lp.repair import lipschitz_envelope, repair, repair_verified
from mdpsim.privacy.verifier import PrivacyViolation, verify


def _points(n: int, seed: int, size_m: float = 3000.0) -> Domain:
    rng = np.random.default_rng(seed)
    return Domain.from_points(rng.uniform(0, size_m, (n, 2)), metric="l2")


def _tent_matrix(domain: Domain, eps: float) -> np.ndarray:
    """The exponential mechanism: eps-mDP, many entries far below 1e-6 at large eps."""
    Z = np.exp(-eps * domain.dist_xy / 2)
    return Z / Z.sum(axis=1, keepdims=True)


def test_planted_1e7_violations_are_fixed_and_verified():
    rng = np.random.default_rng(1)
    xy = rng.uniform(0, 3000, (40, 2))
    xy[1] = xy[0] + [2.0, 0.0]  # a 2 m pair, as on the Helsinki network
    domain = Domain.from_points(xy, metric="l2")
    eps, margin = 10.0, 1e-3
    Z = _tent_matrix(domain, eps * (1 - margin))  # what an LP at the reduced budget returns
    assert Z.min() < 1e-7
    bumped = Z.copy()
    bumped[0, domain.dist_xy[0] > 2.5] += 1e-7  # solver-tolerance noise on tiny entries
    bumped /= bumped.sum(axis=1, keepdims=True)
    assert not verify(bumped, domain.dist_xx, eps).passed
    result = repair_verified(bumped, domain.dist_xx, eps, margin=margin)
    assert result.verification.passed
    assert verify(result.matrix, domain.dist_xx, eps).passed
    np.testing.assert_allclose(result.matrix.sum(axis=1), 1.0, atol=1e-12)
    assert result.max_change < 1e-6


@pytest.mark.parametrize("side", ["upper", "lower"])
def test_envelope_equals_bruteforce_min_over_all_secrets(side):
    domain = _points(25, seed=3)
    rng = np.random.default_rng(4)
    Z = rng.uniform(0.01, 1.0, (25, 7))
    eps = 3.0
    logs, D = np.log(Z), domain.dist_xx
    if side == "upper":
        expected = np.max(logs[None, :, :] - eps * D[:, :, None], axis=1)
    else:
        expected = np.min(logs[None, :, :] + eps * D[:, :, None], axis=1)
    for pairs in (None, domain.constraint_pairs):
        got = lipschitz_envelope(Z, D, eps, pairs=pairs, side=side)
        np.testing.assert_allclose(np.log(got), expected, rtol=0, atol=1e-12)


@pytest.mark.parametrize("side", ["upper", "lower"])
def test_envelope_is_exactly_mdp_and_on_the_right_side(side):
    domain = _points(30, seed=5)
    Z = np.random.default_rng(6).uniform(0.0, 1.0, (30, 12)) ** 4
    U = lipschitz_envelope(Z, domain.dist_xx, 2.0, side=side)
    assert verify(U, domain.dist_xx, 2.0, stochastic=False).passed  # rows not normalised
    assert np.all(U >= Z * (1 - 1e-12)) if side == "upper" else np.all(U <= Z * (1 + 1e-12))


def test_road_envelope_with_chaining_pairs_matches_all_pairs(road_domain_small):
    d = road_domain_small
    Z = np.random.default_rng(7).uniform(0.0, 1.0, (d.n_x, d.n_y)) ** 3
    by_pairs = lipschitz_envelope(Z, d.dist_xx, 5.0, pairs=d.constraint_pairs)
    by_all = lipschitz_envelope(Z, d.dist_xx, 5.0)
    np.testing.assert_allclose(by_pairs, by_all, rtol=1e-12)


def test_half_margin_repairs_any_matrix_and_certified_bound_holds():
    domain = _points(20, seed=8)
    Z = np.random.default_rng(9).uniform(0.0, 1.0, (20, 20)) ** 6  # far from mDP
    eps = 4.0
    result = repair_verified(Z, domain.dist_xx, eps, margin=0.5)
    assert result.verification.passed
    assert result.certified_epsilon <= eps * (1 + 1e-12)
    small = repair(Z, domain.dist_xx, 3.0)
    assert verify(small.matrix, domain.dist_xx, small.certified_epsilon).passed


def test_upper_envelope_fills_a_zero_and_lower_drops_its_column():
    domain = _points(10, seed=10)
    Z = _tent_matrix(domain, 2.0)
    Z[4, 3] = 0.0
    upper = repair(Z, domain.dist_xx, 1.9, side="upper")
    lower = repair(Z, domain.dist_xx, 1.9, side="lower")
    assert upper.matrix[4, 3] > 0
    assert np.all(lower.matrix[:, 3] == 0)
    assert verify(upper.matrix, domain.dist_xx, 2.0).passed
    # losing a whole column spreads the row sums: only the certified bound is promised
    assert verify(lower.matrix, domain.dist_xx, lower.certified_epsilon).passed


def test_failed_verification_raises_never_returns(monkeypatch):
    domain = _points(10, seed=11)
    Z = np.random.default_rng(12).uniform(0.0, 1.0, (10, 10)) ** 8
    Z /= Z.sum(axis=1, keepdims=True)
    fake = repair(Z, domain.dist_xx, 1.0)
    monkeypatch.setattr(
        repair_mod, "repair", lambda *a, **k: fake.__class__(**{**fake.__dict__, "matrix": Z})
    )
    with pytest.raises(PrivacyViolation):
        repair_verified(Z, domain.dist_xx, 1.0, margin=0.1)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"matrix": -np.ones((3, 2))}, "below"),
        ({"dist": np.zeros((3, 3))}, "dist"),
        ({"side": "middle"}, "side"),
        ({"epsilon": 0.0}, "epsilon"),
    ],
)
def test_bad_inputs_raise_input_error(kwargs, match):
    domain = _points(3, seed=13)
    args = {"matrix": np.full((3, 2), 0.5), "dist": domain.dist_xx, "epsilon": 1.0}
    args.update(kwargs)
    side = args.pop("side", "upper")
    with pytest.raises(InputError, match=match):
        lipschitz_envelope(args["matrix"], args["dist"], args["epsilon"], side=side)
    with pytest.raises(InputError, match="margin"):
        repair_verified(np.full((3, 2), 0.5), domain.dist_xx, 1.0, margin=0.0)


def test_release_verified_grows_the_margin_and_resolves_until_the_check_passes(monkeypatch):
    domain = _points(12, seed=5)
    eps = 4.0
    real = repair_mod.verify
    calls = []

    def flaky(matrix, dist, epsilon, **kw):  # the first two exact checks fail (planted)
        calls.append(1)
        result = real(matrix, dist, epsilon, **kw)
        return dataclasses.replace(result, passed=result.passed and len(calls) > 2)

    resolved = []

    def resolve(margin):
        resolved.append(margin)
        return _tent_matrix(domain, eps * (1 - margin))

    monkeypatch.setattr(repair_mod, "verify", flaky)
    out = repair_mod.release_verified(
        _tent_matrix(domain, eps), domain.dist_xx, eps, margin=1e-6, resolve=resolve
    )
    assert resolved == pytest.approx([1e-5, 1e-4], rel=1e-12)
    assert out.margin == pytest.approx(1e-4, rel=1e-12) and out.rounds == 3
    assert out.verification.passed and real(out.matrix, domain.dist_xx, eps).passed


def test_release_verified_keeps_a_passing_input_and_fails_closed_at_the_max_margin(monkeypatch):
    domain = _points(10, seed=6)
    Z = _tent_matrix(domain, 3.0)
    kept = repair_mod.release_verified(Z, domain.dist_xx, 3.0, margin=1e-3, check_first=True)
    assert kept.rounds == 0 and np.array_equal(kept.matrix, Z)
    real = repair_mod.verify
    monkeypatch.setattr(
        repair_mod,
        "verify",
        lambda *a, **kw: dataclasses.replace(real(*a, **kw), passed=False),
    )
    with pytest.raises(PrivacyViolation, match="planted-who.*margin 0.5"):
        repair_mod.release_verified(Z, domain.dist_xx, 3.0, margin=1e-3, who="planted-who")


@pytest.mark.parametrize("margin", [0.0, 0.6, float("nan"), True])
def test_check_margin_rejects_values_outside_the_interval(margin):
    with pytest.raises(InputError, match="margin"):
        check_margin(margin, repair_mod.MAX_MARGIN)
