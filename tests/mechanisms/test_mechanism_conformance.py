"""One conformance suite for EVERY registered mechanism (``mdpsim.mechanisms.available()``).

Each mechanism is built as ``make(name, epsilon=eps, **cls.conformance_params)`` on the two
40-point fixtures and must: release a non-negative row-stochastic matrix with one row per
secret of the domain given to ``fit`` (index ``i`` samples secret ``i`` of that domain); pass
the exact verifier (full check, all pairs) against that domain's true distances at every
budget; be deterministic (same parameters -> same matrix; same seed -> same samples); sample
with the frequencies of its rows; reject bad parameters with InputError; take every parameter
after ``epsilon`` by keyword; round-trip ``make(name, **m.get_params())``; leave its
parameters unchanged by ``fit``; and state a ``guarantee`` that composes ``report_guarantee``
(pure, certified on ``matrix_``) and ``upload_guarantee``.

Chi-square false-alarm rate: each mechanism runs CHI2_TESTS goodness-of-fit tests at level
ALPHA / CHI2_TESTS, so a correct mechanism fails this check with probability <= ALPHA = 1e-4
over the random seed (the seed is fixed, so the outcome is reproducible).
"""

from __future__ import annotations

import copy
import inspect

import numpy as np
import pytest
from scipy import stats

from mdpsim.errors import InputError
from mdpsim.mechanisms import available, make
from mdpsim.mechanisms.base import mechanism_class
from mdpsim.privacy import verify

#: eps 4 in the default suite; the extremes (near-uniform, near-identity) in CI's slow run
BUDGETS = (
    pytest.param(0.5, marks=pytest.mark.slow),
    4.0,
    pytest.param(10.0, marks=pytest.mark.slow),
)
DOMAINS = ("road_domain_small", "l2_domain_small")
ALPHA = 1e-4
CHI2_ROWS = (0, 17)
CHI2_TESTS = len(CHI2_ROWS) * len(DOMAINS)
N_DRAWS = 20_000
_FITTED: dict = {}
_PARAMS_BEFORE_FIT: dict = {}


def _params(name: str) -> dict:
    return dict(mechanism_class(name).conformance_params)


def _users(name: str) -> dict:
    """``fit``'s users: four, two sharing a secret (ignored unless it needs its users)."""
    return {"users": np.array([0, 5, 5, 17])}


def _fitted(name: str, domain_name: str, eps: float, request):
    key = (name, domain_name, eps)
    if key not in _FITTED:
        domain = request.getfixturevalue(domain_name)
        mech = make(name, epsilon=eps, **_params(name))
        _PARAMS_BEFORE_FIT[key] = copy.deepcopy(mech.get_params())
        _FITTED[key] = mech.fit(domain, **_users(name))
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
    if mech.report_guarantee.kind == "pure":
        assert mech.info_["verified_epsilon"] == pytest.approx(result.smallest_epsilon, rel=1e-9)


@pytest.mark.parametrize("domain_name", DOMAINS)
@pytest.mark.parametrize("name", available())
def test_same_parameters_and_seed_give_same_matrix_and_samples(name, domain_name, request):
    first = _fitted(name, domain_name, 4.0, request)
    second = make(name, epsilon=4.0, **_params(name))
    second.fit(request.getfixturevalue(domain_name), **_users(name))
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
def test_unknown_parameter_is_rejected_naming_it(name):
    with pytest.raises(InputError, match=f"'{name}' has no parameter 'no_such_parameter'"):
        make(name, epsilon=1.0, no_such_parameter=1, **_params(name))


@pytest.mark.parametrize("domain_name", DOMAINS)
@pytest.mark.parametrize("eps", BUDGETS)
@pytest.mark.parametrize("name", available())
def test_matrix_has_one_row_per_secret_of_the_domain_given_to_fit(name, eps, domain_name, request):
    domain = request.getfixturevalue(domain_name)
    mech = _fitted(name, domain_name, eps, request)
    assert mech.domain_ is domain
    assert mech.matrix_.shape == (domain.n_x, domain.n_y)
    # the README's own example, for every mechanism
    assert verify(mech.matrix_, domain.dist_xx, eps).passed
    last = domain.n_x - 1  # index i is secret i of `domain`, for sampling too
    draws = mech.sample_many(np.full(50, last), np.random.default_rng(1))
    assert np.all(mech.matrix_[last, draws] > 0)
    with pytest.raises(InputError, match="secret indices"):
        mech.sample_many([domain.n_x], np.random.default_rng(1))


