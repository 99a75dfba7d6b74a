"""The elimination's compiled kernel against the numpy formulas it replaces (the same bits)."""

from __future__ import annotations

import numpy as np
import pytest

from mdpsim.queries._kernels import all_finite, all_finite_nonnegative, band_rounds, trial_sums
from mdpsim.queries.elimination import distance_to, half_width_km


def _numpy_rounds(values, weighted_sum, rho_total, parts, std_km, noise, lam):
    """The rounds as the elimination computed them with numpy."""
    terms = parts[..., None] * (values + noise * std_km[..., None])
    terms[0] += weighted_sum
    totals = parts.copy()
    totals[0] += rho_total
    sums, totals = np.add.accumulate(terms, axis=0), np.add.accumulate(totals, axis=0)
    return sums, totals, sums / totals[..., None], half_width_km(totals, lam)


@pytest.mark.parametrize("seed", range(30))
def test_trial_sums_match_the_numpy_formulas(seed):
    rng = np.random.default_rng(seed)
    rounds, users, dim = int(rng.integers(1, 9)), int(rng.integers(1, 40)), 1 + seed % 2
    values = rng.uniform(-20, 20, (users, dim))
    weighted_sum = rng.uniform(-5, 5, (users, dim)) * (seed % 3 > 0)
    rho_total = rng.uniform(0, 3, users) * (seed % 3 > 0)
    parts = rng.choice([1e-3, 0.125, 0.5, 7.0], (rounds, users)) * rng.uniform(0.5, 2, users)
    std_km = 1.0 / np.sqrt(2.0 * parts) * (1.0 + 1e-12)
    noise = rng.standard_normal((rounds, users, dim))
    lam = float(rng.uniform(1, 5))
    got = trial_sums(values, weighted_sum, rho_total, parts, std_km, noise, lam)
    want = _numpy_rounds(values, weighted_sum, rho_total, parts, std_km, noise, lam)
    for a, b in zip(got, want, strict=True):
        assert a.shape == b.shape
        assert a.tobytes() == b.tobytes()


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf, -1.0, -5e-324, 0.0, 1e308])
def test_the_finite_checks_match_numpy(bad):
    for shape in [(7,), (3, 2), (0,), (0, 2)]:
        values = np.ones(shape)
        if values.size:
            values.flat[values.size // 2] = bad
        assert all_finite(values) == bool(np.isfinite(values).all())
        want = bool(np.isfinite(values).all() and not (values < 0).any())
        assert all_finite_nonnegative(values) == want
    strided = np.arange(12.0).reshape(3, 4)[:, ::2]
    strided[1, 1] = bad
    assert all_finite(strided) == bool(np.isfinite(strided).all())


@pytest.mark.parametrize("seed", range(30))
def test_band_rounds_match_the_numpy_rule(seed):
    rng = np.random.default_rng(100 + seed)
    rounds, users, dim = int(rng.integers(1, 9)), int(rng.integers(1, 30)), 1 + seed % 2
    values = rng.uniform(-3, 3, (users, dim))
    weighted_sum, rho_total = np.zeros((users, dim)), np.zeros(users)
    parts = rng.choice([0.05, 0.5, 30.0], (rounds, users))
    std_km = 1.0 / np.sqrt(2.0 * parts) * (1.0 + 1e-12)
    noise = rng.standard_normal((rounds, users, dim))
    lam, point = float(rng.uniform(1, 4)), rng.uniform(-2, 2, dim - 1 and 2)
    nu_low, nu_high = sorted(rng.uniform(-1, 3, 2)) if seed % 3 else (-np.inf, 0.6)
    users = np.sort(rng.choice(users + 3, users, replace=False))
    values, weighted_sum = (
        rng.uniform(-3, 3, (users.max() + 1, dim)),
        np.zeros((users.max() + 1, dim)),
    )
    rho_total = np.zeros(users.max() + 1)
    got = band_rounds(
        values, weighted_sum, rho_total, users, parts, std_km, noise, lam, point, nu_low, nu_high
    )
    sums, totals, mean, h = _numpy_rounds(
        values[users], weighted_sum[users], rho_total[users], parts, std_km, noise, lam
    )
    flat = mean.reshape(-1, dim)
    est = (distance_to(point)(flat) if dim == 2 else flat[:, 0]).reshape(totals.shape)
    out0, out1 = est - h > nu_high, est + h < nu_low
    settled = (out0 | out1).any(axis=1)
    first = int(settled.argmax()) if settled.any() else -1
    for a, b in zip(got[:4], (sums, totals, out0, out1), strict=True):
        assert a.tobytes() == b.tobytes()
    assert got[4] == first
