"""Range counting, KDE, kNN and threshold queries, and budgeting across queries (Algorithm 3)."""

import numpy as np
import pytest

from mdpsim.errors import InputError, PrivacyBudgetError
from mdpsim.privacy.accounting import CGP
from mdpsim.privacy.filters import PopulationFilter
from mdpsim.queries import (
    METHODS,
    Disk,
    QueryBudgeter,
    Rectangle,
    allocate,
    count_err,
    dist_err,
    kde,
    knn,
    priv_sav,
    range_count,
    threshold_query,
    true_count,
    true_kde,
    true_knn,
)


@pytest.fixture
def town():
    """2,000 users (metres) around a 1 km square; a few far away."""
    rng = np.random.default_rng(11)
    return np.concatenate([rng.normal(0, 800, (1990, 2)), rng.normal(20_000, 100, (10, 2))])


@pytest.mark.parametrize(
    "region", [Rectangle(-500, -300, 700, 400), Disk(100.0, -50.0, 600.0)], ids=["rect", "disk"]
)
def test_signed_distance_is_negative_inside_and_1_lipschitz(region):
    rng = np.random.default_rng(0)
    a, b = rng.uniform(-2, 2, (5000, 2)), rng.uniform(-2, 2, (5000, 2))
    da, db = region.signed_distance_km(a), region.signed_distance_km(b)
    assert np.all(np.abs(da - db) <= np.linalg.norm(a - b, axis=1) + 1e-12)
    assert region.signed_distance_km(np.array([[0.0, 0.0]]))[0] < 0
    assert region.signed_distance_km(np.array([[1.5, 1.5]]))[0] > 0
    assert np.all(np.abs(db[np.abs(db) < 1e-3]) < 1e-3)  # continuity at the boundary


def test_rectangle_signed_distance_values():
    r = Rectangle(0, 0, 1000, 2000)
    pts = np.array([[0.5, 1.0], [0.1, 1.0], [2.0, 1.0], [4.0, 6.0]])
    assert r.signed_distance_km(pts) == pytest.approx([-0.5, -0.1, 1.0, 5.0])


@pytest.mark.parametrize("method", METHODS)
def test_range_count_is_exact_with_a_huge_budget_and_never_overspends(town, method):
    region = Rectangle(-500, -500, 500, 500)
    rho = np.full(len(town), 1e7)
    ans = range_count(town, region, rho, method=method, rng=np.random.default_rng(1))
    assert ans.value == true_count(town, region)
    assert np.all(ans.spent <= rho) and np.all(ans.spent > 0)
    if method.startswith("PM"):
        assert priv_sav(ans.spent, rho) > 0.7  # most users settle in round 1 of 4
    else:
        assert np.array_equal(ans.spent, rho)


def test_range_count_pm_matches_bm_error_while_saving_budget(town):
    region = Rectangle(-400, -400, 600, 300)
    truth = true_count(town, region)
    errs = {m: [] for m in METHODS}
    savings = []
    for seed in range(30):
        for m in METHODS:
            ans = range_count(town, region, 20.0, method=m, rng=np.random.default_rng(seed))
            errs[m].append(count_err(ans.value, truth))
            if m == "PM1":
                savings.append(priv_sav(ans.spent, np.full(len(town), 20.0)))
    for pm, bm in (("PM0", "BM0"), ("PM1", "BM1")):
        spread = np.std(errs[bm]) / np.sqrt(30)
        assert np.mean(errs[pm]) <= np.mean(errs[bm]) + 3 * spread + 0.01
    assert np.mean(savings) > 0.1


def test_users_without_budget_are_not_asked_and_not_counted(town):
    rho = np.full(len(town), 1e7)
    rho[:1000] = 0.0
    region = Disk(0.0, 0.0, 800.0)
    ans = range_count(town, region, rho, method="PM0", rng=np.random.default_rng(2))
    assert ans.value == true_count(town[1000:], region)
    assert np.all(ans.spent[:1000] == 0) and not ans.participants[:1000].any()


