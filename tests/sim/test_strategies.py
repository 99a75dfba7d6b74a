"""Strategies: registries, report policies, budget policies, query planners, refresh schedules."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from conftest import CHEAP_STRICT

from mdpsim.agents.strategies import (
    BUDGET_POLICIES,
    PSEUDONYM_STRATEGIES,
    QUERY_PLANNERS,
    REFRESH_SCHEDULES,
    REPORT_POLICIES,
    Strategies,
    from_scenario,
)
from mdpsim.errors import InputError
from mdpsim.experiments.run import run_scenario, simulate
from mdpsim.simulation import scenario as sc
from mdpsim.simulation.model import PrivacyModel


@pytest.fixture(scope="module")
def world(make_scenario):
    """This module's scenario (``world(strategies=..., **tables)`` changes tables)."""
    return make_scenario.but(
        scenario={"name": "s", "seed": 2, "ticks": 6},
        domain={"n_points": 60},
        users={"count": 12},
        queries={"rho_per_km2": 20.0},
    )


def test_registries_name_what_exists_and_refuse_unknown_names_and_parameters(world):
    assert REPORT_POLICIES.available() == ["always", "budget_aware", "threshold"]
    assert BUDGET_POLICIES.available() == ["cgp", "pure_gp", "renewing"]
    assert QUERY_PLANNERS.available() == ["per_query", "budgeter"]
    assert REFRESH_SCHEDULES.available() == ["every", "on_release"]
    with pytest.raises(InputError, match="available: always, budget_aware, threshold"):
        REPORT_POLICIES.make("sometimes")
    with pytest.raises(InputError, match="no parameter 'rho'; parameters: rho_per_km2"):
        BUDGET_POLICIES.from_spec({"name": "cgp", "rho": 3.0})
    with pytest.raises(InputError, match="strategies.report"):
        world(strategies={"report": {"name": "threshold", "max_expected_loss_km": -1.0}})


@pytest.mark.parametrize(
    ("tables", "line"),
    [
        ({"users": {"budget_rho_per_km2": 123.0}},
         'users.budget_rho_per_km2 is gone: write [strategies] budget = {name = "cgp", '
         'rho_per_km2 = 123.0} (to sweep it: "strategies.budget.rho_per_km2")'),
        ({"mechanism": {"refresh_every_ticks": 3}},
         'mechanism.refresh_every_ticks is gone: write [strategies] refresh = {name = "every", '
         "ticks = 3}"),
        ({"attacks": {"pseudonym_change_tick": 5}},
         "attacks.pseudonym_change_tick is gone: write [strategies] pseudonyms = "
         '{name = "change_at", tick = 5}'),
    ],
)  # fmt: skip
def test_a_retired_field_is_one_line_with_the_toml_to_write(world, tables, line):
    with pytest.raises(InputError) as err:
        world(**tables)
    assert str(err.value).startswith(line) and "\n" not in str(err.value)
    with pytest.raises(InputError, match="users.budget_rho_per_km2 is gone"):
        world().replace(**{"users.budget_rho_per_km2": 5.0})


def test_a_strategy_parameter_has_a_dotted_name_to_read_change_and_sweep(world):
    s = world()
    assert s.get("strategies.budget.rho_per_km2") == 200.0  # unset: cgp's default
    rich = s.replace(**{"strategies.budget.rho_per_km2": 600.0})
    assert rich.strategies.budget == {"name": "cgp", "rho_per_km2": 600.0}
    assert from_scenario(rich).budget.rho_per_km2 == 600.0
    assert rich.get("strategies.budget.rho_per_km2") == 600.0
    renewing = world(strategies={"budget": {"name": "renewing", "window_ticks": 4}})
    longer = renewing.replace(**{"strategies.budget.window_ticks": 8})
    assert longer.strategies.budget == {"name": "renewing", "window_ticks": 8}
    assert renewing.replace(**{"users.count": 3}).strategies.budget == renewing.strategies.budget
    with pytest.raises(InputError, match="strategies.budget"):
        s.replace(**{"strategies.budget.rho": 1.0})  # cgp has no parameter rho
    raw = {**world.raw(), "sweep": {"strategies.budget.rho_per_km2": [600.0, -1.0]}}
    with pytest.raises(InputError, match="sweep.strategies.budget.rho_per_km2"):
        sc.from_dict(raw)


def test_same_bytes_whatever_the_order_strategies_are_built_in(tmp_path, world):
    s = world()
    specs = {
        "report": ("budget_aware", REPORT_POLICIES),
        "budget": ("cgp", BUDGET_POLICIES),
        "query_planner": ("budgeter", QUERY_PLANNERS),
        "refresh": ({"name": "every", "ticks": 2}, REFRESH_SCHEDULES),
        "pseudonyms": ({"name": "change_at", "tick": 3}, PSEUDONYM_STRATEGIES),
    }
    tables = []
    for order in (list(specs), list(reversed(specs))):
        built = {kind: specs[kind][1].from_spec(specs[kind][0]) for kind in order}
        model = PrivacyModel(s, strategies=Strategies(**built))
        model.run(6)
        pd.DataFrame(model.log.ticks).to_parquet(tmp_path / "t.parquet", index=False)
        tables.append((tmp_path / "t.parquet").read_bytes())
    assert tables[0] == tables[1]


