"""The PmDP auditor: exact densities, honest confidence, and planted over-budget releases."""

from __future__ import annotations

import math

import numpy as np
import pytest

from mdpsim.errors import InputError, PrivacyBudgetError
from mdpsim.mechanisms.dista_lp.release import ParameterRelease
from mdpsim.privacy.pmdp import (
    audit_pmdp,
    calibrate_scale,
    clopper_pearson_confidence,
    clopper_pearson_upper,
    hoeffding_confidence,
    samples_needed,
)


def _line_population(n: int = 30):
    """Records on a line (km); each releases its own position: sensitivity 1 per km."""
    x = np.linspace(0.0, 2.0, n)
    return x[:, None], np.abs(x[:, None] - x[None, :])


def _laplace(b: float, *, direction=0.0, noise="shifted") -> ParameterRelease:
    return ParameterRelease(
        np.array([-50.0]), np.array([50.0]), np.array([b]), np.zeros(1), np.array([direction]),
        noise=noise,
    )  # fmt: skip


def test_samples_needed_matches_the_binomial_zero_violation_rule():
    s = samples_needed(1e-4, 0.99)
    assert s == math.ceil(math.log(0.01) / math.log1p(-1e-4))
    assert clopper_pearson_confidence(0, s, 1e-4) >= 0.99
    assert clopper_pearson_confidence(0, s - 1, 1e-4) < 0.99


@pytest.mark.parametrize("k", [0, 1, 3, 7])
def test_clopper_pearson_upper_bound_is_exact_and_agrees_with_the_confidence(k):
    from scipy.stats import beta

    n, conf = 60_000, 0.99
    upper = clopper_pearson_upper(k, n, conf)
    assert upper == pytest.approx(beta.ppf(conf, k + 1, n - k), rel=1e-9)
    for delta in (0.5 * upper, 0.999 * upper, 1.001 * upper, 2 * upper):
        assert (upper <= delta) == (clopper_pearson_confidence(k, n, delta) >= conf)


def test_an_audit_reports_the_upper_bound_of_its_violation_rate():
    thetas, dist = _line_population()
    res = audit_pmdp(_laplace(2.0), thetas, dist, 1.0, 1e-3, n_samples=20_000,
                     rng=np.random.default_rng(0))  # fmt: skip
    assert res.p_upper == clopper_pearson_upper(res.n_violations, 20_000, 0.99)
    assert res.p_hat < res.p_upper and (res.p_upper <= 1e-3) == res.passed


def test_the_papers_100_samples_certify_almost_nothing():
    assert clopper_pearson_confidence(0, 100, 1e-4) < 0.011
    assert hoeffding_confidence(0.0, 100, 1e-4) == 0.0  # Prop. 2 is vacuous there


@pytest.mark.parametrize("noise", ["shifted", "onesided"])
@pytest.mark.parametrize("direction", [-1.0, 0.0, 1.0])
def test_logpdf_is_a_normalised_density_with_clip_atoms(noise, direction):
    rel = ParameterRelease(
        np.array([-1.0]), np.array([1.5]), np.array([0.7]), np.array([-0.2]),
        np.array([direction]), noise=noise,
    )  # fmt: skip
    theta = np.array([[0.3]])
    grid = np.linspace(-1.0, 1.5, 200_001)[1:-1]
    dens = np.exp(rel.logpdf(grid[:, None], np.repeat(theta, len(grid), axis=0)))
    interior = np.trapezoid(dens, grid)
    atoms = np.exp(rel.logpdf(np.array([[-1.0], [1.5]]), np.repeat(theta, 2, axis=0))).sum()
    assert interior + atoms == pytest.approx(1.0, abs=2e-4)


def test_atom_masses_match_sampling_frequencies(rng):
    rel = ParameterRelease(
        np.array([0.0]), np.array([3.0]), np.array([1.0]), np.array([-0.5]), np.array([-1.0]),
        noise="onesided",
    )  # fmt: skip
    theta = np.full((200_000, 1), 1.0)
    z = rel.sample(theta, rng)
    mass0 = math.exp(rel.logpdf(np.array([[0.0]]), theta[:1])[0])
    assert np.mean(z == 0.0) == pytest.approx(mass0, abs=0.005)
    assert mass0 == pytest.approx(math.exp(-0.5), rel=1e-12)


def test_audit_passes_a_release_calibrated_to_its_sensitivity(rng):
    thetas, dist = _line_population()
    eps = 2.0
    res = audit_pmdp(_laplace(1 / eps), thetas, dist, eps, 1e-3, confidence=0.95, rng=rng)
    assert res.n_violations == 0 and res.passed
    assert res.n_samples == samples_needed(1e-3, 0.95)
    assert res.confidence >= 0.95