@pytest.mark.parametrize("method", METHODS)
def test_kde_is_close_with_a_large_budget_and_pm_saves_on_far_users(town, method):
    p, b = np.array([100.0, 50.0]), 300.0
    rho = np.full(len(town), 1e5)
    ans = kde(town, p, b, rho, method=method, rng=np.random.default_rng(3))
    assert ans.value == pytest.approx(true_kde(town, p, b), abs=2e-3)
    if method.startswith("PM"):
        far = np.linalg.norm(town - p, axis=1) > 6 * b + 500
        assert np.all(ans.elimination.s0[far]) and np.all(ans.spent[far] < rho[far])


def test_kde_answers_zero_when_everybody_is_far():
    rng = np.random.default_rng(4)
    xy = rng.normal(50_000, 100, (300, 2))
    ans = kde(xy, np.zeros(2), 100.0, 1e3, method="PM1", rng=rng, c=4)
    assert ans.value == 0.0 and ans.elimination.iterations == 1
    assert priv_sav(ans.spent, np.full(300, 1e3)) == pytest.approx(0.75)


@pytest.mark.parametrize("method", METHODS)
def test_knn_finds_the_true_neighbours_with_a_large_budget(town, method):
    p = np.array([0.0, 0.0])
    ans = knn(town, p, 10, 1e8, method=method, rng=np.random.default_rng(5))
    assert np.array_equal(np.sort(ans.value), true_knn(town, p, 10))
    assert dist_err(ans.value, town, p) == 0.0
    if method.startswith("PM"):
        assert priv_sav(ans.spent, np.full(len(town), 1e8)) > 0.5


def test_knn_with_at_most_k_users_costs_nothing(town):
    rho = np.zeros(len(town))
    rho[:3] = 5.0
    ans = knn(town, np.zeros(2), 5, rho, method="PM0", rng=np.random.default_rng(0))
    assert ans.value.tolist() == [0, 1, 2] and not ans.spent.any()


def test_dist_err_is_relative_excess_distance():
    xy = np.array([[1000.0, 0.0], [2000.0, 0.0], [3000.0, 0.0]])
    assert dist_err([0, 1], xy, np.zeros(2)) == 0.0
    assert dist_err([0, 2], xy, np.zeros(2)) == pytest.approx(1.0 / 3.0)


def test_threshold_query_stops_early_when_the_answer_is_clear():
    rng = np.random.default_rng(6)
    clear = threshold_query(100.0, 5000.0, 1e-3, rng=rng, c=8)
    assert clear.value is True and clear.spent[0] < 1e-3
    close = threshold_query(4999.0, 5000.0, 1e-3, rng=rng, c=8)
    assert close.spent[0] == pytest.approx(1e-3)
    base = threshold_query(6000.0, 5000.0, 10.0, method="BM1", rng=rng)
    assert base.value is False and base.spent[0] == 10.0


def test_threshold_early_answers_are_right_with_probability_1_minus_beta_over_4():
    wrong = 0
    for seed in range(300):
        rng = np.random.default_rng(seed)
        ans = threshold_query(4990.0, 5000.0, 1e-3, rng=rng, c=8, beta=0.4)
        early = ans.elimination.s0[0] or ans.elimination.s1[0]
        wrong += bool(early and ans.value is not True)
    assert wrong / 300 <= 0.1


@pytest.mark.parametrize("strategy", ["fixed", "even", "proportion", "linear"])
def test_allocations_never_exceed_what_is_left(strategy):
    rem = np.array([1.0, 0.5, 0.0, 0.9])
    for l in range(1, 6):
        a = allocate(rem, total_budget=1.0, m=5, l=l, strategy=strategy)
        assert np.all(a <= rem) and np.all(a >= 0)
    last = allocate(rem, total_budget=1.0, m=5, l=5, strategy=strategy)
    if strategy in ("even", "linear"):
        assert np.array_equal(last, rem)  # the last query uses everything left
    assert allocate(np.array([0.8]), total_budget=1.0, m=5, l=2, strategy="proportion")[
        0
    ] == pytest.approx(0.2 + 0.75 * 0.0)


