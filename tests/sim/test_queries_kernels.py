"""The elimination's compiled kernels against the numpy formulas they replace (the same bits)."""

from __future__ import annotations

import numpy as np
import pytest

from mdpsim.queries._kernels import all_finite, all_finite_nonnegative, trial_sums
from mdpsim.queries.elimination import half_width_km


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
