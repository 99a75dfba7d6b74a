"""Traces in (docs/traces.md): every bad row is one line naming row and column; --strict
refuses the file (exit 2), the default drops and counts; fixes snap to the secrets and resample
to ticks; users and ticks come from the data, through build_world to every driver."""

from __future__ import annotations

import json
import warnings

import numpy as np
import pandas as pd
import pyproj
import pytest

from mdpsim.cli import main
from mdpsim.env import parallel_env
from mdpsim.errors import InputError
from mdpsim.experiments.run import simulate
from mdpsim.simulation import scenario as sc
from mdpsim.simulation.trace_walks import RoadPaths, TracePopulation, resample
from mdpsim.simulation.traces import TraceWarning, read_fixes
from mdpsim.simulation.world import build_world, network_extent

BASE = {
    "scenario": {"name": "replay", "seed": 4, "ticks": 3, "tick_seconds": 60.0},
    "network": {"source": "helsinki-test"},
    "domain": {"n_points": 60},
    "users": {"count": 2},
    "strategies": {"budget": {"name": "cgp", "rho_per_km2": 1000.0}},
    "mechanism": {"name": "em", "epsilon_per_km": 4.0},
    "queries": {"every_ticks": 0},
    "attacks": {"run": ["bayes", "tracking"]},
}


def _read(path, graph, **kw):
    return read_fixes(path, graph_crs=graph.graph["crs"], extent_xy=network_extent(graph), **kw)


def _csv(tmp_path, rows, header="user,time,lat,lon"):
    path = tmp_path / "fixes.csv"
    path.write_text(header + "\n" + "\n".join(rows) + "\n")
    return path


def _good_rows(centre, n=3):
    lon, lat = centre
    return [f"a,{60 * i},{lat:.6f},{lon:.6f}" for i in range(n)]


BAD_ROWS = {
    "outside the extent": ("a,200,61.5,25.9", "row 4, columns lon/lat: (25.9, 61.5) is outside"),
    "time going back": ("a,30,{lat},{lon}", "row 4, column time: 30 goes back from row 3's 120"),
    "duplicate time": ("a,120,{lat},{lon}", "row 4, column time: 120 repeats row 3's 120"),
    "missing value": ("a,200,,{lon}", "row 4, column lat: missing value"),
    "non-numeric": ("a,200,north,{lon}", "row 4, column lat: 'north' is not a finite number"),
    "non-numeric time": ("a,noon,{lat},{lon}", "row 4, column time: 'noon' is not a number"),
    "missing user": (",200,{lat},{lon}", "row 4, column user: missing value"),
}


@pytest.mark.parametrize("case", sorted(BAD_ROWS))
def test_each_bad_row_gives_one_line_naming_row_and_column(case, tmp_path, helsinki_test_walk,
                                                           centre):  # fmt: skip
    bad, expected = BAD_ROWS[case]
    path = _csv(tmp_path, [*_good_rows(centre), bad.format(lon=centre[0], lat=centre[1])])
    with pytest.warns(TraceWarning, match="1 bad row dropped"):
        fixes = _read(path, helsinki_test_walk)
    assert len(fixes.report.lines) == 1
    assert fixes.report.lines[0].startswith(expected), fixes.report.lines
    assert (fixes.report.n_rows, fixes.report.n_kept, fixes.report.n_dropped) == (4, 3, 1)
    with pytest.raises(InputError, match=r"1 bad row \(strict\): row 4, column"):
        _read(path, helsinki_test_walk, strict=True)


def test_a_missing_column_refuses_the_file_in_one_line(tmp_path, helsinki_test_walk, centre):
    path = _csv(tmp_path, ["a,60.1,24.9"], header="user,lat,lon")
    with pytest.raises(InputError, match="has no column 'time'"):
        _read(path, helsinki_test_walk)
    path = _csv(tmp_path, ["a,0,1,2"], header="user,time,x,y")
    with pytest.raises(InputError, match="set mobility.crs"):
        _read(path, helsinki_test_walk)


def test_good_files_give_no_warning_and_times_may_be_iso(tmp_path, helsinki_test_walk, centre):
    lon, lat = centre
    rows = [f"u{i % 2},2026-05-01T08:0{i}:00Z,{lat},{lon}" for i in range(6)]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        fixes = _read(_csv(tmp_path, rows), helsinki_test_walk)
    assert list(fixes.user_ids) == ["u0", "u1"]
    assert fixes.origin == pd.Timestamp("2026-05-01T08:00:00Z")
    assert fixes.n_ticks(60.0) == 6  # 08:00 .. 08:05
    assert np.allclose(np.sort(fixes.seconds[fixes.user == 0]), [0, 120, 240])


