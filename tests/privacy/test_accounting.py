"""Geo-privacy notions, conversions, the Gaussian CGP mechanism and the Gaussian norm bound."""

import math

import numpy as np
import pytest
from scipy import integrate, stats

from mdpsim.errors import InputError
from mdpsim.privacy.accounting import (
    CGP,
    ApproxGP,
    PureGP,
    approx_gp_to_cgp_budget,
    cgp_delta,
    cgp_to_approx_gp,
    gaussian_noise_std_km,
    gaussian_norm_bound,
    gaussian_release,
    gp_to_cgp,
    laurent_massart_bound,
)

CASES = [(1.0, 1e-6, 1.0), (50.0, 1e-5, 0.5), (0.01, 1e-9, 10.0), (100.0, 1e-3, 0.01)]


def _gaussian_hockey_stick(rho, eps, d):
    """Exact delta of the rho-CGP Gaussian mechanism for a pair at distance d (km)."""
    mu, s = rho * d * d, math.sqrt(2.0 * rho) * d
    return stats.norm.cdf((mu - eps * d) / s) - math.exp(eps * d) * stats.norm.cdf(
        (-mu - eps * d) / s
    )


def test_pure_gp_implies_half_epsilon_squared_cgp():
    assert gp_to_cgp(3.0) >= 4.5
    assert gp_to_cgp(3.0) == pytest.approx(4.5, rel=1e-11)


@pytest.mark.parametrize(("rho", "delta", "lam"), CASES)
def test_cgp_to_approx_gp_holds_for_the_gaussian_at_every_distance_up_to_lambda(rho, delta, lam):
    eps = cgp_to_approx_gp(rho, delta=delta, lambda_km=lam).epsilon_per_km
    worst = max(_gaussian_hockey_stick(rho, eps, d) for d in np.linspace(lam / 2000, lam, 2000))
    assert worst <= delta
    # ... and is no looser than the classic rho*Lambda + 2 sqrt(rho log(1/delta)).
    assert eps <= rho * lam + 2.0 * math.sqrt(rho * math.log(1.0 / delta))


@pytest.mark.parametrize(("rho", "delta", "lam"), CASES)
def test_conversions_are_mutually_consistent(rho, delta, lam):
    eps = cgp_to_approx_gp(rho, delta=delta, lambda_km=lam).epsilon_per_km
    assert approx_gp_to_cgp_budget(eps, delta=delta, lambda_km=lam) == pytest.approx(rho, rel=1e-6)
    assert cgp_delta(rho, epsilon_per_km=eps, lambda_km=lam) == pytest.approx(delta, rel=1e-6)
    # A smaller epsilon must cost a larger delta.
    assert cgp_delta(rho, epsilon_per_km=0.9 * eps, lambda_km=lam) > delta


def test_the_cgp_budget_of_an_approximate_budget_never_converts_above_it():
    for eps, delta, lam in [(5.0, 1e-6, 1.0), (1.0, 1e-8, 3.0), (40.0, 1e-4, 0.1)]:
        rho = approx_gp_to_cgp_budget(eps, delta=delta, lambda_km=lam)
        assert rho > 0
        assert cgp_to_approx_gp(rho, delta=delta, lambda_km=lam).epsilon_per_km <= eps * (1 + 1e-9)


@pytest.mark.parametrize(
    "bad",
    [
        lambda: cgp_to_approx_gp(1.0, delta=1e-6, lambda_km=math.inf),
        lambda: cgp_to_approx_gp(1.0, delta=0.0, lambda_km=1.0),
        lambda: cgp_to_approx_gp(float("nan"), delta=1e-6, lambda_km=1.0),
        lambda: gp_to_cgp(-1.0),
        lambda: CGP(float("inf")),
        lambda: PureGP(-0.5),
        lambda: ApproxGP(1.0, 1.5, 1.0),
        lambda: gaussian_noise_std_km(np.array([1.0, 0.0])),
        lambda: gaussian_norm_bound(2, 0.0),
    ],
)
def test_bad_parameters_raise_input_errors(bad):
    with pytest.raises(InputError):
        bad()


@pytest.mark.parametrize("alpha", [1.5, 2.0, 8.0])
def test_gaussian_mechanism_meets_the_cgp_renyi_bound(alpha):
    rho, lip, d = 3.0, 2.0, 0.4  # a 2-Lipschitz phi moves by at most 0.8 km
    sigma = float(gaussian_noise_std_km(rho, lipschitz=lip))
    shift = lip * d

    def integrand(z):
        logp, logq = stats.norm.logpdf(z, 0.0, sigma), stats.norm.logpdf(z, shift, sigma)
        return math.exp(alpha * logp + (1 - alpha) * logq)

    centre = (1 - alpha) * shift  # the tilted density is Gaussian around here
    val, _ = integrate.quad(integrand, centre - 20 * sigma, centre + 20 * sigma, limit=200)
    renyi = math.log(val) / (alpha - 1)
    assert renyi <= rho * alpha * d * d
    assert renyi == pytest.approx(rho * alpha * d * d, rel=1e-6)


def test_gaussian_release_has_the_stated_noise_and_per_user_scales():
    rng = np.random.default_rng(1)
    rho = np.array([0.5] * 20000 + [50.0] * 20000)
    out = gaussian_release(np.zeros((40000, 2)), rho, rng=rng)
    assert np.std(out[:20000]) == pytest.approx(1.0, rel=0.02)
    assert np.std(out[20000:]) == pytest.approx(0.1, rel=0.02)


@pytest.mark.parametrize("d", [1, 2, 3])
def test_gaussian_norm_bound_is_the_exact_tail_quantile(d):
    rng = np.random.default_rng(d)
    beta = 0.05
    z = np.linalg.norm(rng.standard_normal((200000, d)), axis=1)
    rate = float(np.mean(z > gaussian_norm_bound(d, beta)))
    assert abs(rate - beta) < 4 * math.sqrt(beta * (1 - beta) / len(z))


def test_norm_bound_closed_forms_and_laurent_massart_dominates():
    betas = np.array([0.3, 1e-3, 1e-9])
    assert np.allclose(gaussian_norm_bound(2, betas), np.sqrt(2 * np.log(1 / betas)))
    assert np.allclose(gaussian_norm_bound(1, betas), stats.norm.isf(betas / 2))
    for d in (1, 2, 5):
        assert np.all(laurent_massart_bound(d, betas) >= gaussian_norm_bound(d, betas))
