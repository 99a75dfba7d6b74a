"""The agents of agents/: a Q-learning user on the eps-level choice, and the self-play."""

from __future__ import annotations

import numpy as np
import pytest

from mdpsim.agents.policies.greedy import GreedyReporter
from mdpsim.agents.policies.q_learning import TabularQ, UserState, level_user
from mdpsim.agents.policies.random_agent import RandomAgent
from mdpsim.env import RewardWeights, single_agent_env
from mdpsim.simulation import scenario as sc

#: docs/env.md, "A learning user": the budget pays 15 reports at eps 4, 1 at eps 12
LEVEL_GAME = {
    "scenario": {"name": "levels", "seed": 3, "ticks": 20},
    "network": {"source": "helsinki-test"},
    "domain": {"n_points": 60},
    "users": {"count": 2},
    "strategies": {"budget": {"name": "cgp", "rho_per_km2": 120.0}},
    "mechanism": {"name": "em", "epsilon_per_km": 12.0},
    "queries": {"every_ticks": 0},
    "attacks": {"run": ["bayes"]},
    "game": {"epsilon_levels": [1.0, 4.0, 12.0]},
}
WEIGHTS = RewardWeights(attack_weight=3.0)
HELD_OUT = range(40)  # 20 gave intervals that touched once the tick moved first


def _episode(env, act, seed: int) -> float:
    obs, _ = env.reset(seed=seed)
    total, done = 0.0, False
    while not done:
        obs, reward, terminated, truncated, _ = env.step(act(obs))
        total, done = total + reward, terminated or truncated
    return total


def _interval(returns: np.ndarray) -> tuple[float, float]:
    """Mean and 95 % half-width."""
    return float(returns.mean()), float(1.96 * returns.std(ddof=1) / np.sqrt(len(returns)))


def test_q_learning_update_is_the_running_mean_of_its_targets():
    agent = TabularQ(1, 2, lambda obs: 0, gamma=1.0)
    for reward in (1.0, 2.0, 6.0):
        agent.update(None, 1, reward, None, True)
    assert agent.q[0].tolist() == [0.0, 3.0] and agent.act(None) == 1
    state = UserState(["tick_fraction", "remaining_fraction"], budget_bins=4, tick_bins=2)
    assert state(np.array([0.6, 1.0])) == 1 * 4 + 3 and state.n_states == 8


@pytest.mark.slow
def test_the_q_learning_user_beats_always_and_random_on_held_out_seeds():
    env = single_agent_env(sc.from_dict(LEVEL_GAME), agent="user_0", weights=WEIGHTS)
    learned = level_user(env, episodes=600, seeds=range(1000, 1020), seed=0)
    agents = {
        "q_learning": learned.act,
        "always": lambda obs: env.strategy_action(),
        "random": RandomAgent(env.action_space, seed=1).act,
        "greedy": GreedyReporter(attack_weight=WEIGHTS.attack_weight).act,
    }
    scores = {
        n: _interval(np.array([_episode(env, a, s) for s in HELD_OUT])) for n, a in agents.items()
    }
    q_mean, q_half = scores["q_learning"]
    for other in ("always", "random"):
        mean, half = scores[other]
        assert q_mean - q_half > mean + half, (other, scores)  # the intervals do not meet


@pytest.mark.slow
def test_self_play_rows_hold_both_players_rewards_per_move():
    from mdpsim.agents.policies.self_play import markdown, play

    rows = play(rounds=1, episodes=2, held_out=range(1))
    assert [(r["round"], r["moved"]) for r in rows] == [
        (0, "strategies"),
        (1, "users"),
        (1, "server"),
    ]
    assert all(np.isfinite(r["user"]) and np.isfinite(r["server"]) for r in rows)
    assert rows[0]["mean_eps"] == 12.0 and rows[0]["lp_share"] == 0.0  # the strategies
    assert markdown(rows).count("\n") == 4
