"""The Streamlit dashboard, headless: every page and its main widgets through ``AppTest``,
and the tables behind the map, the charts and the batch explorer."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from streamlit.testing.v1 import AppTest

from mdpsim._core.paths import source_checkout
from mdpsim.cli import main
from mdpsim.dashboard import batch_data, model_view
from mdpsim.dashboard.geo import road_paths
from mdpsim.dashboard.launch import APP, streamlit_command, streamlit_env
from mdpsim.errors import InputError
from mdpsim.experiments.backends import Backend
from mdpsim.experiments.batch import run_batch
from mdpsim.simulation import columns
from mdpsim.simulation import scenario as sc
from mdpsim.simulation.model import PrivacyModel

TIMEOUT_S = 120
HELSINKI_LONLAT = ((24.90, 24.99), (60.14, 60.19))  # a box around the bundled extract

REPO = source_checkout()


def _app() -> AppTest:
    return AppTest.from_file(str(APP), default_timeout=TIMEOUT_S)


def _no_failures(at: AppTest) -> None:
    assert not at.exception, [e.value for e in at.exception]
    assert not at.error, [e.value for e in at.error]


def _charts(at: AppTest) -> list:
    return at.get("vega_lite_chart")


def _deck(at: AppTest) -> dict:
    (deck,) = at.get("deck_gl_json_chart")
    return json.loads(deck.proto.json)


@pytest.fixture(scope="module")
def live(helsinki_walk) -> AppTest:
    """The live page after its first load (default scenario, model built, no tick yet)."""
    at = _app()
    at.run()
    _no_failures(at)
    return at


# ---------------------------------------------------------------------- live page
def test_live_page_opens_on_the_small_default_model(live):
    model = live.session_state["live_model"]
    assert model.tick == 0
    assert model.domain.n_x == model_view.LIVE_DEFAULT["domain"]["n_points"]
    assert live.number_input(key="live_users_count").value == 30
    assert live.selectbox(key="live_mechanism_name").value == "dista_lp"  # the honest default
    assert model.server.mechanism.get_params()["upload"] == "none"
    assert live.metric[0].value == "0"
    assert any("Step the model" in i.value for i in live.info)  # no charts before a tick


def test_run_n_ticks_updates_metrics_map_and_charts(live):
    live.number_input(key="live_n").set_value(3)
    live.button(key="live_run").click().run()
    _no_failures(live)
    model = live.session_state["live_model"]
    assert model.tick == 3 and live.metric[0].value == "3"
    # one chart per attack metric the run has (error, hit, entropy, leakage), the other
    # metric groups, the budget histogram and the inspector's row plot
    others = [*columns.CHARTS, columns.SAVINGS_CHART]  # the queries' savings: every kind
    # ... the game levels' privacy-quality plane and the people model's share at home by hour
    assert len(_charts(live)) == 4 + len(others) + 3 + 1
    layers = {layer["id"] for layer in _deck(live)["layers"]}
    assert layers == {"roads", "reported", "estimate"}
    live.button(key="live_step").click().run()
    _no_failures(live)
    assert live.session_state["live_model"].tick == 4


def test_map_toggles_add_true_locations_and_tracking_estimates(live):
    live.button(key="live_step").click().run()
    live.toggle(key="live_show_true").set_value(True)
    live.toggle(key="live_show_tracking").set_value(True).run()
    _no_failures(live)
    deck = _deck(live)
    layers = {layer["id"]: layer for layer in deck["layers"]}
    assert {"roads", "reported", "estimate", "true", "tracking"} == set(layers)
    assert deck.get("mapStyle") == "__MAP_STYLE__" and "mapProvider" not in deck  # no tiles
    assert len(layers["true"]["data"]) == 30


def test_homes_and_work_places_are_drawn_and_the_model_is_offered(live):
    assert live.selectbox(key="live_mobility_model").value == "epr"
    assert set(live.selectbox(key="live_mobility_model").options) == {"epr", "waypoints"}
    live.button(key="live_step").click().run()
    live.toggle(key="live_show_places").set_value(True).run()
    _no_failures(live)
    layers = {layer["id"]: layer for layer in _deck(live)["layers"]}
    model = live.session_state["live_model"]
    assert len(layers["home"]["data"]) == 30
    assert len(layers["work"]["data"]) == int((model.population.work >= 0).sum())
    assert any("at home, by hour" in m.value for m in live.markdown)


def test_inspector_shows_a_row_and_a_block_heatmap(live):
    live.button(key="live_step").click().run()
    live.number_input(key="insp_user").set_value(7).run()
    _no_failures(live)
    live.radio(key="insp_view").set_value("a block of the matrix").run()
    live.slider(key="insp_size").set_value(12)
    live.number_input(key="insp_row0").set_value(390).run()  # a block cut by the matrix edge
    _no_failures(live)
    spec = json.loads(_charts(live)[-1].proto.spec)
    assert spec["mark"] in ("rect", {"type": "rect"})


def test_bad_scenario_input_shows_the_validation_message(live):
    before = live.session_state["live_model"]
    live.number_input(key="live_domain_n_points").set_value(1)
    live.button(key="live_apply").click().run()
    assert not live.exception
    assert any("domain.n_points" in e.value and ">= 2" in e.value for e in live.error)
    assert live.session_state["live_model"] is before  # the running model is kept


def test_an_absurd_epsilon_is_one_error_and_the_step_controls_stay(helsinki_walk):
    at = _app()
    at.run()
    before = at.session_state["live_model"]
    for eps in (1.7e308, 1e-300):  # issue 38 item 5: the page raised, the controls went
        at.number_input(key="live_mechanism_epsilon_per_km").set_value(eps)
        at.button(key="live_apply").click().run()
        assert not at.exception, [e.value for e in at.exception]
        (error,) = [e.value for e in at.error]
        assert f"epsilon={eps:g} per km times the domain's diameter" in error
        assert "\n" not in error and "use epsilon in [" in error
        assert at.session_state["live_model"] is before  # the running model is kept
        tick = before.tick
        at.button(key="live_step").click().run()  # the step controls are there and work
        assert not at.exception
        assert at.session_state["live_model"].tick == tick + 1


@pytest.mark.slow
def test_the_waypoint_model_can_be_picked_and_has_no_homes(helsinki_walk):
    at = _app()
    at.run()
    at.selectbox(key="live_mobility_model").set_value("waypoints")
    at.button(key="live_apply").click().run()
    _no_failures(at)
    model = at.session_state["live_model"]
    assert model.config.mobility.model == "waypoints"
    assert model_view.places(model) == {} and model_view.home_by_hour(model).empty


@pytest.mark.slow
def test_applying_edits_rebuilds_the_model(helsinki_walk):
    at = _app()
    at.run()
    at.number_input(key="live_users_count").set_value(12)
    at.number_input(key="live_mechanism_epsilon_per_km").set_value(3.0)
    at.multiselect(key="live_attacks_run").set_value(["bayes", "upload"])
    at.button(key="live_apply").click().run()
    _no_failures(at)
    model = at.session_state["live_model"]
    assert model.population.n_users == 12 and "tracking" not in model.server.attacks.attacks
    assert model.config.mechanism.epsilon_per_km == 3.0
    at.button(key="live_step").click().run()
    _no_failures(at)
    assert "tracking" not in {layer["id"] for layer in _deck(at)["layers"]}


@pytest.mark.slow
def test_the_strategies_of_a_live_run_can_be_picked(helsinki_walk):
    at = _app()
    at.run()
    assert at.selectbox(key="live_strategy_report").value == "always"
    assert at.selectbox(key="live_strategy_budget").options == ["cgp", "pure_gp", "renewing"]
    at.selectbox(key="live_strategy_report").set_value("budget_aware")
    at.selectbox(key="live_strategy_budget").set_value("renewing")
    at.selectbox(key="live_strategy_query_planner").set_value("budgeter")
    at.selectbox(key="live_strategy_refresh").set_value("on_release")
    at.button(key="live_apply").click().run()
    _no_failures(at)
    model = at.session_state["live_model"]
    s = model.strategies
    assert (s.report.name, s.budget.name, s.query_planner.name, s.refresh.name) == (
        "budget_aware",
        "renewing",
        "budgeter",
        "on_release",
    )
    assert s.budget.rho_per_km2 == 400.0  # the page's budget field carried over
    at.button(key="live_step").click().run()
    _no_failures(at)
    assert at.session_state["live_model"].tick == 1
    assert any("within each window" in c.value for c in at.caption)


@pytest.mark.slow
def test_a_strategy_the_budget_cannot_charge_is_refused_with_its_reason(helsinki_walk):
    at = _app()
    at.run()
    at.selectbox(key="live_strategy_budget").set_value("pure_gp")
    at.button(key="live_apply").click().run()
    assert not at.exception
    assert any("cannot pay the Gaussian (CGP) queries" in e.value for e in at.error)


@pytest.mark.slow
def test_picking_a_shipped_scenario_loads_its_fields(helsinki_walk):
    at = _app()
    at.run()
    at.selectbox(key="live_scenario").set_value("mechanism_compare").run()
    _no_failures(at)
    shipped = sc.resolve("mechanism_compare")
    assert at.number_input(key="live_domain_n_points").value == shipped.get("domain.n_points")
    assert at.session_state["live_model"].population.n_users == shipped.get("users.count")


@pytest.mark.slow
def test_the_game_levels_can_be_picked_and_each_is_placed_beside_the_frontier(helsinki_walk):
    at = _app()
    at.run()
    assert at.text_input(key="live_game_levels").value == ""  # the default: one level
    at.selectbox(key="live_mechanism_name").set_value("em")
    at.text_input(key="live_game_levels").set_value("2, 6, 12")
    at.button(key="live_apply").click().run()
    _no_failures(at)
    model = at.session_state["live_model"]
    assert model.server.levels == (2.0, 6.0, 12.0) and len(model.server.level_mechanisms) == 3
    at.button(key="live_step").click().run()
    _no_failures(at)
    (table,) = at.dataframe  # the levels table
    levels = table.value
    assert levels["epsilon_per_km"].tolist() == [2.0, 6.0, 12.0]
    assert levels["reports_last_tick"].sum() == int(model.log.ticks[-1]["n_reports"])
    # N = 400 > FRONTIER_LP_MAX_N, Y = X: the closed-form bound, never below a mechanism
    assert (levels["frontier_gap_km"] >= -1e-9).all()
    (caption,) = [c.value for c in at.caption if "below the frontier" in c.value]
    assert caption.startswith("em at eps 6") and "min(Q, cap)" in caption
    spec = json.loads(_charts(at)[-2].proto.spec)  # the plane, before the inspector's chart
    assert [layer["mark"]["type"] for layer in spec["layer"]] == ["line", "point", "text"]


@pytest.mark.slow
def test_levels_without_the_mechanism_eps_are_refused_on_the_page(helsinki_walk):
    at = _app()
    at.run()
    before = at.session_state["live_model"]
    at.text_input(key="live_game_levels").set_value("2, 4")
    at.button(key="live_apply").click().run()
    assert not at.exception
    assert any("must hold mechanism.epsilon_per_km" in e.value for e in at.error)
    assert at.session_state["live_model"] is before
    at.text_input(key="live_game_levels").set_value("2, four")
    at.button(key="live_apply").click().run()
    assert any("game.epsilon_levels" in e.value and "commas" in e.value for e in at.error)


def test_the_page_frontier_is_the_lp_optimum_on_small_domains(helsinki_walk):
    scenario = model_view.default_scenario().replace(
        **{"domain.n_points": 60, "mechanism.name": "em", "game.epsilon_levels": [2.0, 6.0, 12.0]}
    )
    model = PrivacyModel(scenario, graph=helsinki_walk)
    curve, kind = model_view.frontier_curve(model.domain)
    assert kind == "lp" and len(curve) == model_view.FRONTIER_QUALITIES
    assert np.all(np.diff(curve["adversary_error_km"]) >= -1e-9)  # monotone in Q
    levels = model_view.level_table(model)
    for row, mech in zip(levels.itertuples(), model.server.level_mechanisms, strict=True):
        assert row.quality_loss_km == pytest.approx(mech.expected_loss())
        assert row.report_cost == pytest.approx(row.epsilon_per_km**2 / 2)  # CGP: eps^2 / 2
    gaps = model_view.frontier_gap(curve, levels)
    assert (gaps >= -1e-6).all()  # no level above the frontier
    plane = model_view.frontier_plane(curve, levels)
    assert (plane["series"] == "running mechanism").sum() == 1


# ---------------------------------------------------------------------- tables of the live page
@pytest.fixture(scope="module")
def stepped(helsinki_walk):
    model = PrivacyModel(model_view.default_scenario(), graph=helsinki_walk)
    model.run(2)
    return model


def test_points_are_the_latest_tick_in_lonlat(stepped):
    layers = model_view.points(stepped)
    last = stepped.log.users[-1]
    n_reports = int((last["reported_output"] >= 0).sum())
    assert len(layers["true"]) == stepped.population.n_users
    assert len(layers["reported"]) == len(layers["estimate"]) == n_reports
    assert set(layers) == {"true", "reported", "estimate", "tracking"}
    (lon_lo, lon_hi), (lat_lo, lat_hi) = HELSINKI_LONLAT
    for frame in layers.values():
        assert frame["lon"].between(lon_lo, lon_hi).all()
        assert frame["lat"].between(lat_lo, lat_hi).all()


def test_home_by_hour_is_the_share_of_users_at_their_home(stepped):
    frame = model_view.home_by_hour(stepped)
    home = stepped.population.home
    shares = [(cols["secret"] == home).mean() for cols in stepped.log.users]
    assert list(frame.index) == [8]  # two 5-minute ticks from 8:00
    assert frame.loc[8, "simulated"] == pytest.approx(np.mean(shares))
    assert frame.loc[8, "diary routine"] == stepped.config.mobility.home_by_hour[8]
    homes = model_view.places(stepped)["home"]
    assert len(homes) == stepped.population.n_users


def test_user_row_is_the_mechanism_row_of_the_users_secret(stepped):
    row = model_view.user_row(stepped, 4)
    secret = stepped.population.position[4]
    assert np.isclose(row["probability"].sum(), 1.0)
    assert np.allclose(row["distance_km"], stepped.domain.dist_xy[secret])
    with pytest.raises(InputError, match="users are 0..29"):
        model_view.user_row(stepped, 30)


def test_matrix_block_is_clipped_at_the_edge_and_checks_its_start(stepped):
    block = model_view.matrix_block(stepped, row0=395, col0=0, size=10)
    assert len(block) == 5 * 10 and block["row"].max() == 399
    matrix = stepped.server.mechanism.matrix_
    assert np.allclose(block["probability"], matrix[395:400, :10].ravel())
    with pytest.raises(InputError, match="outside the 400 x 400 matrix"):
        model_view.matrix_block(stepped, row0=400, col0=0, size=5)


def test_edited_rejects_fields_the_page_does_not_edit():
    with pytest.raises(InputError, match="not editable"):
        model_view.edited(model_view.default_scenario(), {"network.source": "x"})


def test_a_strategy_parameter_field_applies_only_to_a_strategy_that_takes_it():
    base = model_view.default_scenario()
    field = "strategies.budget.rho_per_km2"
    assert model_view.field_value(base, field) == 400.0
    pure = model_view.with_strategies(base, {"budget": "pure_gp"})
    assert pure.strategies.budget == "pure_gp"  # cgp's rho_per_km2 is no parameter of pure_gp
    assert model_view.field_value(pure, field) is None
    assert model_view.edited(pure, {field: None}).strategies.budget == "pure_gp"


def test_road_paths_draw_each_road_once(helsinki_test_walk):
    paths = road_paths(helsinki_test_walk)
    undirected = {(min(u, v), max(u, v), k) for u, v, k in helsinki_test_walk.edges(keys=True)}
    assert len(paths) == len(undirected)
    assert all(len(p) >= 2 for p in paths)


# ---------------------------------------------------------------------- batch explorer
@pytest.fixture(scope="module")
def store(tmp_path_factory, helsinki_walk) -> Path:
    """A tiny real batch: 2 mechanisms x 2 speeds x 2 repetitions, 3 ticks each."""
    scenario = sc.from_dict(BATCH_BASE)
    out = tmp_path_factory.mktemp("batch") / "tiny"
    outcome = run_batch(scenario, out, backend=Backend(workers=1), progress=False)
    assert outcome.n_done == 8
    return out


BATCH_BASE = {
    "scenario": {"name": "tiny", "seed": 3, "ticks": 3},
    "domain": {"n_points": 40},
    "users": {"count": 6},
    "mechanism": {"name": "em", "epsilon_per_km": 4.0},
    "queries": {"every_ticks": 0},
    "attacks": {"run": ["bayes", "tracking"]},
    "sweep": {
        "mechanism.name": ["em", "laplace"],
        "users.speed_mps": [1.0, 2.0],
        "repetitions": 2,
    },
}


@pytest.fixture
def explorer(store) -> AppTest:
    at = _app()
    at.switch_page("pages/batch.py")
    at.session_state["batch_dir"] = str(store)
    at.run()
    _no_failures(at)
    return at


def test_batch_explorer_plots_and_summarises_every_sweep_point(explorer):
    assert explorer.multiselect(key="batch_filter_mechanism").options == ["em", "laplace"]
    assert explorer.multiselect(key="batch_filter_epsilon_per_km").options == ["4.0"]
    assert explorer.multiselect(key="batch_filter_users.speed_mps").options == ["1.0", "2.0"]
    assert len(_charts(explorer)) == 1
    summary = explorer.dataframe[0].value
    assert len(summary) == 4 and (summary["n"] == 2).all()


def test_batch_filters_narrow_the_summary_and_the_download(explorer):
    explorer.multiselect(key="batch_filter_mechanism").select("laplace").run()
    _no_failures(explorer)
    summary = explorer.dataframe[0].value
    assert set(summary["mechanism.name"]) == {"laplace"} and len(summary) == 2
    downloads = {d.proto.label for d in explorer.get("download_button")}
    assert downloads == {"summary CSV", "per-task CSV"}


def test_batch_plot_against_a_swept_field_escapes_its_dotted_name(explorer):
    explorer.selectbox(key="batch_x").set_value("users.speed_mps").run()
    _no_failures(explorer)
    spec = json.loads(_charts(explorer)[0].proto.spec)
    assert spec["layer"][0]["encoding"]["x"]["field"] == "users\\.speed_mps"
    explorer.multiselect(key="batch_filter_users.speed_mps").select(2.0).run()
    _no_failures(explorer)
    assert set(explorer.dataframe[0].value["users.speed_mps"]) == {2.0}


def test_batch_plot_over_ticks_and_other_metrics(explorer):
    explorer.selectbox(key="batch_x").set_value("tick").run()
    _no_failures(explorer)
    explorer.selectbox(key="batch_metric").set_value("bayes_error_km")
    explorer.multiselect(key="batch_series").select("epsilon_per_km").run()
    _no_failures(explorer)
    spec = json.loads(_charts(explorer)[0].proto.spec)
    assert spec["layer"][0]["encoding"]["x"]["field"] == "tick"


def test_batch_explorer_says_what_is_wrong_with_a_folder(explorer, tmp_path):
    explorer.text_input(key="batch_dir").set_value(str(tmp_path)).run()
    assert not explorer.exception
    assert any("not a batch store" in e.value for e in explorer.error)


def test_batch_explorer_opens_on_a_batch_without_typing_anything(monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)  # no runs/ here: the bundled results are still listed
    at = _app()
    at.switch_page("pages/batch.py")
    at.run()
    _no_failures(at)
    options = at.selectbox(key="batch_pick").options
    assert "docs/results/paper_dista_lp (bundled results)" in options
    assert "docs/results/paper_budgeting (bundled results)" in options
    assert at.text_input(key="batch_dir").value == ""
    assert len(_charts(at)) == 1 and len(at.dataframe[0].value) > 0
    assert not at.info  # no "give a folder" prompt


def test_a_bundled_result_shows_its_sweep_points_but_no_tick_axis(explorer):
    explorer.text_input(key="batch_dir").set_value("").run()
    explorer.selectbox(key="batch_pick").set_value(
        "docs/results/paper_dista_lp (bundled results)"
    ).run()
    _no_failures(explorer)
    bundled = pd.read_csv(REPO / "docs/results/paper_dista_lp/summary.csv")
    summary = explorer.dataframe[0].value
    assert len(summary) == len(bundled)
    assert list(summary["n"]) == list(bundled["n"])
    assert "tick" not in explorer.selectbox(key="batch_x").options
    assert any("no plots over ticks" in c.value for c in explorer.caption)


def test_a_report_folder_loads_its_task_table_and_swept_fields():
    batch = batch_data.load(REPO / "docs/results/paper_budgeting")
    assert batch.swept == ["queries.saving", "users.budget_rho_per_km2", "queries.rho_per_km2"]
    assert batch.tasks["task_id"].iloc[0] == "0000" and not batch.has_ticks
    assert batch_data.find_reports(REPO / "docs/results") == [
        REPO / "docs/results/paper_budgeting",
        REPO / "docs/results/paper_dista_lp",
    ]


def test_errorbars_are_means_with_196_standard_errors(store):
    batch = batch_data.load(store)
    stats = batch_data.errorbars(
        batch.tasks, x="epsilon_per_km", y="utility_loss_km", series=["mechanism"]
    )
    tasks = batch.tasks
    one = tasks[tasks["mechanism"] == "em"]
    values = one["utility_loss_km"].to_numpy()
    row = stats[stats["series"] == "em"].iloc[0]
    half = 1.96 * values.std(ddof=1) / np.sqrt(len(values))
    assert row["n"] == 4 and np.isclose(row["mean"], values.mean())
    assert np.isclose(row["hi"] - row["mean"], half) and np.isclose(row["mean"] - row["lo"], half)


def test_select_with_nothing_chosen_keeps_everything():
    frame = pd.DataFrame({"a": [1, 2, 3], "b": ["x", "y", "x"]})
    assert len(batch_data.select(frame, {"a": [], "b": []})) == 3
    assert batch_data.select(frame, {"b": ["x"], "a": [3]})["a"].tolist() == [3]


def test_find_stores_lists_batch_folders(store):
    assert batch_data.find_stores(store.parent) == [store]
    assert batch_data.find_stores(store / "nowhere") == []


# ---------------------------------------------------------------------- the command
def test_dashboard_command_runs_the_app_headless_without_usage_statistics():
    cmd = streamlit_command(port=8765, address="127.0.0.1")
    assert cmd[1:5] == ["-m", "streamlit", "run", str(APP)] and APP.is_file()
    options = dict(zip(cmd[5::2], cmd[6::2], strict=True))
    assert options == {
        "--server.port": "8765",
        "--server.address": "127.0.0.1",
        "--server.headless": "true",
        "--browser.gatherUsageStats": "false",
        "--client.toolbarMode": "minimal",
    }
    assert streamlit_env()["STREAMLIT_BROWSER_GATHER_USAGE_STATS"] == "false"


def test_dashboard_command_rejects_a_bad_port(capsys):
    assert main(["dashboard", "--port", "70000"]) == 2
    assert "--port=70000" in capsys.readouterr().err


def test_batch_explorer_on_a_store_being_written_shows_what_has_finished(explorer, store, tmp_path):
    # a store as `mdpsim batch` leaves it mid-way: the manifest, some finished tasks' files
    partial = tmp_path / "partial"
    shutil.copytree(store, partial, ignore=shutil.ignore_patterns("*.parquet", "*.done.json"))
    explorer.text_input(key="batch_dir").set_value(str(partial)).run()
    _no_failures(explorer)  # before: "has no finished task yet" as an error
    assert any("none of its 8 tasks has finished yet" in i.value for i in explorer.info)
    for task in ("0000", "0003", "0005"):
        for suffix in (".users.parquet", ".timings.parquet", ".parquet", ".done.json"):
            if (store / "tasks" / f"{task}{suffix}").is_file():  # in the writer's order
                shutil.copy(store / "tasks" / f"{task}{suffix}", partial / "tasks")
    explorer.run()  # a refresh
    _no_failures(explorer)
    assert "3 of 8 tasks finished" in explorer.caption[0].value
    assert set(explorer.dataframe[0].value["n"]) <= {1, 2}
    assert len(_charts(explorer)) == 1


def test_batch_explorer_names_a_damaged_task_and_shows_the_others(explorer, store, tmp_path):
    damaged = tmp_path / "damaged"
    shutil.copytree(store, damaged)
    path = damaged / "tasks" / "0001.parquet"
    path.write_bytes(path.read_bytes()[:100])  # truncated: before, a pyarrow traceback
    explorer.text_input(key="batch_dir").set_value(str(damaged)).run()
    _no_failures(explorer)
    warned = [w.value for w in explorer.warning if "tasks/0001.parquet is truncated" in w.value]
    assert len(warned) == 1 and "--resume" in warned[0]
    assert "7 of 8 tasks finished" in explorer.caption[0].value
    assert len(_charts(explorer)) == 1


def test_mobility_measures_per_task_are_the_runs_walk_measured(store):
    from mdpsim.dashboard import batch_mobility
    from mdpsim.experiments.store import finished_ids, load_users
    from mdpsim.simulation.mobility_measures import measure

    ids = finished_ids(store)
    frame = batch_mobility.task_measures(store, ids).set_index("task_id")
    tasks = batch_data.load(store).tasks.set_index("task_id")
    users = load_users(store, ids)
    tick_s = sc.from_dict(BATCH_BASE).scenario.tick_seconds
    for tid in ids:  # each task's own walk as the run stored it, measured here
        rows = users[users["task_id"] == tid]
        walk = rows.pivot(index="tick", columns="user", values="secret").to_numpy()
        seed = int(tasks.loc[tid, "seed"])
        xy = batch_mobility.build_world(sc.from_dict(BATCH_BASE), seed).domain.x_xy
        expected = measure(walk, xy, tick_seconds=tick_s, resolution_m=200.0, seed=seed)["values"]
        np.testing.assert_array_equal(
            frame.loc[tid].to_numpy(dtype=float), np.array(list(expected.values()), dtype=float)
        )


def test_the_batch_explorer_plots_a_mobility_measure_across_the_sweep(explorer):
    explorer.toggle(key="batch_mobility").set_value(True).run()
    _no_failures(explorer)
    explorer.selectbox(key="batch_x").set_value("users.speed_mps").run()
    metric = explorer.selectbox(key="batch_metric")
    assert any(o.startswith("mobility: rg_median_km") for o in metric.options)
    metric.set_value("mobility_rg_median_km").run()
    _no_failures(explorer)
    spec = json.loads(_charts(explorer)[0].proto.spec)
    assert spec["layer"][0]["encoding"]["y"]["title"].startswith("mobility: rg_median_km")
