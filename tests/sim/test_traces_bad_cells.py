"""A bad time is a bad row (issue 35, item 6): random CSV / Parquet trace files with random bad
cells never raise anything but one InputError (no good fix left, or --strict), name every bad
row once, and keep every good row."""

from __future__ import annotations

import re
import warnings

import pandas as pd
import pyproj
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mdpsim.errors import InputError
from mdpsim.simulation.traces import NAIVE_NOTE, read_fixes
from mdpsim.simulation.world import network_extent

ISO_BAD = ["5", "1700000000", "1066-01-01T00:00:00Z", "2024-01-01T00:00:00+99:00", "noon",
           "2024-13-01T00:00:00Z", "99999-01-01"]  # fmt: skip
SECONDS_BAD = ["2024-01-01T00:00:00Z", "abc", "inf", "-nan", "1e999"]
COORD_BAD = ["", "abc", "nan", "inf", "0.0"]  # 0.0: outside the network's extent


@pytest.fixture(scope="module")
def place(helsinki_test_walk):
    """``(lon, lat)`` of the network's centre, and how read_fixes is called on it."""
    graph = helsinki_test_walk
    xmin, ymin, xmax, ymax = network_extent(graph)
    to = pyproj.Transformer.from_crs(graph.graph["crs"], "EPSG:4326", always_xy=True)
    lon, lat = to.transform((xmin + xmax) / 2, (ymin + ymax) / 2)

    def read(path, **kw):
        return read_fixes(path, graph_crs=graph.graph["crs"], extent_xy=network_extent(graph), **kw)

    return (float(lon), float(lat)), read


@st.composite
def trace_files(draw):
    """Rows of good fixes (times increasing per user) and a set of (row, column, bad value);
    row 0's time is never bad (the first time decides the column's kind)."""
    n = draw(st.integers(2, 25))
    iso = draw(st.booleans())
    users = draw(st.lists(st.sampled_from(["0", "1", "u7", "10"]), min_size=n, max_size=n))
    bad = {}
    for row in draw(st.sets(st.integers(0, n - 1), max_size=n)):
        column = draw(st.sampled_from(["time", "lat", "lon", "user"]))
        if column == "time" and row == 0:
            continue
        pool = {"time": ISO_BAD if iso else SECONDS_BAD, "user": [""]}.get(column, COORD_BAD)
        bad[row] = (column, draw(st.sampled_from(pool)))
    return n, iso, users, bad, draw(st.sampled_from(["csv", "parquet"])), draw(st.booleans())


@settings(
    max_examples=60,
    deadline=None,
    derandomize=True,  # CI draws the same files each run (docs/reliability.md)
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(case=trace_files())
def test_random_bad_cells_are_one_bad_row_each_and_the_good_rows_stay(place, tmp_path, case):
    (lon, lat), read = place
    n, iso, users, bad, fmt, strict = case
    times = [f"2024-05-0{1 + i // 1000}T10:{(i // 60) % 60:02d}:{i % 60:02d}Z" for i in range(n)]
    table = pd.DataFrame(
        {
            "user": users,
            "time": times if iso else [str(10 * i) for i in range(n)],
            "lat": [f"{lat + 1e-5 * i:.7f}" for i in range(n)],
            "lon": [f"{lon:.7f}"] * n,
        },
        dtype=object,
    )
    for row, (column, value) in bad.items():
        table.loc[row, column] = None if value == "" else value
    path = tmp_path / f"fixes.{fmt}"
    if fmt == "csv":
        table.to_csv(path, index=False)
    else:
        table.to_parquet(path, index=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            fixes = read(path, strict=strict)
        except InputError as exc:
            assert "\n" not in str(exc)
            assert bad, "a file without bad cells is read"
            assert strict or len(bad) == n, str(exc)
            return
    lines = fixes.report.lines
    named = [int(re.match(r"row (\d+),", line).group(1)) - 1 for line in lines]
    assert sorted(named) == sorted(bad), lines  # every bad row once, no good one
    assert fixes.report.n_kept == n - len(bad)
    assert not fixes.report.notes  # every time says Z


def test_naive_times_are_read_as_utc_and_said_once(place, tmp_path, capsys):
    (lon, lat), read = place
    rows = [f"a,2024-05-01T10:00:0{i},{lat + 1e-5 * i},{lon}" for i in range(3)]
    path = tmp_path / "naive.csv"
    path.write_text("user,time,lat,lon\n" + "\n".join(rows) + "\n")
    fixes = read(path)
    assert fixes.report.notes == (NAIVE_NOTE,)
    assert fixes.origin == pd.Timestamp("2024-05-01T10:00:00Z")


def test_a_row_with_an_extra_field_is_one_bad_row(place, tmp_path):
    (lon, lat), read = place
    rows = [f"a,{60 * i},{lat + 1e-5 * i},{lon}" for i in range(4)]
    rows[2] += ",extra"
    path = tmp_path / "extra.csv"
    path.write_text("user,time,lat,lon\n" + "\n".join(rows) + "\n")
    with pytest.warns(UserWarning):
        fixes = read(path)
    assert fixes.report.lines == ("row 3: 5 fields, the header has 4",)
    assert fixes.report.n_kept == 3
