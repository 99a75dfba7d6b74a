"""The server's exact best response (sim/env/joint_game.py) and the owed answers' expected
errors (sim/env/expected_errors.py) against the real query code."""

from __future__ import annotations

import numpy as np
import pytest

from mdpsim.agents.policies.random_agent import RandomAgent
from mdpsim.agents.policies.self_play import SelfPlay
from mdpsim.agents.strategies.query_planner import QueryRound, ask_one
from mdpsim.env import JointGame, RewardWeights, best_response, single_agent_env
from mdpsim.env.expected_errors import asked_range_errors, prior_range_errors
from mdpsim.env.prior_answers import PriorCall, planar_distances_km, range_prior
from mdpsim.errors import InputError
from mdpsim.simulation import scenario as sc

#: users stay where the prior put them; the server picks EM or Laplace and whether to ask
GAME = {
    "scenario": {"name": "server_br", "seed": 3, "ticks": 8},
    "network": {"source": "helsinki-test"},
    "domain": {"n_points": 30},
    "users": {"count": 3, "speed_mps": 1e-6},
    "strategies": {"budget": {"name": "cgp", "rho_per_km2": 60.0}},
    "mechanism": {"name": "em", "epsilon_per_km": 4.0},
    "queries": {"kinds": ["range"], "every_ticks": 1, "rho_per_km2": 2.0, "saving": False},
    "attacks": {"run": ["bayes"]},
    "game": {"epsilon_levels": [1.0, 4.0], "mechanisms": ["em", "laplace"]},
}
WEIGHTS = RewardWeights(attack_weight=3.0, query_weight=0.1)
HELD_OUT = range(100, 140)


@pytest.fixture(scope="module")
def env():
    return single_agent_env(sc.from_dict(GAME), agent="server", weights=WEIGHTS)


def _episode(env, act, seed: int) -> float:
    obs, _ = env.reset(seed=seed)
    total, done = 0.0, False
    while not done:
        obs, reward, _, done, _ = env.step(act(obs))
        total += reward
    return total


def test_the_expected_range_errors_match_the_query_code(env):
    """Monte Carlo of ask_one (BM1) and of the prior's answer, users placed by the prior."""
    env.reset(seed=1)
    domain, settings = env.model.domain, env.game.scenario.queries
    planar = planar_distances_km(domain)
    asked = asked_range_errors(settings, domain, 3)
    prior = prior_range_errors(settings, domain, planar, 3)
    assert asked[0] == prior[0] == 0.0
    rng = np.random.default_rng(0)
    for n in (1, 3):
        got, got_prior = [], []
        for _ in range(6000):
            pos = rng.choice(domain.n_x, size=n, p=domain.prior)
            round_ = QueryRound(settings, domain.x_xy[pos], domain, None, None, rng)
            got.append(ask_one("range", round_, np.full(n, settings.rho_per_km2))[1])
            got_prior.append(range_prior(PriorCall(settings, domain, pos, planar)))
        for sample, exact in ((got, asked[n]), (got_prior, prior[n])):
            half = 3.3 * np.std(sample, ddof=1) / np.sqrt(len(sample))  # 99.9 %
            assert abs(np.mean(sample) - exact) <= half, (n, np.mean(sample), exact)


def test_playing_the_servers_best_response_earns_its_value(env):
    diff = []
    for seed in HELD_OUT:
        br = best_response(env, seed=seed)
        diff.append(_episode(env, br.act, seed) - br.value)
    half = 2.58 * np.std(diff, ddof=1) / np.sqrt(len(diff))  # 99 %
    assert abs(np.mean(diff)) <= half, (np.mean(diff), half)


def _self_play_server(env):
    """The self-play server learner of agents/policies/self_play.py, trained briefly here."""
    play = SelfPlay(GAME)
    learner = play.new_server_learner(1)
    play.train(learner, "server", None, learner, range(1000, 1005), 20)
    return lambda obs: play.server_action(learner.act(obs))


def test_no_shipped_server_policy_beats_the_best_response(env):
    policies = {
        "always ask": lambda obs: np.array([0, 0, 1]),
        "never ask": lambda obs: np.array([0, 0, 0]),
        "publish laplace, ask": lambda obs: np.array([1, 1, 1]),
        "self-play": _self_play_server(env),
    }
    for seed in range(3):
        br = best_response(env, seed=seed)
        for name, policy in policies.items():  # exact values on the same states
            assert br.evaluate(policy) <= br.value + 1e-9, (name, seed)
        assert br.evaluate(br.act) == pytest.approx(br.value)
        assert br.value > br.evaluate(policies["always ask"]) + 1e-3  # the choice matters
    randomly = RandomAgent(env.action_space, seed=1).act
    played = np.array([_episode(env, randomly, s) for s in HELD_OUT[:20]])
    values = np.mean([best_response(env, seed=s).value for s in HELD_OUT[:20]])
    assert played.mean() - 2.58 * played.std(ddof=1) / np.sqrt(20) <= values


def test_the_exact_value_of_the_strategies_is_what_they_earn(env):
    diff = []
    for seed in HELD_OUT:
        value = JointGame(env, seed=seed).values()["server"]
        diff.append(_episode(env, lambda obs: env.strategy_action(), seed) - value)
    half = 2.58 * np.std(diff, ddof=1) / np.sqrt(len(diff))
    assert abs(np.mean(diff)) <= half, (np.mean(diff), half)


@pytest.mark.parametrize(
    ("queries", "why"),
    [
        ({"kinds": ["range", "kde"], "saving": False}, "expected error of a 'kde' answer"),
        ({"kinds": ["range"], "saving": True}, "queries.saving = false"),
    ],
)
def test_a_server_game_without_an_exact_expectation_says_why(queries, why):
    game = {**GAME, "queries": {**GAME["queries"], **queries}}
    env = single_agent_env(sc.from_dict(game), agent="server", weights=WEIGHTS)
    with pytest.raises(InputError, match=why):
        best_response(env, seed=0)
