"""Trace ids survive (issue 35, item 5): users.parquet's ``user_id`` is each user's id as
written in the traces file, the exports use the same ids, and integer ids are ordered as
numbers. One file run twice with its ids relabelled (0..11 and u00..u11): every id points at
the same trace."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyproj
import pytest

from mdpsim.experiments.run import run_scenario
from mdpsim.simulation import scenario as sc
from mdpsim.simulation.traces import read_fixes
from mdpsim.simulation.world import network_extent

N_USERS = 12


@pytest.fixture(scope="module")
def fixes_rows(helsinki_test_walk):
    """(user index, seconds, lat, lon) of 12 users' walks across the network (4 fixes each)."""
    graph = helsinki_test_walk
    xmin, ymin, xmax, ymax = network_extent(graph)
    to = pyproj.Transformer.from_crs(graph.graph["crs"], "EPSG:4326", always_xy=True)
    rng = np.random.default_rng(3)
    rows = []
    for u in range(N_USERS):
        x = rng.uniform(xmin, xmax, 4)
        y = rng.uniform(ymin, ymax, 4)
        lon, lat = to.transform(x, y)
        rows += [(u, 60 * t, lat[t], lon[t]) for t in range(4)]
    return rows


def _write(tmp_path, rows, label, name):
    path = tmp_path / name
    lines = [f"{label(u)},{s},{lat:.7f},{lon:.7f}" for u, s, lat, lon in rows]
    path.write_text("user,time,lat,lon\n" + "\n".join(lines) + "\n")
    return path


def _run(path, out):
    scenario = sc.from_dict(
        {
            "scenario": {"name": "ids", "seed": 1, "ticks": 4, "tick_seconds": 60.0},
            "network": {"source": "helsinki-test"},
            "domain": {"n_points": 40},
            "mechanism": {"name": "em", "epsilon_per_km": 4.0},
            "queries": {"every_ticks": 0},
            "attacks": {"run": ["bayes"]},
            "mobility": {"source": "traces", "path": str(path)},
        }
    )
    run_scenario(scenario, out, export=("geoparquet", out.parent / f"{out.name}.parquet"))
    users = pd.read_parquet(out / "users.parquet")
    exported = pd.read_parquet(out.parent / f"{out.name}.parquet")
    return users, exported[exported["trace"] == "true"]


def test_relabelled_ids_point_at_the_same_traces(tmp_path, fixes_rows):
    numbers, _ = _run(_write(tmp_path, fixes_rows, str, "n.csv"), tmp_path / "n")
    texts, texts_export = _run(
        _write(tmp_path, fixes_rows, lambda u: f"u{u:02d}", "t.csv"), tmp_path / "t"
    )
    assert numbers["user_id"].dtype == np.int64 and set(numbers["user_id"]) == set(range(12))
    assert set(texts["user_id"]) == {f"u{u:02d}" for u in range(12)}
    # ids as numbers: 0, 1, 2, ..., 10, 11 (not '0', '1', '10', '11', '2'); so user k is id k
    assert (numbers["user_id"] == numbers["user"]).all()
    relabel = {f"u{u:02d}": u for u in range(12)}
    for frame in (numbers, texts):
        frame["trace_of"] = frame["user_id"].map(lambda i: relabel.get(i, i))
    key = ["trace_of", "tick", "secret"]
    pd.testing.assert_frame_equal(
        numbers.sort_values(key)[key].reset_index(drop=True),
        texts.sort_values(key)[key].reset_index(drop=True),
    )
    assert set(texts_export["user"]) == set(texts["user_id"])  # the exports: the same ids


def test_integer_ids_are_ordered_as_numbers(tmp_path, helsinki_test_walk, fixes_rows):
    rows = [(u * 5, s, lat, lon) for u, s, lat, lon in fixes_rows]  # 0, 5, 10, ..., 55
    fixes = read_fixes(
        _write(tmp_path, rows, str, "f.csv"),
        graph_crs=helsinki_test_walk.graph["crs"],
        extent_xy=network_extent(helsinki_test_walk),
    )
    np.testing.assert_array_equal(fixes.user_ids, np.arange(0, 60, 5))
    rows = [(f"00{u}" if u == 3 else u, s, lat, lon) for u, s, lat, lon in fixes_rows]
    fixes = read_fixes(
        _write(tmp_path, rows, str, "g.csv"),
        graph_crs=helsinki_test_walk.graph["crs"],
        extent_xy=network_extent(helsinki_test_walk),
    )
    assert fixes.user_ids.dtype.kind == "U" and "003" in fixes.user_ids  # as written, as text
