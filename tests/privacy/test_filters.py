"""Privacy filters: never past the budget, the remainder spendable exactly, atomic, fail-closed."""

from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mdpsim.errors import InputError, PrivacyBudgetError
from mdpsim.privacy.accounting import CGP, ApproxGP, PureGP, cgp_to_approx_gp
from mdpsim.privacy.filters import (
    PopulationFilter,
    PrivacyFilter,
    add_up,
    capacity_of,
    cost_in,
    fits,
    sub_down,
)

budgets = st.floats(min_value=1e-6, max_value=1e6, allow_nan=False, allow_infinity=False)
# A move of the adaptive analyst: a cost relative to what is left (so it depends on the past),
# exactly what is left, a hair more than that, an absolute cost, or a tiny one.
moves = st.one_of(
    st.tuples(st.just("fraction"), st.floats(min_value=0.0, max_value=1.5)),
    st.tuples(st.just("remaining"), st.just(0.0)),
    st.tuples(st.just("above"), st.just(0.0)),
    st.tuples(st.just("absolute"), st.floats(min_value=0.0, max_value=1e6)),
    st.tuples(st.just("tiny"), st.floats(min_value=0.0, max_value=1e-300)),
)


def _cost(move, f: PrivacyFilter) -> float:
    kind, x = move
    if kind == "fraction":
        return f.remaining * x
    if kind == "remaining":
        return f.remaining
    if kind == "above":
        return float(np.nextafter(f.remaining, np.inf))
    return x


def _never_past_budget(budget, seq):
    f = PrivacyFilter(CGP(budget))
    exact = Fraction(0)
    halted_at = None
    for t, move in enumerate(seq):
        cost = _cost(move, f)
        ok = f.request(cost, component=t % 3)
        if ok:
            exact += Fraction(cost)
            assert halted_at is None  # HALT is permanent
        elif cost > 0 or f.halted:
            halted_at = t if halted_at is None else halted_at
        assert exact <= Fraction(budget)
        assert Fraction(f.spent) >= exact  # recorded never below the true spend
        assert Fraction(f.remaining) <= Fraction(budget) - Fraction(f.spent)


def _remainder_spendable(budget, seq):
    f = PrivacyFilter(PureGP(budget))
    for move in seq:
        cost = _cost(move, f)
        if fits(f.spent, cost, f.capacity):  # stay below the budget: never halt here
            f.request(cost)
    assert f.request(f.remaining)
    assert f.remaining == 0.0
    assert f.spent == budget
    assert not f.request(float(np.nextafter(0.0, 1.0)))
    assert f.halted


@settings(max_examples=150, deadline=None)
@given(
    caps=st.lists(budgets, min_size=1, max_size=8),
    rounds=st.lists(st.lists(st.floats(0.0, 1.2), min_size=8, max_size=8), max_size=12),
)
def test_population_filter_matches_one_filter_per_user(caps, rounds):
    n = len(caps)
    top = max(caps)
    pop = PopulationFilter(CGP(top), n, capacity=caps)
    users = [PrivacyFilter(CGP(c)) for c in caps]
    for frac in rounds:
        costs = np.array([users[i].remaining * frac[i] for i in range(n)])
        ok = pop.request(costs, component="t")
        for i in range(n):
            expect = users[i].request(costs[i]) if costs[i] > 0 else False
            assert ok[i] == expect
            assert pop.spent[i] == users[i].spent
            assert pop.halted[i] == users[i].halted
    assert np.all(pop.spent <= np.array(caps))
    assert np.array_equal(pop.remaining, [u.remaining for u in users])


SEQUENCES = st.lists(moves, min_size=1, max_size=40)


@settings(max_examples=400, deadline=None)
@given(budget=budgets, seq=SEQUENCES)
def test_no_adaptive_sequence_lets_the_composed_loss_pass_the_budget(budget, seq):
    _never_past_budget(budget, seq)


@settings(max_examples=400, deadline=None)
@given(budget=budgets, seq=SEQUENCES)
def test_the_remaining_budget_can_be_spent_exactly(budget, seq):
    _remainder_spendable(budget, seq)


@pytest.mark.slow
@settings(max_examples=3000, deadline=None)
@given(budget=budgets, seq=SEQUENCES)
def test_thousands_of_adaptive_sequences_stay_within_budget_and_spend_exactly(budget, seq):
    _never_past_budget(budget, seq)
    _remainder_spendable(budget, seq)


