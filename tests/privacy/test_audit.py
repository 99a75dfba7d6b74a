"""The black-box auditor catches planted bugs and raises no false alarm on correct mechanisms."""

from __future__ import annotations

import numpy as np
import planted  # tests/privacy/planted.py: reference samplers, correct and with planted bugs
import pytest
from scipy.optimize import brentq
from scipy.stats import beta, binom

from mdpsim.errors import InputError
from mdpsim.geo.domain import Domain
from mdpsim.mechanisms import available, make, mechanism_class
from mdpsim.mechanisms.em import exponential_matrix
from mdpsim.privacy.audit import (
    audit,
    matrix_sampler,
    mechanism_sampler,
)
from mdpsim.privacy.pmdp import clopper_pearson_lower, clopper_pearson_upper
from mdpsim.privacy.sampling import sample_rows
from mdpsim.privacy.verifier import verify

EPS = 2.0  # per km
LINE_STEP_KM = 0.1
LINE_KM = np.arange(40) * LINE_STEP_KM
LINE_DIST = np.abs(LINE_KM[:, None] - LINE_KM[None, :])
GRID_KM = np.stack(np.meshgrid(np.arange(9.0), np.arange(9.0)), axis=-1).reshape(-1, 2)
GRID_DIST = np.linalg.norm(GRID_KM[:, None] - GRID_KM[None, :], axis=2)
ROAD_EPS = 4.0  # per km, as in the issue: claimed 4, true 4.8


def _audit(sample, dist, eps, seed=0, **kw):
    return audit(sample, dist, eps, rng=np.random.default_rng(seed), **kw)


@pytest.fixture(scope="module")
def road(helsinki_test_walk):
    """A 50-point road domain of the test extract and EM tuned to a true epsilon."""
    domain = Domain.from_network(helsinki_test_walk, n_points=50, seed=0)
    d = domain.dist_xx

    def em_with_true_epsilon(true_eps: float) -> np.ndarray:
        def gap(e):
            return verify(exponential_matrix(d, e), d, 1e9).smallest_epsilon - true_eps

        return exponential_matrix(d, brentq(gap, true_eps, 2.5 * true_eps, xtol=1e-9))

    return d, em_with_true_epsilon


def _matrix_sampler(matrix):
    return lambda i, n, rng: sample_rows(matrix, np.full(n, i), rng)


@pytest.mark.parametrize("seed", [0, 1])
def test_em_truly_at_1_2_eps_on_a_road_domain_is_caught(road, seed):
    dist, em = road
    result = _audit(_matrix_sampler(em(1.2 * ROAD_EPS)), dist, ROAD_EPS, seed=seed)
    assert not result.passed, result.lines()
    assert ROAD_EPS < result.epsilon_lower_bound <= 1.2 * ROAD_EPS
    assert result.total_samples <= 30_000_000


def test_tight_em_on_a_road_domain_passes_and_is_resolved_within_10_percent(road):
    dist, em = road
    result = _audit(_matrix_sampler(em(ROAD_EPS)), dist, ROAD_EPS)
    assert result.passed, result.lines()
    assert 0.9 * ROAD_EPS < result.epsilon_lower_bound <= ROAD_EPS


def test_a_leak_on_one_output_of_the_closest_pair_is_caught(road):
    dist, em = road
    z = em(ROAD_EPS)
    off = dist + np.diag(np.full(len(dist), np.inf))
    i, j = np.unravel_index(np.argmin(off), off.shape)
    k = int(np.argmax(z[i]))
    target = np.exp(1.2 * ROAD_EPS * dist[i, j]) * z[j, k]  # z[i, k] after renormalising
    z[i, k] = target * (1 - z[i, k]) / (1 - target)
    z[i] /= z[i].sum()
    result = _audit(_matrix_sampler(z), dist, ROAD_EPS)
    assert not result.passed, result.lines()
    assert {result.worst.i, result.worst.j} == {i, j} and k in result.worst.event


