"""Re-identification from k known (place, hour) points: known answers, chance, the seed."""

from __future__ import annotations

import numpy as np
import pytest
from routine_driver import feed, routine
from test_attacks_contract import Identity, Uniform

from mdpsim.attacks import make
from mdpsim.attacks.uniqueness import KS, known_points
from mdpsim.errors import InputError

N_USERS, TICKS = 30, 48


@pytest.fixture(scope="module")
def domain(walk_domain):
    return walk_domain(100, 2)


@pytest.fixture(scope="module")
def trace(domain):
    return routine(domain.n_x, N_USERS, TICKS, seed=3)[0]


def _summary(domain, mechanism, trace, **params):
    suite, final = feed(domain, mechanism, trace, [{"name": "uniqueness", **params}], seed=7)
    return suite.summary().iloc[0], final["uniqueness"][0]


def test_a_perfect_mechanism_links_everyone_from_one_point(domain, trace):
    s, scores = _summary(domain, Identity().fitted_by_hand(domain), trace, match_km=0.01)
    for k in KS:  # distinct homes and works: one point names the person
        assert s[f"linked_k{k}"] == 1.0
    assert s["chance"] == pytest.approx(1 / N_USERS)
    assert len(scores.users) == N_USERS


def test_a_uniform_mechanism_links_at_chance(domain, trace):
    s, _ = _summary(domain, Uniform(epsilon=1.0).fit(domain), trace)
    for k in KS:  # every pseudonym matches equally: ties fall in a random order
        assert s[f"linked_k{k}"] <= 2 * s["chance"]


def test_shared_places_need_more_points(domain):
    # users in pairs share a home; only the work tells them apart: one night point links half
    trace, home, work = routine(domain.n_x, N_USERS, TICKS, seed=3)
    trace = np.where(np.isin(trace, home), home[np.arange(N_USERS) // 2 * 2][None, :], trace)
    s, _ = _summary(domain, Identity().fitted_by_hand(domain), trace, match_km=0.01)
    assert s["linked_k1"] < 1.0 and s["linked_k4"] >= s["linked_k1"]


def test_targets_limit_the_persons_scored(domain, trace):
    _, scores = _summary(domain, Identity().fitted_by_hand(domain), trace, targets=10)
    assert len(scores.users) == 10 and len(np.unique(scores.users)) == 10


def test_same_seed_same_points_other_seed_other_points(trace):
    persons = np.arange(N_USERS)
    a = known_points(trace, persons, np.random.default_rng(1), 4)
    b = known_points(trace, persons, np.random.default_rng(1), 4)
    c = known_points(trace, persons, np.random.default_rng(2), 4)
    np.testing.assert_array_equal(a[0], b[0])
    assert not np.array_equal(a[0], c[0])
    assert all(len(set(row)) == 4 for row in a[0].tolist())  # distinct ticks


def test_same_seed_same_scores(domain, trace):
    from mdpsim.mechanisms import make as make_mechanism

    em = make_mechanism("em", epsilon=4.0).fit(domain)
    a, b = (_summary(domain, em, trace)[1].values for _ in range(2))
    for name in a:
        np.testing.assert_array_equal(a[name], b[name])


def test_bad_targets_are_refused():
    with pytest.raises(InputError, match="targets"):
        make("uniqueness", targets=0)


def test_a_regenerated_identical_mechanism_shares_its_table(domain):
    from mdpsim.attacks.base import Context, Release

    attack = make("uniqueness")
    attack.start(Context(domain=domain, n_users=3))
    em = Uniform(epsilon=1.0).fit(domain)
    for tick in (1, 5):
        attack.release(Release(tick=tick, mechanism=em))
    attack.release(Release(tick=9, mechanism=Identity().fitted_by_hand(domain)))
    assert attack.posts_[1] is attack.posts_[0] and attack.posts_[2] is not attack.posts_[0]


def test_any_of_a_persons_pseudonyms_is_a_right_link(domain, trace):
    specs = [{"name": "uniqueness", "match_km": 0.01}]
    suite, final = feed(domain, Identity().fitted_by_hand(domain), trace, specs, change_at=25)
    s = suite.summary().iloc[0]
    assert s["chance"] == pytest.approx(1 / (2 * N_USERS)) and s["linked_k1"] == 1.0
