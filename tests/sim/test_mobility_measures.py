"""The measures of human mobility (mdpsim.simulation.mobility_measures) on walks with known
answers, the people model held to the laws on a smaller run than docs/mobility.md's (pinned,
with tolerances), the waypoint walk failing them, and ``mdpsim mobility`` end to end."""

from __future__ import annotations

import json

import numpy as np
import pytest

from mdpsim.cli import main
from mdpsim.simulation import scenario as sc
from mdpsim.simulation.mobility_measures import (
    fit_dwell,
    holds,
    measure,
    radius_of_gyration_km,
    stays,
    uniqueness,
    window_share,
)
from mdpsim.simulation.world import build_world


def test_stays_are_runs_of_at_least_min_ticks_per_user():
    walk = np.array([[0, 5], [0, 5], [1, 6], [2, 6], [2, 6]])  # (ticks, users)
    st = stays(walk, 2)
    assert st.user.tolist() == [0, 0, 1, 1]
    assert st.place.tolist() == [0, 2, 5, 6]
    assert st.start.tolist() == [0, 3, 0, 2]
    assert st.ticks.tolist() == [2, 2, 2, 3]


def test_radius_of_gyration_of_two_places_is_d_sqrt_p_q():
    xy = np.array([[0.0, 0.0], [3000.0, 4000.0], [9e9, 9e9]])  # 5 km apart
    walk = np.array([0] * 3 + [1]).reshape(-1, 1)  # p = 3/4 at place 0
    expected = 5.0 * np.sqrt(0.75 * 0.25)
    assert radius_of_gyration_km(walk, xy)[0] == pytest.approx(expected)
    walk3 = np.array([0, 0, 0, 1, 2]).reshape(-1, 1)  # a third, rarer place is left out by k = 2
    assert radius_of_gyration_km(walk3, xy, k=2)[0] == pytest.approx(expected)


def test_the_dwell_fit_recovers_the_law_it_is_drawn_from():
    rng = np.random.default_rng(5)
    grid = np.logspace(np.log10(1 / 3), np.log10(24 * 30), 20_000)  # 20 min .. 30 days
    density = grid ** (-1.8) * np.exp(-grid / 17.0)
    cdf = np.cumsum(density * np.gradient(grid))
    draws = np.interp(rng.random(4000) * cdf[-1], cdf, grid)
    beta, tau_h = fit_dwell(draws, 1 / 3)
    assert beta == pytest.approx(0.8, abs=0.08)
    assert tau_h == pytest.approx(17.0, rel=0.35)
    assert np.isnan(fit_dwell(draws[:10], 1 / 3)[0])  # too few stays: no fit


def test_uniqueness_is_zero_for_twins_and_one_for_loners():
    xy = np.array([[0.0, 0.0], [1000.0, 0.0], [0.0, 1000.0]])
    hours = np.arange(8.0)
    twins = np.tile(np.array([0, 1, 0, 1, 2, 2, 0, 1]).reshape(-1, 1), (1, 2))
    rng = np.random.default_rng(0)
    assert set(uniqueness(twins, xy, hours, resolution_m=200, rng=rng).values()) == {0.0}
    loners = np.stack([np.zeros(8, int), np.ones(8, int), np.full(8, 2)], axis=1)
    assert set(uniqueness(loners, xy, hours, resolution_m=200, rng=rng).values()) == {1.0}
    coarse = uniqueness(loners, xy, hours, resolution_m=5000, rng=rng)  # one cell for all
    assert set(coarse.values()) == {0.0}


def test_the_window_share_finds_the_night_at_home():
    tick_s = 3600.0
    day = np.array([0] * 7 + [1] * 15 + [0] * 2)  # home 22:00-07:00
    walk = np.tile(day, 3).reshape(-1, 1)
    assert window_share(walk, np.array([0]), tick_s)[0] == pytest.approx(1.0)
    assert window_share(walk, np.array([0]), tick_s, hours_w=12)[0] == pytest.approx(9 / 12)


def _walk(model: str, users: int, days: float, seed: int = 2026):
    scenario = sc.resolve("helsinki_demo").replace(**{
        "users.count": users, "scenario.ticks": int(days * 288), "domain.n_points": 1000,
        "scenario.seed": seed, "mobility.model": model,
    })  # fmt: skip
    world = build_world(scenario)
    return world.walks_ahead(scenario.scenario.ticks), world.domain.x_xy


