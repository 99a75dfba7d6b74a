"""mdpsim.env with the [game] table: eps levels for users, mechanism and query-kind choices."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from gymnasium.utils.env_checker import check_env
from pettingzoo.test import parallel_api_test

from mdpsim.attacks.bayes import BayesAttack
from mdpsim.cli import main
from mdpsim.env import LEVEL_OBS, USER_OBS, parallel_env, single_agent_env
from mdpsim.errors import InputError
from mdpsim.experiments.run import tables, write_outputs
from mdpsim.privacy.filters import charge_of
from mdpsim.simulation import scenario as sc
from mdpsim.simulation.model import PrivacyModel

LEVELS = [2.0, 6.0, 12.0]
GAME = {
    "scenario": {"name": "game", "seed": 3, "ticks": 5},
    "network": {"source": "helsinki-test"},
    "domain": {"n_points": 60},
    "users": {"count": 4},
    "strategies": {"budget": {"name": "cgp", "rho_per_km2": 500.0}},
    "mechanism": {"name": "em", "epsilon_per_km": 6.0},
    "queries": {"rho_per_km2": 20.0, "kinds": ["range", "kde"]},
    "attacks": {"run": ["bayes", "tracking"]},
    "game": {"epsilon_levels": LEVELS, "mechanisms": ["em", "laplace"], "choose_query_kinds": True},
}


@pytest.fixture(scope="module")
def game():
    return sc.from_dict(GAME)


def test_game_spaces_pass_the_pettingzoo_api_test(game):
    env = parallel_env(game)
    assert env.action_space("user_0").n == 1 + len(LEVELS)
    assert env.action_space("server").nvec.tolist() == [2, 2, 2, 2]
    assert env.game.server_action_fields() == ("refresh", "mechanism", "query_range", "query_kde")
    parallel_api_test(env, num_cycles=6)


@pytest.mark.parametrize("agent", ["server", "user_1"])
def test_game_spaces_pass_the_gymnasium_checker(game, agent):
    check_env(single_agent_env(game, agent=agent), skip_render_check=True)


def test_default_spaces_stay_as_they_were():
    plain = sc.from_dict({k: v for k, v in GAME.items() if k != "game"})
    env = parallel_env(plain)
    assert env.action_space("user_0").n == 2
    assert env.action_space("server").nvec.tolist() == [2, 2]
    assert env.observation_space("user_0").shape == (len(USER_OBS),)


def test_a_report_pays_its_level_and_the_observation_holds_every_level(game):
    env = parallel_env(game)
    env.reset(seed=7)
    actions = env.strategy_actions()
    actions.update({"user_0": 1, "user_1": 3, "user_2": 0, "user_3": 2})  # levels 0, 2, -, 1
    obs, *_ = env.step(actions)
    model = env.model
    server = model.server
    charges = [charge_of(model.budget.notion, m.report_guarantee) for m in server.level_mechanisms]
    assert [c.cost for c in charges] == pytest.approx([e**2 / 2 for e in LEVELS])
    spent = model.filters.spent_by_component()["reports"]
    np.testing.assert_allclose(spent, [charges[0].cost, charges[2].cost, 0.0, charges[1].cost])
    eps = model.log.users[-1]["report_epsilon_per_km"]
    np.testing.assert_array_equal(eps[[0, 1, 3]], [2.0, 12.0, 6.0])
    assert np.isnan(eps[2])
    fields = dict(zip(env.game.user_fields(), obs["user_1"], strict=True))
    for level, mech in enumerate(server.level_mechanisms):
        cost = fields[f"level{level}_cost_fraction"]
        assert cost == pytest.approx(charges[level].cost / 500.0, rel=1e-6)
        assert fields[f"level{level}_expected_loss_km"] == pytest.approx(mech.expected_loss())
    assert len(env.game.user_fields()) == len(USER_OBS) + len(LEVELS) * len(LEVEL_OBS)
    server_obs = dict(zip(env.game.server_fields(), obs["server"], strict=True))
    assert [server_obs[f"level{i}_reported_fraction"] for i in range(3)] == [0.25, 0.25, 0.25]


def test_the_attack_reads_each_report_through_its_own_level(game):
    env = parallel_env(game)
    env.reset(seed=2)
    actions = env.strategy_actions()
    actions.update({f"user_{i}": 1 + i % 3 for i in range(4)})
    env.step(actions)
    model = env.model
    reports = model.last_reports
    (scored,) = [s for s in model.last_attacks.scores["bayes"] if s.tick == model.tick]
    domain = model.domain
    bayes = model.server.attacks.attacks["bayes"]
    assert len(set(reports.levels.tolist())) == 3
    for u, y, level in zip(reports.users, reports.outputs, reports.levels, strict=True):
        mech = model.server.level_mechanisms[level]
        table = BayesAttack.fit(mech.matrix_, domain.prior, domain.dist_xx)
        seen = bayes.posterior_t_[level * domain.n_y + y]  # the column of (level, output)
        np.testing.assert_allclose(seen, table.posterior[:, y], rtol=1e-9, atol=1e-15)
        row = int(np.flatnonzero(scored.users == u)[0])
        truth = model.population.position[u]
        assert scored.values["hit"][row] == float(table.map_estimate[y] == truth)


def test_the_server_picks_the_mechanism_and_the_query_kinds(game):
    env = parallel_env(game)
    env.reset(seed=4)
    actions = env.strategy_actions()
    actions["server"] = np.array([1, 1, 1, 0])  # refresh to laplace, ask range only
    env.step(actions)
    row = env.model.log.ticks[-1]
    assert row["mechanism"] == "laplace" and row["mechanism_regenerated"]
    assert "range_error" in row and "kde_error" not in row
    assert all(m.name == "laplace" for m in env.model.server.level_mechanisms)
    follow = env.strategy_actions()["server"]
    assert follow[1] == 1  # the strategies keep what is published


def test_following_the_strategies_of_a_game_writes_the_bytes_of_mdpsim_run(tmp_path):
    path = tmp_path / "g.toml"
    path.write_text(
        '[scenario]\nname = "g"\nseed = 3\nticks = 4\n[network]\nsource = "helsinki-test"\n'
        "[domain]\nn_points = 60\n[users]\ncount = 4\n"
        '[mechanism]\nname = "em"\nepsilon_per_km = 6.0\n[queries]\nrho_per_km2 = 20.0\n'
        '[strategies]\nbudget = {name = "cgp", rho_per_km2 = 500.0}\n'
        '[game]\nepsilon_levels = [2.0, 6.0]\nmechanisms = ["em", "laplace"]\n'
        "choose_query_kinds = true\n"
    )
    assert main(["run", str(path), "--out", str(tmp_path / "cli"), "--seed", "5"]) == 0
    env = parallel_env(sc.load(path))
    env.reset(seed=5)
    while env.agents:
        env.step(env.strategy_actions())
    write_outputs(tmp_path / "env", env.model.config, 5, tables(env.model))
    for name in ("ticks.parquet", "users.parquet"):
        assert (tmp_path / "env" / name).read_bytes() == (tmp_path / "cli" / name).read_bytes()
    users = pd.read_parquet(tmp_path / "cli" / "users.parquet")
    reported = users["reported_output"] >= 0
    assert (users.loc[reported, "report_epsilon_per_km"] == 6.0).all()  # the default level


@pytest.mark.parametrize(
    ("game", "match"),
    [
        ({"epsilon_levels": [2.0, 4.0]}, "must hold mechanism.epsilon_per_km"),
        ({"mechanisms": ["laplace"]}, "must hold mechanism.name"),
        ({"mechanisms": ["em", "nope"]}, "game.mechanisms"),
        ({"epsilon_levels": [6.0, 6.0]}, "twice"),
        ({"epsilon_levels": [2.0, 6.0], "mechanisms": ["em", "dista_lp"]}, "one level"),
    ],
)
def test_game_fields_are_refused_with_one_line(game, match):
    raw = {k: v for k, v in GAME.items() if k != "game"}
    uploads = {"params_by_name": {"dista_lp": {"upload": "location"}}}  # takes uploads
    raw["mechanism"] = {**raw["mechanism"], **uploads}
    with pytest.raises(InputError, match=match):
        sc.from_dict({**raw, "game": game})


def test_dista_lp_without_uploads_plays_at_every_level():
    raw = {k: v for k, v in GAME.items() if k != "game"}
    raw["mechanism"] = {"name": "dista_lp", "epsilon_per_km": 6.0, "params": {"upload": "none"}}
    raw["game"] = {"epsilon_levels": [2.0, 6.0]}
    model = PrivacyModel(sc.from_dict(raw), rng=2)
    model.run(2)
    server = model.server
    assert [m.epsilon for m in server.level_mechanisms] == [2.0, 6.0]
    assert all(m.uploads_ is None for m in server.level_mechanisms)
    assert "upload" not in model.filters.spent_by_component()


def test_a_bad_action_names_the_space(game):
    env = parallel_env(game)
    env.reset(seed=1)
    with pytest.raises(InputError, match="1 .. 3"):
        env.step({"user_0": 4})
    with pytest.raises(InputError, match="refresh, mechanism, query_range, query_kde"):
        env.step({"server": np.array([1, 2, 0, 0])})


def test_each_user_reports_at_the_level_it_chose_and_a_level_too_high_is_one_line(game):
    env = parallel_env(game)
    env.reset(seed=0)
    actions = {**env.strategy_actions(), "user_0": 0, "user_1": 1, "user_2": 3, "user_3": 2}
    env.step(actions)
    reports = env.game.model.last_reports
    chosen = dict(zip(reports.users.tolist(), reports.levels.tolist(), strict=True))
    assert chosen == {1: 0, 2: 2, 3: 1}  # user_0 silent; action k reports at level k - 1
    with pytest.raises(InputError, match=r"^user_2 action 4 must be 0 \(silent\) or 1 \.\. 3 "):
        env.step({"user_2": 4})
    assert env.game.model.tick == 1