def test_x_y_in_a_named_crs_match_lat_lon(tmp_path, helsinki_test_walk, centre):
    lon, lat = centre
    x, y = pyproj.Transformer.from_crs("EPSG:4326", "EPSG:3067", always_xy=True).transform(lon, lat)
    by_xy = _read(_csv(tmp_path, [f"a,0,{x},{y}"], header="user,time,x,y"), helsinki_test_walk,
                  crs="EPSG:3067")  # fmt: skip
    by_ll = _read(_csv(tmp_path, [f"a,0,{lat},{lon}"]), helsinki_test_walk)
    assert np.allclose(by_xy.xy, by_ll.xy, atol=1e-3)


def test_resampling_takes_the_fix_nearest_in_time():
    user = np.array([0, 0, 0, 1])
    seconds = np.array([0.0, 100.0, 130.0, 50.0])
    value = np.array([10, 11, 12, 20])
    walks = resample(user, seconds, value, 2, 60.0)  # nearest in time; ticks at 0, 60, 120 s
    assert walks.tolist() == [[10, 20], [11, 20], [12, 20]]
    population = TracePopulation(walks)
    seen = [population.position.tolist()]
    for _ in range(3):
        population.step()
        seen.append(population.position.tolist())
    # tick 0 stands at the first row, tick 1's move reaches it; after the data: last seen
    assert seen == [[10, 20], [10, 20], [11, 20], [12, 20]]


def test_between_sparse_fixes_users_walk_the_road(helsinki_test_walk):
    world = build_world(sc.from_dict(BASE), graph=helsinki_test_walk)
    dist = world.domain.dist_xx
    a, b = np.unravel_index(np.argmax(dist), dist.shape)  # the two farthest secrets
    user, seconds, value = np.zeros(2, int), np.array([0.0, 600.0]), np.array([a, b])
    walks = resample(user, seconds, value, 1, 60.0, along=RoadPaths(world.domain))[:, 0]
    assert walks[0] == a and walks[-1] == b and len(walks) == 11
    from_a = dist[a, walks]
    assert np.all(np.diff(from_a) >= 0)  # steadily away from a ...
    assert np.allclose(from_a + dist[walks, b], dist[a, b])  # ... on a shortest path to b
    steps = dist[walks[:-1], walks[1:]]
    assert steps.max() < dist[a, b] / 2  # no jump: a tenth of the way a tick, plus a gap
    nearest = resample(user, seconds, value, 1, 60.0)[:, 0]
    assert set(nearest) == {a, b}  # waits, then jumps the whole way


def test_a_replay_too_long_for_memory_is_refused_in_one_line():
    with pytest.raises(InputError, match="raise scenario.tick_seconds"):
        resample(np.array([0, 0]), np.array([0.0, 3.2e7]), np.array([1, 2]), 5, 1.0)


def _scenario(path, **mobility):
    return sc.from_dict({**BASE, "mobility": {"source": "traces", "path": str(path), **mobility}})


def _fixes_at_secrets(tmp_path, world, lonlat, *, users=3, ticks=5, noise_m=0.0, seed=0):
    """A CSV of fixes at random secrets of ``world`` (plus Gaussian noise), and the secrets."""
    rng = np.random.default_rng(seed)
    truth = rng.integers(world.domain.n_x, size=(ticks, users))
    xy = world.domain.x_xy[truth.ravel()] + rng.normal(0, noise_m, size=(truth.size, 2))
    lon, lat = lonlat(xy)
    frame = pd.DataFrame(
        {
            "user": np.tile([f"p{u:03d}" for u in range(users)], ticks),  # ids sort as text
            "time": np.repeat(np.arange(ticks) * 60.0, users),
            "lat": lat,
            "lon": lon,
        }
    )
    path = tmp_path / "walks.parquet"
    frame.to_parquet(path)
    return path, truth


def test_users_and_ticks_come_from_the_data(tmp_path, helsinki_test_walk, lonlat):
    synthetic = build_world(sc.from_dict(BASE), graph=helsinki_test_walk)
    path, truth = _fixes_at_secrets(tmp_path, synthetic, lonlat, users=3, ticks=5)
    world = build_world(_scenario(path), graph=helsinki_test_walk)
    assert (world.n_users, world.scenario.users.count, world.scenario.scenario.ticks) == (3, 3, 5)
    assert np.array_equal(world.walks_ahead(5), truth)
    ticks, users, _ = simulate(_scenario(path), graph=helsinki_test_walk)
    assert len(ticks) == 5 and users["user"].nunique() == 3
    assert np.array_equal(users["secret"].to_numpy().reshape(5, 3), truth)