@pytest.fixture(scope="module")
def people_values():
    walk, xy = _walk("epr", users=100, days=4)
    return measure(walk, xy, tick_seconds=300.0, start_hour=8.0, seed=1)["values"]


@pytest.mark.parametrize(
    ("name", "low", "high"),
    [
        # docs/mobility.md's run (300 users, 7 days) holds the laws' ranges; 100 users over
        # 4 days (seeds 1-3: zeta 1.21-1.29, slope 0.62-0.68, P(new) 0.34-0.35) within these
        ("zeta", 1.0, 1.45),
        ("s_slope", 0.45, 0.75),
        ("p_new_s10", 0.30, 0.44),
        ("top1_window70", 0.8, 1.0),
        ("distinct_top1", 0.5, 1.0),
        ("min_stay_min", 20.0, np.inf),
        ("top2_share", 0.5, 1.0),
        ("night_home_share", 0.85, 1.0),
    ],
)
def test_people_follow_the_laws_of_human_mobility(people_values, name, low, high):
    assert low <= people_values[name] <= high


def test_the_waypoint_walk_breaks_them(people_values):
    walk, xy = _walk("waypoints", users=100, days=2)
    values = measure(walk, xy, tick_seconds=300.0, start_hour=8.0, seed=1)["values"]
    assert holds("zeta", values["zeta"]) is False  # shared destinations, no home
    assert values["night_home_share"] < 0.5 < people_values["night_home_share"]


def test_the_mobility_command_writes_json_table_and_plots(tmp_path, capsys):
    out = tmp_path / "mob"
    code = main(["mobility", "--users", "8", "--days", "1", "--n-points", "200",
                 "--out", str(out)])  # fmt: skip
    assert code == 0
    assert sorted(p.name for p in out.iterdir()) == [
        ".mdpsim-output", "mobility.json", "mobility.md", "mobility.png",
    ]  # fmt: skip
    result = json.loads((out / "mobility.json").read_text())
    assert result["run"]["users"] == 8 and result["run"]["ticks"] == 288
    assert set(result["laws"]) == set(result["values"])
    assert "| zeta |" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (["--days", "0"], "--days"),
        (["--users", "0"], "--users"),
        (["--resolution-m", "-5"], "--resolution-m"),
        (["--traces", "no-such-file.csv"], "--traces no-such-file.csv: no such file"),
    ],
)
def test_bad_arguments_get_one_line_and_exit_2(tmp_path, capsys, argv, said):
    assert main(["mobility", *argv, "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert said in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "o").exists()


def test_traces_are_measured_on_the_scenario_network(tmp_path, helsinki_test_walk):
    import pyproj

    from mdpsim.simulation.world import network_extent

    xmin, ymin, xmax, ymax = network_extent(helsinki_test_walk)
    to = pyproj.Transformer.from_crs(helsinki_test_walk.graph["crs"], "EPSG:4326", always_xy=True)
    rows = []
    for user, fx in enumerate((0.2, 0.5, 0.8)):  # three people, home and away, over 2 days
        for hour in range(48):
            fy = 0.3 if (hour % 24) < 8 or (hour % 24) >= 20 else 0.7
            lon, lat = to.transform(xmin + fx * (xmax - xmin), ymin + fy * (ymax - ymin))
            rows.append(f"p{user},{hour * 3600},{lat},{lon}")
    traces = tmp_path / "fixes.csv"
    traces.write_text("user,time,lat,lon\n" + "\n".join(rows) + "\n")
    scenario = tmp_path / "net.toml"
    scenario.write_text(
        '[scenario]\nname = "net"\ntick_seconds = 600\n[network]\nsource = "helsinki-test"\n'
        '[domain]\nn_points = 60\n[mechanism]\nname = "em"\nepsilon_per_km = 4.0\n'
    )
    out = tmp_path / "mob"
    assert main(["mobility", str(scenario), "--traces", str(traces), "--out", str(out)]) == 0
    result = json.loads((out / "mobility.json").read_text())
    assert result["run"]["users"] == 3
    assert result["run"]["source"] == f"traces {traces}"
    assert result["values"]["night_home_share"] == pytest.approx(1.0)
    assert result["values"]["distinct_top1"] == pytest.approx(1.0)
