"""Exact best responses of a user (sim/env/responses.py) and exploitability."""

from __future__ import annotations

import numpy as np
import pytest

from mdpsim.agents.policies.greedy import GreedyReporter
from mdpsim.agents.policies.q_learning import level_user
from mdpsim.agents.policies.random_agent import RandomAgent
from mdpsim.env import RewardWeights, best_response, exploitability, single_agent_env
from mdpsim.errors import InputError
from mdpsim.simulation import scenario as sc

#: the level game of docs/env.md, shortened: a budget of 40 pays 5 reports at eps 4
GAME = {
    "scenario": {"name": "br", "seed": 3, "ticks": 8},
    "network": {"source": "helsinki-test"},
    "domain": {"n_points": 40},
    "users": {"count": 2, "speed_mps": 1e-6},  # users stay put
    "mobility": {"model": "waypoints"},  # where the prior put them (people start at home)
    "strategies": {"budget": {"name": "cgp", "rho_per_km2": 40.0}},
    "mechanism": {"name": "em", "epsilon_per_km": 12.0},
    "queries": {"every_ticks": 0},
    "attacks": {"run": ["bayes"]},
    "game": {"epsilon_levels": [1.0, 4.0, 12.0]},
}
WEIGHTS = RewardWeights(attack_weight=3.0)
HELD_OUT = range(100, 160)


@pytest.fixture(scope="module")
def env():
    return single_agent_env(sc.from_dict(GAME), agent="user_0", weights=WEIGHTS)


def _episode(env, act, seed: int, *, oracle: bool = False) -> float:
    obs, _ = env.reset(seed=seed)
    total, done = 0.0, False
    while not done:
        secret = int(env.model.population.position[0])
        obs, reward, _, done, _ = env.step(act(obs, secret) if oracle else act(obs))
        total += reward
    return total


def _always(obs) -> int:
    return 3  # eps 12, the scenario's level: the filter refuses once the budget is short


def test_playing_the_best_response_earns_its_value_and_peeking_earns_more(env):
    """Users that stay where the prior put them: the value is the mean of what is played."""
    played, values, peeked, peek_values = [], [], [], []
    for seed in HELD_OUT:
        br = best_response(env, seed=seed)
        oracle = br.oracle()
        values.append(br.value)
        peek_values.append(br.oracle_value)
        played.append(_episode(env, br.act, seed))
        peeked.append(_episode(env, oracle, seed, oracle=True))
        assert br.oracle_value >= br.value - 1e-9  # seeing the secret can only help
    diff = np.array(played) - np.array(values)
    half = 2.58 * diff.std(ddof=1) / np.sqrt(len(diff))  # 99 %
    assert abs(diff.mean()) <= half, (diff.mean(), half)
    assert np.mean(peek_values) > np.mean(values) + 0.1  # the restriction is real
    gain = np.array(peeked) - np.array(played)
    assert gain.mean() > 0, gain.mean()


def test_no_shipped_policy_beats_the_best_response(env):
    learned = level_user(env, episodes=60, seeds=range(1000, 1010), seed=0)
    greedy = GreedyReporter(attack_weight=WEIGHTS.attack_weight)
    policies = {"always": _always, "greedy": greedy.act, "q_learning": learned.act}
    for seed in range(3):
        br = best_response(env, seed=seed)
        for name, policy in policies.items():  # exact values on the same states
            assert br.game.evaluate(policy) <= br.value + 1e-9, (name, seed)
        assert br.game.evaluate(br.act) == pytest.approx(br.value)
    randomly = RandomAgent(env.action_space, seed=1).act
    played = np.array([_episode(env, randomly, s) for s in HELD_OUT[:20]])
    values = np.mean([best_response(env, seed=s).value for s in HELD_OUT[:20]])
    assert played.mean() + 2.58 * played.std(ddof=1) / np.sqrt(20) < values


def test_exploitability_is_zero_at_the_best_response_and_positive_for_always(env):
    seeds = range(2)
    at_always = exploitability(env, _always, seeds=seeds)
    assert set(at_always.gains) == {"server", "user_0", "user_1"}
    assert all(at_always.gains[u] > 0.1 for u in ("user_0", "user_1"))
    assert at_always.nash_conv == pytest.approx(sum(at_always.gains.values()))
    assert exploitability(env, GreedyReporter(3.0).act, seeds=seeds).nash_conv >= -1e-9


@pytest.mark.parametrize(
    ("tables", "why"),
    [
        ({"attacks": {"run": ["bayes", "tracking"]}}, "reads more than this tick's report"),
        ({"queries": {"every_ticks": 1, "kinds": ["range"]}}, "queries.saving = false"),
        ({"strategies": {"refresh": "on_release"}}, "refresh schedule reads"),
    ],
)
def test_a_game_that_is_no_mdp_over_the_users_information_says_why(tables, why):
    game = {**GAME, **tables}
    env = single_agent_env(sc.from_dict(game), agent="user_0", weights=WEIGHTS)
    with pytest.raises(InputError, match=why):
        best_response(env, seed=0)


def test_queries_without_saving_charge_the_budget_the_best_response_replays():
    game = {**GAME, "queries": {"every_ticks": 2, "kinds": ["range"], "saving": False,
                                "rho_per_km2": 3.0}}  # fmt: skip
    env = single_agent_env(sc.from_dict(game), agent="user_0", weights=WEIGHTS)
    br = best_response(env, seed=5)
    obs, _ = env.reset(seed=5)
    done = False
    while not done:  # every observation is a state of the best response's game
        obs, _, _, done, _ = env.step(br.act(obs))
        if not done:
            br.game.state_of(obs)
    assert env.model.filters.spent[0] > 0
