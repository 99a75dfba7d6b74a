"""One world builder, one loop: every driver builds its world in mdpsim.simulation.world and runs
the model."""

from __future__ import annotations

import ast
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from mdpsim.cli import main
from mdpsim.env import parallel_env
from mdpsim.errors import InputError
from mdpsim.experiments import harness
from mdpsim.experiments.run import simulate
from mdpsim.simulation import scenario as sc
from mdpsim.simulation.model import PrivacyModel
from mdpsim.simulation.world import build_world

SIM = Path(__file__).resolve().parents[2] / "sim"
DASHBOARD = SIM.parent / "dashboard"


@pytest.fixture(scope="module")
def oracle(make_scenario):
    """The grant_true_mobility scenario of issue 25: an oracle tracking attack."""
    return make_scenario.but(
        scenario={"name": "oracle", "seed": 5, "ticks": 4},
        domain={"n_points": 50},
        users={"count": 12},
        strategies={"budget": {"name": "cgp", "rho_per_km2": 1000.0}},
        mechanism={"epsilon_per_km": 4.0},
        queries={"every_ticks": 0},
        attacks={
            "run": ["bayes", "oracle"],
            "params": {"oracle": {"attack": "tracking", "mobility": "true"}},
            "grant_true_mobility": True,
        },
    )


ORACLE_TOML = """
[scenario]
name = "oracle"
seed = 5
ticks = 4
[network]
source = "helsinki-test"
[domain]
n_points = 50
[users]
count = 12
[mechanism]
name = "em"
epsilon_per_km = 4.0
[queries]
every_ticks = 0
[attacks]
run = ["bayes", "oracle"]
params.oracle = { attack = "tracking", mobility = "true" }
grant_true_mobility = true
[strategies]
budget = {name = "cgp", rho_per_km2 = 1000.0}
"""


def test_only_the_world_builder_places_the_domain():
    """``Domain.from_network`` from scenario fields is called in mdpsim.simulation.world only."""
    callers = []
    for path in [*SIM.rglob("*.py"), *DASHBOARD.rglob("*.py")]:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Attribute) and node.attr == "from_network":
                callers.append(path.relative_to(SIM.parent).as_posix())
    assert sorted(set(callers) - {"sim/cli.py"}) == [
        "sim/simulation/world.py"
    ]  # cli: `mdpsim domain`


def test_the_model_walks_the_world_the_builder_makes(oracle):
    s = oracle()
    world = build_world(s, 9)
    ahead = world.walks_ahead(3)
    model = PrivacyModel(s, rng=9)
    np.testing.assert_array_equal(model.domain.x_xy, world.domain.x_xy)
    for t in range(3):
        np.testing.assert_array_equal(model.population.position, ahead[t])
        model.step()


def test_walks_ahead_leave_the_world_unchanged(oracle):
    world = build_world(oracle(), 2)
    start = world.population.position.copy()
    first = world.walks_ahead(4)
    np.testing.assert_array_equal(world.population.position, start)
    np.testing.assert_array_equal(world.walks_ahead(4), first)


def test_granted_true_mobility_runs_in_run_attack_and_env(tmp_path, oracle):
    s = oracle()
    ticks, _, _ = simulate(s)
    assert np.isfinite(ticks["oracle_error_km"]).all()

    summary, _ = harness.evaluate(s, harness.plan_of(s))
    assert set(summary["attack"]) == {"bayes", "oracle"}

    env = parallel_env(s)
    env.reset(seed=5)
    while env.agents:
        env.step({agent: env.action_space(agent).sample() for agent in env.agents})
    path = tmp_path / "oracle.toml"
    path.write_text(ORACLE_TOML, encoding="utf-8")
    assert sc.load(path).to_dict() == s.to_dict()
    assert main(["run", str(path), "--out", str(tmp_path / "r")]) == 0
    assert main(["attack", str(path), "--out", str(tmp_path / "a"), "--no-progress"]) == 0


def test_report_probability_thins_the_reports_in_mdpsim_run(oracle):
    full, _, _ = simulate(oracle())
    half, _, _ = simulate(oracle(attacks={"report_probability": 0.5}))
    assert (full["n_reports"] == 12).all()
    assert 0 < half["n_reports"].sum() < 0.8 * full["n_reports"].sum()


def test_pseudonyms_change_at_the_scenario_tick_in_mdpsim_run(oracle):
    model = PrivacyModel(oracle(strategies={"pseudonyms": {"name": "change_at", "tick": 3}}))
    seen = []
    for _ in range(4):
        model.step()
        seen.append(model.pseudonyms.copy())
    np.testing.assert_array_equal(seen[0], seen[1])
    assert set(seen[2]) == set(range(12, 24)) and not np.array_equal(seen[1], seen[2])
    np.testing.assert_array_equal(seen[2], seen[3])


def test_mdpsim_attack_is_the_run_of_each_mechanism(oracle):
    """The attack table of a mechanism is the attack columns of `mdpsim run` with it."""
    s = oracle(attacks={"run": ["bayes"], "params": {}})
    summary, per_tick = harness.evaluate(s, harness.plan_of(s))
    ticks, _, _ = simulate(s)
    pd.testing.assert_series_equal(
        per_tick.set_index("tick")["error_km"].rename("bayes_error_km"),
        ticks.set_index("tick")["bayes_error_km"],
        check_dtype=False,
    )
    assert summary["mechanism"].tolist() == ["em"]


def test_true_mobility_without_the_grant_is_refused_at_load(oracle):
    """Found by tests/sim/test_scenario_runs.py: it passed validation and failed in the run."""
    with pytest.raises(InputError, match="attacks.params.oracle.*grant_true_mobility"):
        oracle(attacks={"grant_true_mobility": False})