def test_noisy_fixes_mostly_land_on_their_secret(tmp_path, helsinki_test_walk, lonlat):
    world = build_world(sc.from_dict(BASE), graph=helsinki_test_walk)
    path, truth = _fixes_at_secrets(tmp_path, world, lonlat, users=20, ticks=20, noise_m=10.0)
    replay = build_world(_scenario(path), graph=helsinki_test_walk)
    assert np.mean(replay.walks_ahead(20) == truth) >= 0.9  # 60 secrets: far apart


def test_the_env_plays_trace_driven_users(tmp_path, helsinki_test_walk, lonlat):
    world = build_world(sc.from_dict(BASE), graph=helsinki_test_walk)
    path, _ = _fixes_at_secrets(tmp_path, world, lonlat, users=4, ticks=3)
    env = parallel_env(_scenario(path).to_dict())
    env.reset(seed=1)
    assert env.agents == ["server", "user_0", "user_1", "user_2", "user_3"]


def test_the_dashboards_live_model_replays_traces(tmp_path, helsinki_test_walk, lonlat):
    from mdpsim.dashboard import model_view, resources

    world = build_world(sc.from_dict(BASE), graph=helsinki_test_walk)
    path, truth = _fixes_at_secrets(tmp_path, world, lonlat, users=4, ticks=3)
    model = resources.build_model(_scenario(path, resample="nearest"))
    model.step()
    assert model.population.n_users == 4 and model.config.scenario.ticks == 3
    assert len(model_view.points(model)["true"]) == 4
    assert np.array_equal(model.log.users[0]["secret"], truth[0])


def _toml(tmp_path, data_path) -> str:
    path = tmp_path / "replay.toml"
    path.write_text(
        '[network]\nsource = "helsinki-test"\n[domain]\nn_points = 60\n'
        '[mechanism]\nname = "em"\nepsilon_per_km = 4.0\n[queries]\nevery_ticks = 0\n'
        f'[attacks]\nrun = ["bayes"]\n[mobility]\nsource = "traces"\npath = "{data_path.name}"\n'
    )
    return str(path)


def test_the_cli_reports_dropped_rows_and_strict_exits_2(tmp_path, centre, capsys):
    lon, lat = centre
    _csv(tmp_path, [*_good_rows(centre), "a,60,north,24.9", f"a,30,{lat},{lon}"])
    scenario = _toml(tmp_path, tmp_path / "fixes.csv")  # a path relative to the scenario file
    assert main(["run", scenario, "--out", str(tmp_path / "run")]) == 0
    err = capsys.readouterr().err
    assert "bad row: row 4, column lat: 'north' is not a finite number" in err
    assert "bad row: row 5, column time: 30 goes back from row 3's 120 for user 'a'" in err
    assert "5 rows, 3 fixes kept, 2 bad rows dropped" in err
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["traces"]["bad_rows_dropped"] == 2
    assert summary["scenario"]["users"]["count"] == 1
    batch = ["batch", scenario, "--out", str(tmp_path / "strict"), "--workers", "1"]
    for command in (["run", scenario, "--out", str(tmp_path / "strict")], ["attack", scenario],
                    batch):  # fmt: skip
        assert main([*command, "--strict"]) == 2
        assert "2 bad rows (strict): row 4, column lat" in capsys.readouterr().err
    assert not (tmp_path / "strict").exists()


def test_attack_batch_and_frontier_write_the_bad_rows_into_their_output(tmp_path, centre, capsys):
    lon, lat = centre
    _csv(tmp_path, [*_good_rows(centre), "a,60,north,24.9", f"a,30,{lat},{lon}"])
    scenario = _toml(tmp_path, tmp_path / "fixes.csv")
    frontier = ["--qualities", "0.5", "--mechanisms", "em", "--epsilons", "4"]
    for command, extra in (("attack", []), ("batch", ["--workers", "1"]), ("frontier", frontier)):
        out = tmp_path / command
        assert main([command, scenario, "--out", str(out), *extra]) == 0, capsys.readouterr().err
        rows = pd.read_csv(out / "bad_rows.csv")
        assert rows["row"].tolist() == [4, 5] and rows["column"].tolist() == ["lat", "time"]


