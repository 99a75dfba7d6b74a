"""One conformance suite for EVERY registered mechanism (``sim.mechanisms.available()``).

Each mechanism is built as ``make(name, epsilon=eps, **cls.conformance_params)`` on the two
40-point fixtures and must: release a non-negative row-stochastic matrix; pass the exact
verifier (full check, all pairs) against the true distances of ``mech.domain_`` at every
budget; be deterministic (same parameters -> same matrix; same seed -> same samples); sample
with the frequencies of its rows; and reject bad parameters with InputError.

Chi-square false-alarm rate: each mechanism runs CHI2_TESTS goodness-of-fit tests at level
ALPHA / CHI2_TESTS, so a correct mechanism fails this check with probability <= ALPHA = 1e-4
over the random seed (the seed is fixed, so the outcome is reproducible).
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from sim.errors import InputError
from sim.mechanisms import available, make
from sim.mechanisms.base import _REGISTRY
from sim.privacy import verify

BUDGETS = (0.5, 4.0, 10.0)
DOMAINS = ("road_domain_small", "l2_domain_small")
ALPHA = 1e-4
CHI2_ROWS = (0, 17)
CHI2_TESTS = len(CHI2_ROWS) * len(DOMAINS)
N_DRAWS = 20_000
_FITTED: dict = {}


def _params(name: str) -> dict:
    return dict(_REGISTRY[name].conformance_params)


def _fitted(name: str, domain_name: str, eps: float, request):
    key = (name, domain_name, eps)
    if key not in _FITTED:
        domain = request.getfixturevalue(domain_name)
        _FITTED[key] = make(name, epsilon=eps, **_params(name)).fit(domain)
    return _FITTED[key]


@pytest.mark.parametrize("domain_name", DOMAINS)
@pytest.mark.parametrize("eps", BUDGETS)
@pytest.mark.parametrize("name", available())
def test_mechanism_releases_a_verified_row_stochastic_matrix(name, eps, domain_name, request):
    mech = _fitted(name, domain_name, eps, request)
    Z, dom = mech.matrix_, mech.domain_
    assert Z.shape == (dom.n_x, dom.n_y)
    assert np.all(np.isfinite(Z)) and Z.min() >= 0
    np.testing.assert_allclose(Z.sum(axis=1), 1.0, rtol=0, atol=1e-12)
    result = verify(Z, dom.dist_xx, eps)
    assert result.passed, str(result)
    assert result.smallest_epsilon <= eps * (1 + 1e-9)
    if mech.guarantee.kind == "pure":
        assert mech.info_["verified_epsilon"] == pytest.approx(result.smallest_epsilon, rel=1e-9)


@pytest.mark.parametrize("domain_name", DOMAINS)
@pytest.mark.parametrize("name", available())
def test_same_parameters_and_seed_give_same_matrix_and_samples(name, domain_name, request):
    first = _fitted(name, domain_name, 4.0, request)
    second = make(name, epsilon=4.0, **_params(name)).fit(request.getfixturevalue(domain_name))
    np.testing.assert_array_equal(first.matrix_, second.matrix_)
    rows = np.arange(first.matrix_.shape[0]).repeat(5)
    a = first.sample_many(rows, np.random.default_rng(7))
    b = second.sample_many(rows, np.random.default_rng(7))
    np.testing.assert_array_equal(a, b)
    assert first.sample(3, np.random.default_rng(9)) == second.sample(3, np.random.default_rng(9))


@pytest.mark.parametrize("domain_name", DOMAINS)
@pytest.mark.parametrize("name", available())
def test_sample_frequencies_match_the_matrix_rows(name, domain_name, request):
    mech = _fitted(name, domain_name, 4.0, request)
    rng = np.random.default_rng(2024)
    for row in CHI2_ROWS:
        row = row % mech.matrix_.shape[0]
        draws = mech.sample_many(np.full(N_DRAWS, row), rng)
        p = mech.matrix_[row]
        assert np.all(p[draws] > 0), "an output of probability 0 was sampled"
        observed, expected = _pooled(np.bincount(draws, minlength=len(p)), p * N_DRAWS)
        if len(observed) < 2:
            continue  # all mass in one output: nothing to test beyond the support check
        pvalue = stats.chisquare(observed, expected).pvalue
        assert pvalue > ALPHA / CHI2_TESTS, f"row {row}: chi-square p = {pvalue:.2e}"


@pytest.mark.parametrize("bad", [0, -1.0, float("nan"), float("inf"), "4", True, None])
@pytest.mark.parametrize("name", available())
def test_bad_epsilon_is_rejected_in_the_constructor(name, bad):
    with pytest.raises(InputError, match="epsilon"):
        make(name, epsilon=bad, **_params(name))


@pytest.mark.parametrize("name", available())
def test_unknown_parameter_is_rejected(name):
    with pytest.raises(TypeError):
        make(name, epsilon=1.0, no_such_parameter=1, **_params(name))


def _pooled(observed: np.ndarray, expected: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Merge the cells expected below 5 draws into one, as the chi-square test needs."""
    small = expected < 5
    obs, exp = observed[~small], expected[~small]
    if small.any() and expected[small].sum() > 0:
        obs = np.append(obs, observed[small].sum())
        exp = np.append(exp, expected[small].sum())
    return obs, exp * (obs.sum() / exp.sum())