def test_the_audit_draws_at_most_its_budget_and_reports_what_it_drew():
    drawn = []

    def counting(i, n, rng):
        drawn.append(n)
        return planted.clamped_geometric(LINE_KM, LINE_STEP_KM, EPS)(i, n, rng)

    result = _audit(counting, LINE_DIST, EPS, total_samples=3_000_000)
    assert sum(drawn) == result.total_samples <= 3_000_000
    assert drawn[:40] == [result.screen_samples_per_input[i] for i in range(40)]  # all screened
    assert len(drawn) - 40 < 40  # the test draws only from the chosen candidates' inputs


@pytest.mark.slow  # the planar Laplace pair runs in the default suite
def test_correct_geometric_passes():
    result = _audit(planted.clamped_geometric(LINE_KM, LINE_STEP_KM, EPS), LINE_DIST, EPS)
    assert result.passed, result.lines()
    assert 0.95 * EPS < result.epsilon_lower_bound <= EPS


@pytest.mark.slow  # the planar Laplace pair runs in the default suite
def test_geometric_with_1_2_eps_is_caught():
    buggy = planted.clamped_geometric(LINE_KM, LINE_STEP_KM, 1.2 * EPS)
    result = _audit(buggy, LINE_DIST, EPS)
    assert not result.passed
    assert EPS < result.epsilon_lower_bound <= 1.2 * EPS


def test_correct_planar_laplace_passes():
    result = _audit(planted.planar_laplace(GRID_KM, 0.5), GRID_DIST, 0.5, total_samples=3_000_000)
    assert result.passed, result.lines()


def test_laplace_with_scale_eps_instead_of_one_over_eps_is_caught():
    buggy = planted.planar_laplace(GRID_KM, 0.5, scale_km=0.5)
    result = _audit(buggy, GRID_DIST, 0.5, total_samples=4_000_000)
    assert not result.passed and result.epsilon_lower_bound > 0.5


def test_identity_is_caught():
    result = _audit(planted.identity, LINE_DIST, EPS, total_samples=1_000_000)
    assert not result.passed and result.epsilon_lower_bound > 5 * EPS


def test_mechanism_raising_on_some_inputs_is_caught():
    inner = planted.clamped_geometric(LINE_KM, LINE_STEP_KM, EPS)
    result = _audit(planted.raising_on_odd(inner), LINE_DIST, EPS, total_samples=1_000_000)
    assert not result.passed


@pytest.mark.slow
def test_no_false_alarm_in_100_audits_of_a_tight_mechanism():
    # the clamped geometric mechanism attains eps*d on every neighbouring pair: the hardest
    # case for the error control (small budget so 100 audits stay within a few seconds)
    sample = planted.clamped_geometric(LINE_KM, LINE_STEP_KM, EPS)
    bounds = [
        _audit(sample, LINE_DIST, EPS, seed=s, total_samples=400_000).epsilon_lower_bound
        for s in range(100)
    ]
    assert max(bounds) <= EPS and min(bounds) > 0.5 * EPS


@pytest.mark.slow
@pytest.mark.parametrize("name", available())
def test_every_registered_mechanism_passes(name, road_domain_small):
    mech = make(name, epsilon=EPS, **mechanism_class(name).conformance_params)
    mech.fit(road_domain_small, users=np.array([0, 5, 17]))  # ignored unless it needs users
    dist = mech.domain_.dist_xx
    result = audit(mechanism_sampler(mech), dist, EPS, rng=np.random.default_rng(1))
    assert result.passed, result.lines()


def test_clopper_pearson_bounds_are_the_exact_beta_quantiles():
    # the one Clopper-Pearson (privacy/pmdp.py), at a confidence, as the PmDP auditor takes it
    lo, hi = clopper_pearson_lower(30, 100, 0.99), clopper_pearson_upper(30, 100, 0.99)
    assert lo == pytest.approx(beta.ppf(0.01, 30, 71), rel=1e-9)
    assert hi == pytest.approx(beta.ppf(0.99, 31, 70), rel=1e-9)
    assert clopper_pearson_lower(0, 100, 0.99) == 0.0 and clopper_pearson_upper(100, 100, 0.99) == 1