@pytest.mark.parametrize("domain_name", DOMAINS)
@pytest.mark.parametrize("name", available())
def test_guarantee_is_the_composition_of_report_and_upload(name, domain_name, request):
    mech = _fitted(name, domain_name, 4.0, request)
    whole, report, upload = mech.guarantee, mech.report_guarantee, mech.upload_guarantee
    # every report is a draw from matrix_, so what it costs is pure and certified
    assert report.kind == "pure"
    assert verify(mech.matrix_, mech.domain_.dist_xx, report.epsilon_per_km).passed
    if upload is None:
        assert (whole.kind, whole.epsilon_per_km, whole.delta) == ("pure", report.epsilon_per_km, 0)
        return
    assert whole.epsilon_per_km == pytest.approx(
        report.epsilon_per_km + upload.epsilon_per_km, rel=1e-12
    )
    assert whole.delta == pytest.approx(report.delta + upload.delta, rel=1e-12)
    assert whole.kind == upload.kind  # the report part is pure
    assert whole.epsilon_per_km <= 4.0 * (1 + 1e-12)


@pytest.mark.parametrize(
    "name",
    available(),
)
def test_parameters_after_epsilon_are_keyword_only(name):
    params = list(inspect.signature(mechanism_class(name).__init__).parameters.values())[1:]
    assert params[0].name == "epsilon"
    # (a **catch-all of deprecated keywords, dista_lp's flat scheme parameters, is allowed)
    positional = [p.name for p in params[1:] if p.kind not in (p.KEYWORD_ONLY, p.VAR_KEYWORD)]
    assert not positional, f"{name}: {positional} must be keyword-only (after *)"


@pytest.mark.parametrize("name", available())
def test_get_params_round_trips_through_make(name):
    mech = make(name, epsilon=4.0, **_params(name))
    params = mech.get_params()
    signature = inspect.signature(type(mech).__init__).parameters.values()
    named = {p.name for p in signature if p.kind is not p.VAR_KEYWORD}  # (deprecated catch-all)
    assert set(params) == named - {"self"}
    assert params["epsilon"] == 4.0
    for key, value in _params(name).items():
        _assert_same(params[key], value, key)
    rebuilt = make(name, **params)
    assert type(rebuilt) is type(mech)
    for key, value in params.items():
        _assert_same(rebuilt.get_params()[key], value, key)


@pytest.mark.parametrize("domain_name", DOMAINS)
@pytest.mark.parametrize("name", available())
def test_fit_does_not_change_the_parameters(name, domain_name, request):
    mech = _fitted(name, domain_name, 4.0, request)
    before = _PARAMS_BEFORE_FIT[(name, domain_name, 4.0)]
    after = mech.get_params()
    assert set(after) == set(before)
    for key, value in before.items():
        _assert_same(after[key], value, key)
    rebuilt = make(name, **after)  # fitted state (e.g. interp's solution) is not a parameter
    assert not hasattr(rebuilt, "matrix_")


def test_get_params_refuses_a_signature_that_hides_parameters():
    class Hidden(mechanism_class("em")):
        def __init__(self, epsilon: float, **params) -> None:
            super().__init__(epsilon)

    with pytest.raises(TypeError, match="must list its parameters"):
        Hidden(1.0).get_params()


def _assert_same(actual, expected, key: str) -> None:
    if isinstance(expected, np.ndarray) or isinstance(actual, np.ndarray):
        np.testing.assert_array_equal(actual, expected, err_msg=key)
    else:
        assert type(actual) is type(expected) and actual == expected, (
            f"{key}: {actual!r} != {expected!r}"
        )


def _pooled(observed: np.ndarray, expected: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Merge the cells expected below 5 draws into one, as the chi-square test needs."""
    small = expected < 5
    obs, exp = observed[~small], expected[~small]
    if small.any() and expected[small].sum() > 0:
        obs = np.append(obs, observed[small].sum())
        exp = np.append(exp, expected[small].sum())
    return obs, exp * (obs.sum() / exp.sum())
