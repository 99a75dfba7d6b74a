"""GPX in (docs/traces.md, "GPX"): a track per user or a named field as the id, times with
zones, a point without time a bad row like a CSV's missing value, a run the same as from CSV."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from mdpsim.errors import InputError
from mdpsim.simulation import scenario as sc
from mdpsim.simulation.traces import TraceWarning, read_fixes
from mdpsim.simulation.world import build_world, network_extent

BASE = {
    "scenario": {"name": "gpx", "seed": 4, "ticks": 3, "tick_seconds": 60.0},
    "network": {"source": "helsinki-test"},
    "domain": {"n_points": 60},
    "users": {"count": 2},
    "strategies": {"budget": {"name": "cgp", "rho_per_km2": 1000.0}},
    "mechanism": {"name": "em", "epsilon_per_km": 4.0},
    "queries": {"every_ticks": 0},
    "attacks": {"run": ["bayes"]},
}
HEAD = '<?xml version="1.0"?>\n<gpx version="1.1" creator="t" xmlns="http://www.topografix.com/GPX/1/1">'


def _read(path, graph, **kw):
    return read_fixes(path, graph_crs=graph.graph["crs"], extent_xy=network_extent(graph), **kw)


def _pt(lon, lat, time=None, extra=""):
    when = f"<time>{time}</time>" if time else ""
    return f'<trkpt lat="{lat:.7f}" lon="{lon:.7f}"><ele>12.5</ele>{when}{extra}</trkpt>'


def _trk(points, name=None, kind=None):
    head = (f"<name>{name}</name>" if name else "") + (f"<type>{kind}</type>" if kind else "")
    return f"<trk>{head}<trkseg>{''.join(points)}</trkseg></trk>"


def _gpx(tmp_path, tracks, name="fixes.gpx"):
    path = tmp_path / name
    path.write_text(HEAD + "".join(tracks) + "</gpx>\n")
    return path


def _times(n, start="2026-05-01T08:00:00Z"):
    return [(pd.Timestamp(start) + pd.Timedelta(minutes=i)).isoformat() for i in range(n)]


def test_two_tracks_are_two_users_with_their_fixes(tmp_path, helsinki_test_walk, centre):
    lon, lat = centre
    path = _gpx(tmp_path, [
        _trk([_pt(lon, lat, t) for t in _times(3)]),
        _trk([_pt(lon, lat, t) for t in _times(2)]),
    ])  # fmt: skip
    fixes = _read(path, helsinki_test_walk)
    assert list(fixes.user_ids) == [1, 2]  # unnamed tracks: their numbers
    assert np.bincount(fixes.user).tolist() == [3, 2]
    named = _gpx(tmp_path, [
        _trk([_pt(lon, lat, t) for t in _times(3)], name="bob"),
        _trk([_pt(lon, lat, t) for t in _times(2)], name="alice"),
    ], name="named.gpx")  # fmt: skip
    fixes = _read(named, helsinki_test_walk)
    assert list(fixes.user_ids) == ["alice", "bob"]
    assert np.bincount(fixes.user).tolist() == [2, 3]


def test_times_with_a_zone_are_their_utc_instant(tmp_path, helsinki_test_walk, centre):
    lon, lat = centre
    zoned = ["2026-05-01T10:00:00+02:00", "2026-05-01T10:01:30+02:00"]
    path = _gpx(tmp_path, [_trk([_pt(lon, lat, t) for t in zoned])])
    fixes = _read(path, helsinki_test_walk)
    assert fixes.origin == pd.Timestamp("2026-05-01T08:00:00Z")
    assert np.allclose(fixes.seconds, [0.0, 90.0])
    assert fixes.report.notes == ()  # zoned: no UTC assumption noted


def test_a_named_field_is_the_id(tmp_path, helsinki_test_walk, centre):
    lon, lat = centre
    path = _gpx(tmp_path, [
        _trk([_pt(lon, lat, t) for t in _times(2)], name="day 1", kind="carol"),
        _trk([_pt(lon, lat, t) for t in _times(2, "2026-05-02T08:00:00Z")], name="day 2",
             kind="carol"),
        _trk([_pt(lon, lat, t, "<name>dave</name>") for t in _times(3, "2026-05-03T08:00:00Z")],
             name="day 1"),
    ])  # fmt: skip
    # the third track has no <type>: its rows are bad rows (missing user), like a CSV's
    with pytest.warns(TraceWarning, match="3 bad rows dropped"):
        by_type = _read(path, helsinki_test_walk, columns={"user": "track_type"})
    assert list(by_type.user_ids) == ["carol"] and by_type.report.n_kept == 4
    assert by_type.report.lines[0] == "row 5, column user: missing value"
    by_name = _read(path, helsinki_test_walk, columns={"user": "track_name"})
    assert list(by_name.user_ids) == ["day 1", "day 2"]  # tracks of one name are one user
    assert np.bincount(by_name.user).tolist() == [5, 2]
    with pytest.warns(TraceWarning, match="4 bad rows dropped"):  # a point's own <name>
        by_point = _read(path, helsinki_test_walk, columns={"user": "name"})
    assert list(by_point.user_ids) == ["dave"] and by_point.report.n_kept == 3
    with pytest.raises(InputError, match="columns: user = 'kind' is not a column"):
        _read(path, helsinki_test_walk, columns={"user": "kind"})


def test_a_point_without_time_is_a_bad_row(tmp_path, helsinki_test_walk, centre):
    lon, lat = centre
    t = _times(3)
    path = _gpx(tmp_path, [_trk([_pt(lon, lat, t[0]), _pt(lon, lat), _pt(lon, lat, t[2])])])
    with pytest.warns(TraceWarning, match="1 bad row dropped"):
        fixes = _read(path, helsinki_test_walk)
    assert fixes.report.lines == ("row 2, column time: missing value",)
    assert (fixes.report.n_rows, fixes.report.n_kept) == (3, 2)
    with pytest.raises(InputError, match=r"1 bad row \(strict\): row 2, column time"):
        _read(path, helsinki_test_walk, strict=True)


def test_a_file_that_is_not_gpx_or_has_no_track_is_refused_in_one_line(
    tmp_path, helsinki_test_walk
):
    bad = tmp_path / "bad.gpx"
    bad.write_text("user,time,lat,lon\n")
    with pytest.raises(InputError, match="bad.gpx' cannot be read as GPX") as err:
        _read(bad, helsinki_test_walk)
    assert "\n" not in str(err.value)
    waypoints = tmp_path / "wpt.gpx"
    waypoints.write_text(HEAD + '<wpt lat="60.17" lon="24.94"/></gpx>')
    with pytest.raises(InputError, match=r"has no track points \(waypoints and route points"):
        _read(waypoints, helsinki_test_walk)


def test_a_run_from_gpx_walks_as_the_same_fixes_from_csv(tmp_path, helsinki_test_walk, lonlat):
    world = build_world(sc.from_dict(BASE), graph=helsinki_test_walk)
    rng = np.random.default_rng(0)
    truth = rng.integers(world.domain.n_x, size=(4, 3))  # (ticks, users)
    lon, lat = lonlat(world.domain.x_xy[truth.ravel()] + rng.normal(0, 5.0, (truth.size, 2)))
    lon, lat = lon.reshape(truth.shape), lat.reshape(truth.shape)
    times = _times(4, "2026-05-01T10:00:00+02:00")
    tracks = [
        _trk([_pt(lon[t, u], lat[t, u], times[t]) for t in range(4)], name=f"p{u}")
        for u in range(3)
    ]  # fmt: skip
    rows = [
        f"p{u},{times[t]},{lat[t, u]:.7f},{lon[t, u]:.7f}" for u in range(3) for t in range(4)
    ]  # fmt: skip
    csv = tmp_path / "fixes.csv"
    csv.write_text("user,time,lat,lon\n" + "\n".join(rows) + "\n")
    walks = {}
    for path in (_gpx(tmp_path, tracks), csv):
        scenario = sc.from_dict({**BASE, "mobility": {"source": "traces", "path": str(path)}})
        replay = build_world(scenario, graph=helsinki_test_walk)
        assert (replay.n_users, replay.scenario.scenario.ticks) == (3, 4)
        walks[path.suffix] = replay.walks_ahead(4)
    assert np.array_equal(walks[".gpx"], walks[".csv"])
    assert np.mean(walks[".gpx"] == truth) >= 0.9
