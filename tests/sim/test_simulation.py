"""The Mesa model and `mdpsim run`: a tick's story, budgets, attacks, determinism, atomic output."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from mdpsim.cli import main
from mdpsim.experiments.run import run_scenario, simulate
from mdpsim.simulation.model import PrivacyModel


@pytest.fixture(scope="module")
def world(make_scenario):
    """This module's scenario: 30 users on Helsinki (``world(**tables)`` changes tables)."""
    return make_scenario.but(
        scenario={"name": "t", "seed": 4, "ticks": 6},
        network=None,
        domain={"n_points": 150},
        users={"count": 30},
        strategies={"budget": {"name": "cgp", "rho_per_km2": 1000.0}},
        queries={"rho_per_km2": 20.0},
    )


@pytest.fixture(scope="module")
def run_tables(world):
    return simulate(world())


def test_agents_are_views_over_the_model_arrays(world):
    model = PrivacyModel(world())
    users = [a for a in model.agents if type(a).__name__ == "UserAgent"]
    assert len(users) == 30
    model.step()
    u = users[3]
    assert u.secret == model.population.position[3]
    assert u.remaining_budget == model.filters.remaining[3]
    assert u.cell.coordinate == u.secret
    assert np.allclose(u.cell.position, model.domain.x_xy[u.secret])


def test_every_tick_has_its_rows(run_tables):
    ticks, users, timings = run_tables
    assert list(ticks["tick"]) == list(range(1, 7))
    assert len(users) == 6 * 30 and list(timings["tick"]) == list(range(7))  # 0: generation
    expected = [
        "utility_loss_km", "bayes_error_km", "bayes_hit", "tracking_error_km", "tracking_hit",
        "bayes_leakage_per_km", "bayes_bound_violation", "range_error", "kde_error", "knn_error",
        "query_privacy_saving", "remaining_budget_mean", "n_halted", "solver_status",
    ]  # fmt: skip
    assert set(expected) <= set(ticks.columns)


def test_users_move_along_roads_within_their_reach(run_tables, world):
    model = PrivacyModel(world())
    before = model.population.position.copy()
    moved = 0
    for _ in range(5):
        model.step()
        after = model.population.position
        reach = model.mobility.reach_km[before]
        assert np.all(model.domain.dist_xx[before, after] <= reach + 1e-12)
        moved += int(np.sum(before != after))
        before = after.copy()
    assert moved > 0


def test_posterior_leakage_of_every_report_is_within_epsilon(run_tables):
    _, users, _ = run_tables
    leak = users["bayes_leakage_per_km"].dropna()
    assert len(leak) > 0 and leak.max() <= 6.0 * (1 + 1e-9)


def test_tracking_does_no_worse_than_single_reports(run_tables):
    ticks, _, _ = run_tables
    assert ticks["tracking_error_km"].mean() <= ticks["bayes_error_km"].mean() + 1e-12


def test_budgets_never_overspend_and_halted_users_stop_answering(world):
    ticks, users, _ = simulate(world(strategies={"budget": {"name": "cgp", "rho_per_km2": 60.0}}))
    assert (users["remaining_budget"] >= 0).all()
    assert ticks["n_halted"].iloc[-1] > 0
    halted_at = users[users["halted"]].groupby("user")["tick"].min()
    later = users.merge(halted_at.rename("halt_tick"), on="user")
    after = later[later["tick"] > later["halt_tick"]]
    assert (after["reported_output"] == -1).all()


def test_elimination_saves_budget_compared_with_the_baseline(world):
    rich = {"budget": {"name": "cgp", "rho_per_km2": 1e5}}
    pm, _, _ = simulate(world(queries={"rho_per_km2": 200.0}, strategies=rich))
    bm, _, _ = simulate(world(queries={"rho_per_km2": 200.0, "saving": False}, strategies=rich))
    assert pm["query_privacy_saving"].mean() > 0.05
    assert bm["query_privacy_saving"].max() == 0.0


def test_same_seed_same_parquet_bytes(tmp_path, world):
    a, b = tmp_path / "a", tmp_path / "b"
    run_scenario(world(), a)
    run_scenario(world(), b)
    for name in ("ticks.parquet", "users.parquet"):
        assert (a / name).read_bytes() == (b / name).read_bytes()
    c = tmp_path / "c"
    run_scenario(world(), c, seed=5)
    assert not pd.read_parquet(a / "users.parquet").equals(pd.read_parquet(c / "users.parquet"))


def test_interrupted_run_leaves_nothing_that_looks_complete(tmp_path, monkeypatch, world):
    calls = {"n": 0}
    original = PrivacyModel.step

    def crash(self):
        calls["n"] += 1
        if calls["n"] == 3:
            raise KeyboardInterrupt
        original(self)

    monkeypatch.setattr(PrivacyModel, "step", crash)
    with pytest.raises(KeyboardInterrupt):
        run_scenario(world(), tmp_path / "out")
    assert list(tmp_path.iterdir()) == []


def test_cli_run_writes_outputs_and_prints_a_summary(tmp_path, capsys):
    path = tmp_path / "s.toml"
    path.write_text(
        '[scenario]\nname = "cli"\nticks = 3\n[domain]\nn_points = 120\n[users]\ncount = 10\n'
        '[mechanism]\nname = "em"\nepsilon_per_km = 4.0\n'
    )
    out = tmp_path / "run"
    assert main(["run", str(path), "--out", str(out), "--ticks", "2", "--seed", "9"]) == 0
    printed = capsys.readouterr().out
    assert "utility_loss_km" in printed and "bayes_hit" in printed
    summary = json.loads((out / "summary.json").read_text())
    assert summary["scenario"]["scenario"]["seed"] == 9 and "seed" not in summary
    assert summary["scenario"]["scenario"]["ticks"] == summary["summary"]["ticks"] == 2
    assert len(pd.read_parquet(out / "users.parquet")) == 20


def test_cli_bad_scenario_exits_2_without_output(tmp_path, capsys):
    path = tmp_path / "bad.toml"
    path.write_text('[mechanism]\nname = "em"\nepsilon_per_km = -4.0\n')
    out = tmp_path / "run"
    assert main(["run", str(path), "--out", str(out)]) == 2
    assert "mechanism.epsilon_per_km" in capsys.readouterr().err
    assert not out.exists()


def test_mechanism_cache_reuses_fitted_mechanisms_across_models(world):
    cache: dict = {}
    first = PrivacyModel(world(), mechanism_cache=cache)
    first.step()
    second = PrivacyModel(world(), domain=first.domain, mechanism_cache=cache)
    second.step()
    assert len(cache) == 1 and second.server.mechanism is first.server.mechanism