def test_bad_audit_parameters_are_refused():
    with pytest.raises(InputError, match="epsilon"):
        audit(planted.identity, LINE_DIST, -1.0)
    with pytest.raises(InputError, match="alpha"):
        audit(planted.identity, LINE_DIST, 1.0, alpha=2.0)
    with pytest.raises(InputError, match="total_samples"):
        audit(planted.identity, LINE_DIST, 1.0, total_samples=10_000)
    with pytest.raises(InputError, match="dist_km"):
        audit(planted.identity, LINE_DIST[:3], 1.0)


def test_cli_audit_passes_em_and_refuses_unknown_mechanisms(capsys):
    from mdpsim.cli import main

    args = ["--source", "helsinki-test", "--n-points", "30", "--samples", "1000000"]
    assert main(["audit", "em", *args]) == 0
    assert "PASS" in capsys.readouterr().out
    assert main(["audit", "nonesuch", *args]) == 2
    assert "unknown mechanism" in capsys.readouterr().err


# ---------------------------------------------------------------- chaining pairs, counts, power
def _road_audit(domain, matrix, seed, **kw):
    return audit(
        matrix_sampler(matrix), domain.dist_xx, ROAD_EPS, pairs=domain.constraint_pairs,
        output_dist_km=domain.dist_xy, rng=np.random.default_rng(seed), **kw,
    )  # fmt: skip


@pytest.fixture(scope="module")
def road_domains(helsinki_test_walk):
    """``road_domains(n)``: the test extract's road domain of n points (seed 0), cached."""
    import functools

    @functools.cache
    def build(n_points: int) -> Domain:
        return Domain.from_network(helsinki_test_walk, n_points=n_points, seed=0)

    return build


def _closest_chaining_pair(domain):
    pairs = domain.constraint_pairs
    k = int(np.argmin(domain.dist_xx[pairs[:, 0], pairs[:, 1]]))
    return int(pairs[k, 0]), int(pairs[k, 1])


def test_only_chaining_pairs_are_screened_and_the_budget_is_kept(road_domains):
    dom = road_domains(50)
    result = _road_audit(dom, planted.em_with_true_epsilon(dom.dist_xx, ROAD_EPS), 0,
                         total_samples=3_000_000)  # fmt: skip
    assert result.n_pairs == 2 * len(dom.constraint_pairs) < 50 * 49
    chaining = {tuple(p) for p in dom.constraint_pairs.tolist()}
    assert all((min(p.i, p.j), max(p.i, p.j)) in chaining for p in result.pairs)
    assert result.total_samples <= 3_000_000 and len(result.pairs) <= 6
    # without `pairs` the chaining pairs are found from the distances alone
    again = audit(matrix_sampler(np.eye(3)), np.array([[0, 1, 2], [1, 0, 1], [2, 1, 0.0]]), 1.0,
                  total_samples=200_000, rng=np.random.default_rng(0))  # fmt: skip
    assert again.n_pairs == 4 and not again.passed


@pytest.mark.slow
def test_the_false_alarm_rate_stays_below_alpha_on_a_tight_mechanism():
    # at a lax alpha the family-wise rate is measurable: of 40 audits of the tight geometric
    # mechanism, the number of false alarms must be plausible under a rate <= alpha
    sample = planted.clamped_geometric(LINE_KM, LINE_STEP_KM, EPS)
    alarms = sum(
        not _audit(sample, LINE_DIST, EPS, seed=s, total_samples=200_000, alpha=0.2).passed
        for s in range(40)
    )
    assert alarms <= binom.ppf(1 - 1e-4, 40, 0.2), alarms


@pytest.mark.slow
def test_no_false_alarm_on_tight_em_at_200_points_with_small_budgets(road_domains):
    dom = road_domains(200)
    tight = planted.em_with_true_epsilon(dom.dist_xx, ROAD_EPS)
    for seed in range(10):
        result = _road_audit(dom, tight, seed, total_samples=2_000_000)
        assert result.passed, result.lines()


