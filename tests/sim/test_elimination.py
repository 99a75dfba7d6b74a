"""Iterative elimination: budget splits, valid triples, PIE-NI and PIE-k guarantees and savings."""

from fractions import Fraction

import numpy as np
import pytest

from mdpsim.errors import InputError
from mdpsim.privacy.accounting import gaussian_norm_bound
from mdpsim.queries.elimination import (
    DistancePrivatization,
    PointPrivatization,
    pie_k,
    pie_ni,
    split_budget,
)


@pytest.mark.parametrize("scheme", ["even", "doubling"])
@pytest.mark.parametrize("c", [1, 3, 10, 64])
def test_split_parts_never_sum_above_the_budget_and_running_sums_are_rounded_up(scheme, c):
    rng = np.random.default_rng(c)
    rho = np.concatenate([rng.uniform(0, 1e3, 200), [0.1, 1.0 / 3.0, 7e-9, 0.0]])
    parts, cum = split_budget(rho, c, scheme=scheme)
    assert parts.shape == cum.shape == (len(rho), c)
    assert np.all(parts >= 0) and np.all(np.diff(cum, axis=1) >= 0)
    for i in range(len(rho)):
        exact = Fraction(0)
        for j in range(c):
            exact += Fraction(parts[i, j])
            assert Fraction(cum[i, j]) >= exact
        assert exact <= Fraction(rho[i]) and cum[i, -1] <= rho[i]
    assert cum[:, -1] == pytest.approx(rho, rel=1e-12)


def test_split_schemes_have_the_stated_proportions():
    even, _ = split_budget(np.array([8.0]), 4, scheme="even")
    doubling, _ = split_budget(np.array([15.0]), 4, scheme="doubling")
    assert even[0].tolist() == [2.0, 2.0, 2.0, 2.0]
    assert doubling[0] == pytest.approx([1.0, 2.0, 4.0, 8.0])


@pytest.mark.parametrize("bad", [dict(c=0), dict(c=65), dict(c=2.0), dict(scheme="log")])
def test_bad_split_parameters_raise(bad):
    kwargs = dict(c=4, scheme="even") | bad
    with pytest.raises(InputError):
        split_budget(np.ones(3), **kwargs)


@pytest.mark.parametrize("kind", ["point", "distance"])
def test_triples_cover_the_truth_with_exactly_the_stated_probability(kind):
    """|g - phi| <= h with probability 1 - beta after uneven partial releases (exact quantile)."""
    rng = np.random.default_rng(7)
    n, beta = 100_000, 0.05
    truth = rng.uniform(-1, 1, (n, 2))
    if kind == "point":
        triple = PointPrivatization(truth, lambda u: u[:, 0], rng=rng)
    else:
        triple = DistancePrivatization(truth[:, 0], rng=rng)
    users = np.arange(n)
    for r in (0.5, 2.0, 7.0):  # three uneven rounds; the bound is checked on the running mean
        triple.release(users, np.full(n, r))
        err = triple.mean(users) - (truth if kind == "point" else truth[:, :1])
        rate = np.mean(np.linalg.norm(err, axis=1) > triple.bound(users, beta))
        assert abs(rate - beta) < 4 * np.sqrt(beta * (1 - beta) / n)


def _ni_trial(seed, *, scale=1.0):
    rng = np.random.default_rng(seed)
    phi = rng.uniform(-0.3, 0.3, 60)  # many users close to the threshold 0
    triple = DistancePrivatization(phi, rng=rng)
    res = pie_ni(triple, np.full(60, 20.0), nu_low=0.0, nu_high=0.0, c=8, beta0=0.2)
    wrong = np.any(res.s1 & (phi >= 0)) or np.any(res.s0 & (phi <= 0))
    return wrong, res


def test_pie_ni_misclassifies_with_probability_at_most_beta0():
    trials = 300
    failures = sum(_ni_trial(s)[0] for s in range(trials))
    assert failures / trials <= 0.2
    # Eliminations happen (the test is not vacuous).
    assert _ni_trial(0)[1].s0.any() and _ni_trial(0)[1].s1.any()


def test_pie_ni_eliminated_users_save_the_parts_they_did_not_use():
    rng = np.random.default_rng(3)
    phi = np.array([-50.0, 50.0, 0.0, 0.0])  # km: settled at once, and undecidable
    rho = np.array([4.0, 4.0, 4.0, 0.0])
    res = pie_ni(DistancePrivatization(phi, rng=rng), rho, nu_low=0.0, nu_high=0.0, c=4)
    assert res.s1.tolist() == [True, False, False, False]
    assert res.s0.tolist() == [False, True, False, False]
    assert res.active.tolist() == [False, False, True, False]
    assert res.rounds.tolist() == [1, 1, 4, 0]
    assert res.spent.tolist() == [1.0, 1.0, 4.0, 0.0]
    assert res.iterations == 4


def test_pie_ni_one_sided_never_fills_s1():
    rng = np.random.default_rng(4)
    phi = rng.uniform(0, 5, 500)
    res = pie_ni(DistancePrivatization(phi, rng=rng), np.full(500, 50.0), nu_low=-np.inf, nu_high=1)
    assert not res.s1.any() and res.s0.any()
    assert np.all(phi[res.s0] > 1.0)


def test_pie_k_keeps_the_true_k_nearest_with_probability_at_least_1_minus_beta0():
    trials, k, missed = 200, 5, 0
    for seed in range(trials):
        rng = np.random.default_rng(seed)
        xy = rng.uniform(-1, 1, (200, 2))
        dist = np.linalg.norm(xy, axis=1)
        triple = PointPrivatization(xy, lambda u: np.linalg.norm(u, axis=1), rng=rng)
        res = pie_k(triple, np.full(200, 30.0), k=k, c=6, beta0=0.2)
        assert res.active.sum() >= k
        missed += not np.all(res.active[np.argsort(dist)[:k]])
    assert missed / trials <= 0.2


def test_pie_k_stops_at_k_survivors_and_they_spend_more_than_the_rest():
    rng = np.random.default_rng(5)
    phi = np.concatenate([[0.01, 0.02, 0.03], np.full(97, 20.0)])
    res = pie_k(DistancePrivatization(phi, rng=rng), np.full(100, 10.0), k=3, c=5)
    assert res.active.tolist()[:3] == [True] * 3 and res.active.sum() == 3
    assert res.iterations == 1 and np.all(res.spent == 2.0)


def test_elimination_parameters_are_validated():
    rng = np.random.default_rng(0)
    triple = DistancePrivatization(np.zeros(3), rng=rng)
    with pytest.raises(InputError):
        pie_ni(triple, np.ones(3), nu_low=1.0, nu_high=0.0)
    with pytest.raises(InputError):
        pie_ni(triple, np.ones(3), nu_low=0.0, nu_high=0.0, beta0=1.0)
    with pytest.raises(InputError):
        pie_ni(triple, np.ones(4), nu_low=0.0, nu_high=0.0)
    with pytest.raises(InputError):
        pie_k(triple, np.ones(3), k=0)


def test_norm_bound_is_what_the_point_triple_uses():
    rng = np.random.default_rng(0)
    triple = PointPrivatization(np.zeros((2, 2)), lambda u: u[:, 0], rng=rng)
    triple.release(np.arange(2), np.array([0.5, 2.0]))
    h = triple.bound(np.arange(2), 0.01)
    assert h == pytest.approx(gaussian_norm_bound(2, 0.01) / np.sqrt([1.0, 4.0]))