def test_budget_aware_users_never_spend_ahead_of_the_linear_schedule(world):
    s = world(
        strategies={"report": "budget_aware", "budget": {"name": "cgp", "rho_per_km2": 100.0}},
        queries={"every_ticks": 0},
    )
    model = PrivacyModel(s)
    for t in range(1, 7):
        model.step()
        spent = model.filters.capacity - model.filters.remaining
        assert np.all(spent <= 100.0 * t / 6 * (1 + 1e-12))
    assert model.filters.halted.sum() == 0
    always, _, _ = simulate(
        world(
            strategies={"budget": {"name": "cgp", "rho_per_km2": 100.0}}, queries={"every_ticks": 0}
        )
    )
    assert always["n_halted"].iloc[-1] > 0  # 18 per report: always-reporters run dry


def test_threshold_users_stay_silent_when_the_mechanism_loses_too_much(world):
    silent, _, _ = simulate(
        world(strategies={"report": {"name": "threshold", "max_expected_loss_km": 0.0}})
    )
    assert (silent["n_reports"] == 0).all()
    loud, _, _ = simulate(
        world(
            strategies={
                "report": {"name": "threshold", "max_expected_loss_km": 50.0},
                "budget": {"name": "cgp", "rho_per_km2": 1e5},
            },
        )
    )
    assert (loud["n_reports"] == 12).all()


def test_renewing_budget_renews_every_window_and_states_its_guarantee(world):
    policy = {"name": "renewing", "rho_per_km2": 40.0, "window_ticks": 3}
    model = PrivacyModel(world(strategies={"budget": policy}, queries={"every_ticks": 0}))
    reports = []
    for _ in range(6):
        model.step()
        reports.append(len(model.last_reports.users))
    assert reports == [12, 12, 0, 12, 12, 0]  # 18 per report: two fit in 40, then a new window
    text = model.budget.statement(6)
    assert "within each window of 3 ticks" in text and "80/km^2-CGP" in text


def test_pure_gp_budget_charges_eps_and_refuses_what_it_cannot_charge(world):
    model = PrivacyModel(
        world(
            strategies={"budget": {"name": "pure_gp", "epsilon_per_km": 30.0}},
            queries={"every_ticks": 0},
        )
    )
    model.step()
    assert model.filters.spent == pytest.approx(np.full(12, 6.0))
    with pytest.raises(InputError, match="pure GP budget cannot pay the Gaussian"):
        PrivacyModel(world(strategies={"budget": "pure_gp"}))
    with pytest.raises(InputError, match="cannot charge the mechanism's upload guarantee"):
        PrivacyModel(
            world(
                strategies={"budget": "pure_gp"},
                mechanism={
                    "name": "dista_lp",
                    "epsilon_per_km": 4.0,
                    "params": {"upload": "strict"},
                },
                queries={"every_ticks": 0},
            )
        )


def test_budgeter_planner_never_halts_users_and_keeps_queries_within_their_share(world):
    s = world(
        strategies={
            "query_planner": {"name": "budgeter", "share": 0.25},
            "budget": {"name": "cgp", "rho_per_km2": 400.0},
        },
        mechanism={"epsilon_per_km": 2.0},
    )
    model = PrivacyModel(s)
    model.run(6)
    spent = model.filters.spent_by_component()
    queries = sum(v for k, v in spent.items() if str(k).startswith("query_"))
    assert np.all(queries <= 100.0 * (1 + 1e-12)) and np.all(queries > 0)
    assert model.filters.halted.sum() == 0
    ticks = [row for row in model.log.ticks if "range_error" in row]
    assert len(ticks) == 6 and all(np.isfinite(r["range_error"]) for r in ticks)
    assert model.strategies.query_planner._budgeter.asked == 18  # m = 3 kinds x 6 ticks


def test_refresh_schedules_are_public_every_and_on_release(world):
    every, _, _ = simulate(world(strategies={"refresh": {"name": "every", "ticks": 2}}))
    assert list(every["mechanism_regenerated"]) == [False, True, False, True, False, True]
    silent = {"name": "threshold", "max_expected_loss_km": 0.0}
    on_release, _, _ = simulate(
        world(
            strategies={"report": silent, "refresh": {"name": "on_release", "silent_fraction": 1.0}}
        )
    )
    assert list(on_release["mechanism_regenerated"]) == [False, True, False, True, False, True]
    never, _, _ = simulate(world())
    assert not never["mechanism_regenerated"].any() and (never["mechanism_generations"] == 1).all()