def test_a_one_output_leak_at_the_closest_pair_of_50_points_is_flagged(road_domains):
    dom = road_domains(50)
    i, j = _closest_chaining_pair(dom)
    tight = planted.em_with_true_epsilon(dom.dist_xx, ROAD_EPS)
    leak = planted.one_output_leak(tight, dom.dist_xx, i, j, 1.5 * ROAD_EPS * dom.dist_xx[i, j])
    result = _road_audit(dom, leak, 0, total_samples=30_000_000)
    assert not result.passed, result.lines()
    assert {result.worst.i, result.worst.j} & {i, j}
    assert ROAD_EPS < result.epsilon_lower_bound <= verify(leak, dom.dist_xx, 1e9).smallest_epsilon


def test_counts_and_draws_of_a_matrix_sampler_have_the_same_distribution():
    z = np.array([[0.5, 0.3, 0.2], [0.1, 0.1, 0.8]])
    sampler, rng = matrix_sampler(z), np.random.default_rng(0)
    counts = sampler.counts(1, 100_000, rng)
    draws = np.bincount(sampler(1, 100_000, rng), minlength=3)
    assert counts.sum() == 100_000 and np.abs(counts - draws).max() < 1_000


def test_a_sampler_is_asked_for_at_most_one_chunk_at_a_time(monkeypatch):
    import mdpsim.privacy.black_box as audit_module

    monkeypatch.setattr(audit_module, "_CHUNK_DRAWS", 5_000)
    sizes = []

    def sample(i, n, rng):
        sizes.append(n)
        return planted.clamped_geometric(LINE_KM, LINE_STEP_KM, EPS)(i, n, rng)

    result = _audit(sample, LINE_DIST, EPS, total_samples=2_000_000)
    assert max(sizes) <= 5_000 and sum(sizes) == result.total_samples


# the targets of issue 29 at 200 points (bench/audit_power.py has the table at every size)
@pytest.mark.slow
def test_em_at_a_true_1_2_eps_on_200_points_is_flagged_9_of_10_times_within_3e7(road_domains):
    dom = road_domains(200)
    bug = planted.em_with_true_epsilon(dom.dist_xx, 1.2 * ROAD_EPS)
    found = sum(not _road_audit(dom, bug, 1000 + s).passed for s in range(10))
    assert found >= 9


@pytest.mark.slow
@pytest.mark.parametrize("where", ["closest pair", "eps d ~ 1"])
def test_one_output_1_5x_leaks_on_200_points_are_flagged_9_of_10_times_within_3e8(
    road_domains, where
):
    dom = road_domains(200)
    d, pairs = dom.dist_xx, dom.constraint_pairs
    if where == "closest pair":
        i, j = _closest_chaining_pair(dom)
    else:
        k = int(np.argmin(np.abs(ROAD_EPS * d[pairs[:, 0], pairs[:, 1]] - 1.0)))
        i, j = int(pairs[k, 0]), int(pairs[k, 1])
    tight = planted.em_with_true_epsilon(d, ROAD_EPS)
    leak = planted.one_output_leak(tight, d, i, j, 1.5 * ROAD_EPS * d[i, j])
    found = sum(
        not _road_audit(dom, leak, 1000 + s, total_samples=300_000_000).passed for s in range(10)
    )
    assert found >= 9


@pytest.mark.slow
@pytest.mark.parametrize("budget", [30_000_000, 300_000_000])
def test_no_false_alarm_in_100_audits_of_tight_em_on_200_points(road_domains, budget):
    dom = road_domains(200)
    tight = planted.em_with_true_epsilon(dom.dist_xx, ROAD_EPS)
    assert all(_road_audit(dom, tight, s, total_samples=budget).passed for s in range(100))


def test_too_few_samples_names_a_total_that_is_enough():
    from mdpsim.privacy.audit import TooFewSamples

    with pytest.raises(TooFewSamples, match="use total_samples=") as caught:
        audit(planted.identity, LINE_DIST, 1.0, total_samples=10_000)
    enough = caught.value.enough
    audit(planted.identity, LINE_DIST, 1.0, total_samples=enough)  # enough: no refusal
    with pytest.raises(TooFewSamples):
        audit(planted.identity, LINE_DIST, 1.0, total_samples=enough - 1000)