def test_proportion_strategy_spends_three_quarters_of_the_savings():
    a = allocate(np.array([0.9]), total_budget=1.0, m=5, l=2, strategy="proportion")
    assert a[0] == pytest.approx(0.2 + 0.75 * (0.9 - 0.8))


@pytest.mark.parametrize("strategy", ["even", "proportion", "linear"])
def test_budgeter_reuses_savings_and_never_overspends(town, strategy):
    pop = PopulationFilter(CGP(50.0), len(town))
    budgeter = QueryBudgeter(pop, 5, strategy=strategy)
    rng = np.random.default_rng(8)
    allocs = []
    for l in range(5):
        region = Rectangle(-500 + 100 * l, -500, 500, 500)

        def query(alloc, region=region):
            allocs.append(alloc.copy())
            return range_count(town, region, alloc, method="PM1", rng=rng)

        budgeter.run(query)
    assert np.all(pop.spent <= 50.0) and not pop.halted.any()
    assert np.mean(allocs[-1]) > 10.0  # later queries get more than B/m thanks to savings
    with pytest.raises(PrivacyBudgetError):
        budgeter.next_allocation()
    assert np.all(pop.remaining[-10:] > 0)  # the far users saved on every query


@pytest.mark.parametrize("strategy", ["fixed", "even", "linear"])
def test_baselines_under_the_budgeter_spend_the_whole_budget_exactly(town, strategy):
    pop = PopulationFilter(CGP(1.0 / 3.0), len(town))
    budgeter = QueryBudgeter(pop, 7, strategy=strategy)
    rng = np.random.default_rng(9)
    for _ in range(7):
        budgeter.run(lambda a: range_count(town, Disk(0, 0, 500), a, method="BM1", rng=rng))
    if strategy == "fixed":
        assert np.all(pop.remaining <= 1e-15)  # B/m rounding only
    else:
        assert np.all(pop.remaining == 0.0) and np.all(pop.spent == 1.0 / 3.0)


def test_budgeter_refuses_a_query_that_spends_beyond_its_allocation(town):
    pop = PopulationFilter(CGP(1.0), len(town))
    budgeter = QueryBudgeter(pop, 2)

    def greedy(alloc):
        ans = range_count(town, Disk(0, 0, 500), alloc, method="BM0", rng=np.random.default_rng())
        ans.spent = ans.spent * 1.5
        return ans

    with pytest.raises(PrivacyBudgetError):
        budgeter.run(greedy)
    assert not pop.spent.any()


@pytest.mark.parametrize(
    "call",
    [
        lambda xy: range_count(xy, Disk(0, 0, 1), 1.0, method="XX", rng=np.random.default_rng()),
        lambda xy: range_count(xy[:, :1], Disk(0, 0, 1), 1.0, rng=np.random.default_rng()),
        lambda xy: range_count(xy, Disk(0, 0, 1), -1.0, rng=np.random.default_rng()),
        lambda xy: kde(xy, np.zeros(2), 0.0, 1.0, rng=np.random.default_rng()),
        lambda xy: knn(xy, np.zeros(2), 0, 1.0, rng=np.random.default_rng()),
        lambda xy: Rectangle(1, 0, 0, 1),
        lambda xy: allocate(np.ones(2), total_budget=1.0, m=3, l=4),
        lambda xy: threshold_query(1.0, 2.0, 1.0, method="PM0", rng=np.random.default_rng()),
    ],
)
def test_bad_query_parameters_raise_input_errors(town, call):
    with pytest.raises(InputError):
        call(town)