def test_run_outputs_record_the_first_generation_and_the_budget_guarantee(tmp_path, world):
    budget = {"name": "renewing", "rho_per_km2": 50.0, "window_ticks": 4}
    summary = run_scenario(world(strategies={"budget": budget}), tmp_path / "out")
    assert summary["mechanism_generations"] == 1
    assert np.isfinite(summary["mechanism_generation_s_mean"])
    doc = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert "within each window of 4 ticks" in doc["budget_guarantee"]
    assert "100/km^2-CGP per user" in doc["budget_guarantee"]  # 6 ticks: 2 windows


@pytest.mark.slow
def test_dista_lp_refreshes_on_a_public_schedule_and_accounts_every_upload(world):
    silent = {"name": "threshold", "max_expected_loss_km": 0.0}  # nobody reports
    s = world(
        strategies={
            "report": silent,
            "refresh": {"name": "on_release", "silent_fraction": 1.0},
            "budget": {"name": "cgp", "rho_per_km2": 1e4},
        },
        users={"count": 4},
        domain={"n_points": 60},
        mechanism={
            "name": "dista_lp",
            "epsilon_per_km": 7.0,
            "params": {"upload": "strict", **CHEAP_STRICT, "delta": 0.01},
        },
        queries={"every_ticks": 0},
        scenario={"ticks": 3},
    )
    ticks, users, _ = simulate(s)
    assert list(ticks["mechanism_regenerated"]) == [False, True, False]
    assert list(ticks["mechanism_generations"]) == [1, 2, 2]
    # each fit charged every active user its upload: eps_up^2 / 2 and the upload's delta
    assert ticks["delta_spent_max"].iloc[-1] == pytest.approx(0.01 * 2)
    assert (ticks["n_reports"] == 0).all()


def test_budgeter_share_starts_over_with_each_window_of_a_renewing_budget(world):
    budget = {"name": "renewing", "rho_per_km2": 400.0, "window_ticks": 2}
    s = world(strategies={"query_planner": {"name": "budgeter", "share": 0.25}, "budget": budget})
    model = PrivacyModel(s)
    model.run(3)  # window 1: ticks 1-2; tick 3 opens window 2
    share = model.strategies.query_planner._budgeter.population
    by_component = model.filters.spent_by_component()  # the ledger starts over at renewal
    in_window = sum(v for k, v in by_component.items() if str(k).startswith("query_"))
    np.testing.assert_allclose(share.spent, in_window, rtol=1e-12)
    assert in_window.sum() > 0 and np.all(in_window <= 100.0 * (1 + 1e-12))


@pytest.mark.slow
@pytest.mark.parametrize("upload", ["none", "location"])
def test_dista_lp_regenerates_at_the_same_ticks_whatever_the_true_walks(upload, world):
    """Regeneration timing is public: two populations walking differently (other speeds and
    dwell times, same seed and schedule) regenerate DistA-LP at exactly the same ticks."""

    def run(speed_mps, dwell_ticks):
        s = world(
            strategies={"refresh": {"name": "every", "ticks": 2}},
            users={"count": 4, "speed_mps": speed_mps, "dwell_ticks": dwell_ticks},
            mobility={"model": "waypoints"},  # dwell_ticks: the waypoint walk's (people sleep)
            mechanism={"name": "dista_lp", "epsilon_per_km": 7.0, "params": {"upload": upload}},
            queries={"every_ticks": 0},
        )
        return simulate(s)

    slow_ticks, slow_users, _ = run(0.5, [1, 2])
    fast_ticks, fast_users, _ = run(6.0, [3, 5])
    assert not slow_users["secret"].equals(fast_users["secret"])  # other true walks
    assert slow_ticks["mechanism_regenerated"].tolist() == [False, True] * 3
    assert (
        fast_ticks["mechanism_regenerated"].tolist() == slow_ticks["mechanism_regenerated"].tolist()
    )


def test_budgeter_plans_each_renewing_window_with_what_the_filter_checks_there(world):
    s = world(
        strategies={
            "query_planner": {"name": "budgeter", "share": 0.5, "strategy": "even"},
            "budget": {"name": "renewing", "rho_per_km2": 400.0, "window_ticks": 3},
        },
        mechanism={"epsilon_per_km": 2.0},
    )
    model = PrivacyModel(s)
    planner = model.strategies.query_planner
    per_window = []
    for window in range(2):
        for _ in range(3):
            model.step()
            assert planner.plan_["window"] == window  # queries ran before the tick's renewal
        assert planner.plan_["ticks"] == (3 * window + 1, 3 * window + 3)
        assert planner.plan_["m"] == 9 and planner._budgeter.asked == 9  # 3 kinds x 3 ticks
        np.testing.assert_array_equal(planner.plan_["capacity"], np.full(12, 200.0))
        # the window's query spend, checked against that window's share of the filter
        spent = planner._budgeter.population._spent  # the window just renewed: its ledger
        per_window.append(spent.copy())
        assert np.all(spent <= 200.0 * (1 + 1e-12))
    assert all(np.all(w > 0) for w in per_window) and model.filters.windows == 2
    assert model.filters.halted.sum() == 0