def test_population_spend_is_atomic_and_fails_closed():
    pop = PopulationFilter(CGP(1.0), 3)
    pop.spend(np.array([0.5, 0.25, 0.0]))
    before = (pop.spent.copy(), pop.halted.copy())
    for bad in ([0.1, float("nan"), 0.1], [0.1, 0.1, float("inf")], [0.1, -1e-9, 0.1]):
        with pytest.raises(PrivacyBudgetError):
            pop.spend(np.array(bad))
        with pytest.raises(PrivacyBudgetError):
            pop.request(np.array(bad))
    with pytest.raises(PrivacyBudgetError, match="1 users would pass"):
        pop.spend(np.array([0.1, 0.8, 0.1]))
    with pytest.raises(PrivacyBudgetError):
        pop.spend(np.array([0.1, 0.1]))  # wrong shape
    assert np.array_equal(pop.spent, before[0]) and np.array_equal(pop.halted, before[1])
    assert pop.affordable(np.array([0.5, 0.75, 1.0])).tolist() == [True, True, True]
    assert pop.affordable(np.array([0.6, 0.0, 1.1])).tolist() == [False, True, False]
    ok = pop.request(np.array([0.6, 0.75, 0.0]))
    assert ok.tolist() == [False, True, False]
    assert pop.halted.tolist() == [True, False, False]
    assert pop.remaining.tolist() == [0.0, 0.0, 1.0]
    with pytest.raises(PrivacyBudgetError, match="halted"):
        pop.spend(np.array([1e-9, 0.0, 0.0]))
    assert not pop.affordable(np.array([1e-300, 0.0, 0.0]))[0]


def test_single_filter_spend_raises_without_changing_state():
    f = PrivacyFilter(CGP(2.0))
    f.spend(1.5, component="loc@t0")
    with pytest.raises(PrivacyBudgetError):
        f.spend(0.6)
    assert f.spent == 1.5 and not f.halted
    for bad in (float("nan"), float("inf"), -1.0):
        with pytest.raises(PrivacyBudgetError):
            f.request(bad)
    f.spend(0.25, component="loc@t1")
    f.spend(0.25, component="loc@t0")
    assert f.spent_by_component() == {"loc@t0": 1.75, "loc@t1": 0.25}
    assert f.remaining == 0.0


def test_approximate_gp_filter_keeps_the_converted_epsilon_within_budget():
    budget = ApproxGP(8.0, 1e-6, 1.0)
    f = PrivacyFilter(budget)
    while f.request(0.07):
        pass
    assert f.halted
    assert cgp_to_approx_gp(f.spent, delta=1e-6, lambda_km=1.0).epsilon_per_km <= 8.0 * (1 + 1e-9)
    assert f.spent + 0.07 > capacity_of(budget)


def test_costs_convert_into_the_budget_currency():
    assert cost_in(CGP(1.0), PureGP(2.0)) >= 2.0
    assert cost_in(ApproxGP(1.0, 1e-6, 1.0), CGP(0.3)) == 0.3
    assert cost_in(PureGP(1.0), PureGP(0.3)) == 0.3
    with pytest.raises(InputError):
        cost_in(PureGP(1.0), CGP(0.3))
    with pytest.raises(InputError):
        cost_in(CGP(1.0), ApproxGP(1.0, 1e-6, 1.0))


def test_directed_rounding_helpers_bracket_the_exact_result():
    rng = np.random.default_rng(0)
    a, b = rng.uniform(0, 1, 2000), rng.uniform(0, 1e-3, 2000)
    up, down = add_up(a, b), sub_down(a, b)
    for x, y, u, d in zip(a, b, up, down, strict=True):
        assert Fraction(u) >= Fraction(x) + Fraction(y)
        assert Fraction(float(np.nextafter(u, -np.inf))) < Fraction(x) + Fraction(y)
        assert Fraction(d) <= max(Fraction(x) - Fraction(y), Fraction(0))
        assert d == 0.0 or Fraction(float(np.nextafter(d, np.inf))) > Fraction(x) - Fraction(y)


def test_population_filter_rejects_bad_construction():
    with pytest.raises(InputError):
        PopulationFilter(CGP(1.0), 2, capacity=[0.5, 2.0])
    with pytest.raises(InputError):
        PopulationFilter(CGP(1.0), -1)