def test_audit_finds_a_planted_release_with_half_the_noise_it_needs(rng):
    thetas, dist = _line_population()
    eps = 2.0
    res = audit_pmdp(_laplace(0.5 / eps), thetas, dist, eps, 1e-3, confidence=0.95, rng=rng)
    assert not res.passed
    assert res.p_hat > 0.1  # the loss exceeds eps on a constant fraction of outputs
    assert res.confidence < 1e-6


def test_onesided_noise_has_infinite_privacy_loss_off_the_support(rng):
    thetas, dist = _line_population()
    res = audit_pmdp(
        _laplace(5.0, direction=-1.0, noise="onesided"), thetas, dist, 2.0, 1e-3,
        confidence=0.9, rng=rng,
    )  # fmt: skip
    assert res.n_infinite > 0 and not res.passed


def test_binary_search_lands_just_above_the_true_scale(rng):
    thetas, dist = _line_population()
    eps = 2.0
    beta, res = calibrate_scale(
        lambda b: _laplace(b), thetas, dist, eps, 1e-3, confidence=0.9, rng=rng, start=0.01
    )
    assert res.passed
    assert 0.8 / eps <= beta <= 1.05 / eps


def test_binary_search_fails_closed_when_no_scale_suffices(rng):
    thetas, dist = _line_population()
    dist = dist.copy()
    dist[0, 1] = dist[1, 0] = 0.0  # two different releases for one place: never private
    with pytest.raises(PrivacyBudgetError):
        calibrate_scale(
            lambda b: _laplace(b, direction=-1.0, noise="onesided"), thetas, dist, 1.0, 1e-3,
            confidence=0.9, rng=rng, max_scale=100.0,
        )  # fmt: skip


@pytest.mark.parametrize(
    "kwargs",
    [{"delta": float("nan")}, {"delta": 0.0}, {"delta": 1.0}, {"confidence": 1.0},
     {"epsilon": float("inf")}, {"epsilon": -1.0}],
)  # fmt: skip
def test_auditor_rejects_bad_parameters(kwargs, rng):
    thetas, dist = _line_population(5)
    args = {"epsilon": 1.0, "delta": 1e-3, "confidence": 0.9} | kwargs
    with pytest.raises(InputError):
        audit_pmdp(_laplace(1.0), thetas, dist, args["epsilon"], args["delta"],
                   confidence=args["confidence"], rng=rng)  # fmt: skip


def test_auditor_rejects_nan_parameters_and_bad_shapes(rng):
    thetas, dist = _line_population(5)
    with pytest.raises(InputError):
        audit_pmdp(_laplace(1.0), np.full_like(thetas, np.nan), dist, 1.0, 1e-3, rng=rng)
    with pytest.raises(InputError):
        audit_pmdp(_laplace(1.0), thetas, dist[:3], 1.0, 1e-3, rng=rng)


@pytest.mark.parametrize("noise", ["shifted", "onesided"])
@pytest.mark.parametrize("scale", [0.05, 1.0, 30.0])
def test_fast_log_ratios_equal_the_difference_of_log_densities(noise, scale):
    """Including clip atoms (up to ~all coordinates clipped) and impossible outputs (+inf)."""
    rng = np.random.default_rng(3)
    d, n_records, n = 300, 12, 400
    lo = rng.uniform(-1.0, 0.0, d)
    hi = lo + rng.uniform(0.5, 2.0, d)
    rel = ParameterRelease(
        lo, hi, rng.uniform(0.5, 1.5, d) * scale, rng.normal(0.0, 0.1, d),
        rng.choice([-1.0, 0.0, 1.0], d), noise=noise,
    )  # fmt: skip
    thetas = rng.uniform(lo, hi, (n_records, d))
    i = rng.integers(0, n_records, n)
    j = (i + 1 + rng.integers(0, n_records - 1, n)) % n_records
    u = rng.random((n, d))
    z = rel.transform(thetas[i], u)
    with np.errstate(invalid="ignore"):
        expected = rel.logpdf(z, thetas[i]) - rel.logpdf(z, thetas[j])
    got = rel.for_records(thetas).log_ratios(i, j, u)
    finite = np.isfinite(expected)
    assert np.array_equal(finite, np.isfinite(got))
    assert np.all(got[~finite] == np.inf)
    np.testing.assert_allclose(got[finite], expected[finite], rtol=1e-12, atol=1e-9)
