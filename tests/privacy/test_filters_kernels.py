"""The filters' compiled kernels against the numpy formulas they replace (the same bits)."""

from __future__ import annotations

import numpy as np
import pytest

from mdpsim.privacy import _filter_kernels as k
from mdpsim.privacy import filters as f


def _arrays(seed: int, n: int = 64) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Spends, costs, capacities and halts with ties, zeros and inexact sums."""
    rng = np.random.default_rng(seed)
    capacity = rng.choice([0.0, 0.1, 1.0, 200.0, 1e-300], n)
    spent = np.minimum(rng.choice([0.0, 0.3, 0.7, 1e16, 1e-17], n) * rng.uniform(0, 1, n), 300.0)
    spent[:8] = capacity[:8]
    cost = rng.choice([0.0, 0.1, 0.2, 1e-17, 5e-324], n) * rng.choice([1.0, 3.0], n)
    cost[8:16] = (capacity - spent)[8:16].clip(0)
    return spent, cost, capacity, rng.uniform(size=n) < 0.2


@pytest.mark.parametrize("seed", range(20))
def test_kernels_match_the_numpy_formulas(seed):
    spent, cost, capacity, halted = _arrays(seed)
    s, err = f._two_sum(spent, cost)
    up = f._rounded_up(s, err)
    assert k.add_up_1d(spent, cost).tobytes() == up.tobytes()
    left = np.where(halted, 0.0, f.sub_down(capacity, spent))
    assert k.left_1d(capacity, spent, halted).tobytes() == left.tobytes()
    for cost_now in (0.0, 0.1, 1.0, float(left.max()), float(np.nextafter(left.max(), 9))):
        short = k.short_of_1d(capacity, spent, halted, cost_now)
        assert short.tolist() == (~halted & (left < cost_now)).tolist()
    charged, asked, check = k.charge_1d(spent, cost, capacity, halted)
    assert charged.tobytes() == up.tobytes()
    assert asked == bool((cost > 0).any())
    assert check == bool(((cost > 0) & (halted | (s >= capacity))).any())
    ok, refused, new_spent, paid = k.request_1d(spent, cost, capacity, halted)
    want_ok = (cost > 0) & ~halted & f._fit(s, err, capacity)
    assert ok.tolist() == want_ok.tolist()
    assert refused.tolist() == ((cost > 0) & ~want_ok).tolist()
    assert new_spent.tobytes() == np.where(want_ok, up, spent).tobytes()
    assert paid.tobytes() == np.where(want_ok, cost, 0.0).tobytes()


@pytest.mark.parametrize("bad", [np.nan, np.inf, -1e-300, -np.inf])
def test_the_cost_check_refuses_what_the_numpy_check_refuses(bad):
    costs = np.array([0.0, 1.0, bad, 2.0])
    assert not k.valid_costs_1d(costs)
    assert k.valid_costs_1d(np.array([0.0, 5e-324, 1e308]))
    with pytest.raises(f.PrivacyBudgetError):
        f._checked_costs(costs, 4)


@pytest.mark.parametrize("seed", range(20))
def test_the_fused_request_is_request_1d_and_what_request_made_of_it(seed):
    spent, cost, capacity, halted = _arrays(seed)
    by = np.random.default_rng(seed).choice([0.0, 0.1, 1e-17, 3.0], len(spent))
    ok, refused, new_spent, paid = k.request_1d(spent, cost, capacity, halted)
    got = k.request_paid_1d(spent, cost, capacity, halted, by)
    assert got[0].tolist() == ok.tolist()
    assert got[1].tolist() == (halted | refused).tolist()
    assert got[2].tobytes() == new_spent.tobytes()
    assert got[3].tobytes() == k.add_up_1d(by, paid).tobytes()
    assert got[4:] == (bool(refused.any()), bool(ok.any()))
