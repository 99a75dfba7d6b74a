"""The game's rules (docs/env.md, "Rewards"): silence costs the server the prior's answer."""

from __future__ import annotations

import numpy as np
import pytest

from mdpsim.agents import attack_success
from mdpsim.env import RewardWeights, parallel_env, single_agent_env
from mdpsim.env.prior_answers import PriorCall, planar_distances_km, prior_answer
from mdpsim.errors import InputError
from mdpsim.queries.range_query import Disk, count_err, true_count


@pytest.fixture(scope="module")
def asking(make_scenario):
    return make_scenario(
        scenario={"name": "rules", "seed": 3, "ticks": 4},
        domain={"n_points": 60},
        users={"count": 12},
        strategies={"budget": {"name": "cgp", "rho_per_km2": 500.0}},
        queries={"kinds": ["range", "kde", "knn"], "rho_per_km2": 5.0},
        attacks={"run": ["bayes"]},
    )


def _brute_range_prior(domain, positions, radius_m: float) -> float:
    """The expected CountErr of n * prior(disk), one query point at a time (Disk, true_count)."""
    locations = domain.x_xy[positions]
    total = 0.0
    for q, weight in enumerate(domain.prior):
        disk = Disk(*domain.x_xy[q], radius_m)
        inside = disk.signed_distance_km(domain.x_xy / 1000.0) < 0
        estimate = len(positions) * float(domain.prior[inside].sum())
        total += weight * count_err(estimate, true_count(locations, disk))
    return total


def test_a_server_that_does_not_ask_pays_the_error_of_the_priors_answer(asking):
    env = parallel_env(asking, weights=RewardWeights(query_weight=0.5))
    env.reset(seed=2)
    secrets = env.model.population.position.copy()
    actions = env.strategy_actions()
    actions["server"] = np.array([0, 0])  # a due tick, nothing asked
    _, rewards, *_ = env.step(actions)
    model = env.model
    assert not any(k.endswith("_error") for k in model.log.ticks[-1])
    domain = model.domain
    call = PriorCall(asking.queries, domain, secrets, planar_distances_km(domain))
    owed = {kind: prior_answer(kind)(call) for kind in ("range", "kde", "knn")}
    assert owed["range"] == pytest.approx(_brute_range_prior(domain, secrets, 250.0))
    assert all(np.isfinite(v) and v >= 0 for v in owed.values()) and owed["range"] > 0
    success = attack_success(model.last_attacks, 12).mean()
    assert rewards["server"] == pytest.approx(success - 0.5 * sum(owed.values()))


def test_prior_answers_are_exact_when_the_data_tells_nothing(asking):
    env = parallel_env(asking)
    env.reset(seed=1)
    domain = env.model.domain
    planar = planar_distances_km(domain)
    five = np.arange(5)  # knn_k = 5: naming every user is exact
    assert prior_answer("knn")(PriorCall(asking.queries, domain, five, planar)) == 0.0
    nobody = np.array([], dtype=np.int64)  # an empty population: a count of 0 is exact
    assert prior_answer("range")(PriorCall(asking.queries, domain, nobody, planar)) == 0.0


def test_asked_ticks_cost_the_asked_error_and_untimely_ticks_cost_nothing(asking):
    env = parallel_env(asking.replace(queries__every_ticks=2), weights=RewardWeights())
    env.reset(seed=2)
    _, rewards, *_ = env.step(env.strategy_actions())  # tick 1: no query is due
    success = attack_success(env.model.last_attacks, 12).mean()
    assert rewards["server"] == pytest.approx(success)
    _, rewards, *_ = env.step(env.strategy_actions())  # tick 2: asked
    row = env.model.log.ticks[-1]
    errors = sum(row[f"{k}_error"] for k in ("range", "kde", "knn"))
    success = attack_success(env.model.last_attacks, 12).mean()
    assert rewards["server"] == pytest.approx(success - 0.1 * errors)


def test_a_query_kind_without_a_prior_answer_is_refused_in_one_line():
    with pytest.raises(InputError, match="no prior answer.*register_prior_answer"):
        prior_answer("not_a_kind")


def test_with_free_queries_a_server_that_always_asks_out_earns_one_that_never_asks(
    make_scenario,
):
    """Free: a budget no query drains and a generous rho, so an answer beats the prior's."""
    game = make_scenario(
        scenario={"name": "free", "seed": 3, "ticks": 6},
        domain={"n_points": 80},
        users={"count": 30},
        mobility={"model": "waypoints"},  # users spread like the prior the server falls back to
        strategies={"budget": {"name": "cgp", "rho_per_km2": 1e6}},
        queries={"kinds": ["range"], "rho_per_km2": 50.0},
        attacks={"run": ["bayes"]},
    )
    env = single_agent_env(game, agent="server")

    def earned(query: int) -> float:
        total = 0.0
        for seed in range(3):
            env.reset(seed=seed)
            done = False
            while not done:
                _, reward, _, done, _ = env.step(np.array([0, query]))
                total += reward
        return total / 3

    always, never = earned(1), earned(0)
    assert always > never + 0.05, (always, never)


@pytest.mark.parametrize("agent", ["user_12", "user_01", "user_-1", "server_1", "nobody"])
def test_an_action_of_an_unknown_agent_is_one_line_naming_the_agents(asking, agent):
    env = parallel_env(asking)
    env.reset(seed=0)
    with pytest.raises(
        InputError, match=rf"unknown agent '{agent}'; agents: server, user_0 \.\. user_11"
    ):
        env.step({agent: 1})


def test_the_strategies_actions_name_every_agent_with_its_choice(asking):
    env = parallel_env(asking)
    env.reset(seed=0)
    decisions = env.game.model.decide()
    actions = env.game.actions_of(decisions)
    assert list(actions) == env.possible_agents
    users = [actions[f"user_{i}"] for i in range(12)]
    assert all(type(a) is int for a in users)  # plain ints, as a policy's actions
    assert users == [1 if r else 0 for r in decisions.report.tolist()]  # one level: 1 reports


@pytest.mark.parametrize("action", [2, -1, np.int64(7)])
def test_an_action_that_is_not_silent_or_report_is_one_line_and_plays_no_tick(asking, action):
    env = parallel_env(asking)
    env.reset(seed=0)
    actions = {**env.strategy_actions(), "user_3": action}
    with pytest.raises(InputError) as info:
        env.step(actions)
    shown = int(action)  # a numpy action is shown as the plain number
    assert str(info.value) == f"user_3 action {shown} must be 0 (silent) or 1 (report)"
    assert env.game.model.tick == 0


def test_without_the_per_user_table_the_game_plays_the_same(asking):
    """docs/rl.md: a training scenario may drop ``[output] per_user``; nothing an agent sees
    or earns changes."""

    def played(scenario) -> list[bytes]:
        env = single_agent_env(scenario, agent="user_0")
        seen = [env.reset(seed=5)[0].tobytes()]
        for t in range(8):  # two 4-tick episodes
            obs, reward, done, _, _ = env.step(t % 2)
            seen += [obs.tobytes(), np.float64(reward).tobytes()]
            if done:
                seen.append(env.reset()[0].tobytes())
        return seen

    quiet = asking.replace(**{"output.per_user": False})
    assert played(quiet) == played(asking)
    env = single_agent_env(quiet, agent="user_0")
    env.reset(seed=5)
    env.step(1)
    assert env.game.model.log.users == []  # the table the tick no longer builds
