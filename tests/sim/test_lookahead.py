"""agents/policies/lookahead.py: the exact best response beats greedy by at least 10 %."""

from __future__ import annotations

import numpy as np
import pytest

from mdpsim.agents.policies import lookahead
from mdpsim.agents.policies.greedy import GreedyReporter
from mdpsim.env import best_response


@pytest.fixture(scope="module")
def env():
    return lookahead.env()


def test_thinking_ahead_pays_at_least_ten_percent_in_exact_value(env):
    greedy = GreedyReporter(lookahead.WEIGHTS.attack_weight).act
    for seed in range(3):
        br = best_response(env, seed=seed)
        greedy_value = br.game.evaluate(greedy)
        assert br.value - greedy_value >= 0.10 * abs(greedy_value), (seed, br.value, greedy_value)


@pytest.mark.slow
def test_thinking_ahead_pays_at_least_ten_percent_on_held_out_seeds(env):
    greedy = GreedyReporter(lookahead.WEIGHTS.attack_weight).act
    seeds = range(20)
    played_br = np.array([lookahead.episode(env, best_response(env, seed=s).act, s) for s in seeds])
    played_greedy = np.array([lookahead.episode(env, greedy, s) for s in seeds])

    def half(r):
        return 1.96 * r.std(ddof=1) / np.sqrt(len(r))

    assert played_br.mean() - played_greedy.mean() >= 0.10 * abs(played_greedy.mean())
    assert played_br.mean() - half(played_br) > played_greedy.mean() + half(played_greedy)