def test_the_cli_shows_20_bad_rows_and_the_count_and_writes_them_all(tmp_path, centre, capsys):
    lon, lat = centre
    bad = [f"a,{60 * (3 + i)},north,{lon}" for i in range(24)] + ["a,1,2,3,4"]  # 25 bad rows
    _csv(tmp_path, [*_good_rows(centre), *bad])
    out = tmp_path / "run"
    assert main(["run", _toml(tmp_path, tmp_path / "fixes.csv"), "--out", str(out)]) == 0
    err = capsys.readouterr().err.splitlines()
    shown = [line for line in err if line.startswith("bad row: row ")]
    assert len(shown) == 20 and shown[0].startswith("bad row: row 4, column lat: 'north'")
    assert "bad row: ... and 5 more (all of them: bad_rows.csv in the output)" in err
    assert any("28 rows, 3 fixes kept, 25 bad rows dropped" in line for line in err)
    rows = pd.read_csv(out / "bad_rows.csv")
    assert list(rows.columns) == ["row", "column", "problem"] and len(rows) == 25
    assert rows["row"].tolist() == list(range(4, 29))
    assert rows["column"].iloc[0] == "lat"
    assert "'north' is not a finite number" in rows["problem"][0]
    assert rows["problem"].iloc[-1] == "5 fields, the header has 4"
    assert rows["column"].isna().iloc[-1]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["traces"]["bad_rows_file"] == "bad_rows.csv"
    assert summary["traces"]["bad_rows_dropped"] == 25


def test_scenario_needs_a_path_for_traces():
    with pytest.raises(InputError, match="field mobility.path needs a file"):
        sc.from_dict({**BASE, "mobility": {"source": "traces"}})
    with pytest.raises(InputError, match="mobility.path is for source = 'traces'"):
        sc.from_dict({**BASE, "mobility": {"path": "x.csv"}})


def test_a_missing_traces_file_is_refused_at_load(tmp_path):
    (tmp_path / "s.toml").write_text(
        '[mechanism]\nname = "em"\nepsilon_per_km = 2.0\n'
        '[mobility]\nsource = "traces"\npath = "gone.csv"\n'
    )
    with pytest.raises(InputError, match=r"mobility.path = 'gone.csv': no such file \(read from"):
        sc.load(tmp_path / "s.toml")
    assert main(["run", str(tmp_path / "s.toml")]) == 2


def test_mobility_columns_map_a_files_own_names(tmp_path, helsinki_test_walk, centre):
    lon, lat = centre
    rows = [f"u{i % 2},{60 * i},{lat},{lon}" for i in range(4)]
    plain = _read(_csv(tmp_path, rows), helsinki_test_walk)
    own = tmp_path / "own"
    own.mkdir()
    path = _csv(own, rows, header="User,Seconds,latitude,longitude")
    names = {"user": "User", "time": "Seconds", "lat": "latitude", "lon": "longitude"}
    mapped = _read(path, helsinki_test_walk, columns=names)
    assert list(mapped.user_ids) == list(plain.user_ids)
    assert np.array_equal(mapped.seconds, plain.seconds) and np.allclose(mapped.xy, plain.xy)
    scenario = _scenario(path, columns=names)  # the same through the scenario and the world
    assert build_world(scenario, seed=0).scenario.users.count == 2


def test_mobility_columns_are_checked_in_one_line(tmp_path, helsinki_test_walk, centre):
    path = _csv(tmp_path, _good_rows(centre), header="User,time,lat,lon")
    with pytest.raises(InputError, match=r"mobility.columns: user = 'Name' is not a column of"):
        _read(path, helsinki_test_walk, columns={"user": "Name"})
    both = _csv(tmp_path, [r + ",x" for r in _good_rows(centre)], header="user,time,lat,lon,Lat")
    with pytest.raises(InputError, match=r"also has a column 'lat'; map that one too"):
        _read(both, helsinki_test_walk, columns={"lat": "Lat"})
    with pytest.raises(InputError, match=r"mobility.columns names 'speed', not a column mdpsim"):
        _scenario(path, columns={"speed": "v"})
    with pytest.raises(InputError, match=r"mobility.columns must give each column a distinct"):
        _scenario(path, columns={"lat": "a", "lon": "a"})
    with pytest.raises(InputError, match=r"mobility.columns is for source = 'traces'"):
        sc.from_dict({**BASE, "mobility": {"columns": {"user": "User"}}})
