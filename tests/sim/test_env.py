"""mdpsim.env: the PettingZoo / Gymnasium API over the simulation, and the docs' example."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env
from pettingzoo.test import parallel_api_test

from mdpsim.agents import attack_success
from mdpsim.cli import main
from mdpsim.env import USER_OBS, RewardWeights, parallel_env, single_agent_env
from mdpsim.errors import InputError
from mdpsim.experiments.run import tables, write_outputs
from mdpsim.simulation import scenario as sc


@pytest.fixture(scope="module")
def scenario(make_scenario):
    return make_scenario(
        scenario={"name": "env", "seed": 3, "ticks": 5},
        domain={"n_points": 60},
        users={"count": 4},
        strategies={"budget": {"name": "cgp", "rho_per_km2": 500.0}},
        queries={"rho_per_km2": 20.0},
    )


def test_parallel_env_passes_the_pettingzoo_api_test(scenario):
    env = parallel_env(scenario)
    assert env.possible_agents == ["server", "user_0", "user_1", "user_2", "user_3"]
    parallel_api_test(env, num_cycles=8)


@pytest.mark.parametrize("agent", ["server", "user_2"])
def test_single_agent_env_passes_the_gymnasium_checker(scenario, agent):
    check_env(single_agent_env(scenario, agent=agent), skip_render_check=True)


def test_unknown_agent_is_refused(scenario):
    with pytest.raises(InputError, match="user_0 .. user_3"):
        single_agent_env(scenario, agent="user_9")


_RUN_TOML = (
    '[scenario]\nname = "env"\nseed = 3\nticks = 5\n[network]\nsource = "helsinki-test"\n'
    "[domain]\nn_points = 60\n[users]\ncount = 4\n"
    '[mechanism]\nname = "em"\nepsilon_per_km = 6.0\n[queries]\nrho_per_km2 = 20.0\n'
    '[strategies]\nreport = "budget_aware"\nbudget = {name = "cgp", rho_per_km2 = 500.0}\n'
)


def _assert_same_bytes_as_mdpsim_run(tmp_path, model) -> None:
    write_outputs(tmp_path / "env", model.config, 11, tables(model))
    for name in ("ticks.parquet", "users.parquet"):
        assert (tmp_path / "env" / name).read_bytes() == (tmp_path / "cli" / name).read_bytes()


def test_following_the_strategies_writes_the_bytes_of_mdpsim_run(tmp_path, scenario):
    path = tmp_path / "s.toml"
    path.write_text(_RUN_TOML)
    assert main(["run", str(path), "--out", str(tmp_path / "cli"), "--seed", "11"]) == 0
    env = parallel_env(sc.load(path))
    env.reset(seed=11)
    while env.agents:
        env.step(env.strategy_actions())
    _assert_same_bytes_as_mdpsim_run(tmp_path, env.model)


@pytest.mark.parametrize("agent", ["user_0", "server"])
def test_a_single_agent_following_its_strategy_writes_the_bytes_of_mdpsim_run(tmp_path, agent):
    path = tmp_path / "s.toml"
    path.write_text(_RUN_TOML)
    assert main(["run", str(path), "--out", str(tmp_path / "cli"), "--seed", "11"]) == 0
    env = single_agent_env(sc.load(path), agent=agent)
    env.reset(seed=11)
    done = False
    while not done:
        *_, done, _ = env.step(env.strategy_action())
    _assert_same_bytes_as_mdpsim_run(tmp_path, env.model)


def test_a_silent_user_never_reports_and_the_server_refresh_action_regenerates(scenario):
    env = parallel_env(scenario)
    env.reset(seed=5)
    for _ in range(3):
        actions = env.strategy_actions()
        actions["user_1"] = 0
        actions["server"] = np.array([1, 0])
        env.step(actions)
    users = env.model.log.users
    assert all(cols["reported_output"][1] == -1 for cols in users)
    assert all(cols["reported_output"][0] >= 0 for cols in users)
    assert [row["mechanism_regenerated"] for row in env.model.log.ticks] == [True] * 3
    assert "range_error" not in env.model.log.ticks[0]  # the server asked no queries


def test_rewards_state_the_game(scenario):
    weights = RewardWeights(attack_weight=2.0, query_weight=0.5, silent_loss_km=3.0)
    env = parallel_env(scenario, weights=weights)
    env.reset(seed=2)
    actions = env.strategy_actions()
    actions["user_0"] = 0
    _, rewards, *_ = env.step(actions)
    model = env.model
    reports, attacks = model.last_reports, model.last_attacks
    success = attack_success(attacks, 4)
    assert rewards["user_0"] == pytest.approx(-3.0 - 2.0 * success[0])
    for u, loss in zip(reports.users, reports.loss_km, strict=True):
        assert rewards[f"user_{u}"] == pytest.approx(-loss - 2.0 * success[u])
    errors = sum(v for k, v in model.log.ticks[-1].items() if k.endswith("_error"))
    assert rewards["server"] == pytest.approx(success.mean() - 0.5 * errors)


def test_user_observation_holds_its_budget_and_the_public_mechanism_facts(scenario):
    env = single_agent_env(scenario, agent="user_3")
    obs, _ = env.reset(seed=4)
    obs, *_ = env.step(1)
    model = env.model
    field = dict(zip(USER_OBS, obs, strict=True))
    remaining = model.filters.remaining[3] / 500.0
    assert field["remaining_fraction"] == pytest.approx(remaining, rel=1e-6)
    loss = model.server.mechanism.expected_loss()
    assert field["expected_loss_km"] == pytest.approx(loss, rel=1e-6)
    assert field["reported_last"] == 1.0


def test_users_who_made_the_same_choices_see_the_same_thing_wherever_they_are(scenario):
    """No location in the user's observation: a choice cannot follow the secret unaccounted."""
    env = parallel_env(scenario)
    obs, _ = env.reset(seed=4)
    users = [a for a in env.agents if a != "server"]
    for _ in range(3):
        assert len(set(env.model.population.position)) > 1  # the users stand apart
        assert len({tuple(obs[a]) for a in users}) == 1
        actions = {a: 1 for a in users} | {"server": np.array([0, 0])}
        obs, *_ = env.step(actions)


