"""The env step's Python paths against the numpy formulas they replaced (the same values)."""

from __future__ import annotations

import numpy as np
import pytest

from mdpsim.env.game import Game, _put_choices
from mdpsim.errors import InputError
from mdpsim.simulation import scenario as sc
from mdpsim.simulation.model import _mean

PLAIN = {
    "scenario": {"name": "parts", "seed": 3, "ticks": 6},
    "network": {"source": "helsinki-test"},
    "domain": {"n_points": 40},
    "users": {"count": 12},
    "mechanism": {"name": "em", "epsilon_per_km": 6.0},
}


def _numpy_choices(report, level, index, choice) -> None:
    """What ``Game.step`` did before: numpy's fancy index."""
    index, choice = np.array(index, dtype=np.intp), np.array(choice, dtype=np.int64)
    report[index] = choice > 0
    chosen = choice > 0
    if level is not None:
        level[index[chosen]] = choice[chosen] - 1


@pytest.mark.parametrize("levels", [1, 3])
def test_choices_are_put_as_the_fancy_index_put_them(levels):
    rng = np.random.default_rng(levels)
    for n_chosen in (1, 2, 8, 9, 30):
        report = rng.random(40) < 0.5
        level = rng.integers(0, levels, 40) if levels > 1 else None
        index = rng.permutation(40)[:n_chosen].tolist()
        choice = rng.integers(0, levels + 1, n_chosen).tolist()
        mine_r, theirs_r = report.copy(), report.copy()
        mine_l = None if level is None else level.copy()
        theirs_l = None if level is None else level.copy()
        _put_choices(mine_r, mine_l, index, choice)
        _numpy_choices(theirs_r, theirs_l, index, choice)
        assert mine_r.tolist() == theirs_r.tolist()
        if level is not None:
            assert mine_l.tolist() == theirs_l.tolist()


def test_the_first_bad_choice_is_refused():
    game = Game(sc.from_dict(PLAIN))
    users = [f"user_{i}" for i in range(5)]
    for choice in ([0, 1, 2, -1, 1], [1, -3, 0, 5, 1], [0, 0, 0, 0, 2]):
        actions = dict(zip(users, choice, strict=True))
        first = users[int(np.flatnonzero((np.array(choice) < 0) | (np.array(choice) > 1))[0])]
        with pytest.raises(InputError, match=f"^{first} action"):
            game._check_choices(actions, users, choice)
    game._check_choices({}, users, [0, 1, 1, 0, 1])


@pytest.mark.parametrize("table", [None, {"epsilon_levels": [2.0, 6.0]}])
def test_a_scored_users_reward_is_its_entry_of_every_reward(table):
    scenario = sc.from_dict({**PLAIN, "game": table} if table else PLAIN)
    every, some = Game(scenario), Game(scenario)
    every.reset(5)
    some.reset(5)
    rng = np.random.default_rng(0)
    scored = ("user_0", "user_4", "user_11")
    for _ in range(6):
        actions = {f"user_{i}": int(rng.integers(0, every.action_space("user_0").n))
                   for i in range(12)}  # fmt: skip
        all_rewards, _ = every.step(actions)
        rewards, _ = some.step(actions, scored=scored)
        assert rewards == {a: all_rewards[a] for a in scored}


def test_the_mean_is_numpys():
    rng = np.random.default_rng(1)
    for n in (1, 2, 5, 7, 8, 9, 16, 80, 129, 1000):
        values = rng.exponential(size=n) * rng.choice([1e-9, 1.0, 1e9], n)
        assert _mean(values) == float(np.mean(values))
    assert np.isnan(_mean(np.zeros(0)))
