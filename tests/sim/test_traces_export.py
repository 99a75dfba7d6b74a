"""Traces out (docs/traces.md): ``mdpsim run --export`` writes true, reported and estimated
traces as GeoJSON / GeoParquet in WGS 84 lon/lat, whole or not at all; and the round trip:
a run's exported true traces, imported as ``source = "traces"``, land on their secrets."""

from __future__ import annotations

import json

import geopandas as gpd
import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest

from mdpsim.cli import main
from mdpsim.errors import InputError
from mdpsim.experiments.export import check_target

TOML = """
[scenario]
name = "export"
seed = 11
ticks = 6
[network]
source = "helsinki-test"
[domain]
n_points = 80
[users]
count = 8
[mechanism]
name = "em"
epsilon_per_km = 4.0
[queries]
every_ticks = 0
[attacks]
run = ["bayes", "smooth"]
params.smooth = { attack = "tracking", method = "smooth", lag_ticks = 2 }
[strategies]
budget = {name = "cgp", rho_per_km2 = 1000.0}
"""


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    """A run exported both ways: (folder, users table)."""
    tmp = tmp_path_factory.mktemp("export")
    (tmp / "s.toml").write_text(TOML)
    run = ["run", str(tmp / "s.toml"), "--out"]
    assert main([*run, str(tmp / "a"), "--export", "geoparquet", str(tmp / "t.parquet")]) == 0
    assert main([*run, str(tmp / "b"), "--export", "geojson", str(tmp / "t.geojson")]) == 0
    return tmp, pd.read_parquet(tmp / "a" / "users.parquet")


def test_geoparquet_has_geo_metadata_and_every_trace(exported):
    tmp, users = exported
    geo = json.loads(pq.read_metadata(tmp / "t.parquet").metadata[b"geo"])
    assert geo["primary_column"] == "geometry"
    assert geo["columns"]["geometry"]["encoding"] == "WKB"
    assert geo["columns"]["geometry"]["crs"]["id"] == {"authority": "EPSG", "code": 4326}
    frame = gpd.read_parquet(tmp / "t.parquet")
    assert frame.crs.to_epsg() == 4326
    assert list(frame.columns) == ["trace", "attack", "user", "tick", "time", "lon", "lat",
                                   "geometry"]  # fmt: skip
    true = frame[frame.trace == "true"]
    assert len(true) == len(users)  # every (tick, user)
    reported = frame[frame.trace == "reported"]
    assert len(reported) == int((users["reported_output"] >= 0).sum())
    estimated = frame[frame.trace == "estimated"]
    assert set(estimated.attack) == {"bayes", "smooth"}
    # a fixed-lag smoother estimates tick t - lag at tick t: the last lag ticks have none
    assert set(estimated[estimated.attack == "smooth"].tick) == set(range(1, 7 - 2))
    assert np.allclose(frame.geometry.x, frame.lon) and np.allclose(frame.geometry.y, frame.lat)
    assert frame.lon.between(20, 32).all() and frame.lat.between(59, 71).all()  # Finland
    assert pd.api.types.is_datetime64_any_dtype(frame.time)
    assert (true.time == pd.Timestamp(0, tz="UTC") + (true.tick - 1) * pd.Timedelta(60, "s")).all()


def test_geojson_is_lon_lat_feature_collection_with_the_same_points(exported):
    tmp, _ = exported
    doc = json.loads((tmp / "t.geojson").read_text())
    assert doc["type"] == "FeatureCollection"
    assert doc["crs"]["properties"]["name"] == "urn:ogc:def:crs:OGC:1.3:CRS84"  # lon/lat order
    first = doc["features"][0]
    assert first["geometry"]["type"] == "Point"
    assert first["geometry"]["coordinates"] == pytest.approx(
        [first["properties"]["lon"], first["properties"]["lat"]]
    )
    assert first["properties"]["time"] == "1970-01-01T00:00:00.000000Z"
    a = gpd.read_file(tmp / "t.geojson")
    b = gpd.read_parquet(tmp / "t.parquet")
    assert a.crs.to_epsg() == 4326 and len(a) == len(b)
    assert np.allclose(a.lon, b.lon) and list(a.trace) == list(b.trace)


@pytest.mark.parametrize("name", ["t.parquet", "t.geojson"])
def test_round_trip_true_traces_land_on_their_secrets(exported, name):
    tmp, users = exported
    (tmp / "replay.toml").write_text(TOML + f'[mobility]\nsource = "traces"\npath = "{name}"\n')
    out = tmp / f"c-{name}"
    assert main(["run", str(tmp / "replay.toml"), "--out", str(out)]) == 0
    again = pd.read_parquet(out / "users.parquet")
    same = (again["secret"].to_numpy() == users["secret"].to_numpy()).mean()
    assert same >= 0.99, same
    summary = json.loads((out / "summary.json").read_text())
    assert summary["traces"]["fixes_kept"] == len(users)
    assert summary["traces"]["bad_rows_dropped"] == 0
    assert summary["traces"]["other_trace_rows_skipped"] > 0  # reported, estimated: not read


def test_export_is_whole_or_absent(tmp_path, monkeypatch, capsys):
    (tmp_path / "s.toml").write_text(TOML.replace("ticks = 6", "ticks = 2"))

    def broken(self, path, **kw):
        with open(path, "wb") as f:
            f.write(b"half")
        raise OSError("disk full")

    monkeypatch.setattr(gpd.GeoDataFrame, "to_parquet", broken)
    target = tmp_path / "t.parquet"
    assert main(["run", str(tmp_path / "s.toml"), "--out", str(tmp_path / "a"), "--export",
                 "geoparquet", str(target)]) == 2  # fmt: skip
    err = capsys.readouterr().err.splitlines()[-1]
    assert err.startswith(f"error: cannot write '{target}' (OSError: disk full)"), err
    assert not target.exists()
    assert not (tmp_path / "a").exists()  # no run folder that looks complete without it
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []


def test_export_target_is_checked_before_the_run(tmp_path):
    with pytest.raises(InputError, match="must be one of geojson, geoparquet"):
        check_target("shapefile", tmp_path / "t.shp")
    with pytest.raises(InputError, match="must end in .geojson or .json"):
        check_target("geojson", tmp_path / "t.parquet")
    (tmp_path / "s.toml").write_text(TOML)
    out = tmp_path / "never"
    assert main(["run", str(tmp_path / "s.toml"), "--out", str(out), "--export", "kml", "x"]) == 2
    assert not out.exists()