def _python_blocks(markdown: str) -> list[str]:
    return re.findall(r"```python\n(.*?)```", markdown, flags=re.S)


@pytest.mark.slow
def test_the_docs_example_runs_and_greedy_beats_the_default():
    doc = (Path(__file__).resolve().parents[2] / "docs" / "env.md").read_text()
    blocks = _python_blocks(doc)
    assert blocks, "docs/env.md has no python example"
    namespace: dict = {}
    for block in blocks:
        exec(block, namespace)  # the documentation's own example
    scores = namespace["scores"]
    assert scores["greedy"] > scores["default"]
    assert np.isfinite(scores["random"])


def test_an_env_keeps_the_worlds_of_its_last_seeds_only_and_a_dropped_seed_replays(
    scenario, monkeypatch
):
    import mdpsim.env.game as game_module

    monkeypatch.setattr(game_module, "SEEDS_KEPT", 2)
    env = single_agent_env(scenario, agent="user_1")

    def episode(seed: int) -> list[bytes]:
        obs, _ = env.reset(seed=seed)
        out, done = [obs.tobytes()], False
        while not done:
            obs, reward, _, done, _ = env.step(1)
            out.append(obs.tobytes() + np.float64(reward).tobytes())
        return out

    first = episode(0)
    kept = env.unwrapped.game._seeds[0]
    again = episode(0)
    assert env.unwrapped.game._seeds[0] is kept and again == first  # reused, same bytes
    for seed in (1, 2):
        episode(seed)
    assert list(env.unwrapped.game._seeds) == [1, 2]  # seed 0, least recently played, dropped
    assert episode(0) == first  # rebuilt, the same world
    assert list(env.unwrapped.game._seeds) == [2, 0]
