"""Real traces in: GPS fixes from a CSV, Parquet, GeoJSON or GPX file, checked, snapped, resampled.

A traces file has one row per fix: ``user`` (any id), ``time`` (seconds, or an ISO 8601 /
Parquet timestamp) and either ``lat`` / ``lon`` (WGS 84) or ``x`` / ``y`` in a named CRS
(``[mobility] crs``). :func:`read_fixes` checks every row and says what is wrong with each bad
one in one line naming the row (1-based, data rows) and the column:

* a missing value, or a value that is not a (finite) number or a time of the column's kind
  (the column's first value decides: seconds, or ISO 8601 / Parquet timestamps): a number
  among times, a time among seconds, a time zone that cannot be read, a year outside
  :data:`YEARS` (what a nanosecond timestamp holds);
* a fix outside the network's extent (the bounding box of its nodes, plus
  :data:`EXTENT_MARGIN_M`);
* a time going back, or repeating, within a user (against the user's latest good fix).

ISO times without a time zone are read as UTC, and the report says so once
(:attr:`TraceReport.notes`). Strict mode refuses a file with any bad row; otherwise the bad
rows are dropped and counted (:class:`TraceReport`, printed by the CLI, recorded in
summary.json, warned about in Python).

:meth:`Fixes.walks` snaps every fix to the nearest secret of the domain (a KD-tree in the
network's projected CRS: the secrets are points on the roads, so the snap is the map match;
docs/traces.md has the measurements against two map-matchers) and resamples to ticks: tick
``t`` (1-based) is at ``t0 + (t - 1) tick_seconds``, ``t0`` the earliest good fix, and a user is
before its first fix at its first, after its last at its last, and in between walks the
shortest road path between two fixes (``resample = "road"``) or waits at the fix nearest in
time (``"nearest"``). Users and ticks (up to the latest fix) come from the data: user ``u`` of
a run is ``Fixes.user_ids[u]``, the id as written in the file (users.parquet's ``user_id``, the
exports' ``user``). Ids that are all integers (numbers, or text such as ``12``; not ``007``)
are int64 and ordered as numbers; any other ids are text, ordered as text.
"""

from __future__ import annotations

import math
import os
import re
import warnings
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
from scipy.spatial import cKDTree

from mdpsim.errors import InputError
from mdpsim.simulation.gpx import read_gpx
from mdpsim.simulation.trace_walks import RoadPaths, resample

#: A fix this far outside the bounding box of the network's nodes is outside its extent.
EXTENT_MARGIN_M = 50.0
#: How many bad-row lines a warning or an error message shows (the report keeps them all).
SHOWN_LINES = 5
#: The origin of tick times when a run has no traces (exports stamp tick t at origin + t-1 ticks).
SYNTHETIC_ORIGIN = pd.Timestamp("1970-01-01T00:00:00Z")
#: The columns a traces file is read by (``[mobility] columns`` maps a file's own names).
TRACE_COLUMNS = ("user", "time", "lat", "lon", "x", "y", "trace")
TRACE_SUFFIXES = (".csv", ".parquet", ".geoparquet", ".geojson", ".json", ".gpx")  # .json: GeoJSON
#: The years a time may lie in (first, last): the range of a nanosecond timestamp.
YEARS = (1678, 2261)
NAIVE_NOTE = "times without a time zone were read as UTC (add Z or +HH:MM to say otherwise)"
#: Numeric times from here up look like epoch milliseconds (1e11 s is the year 5138; 1e11 ms
#: is 1973), read as seconds unless ``[mobility] time_unit = "ms"``: a note says so.
EPOCH_MS_FROM = 1e11
#: What a number in a time column counts, by ``[mobility] time_unit``.
TIME_UNIT_SECONDS = {"s": 1.0, "ms": 1e-3}
WGS84 = "EPSG:4326"
#: The file of a run's folder holding every bad row of its traces file (row, column, problem).
BAD_ROWS_FILE = "bad_rows.csv"


class TraceWarning(UserWarning):
    """Bad rows were dropped from a traces file (the default, non-strict import)."""


@dataclass(frozen=True)
class TraceReport:
    """What the import of one traces file found."""

    path: str
    n_rows: int
    n_kept: int
    lines: tuple[str, ...] = ()  # one per bad row, in row order
    n_filtered: int = 0  # rows of another trace kind (an mdpsim export's reported rows)
    notes: tuple[str, ...] = ()  # what the reading assumed, said once (naive times: UTC)

    @property
    def n_dropped(self) -> int:
        """Bad rows dropped."""
        return len(self.lines)

    def summary(self) -> str:
        """One line: rows read, kept and dropped."""
        other = f", {self.n_filtered} of another trace kind skipped" if self.n_filtered else ""
        return (
            f"traces {self.path}: {_count(self.n_rows, 'row')}, {_count(self.n_kept, 'fix')} "
            f"kept, {_count(self.n_dropped, 'bad row')} dropped{other}"
        )

    def told(self, shown: int) -> list[str]:
        """What the CLI prints: the first ``shown`` bad rows, how many more, the notes, the
        summary (every command writes all bad rows to :data:`BAD_ROWS_FILE` in its output)."""
        lines = [f"bad row: {line}" for line in self.lines[:shown]]
        if len(self.lines) > shown:
            more = len(self.lines) - shown
            where = f"all of them: {BAD_ROWS_FILE} in the output"
            lines.append(f"bad row: ... and {more} more ({where})")
        return [*lines, *(f"note: {note}" for note in self.notes), self.summary()]

    def as_dict(self) -> dict:
        """For summary.json."""
        return {
            "path": self.path,
            "rows": self.n_rows,
            "fixes_kept": self.n_kept,
            "bad_rows_dropped": self.n_dropped,
            "other_trace_rows_skipped": self.n_filtered,
            "notes": list(self.notes),
            "bad_rows_file": BAD_ROWS_FILE if self.lines else None,
        }


@dataclass(frozen=True, eq=False)
class Fixes:
    """The good fixes of a traces file, in the network's projected CRS, by user and time."""

    user_ids: np.ndarray  # (U,) the data's ids: int64 in numeric order, or text (module docstring)
    user: np.ndarray  # (F,) index into user_ids
    seconds: np.ndarray  # (F,) since origin
    xy: np.ndarray  # (F, 2) metres, the network's CRS
    origin: pd.Timestamp | None  # the earliest fix as a time; None: times were plain seconds
    origin_s: float  # the earliest fix, in the file's own seconds
    report: TraceReport = field(repr=False)

    @property
    def n_users(self) -> int:
        """Users in the data."""
        return len(self.user_ids)

    def n_ticks(self, tick_seconds: float) -> int:
        """Ticks from the earliest to the latest fix."""
        return int(math.floor(float(self.seconds.max()) / tick_seconds + 1e-9)) + 1

    def snap(self, secrets_xy: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Per fix, the nearest secret (index) and its distance in metres."""
        dist_m, index = cKDTree(secrets_xy).query(self.xy)
        return np.asarray(index, dtype=np.int64), np.asarray(dist_m, dtype=float)

    def walks(self, domain, tick_seconds: float, *, how: str = "road") -> np.ndarray:
        """``(ticks, users)`` secrets: every fix snapped to the nearest secret of ``domain``,
        resampled to ticks (``how``: ``"road"`` or ``"nearest"``, :func:`resample`)."""
        secret, _ = self.snap(domain.x_xy)
        along = RoadPaths(domain) if how == "road" else None
        return resample(self.user, self.seconds, secret, self.n_users, tick_seconds, along=along)

    def tick_time(self, tick_seconds: float) -> tuple[pd.Timestamp, float]:
        """``(origin, offset_s)``: tick ``t`` is at ``origin + offset_s + (t - 1) tick_seconds``
        seconds (an export writes times the import reads back to the same ticks)."""
        if self.origin is not None:
            return self.origin, 0.0
        return SYNTHETIC_ORIGIN, self.origin_s


# ------------------------------------------------------------------ reading and checking
def read_table(path: Path, user_field: str | None = None) -> pd.DataFrame:
    """The raw table of a traces file (CSV read as text, so every value is checked here);
    ``user_field``: a GPX file's field that is the id (:func:`mdpsim.simulation.gpx.read_gpx`)."""
    if not path.is_file():
        raise InputError(f"field mobility.path = {str(path)!r}: no such file")
    name = path.name.lower()
    if name.endswith(".gpx"):  # its own one-line errors
        return read_gpx(path, user_field)
    try:
        if name.endswith(".csv"):
            return _read_csv(path)
        if name.endswith((".parquet", ".geoparquet")):
            return pd.read_parquet(path)
        if name.endswith((".geojson", ".json")):  # an mdpsim export: lon/lat and time
            import geopandas as gpd

            return pd.DataFrame(gpd.read_file(path).drop(columns="geometry"))
    except (OSError, ValueError, RuntimeError, pd.errors.ParserError) as exc:
        raise InputError(f"traces file {str(path)!r} cannot be read: {exc}") from None
    raise InputError(f"field mobility.path = {str(path)!r} must end in {', '.join(TRACE_SUFFIXES)}")


def renamed(table: pd.DataFrame, columns: dict[str, str], path: Path) -> pd.DataFrame:
    """``table`` with the file's column names of ``[mobility] columns`` read as mdpsim's."""
    for name, source in columns.items():
        if source not in table.columns:
            raise InputError(
                f"field mobility.columns: {name} = {source!r} is not a column of "
                f"{str(path)!r}; its columns: {', '.join(map(str, table.columns))}"
            )
        if name in table.columns and name not in columns.values():
            raise InputError(
                f"field mobility.columns: {name} = {source!r}, but {str(path)!r} also has a "
                f"column {name!r}; map that one too, or drop the entry"
            )
    return table.rename(columns={source: name for name, source in columns.items()})


#: Marks, in its first cell, a CSV row with the wrong number of fields (then one bad row).
MALFORMED = "\x00malformed row: "


def _read_csv(path: Path) -> pd.DataFrame:
    """A CSV as text; a row with more or fewer fields than the header is kept as one row whose
    first cell says so (:data:`MALFORMED`), so it is one bad row, not a refused file."""
    try:
        return pd.read_csv(path, dtype=str, keep_default_na=False, na_values=[""])
    except pd.errors.ParserError:  # a malformed row: read again, the slow way, marking it
        n = len(pd.read_csv(path, nrows=0).columns)

        def mark(fields: list[str]) -> list[str]:
            return [f"{MALFORMED}{len(fields)} fields, the header has {n}"] + [""] * (n - 1)

        return pd.read_csv(
            path, dtype=str, keep_default_na=False, na_values=[""], engine="python",
            on_bad_lines=mark,
        )  # fmt: skip


def coordinate_columns(table: pd.DataFrame, path: Path, crs: str) -> tuple[str, str, str]:
    """``(first, second, crs)``: (lon, lat, WGS 84) or (x, y, the scenario's crs)."""
    cols = set(table.columns)
    missing = [c for c in ("user", "time") if c not in cols]
    if missing:
        raise InputError(
            f"traces file {str(path)!r} has no column {missing[0]!r} (columns: "
            f"{', '.join(map(str, table.columns))}); it needs user, time and lat/lon or x/y"
        )
    if {"lat", "lon"} <= cols:
        if crs and crs.upper() != WGS84:
            raise InputError(
                f"field mobility.crs = {crs!r}: lat/lon columns are WGS 84 (EPSG:4326); give "
                "x/y columns for another CRS, or leave crs unset"
            )
        return "lon", "lat", WGS84
    if {"x", "y"} <= cols:
        if not crs:
            raise InputError(
                f"traces file {str(path)!r} has x/y columns: set mobility.crs to their CRS "
                '(e.g. crs = "EPSG:3067")'
            )
        return "x", "y", crs
    raise InputError(
        f"traces file {str(path)!r} has neither lat/lon nor x/y columns (columns: "
        f"{', '.join(map(str, table.columns))})"
    )


def read_fixes(
    path: str | os.PathLike[str],
    *,
    graph_crs: str,
    extent_xy: tuple[float, float, float, float],
    crs: str = "",
    keep_trace: str = "true",
    strict: bool = False,
    columns: dict[str, str] | None = None,
    time_unit: str = "s",
) -> Fixes:
    """Read and check a traces file (module docstring); bad rows refused (``strict``) or dropped.

    ``extent_xy`` is ``(xmin, ymin, xmax, ymax)`` of the network in ``graph_crs`` metres.
    A file with a ``trace`` column (an mdpsim export) keeps the rows whose trace is
    ``keep_trace``. ``columns`` maps a column mdpsim reads to the file's name for it.
    ``time_unit`` (``"s"`` or ``"ms"``) is what a numeric time counts; seconds that look like
    epoch milliseconds add a note (and a warning) naming ``[mobility] time_unit``.
    """
    path = Path(path)
    table = renamed(read_table(path, (columns or {}).get("user")), columns or {}, path)
    n_rows = len(table)
    first, second, crs = coordinate_columns(table, path, crs)
    n_filtered = 0
    if "trace" in table.columns:
        keep = table["trace"].astype(str).to_numpy() == keep_trace
        n_filtered = int((~keep).sum())
    else:
        keep = np.ones(n_rows, dtype=bool)
    rows = np.arange(1, n_rows + 1)
    problems: dict[int, str] = {}

    def flag(mask: np.ndarray, make_line) -> None:
        for i in np.nonzero(mask & keep)[0].tolist():
            if i not in problems:
                problems[i] = make_line(i)

    first_cells = table.iloc[:, 0].astype(str)
    malformed = first_cells.str.startswith(MALFORMED).to_numpy()
    flag(malformed, lambda i: f"row {rows[i]}: {first_cells.iloc[i][len(MALFORMED) :]}")
    raw_user = table["user"]
    flag(raw_user.isna().to_numpy(), lambda i: f"row {rows[i]}, column user: missing value")
    coords = {}
    for col in (first, second):
        values, bad, missing = _numbers(table[col])
        coords[col] = values
        flag(missing, lambda i, col=col: f"row {rows[i]}, column {col}: missing value")
        flag(
            bad,
            lambda i, col=col: (
                f"row {rows[i]}, column {col}: {table[col].iloc[i]!r} is not a finite number"
            ),
        )
    seconds, origin, bad_time, missing_time, kind, naive = _times(table["time"])
    flag(missing_time, lambda i: f"row {rows[i]}, column time: missing value")
    flag(
        bad_time,
        lambda i: (
            f"row {rows[i]}, column time: {table['time'].iloc[i]!r} is not {kind} (as the "
            "column's first time is)"
        ),
    )
    good = keep & ~np.isin(np.arange(n_rows), list(problems))
    xy = np.full((n_rows, 2), np.nan)
    if good.any():
        xy[good] = _project(coords[first][good], coords[second][good], crs, graph_crs)
    xmin, ymin, xmax, ymax = extent_xy
    m = EXTENT_MARGIN_M
    with np.errstate(invalid="ignore"):
        outside = good & ~(
            (xy[:, 0] >= xmin - m)
            & (xy[:, 0] <= xmax + m)
            & (xy[:, 1] >= ymin - m)
            & (xy[:, 1] <= ymax + m)
        )
    flag(
        outside,
        lambda i: (
            f"row {rows[i]}, columns {first}/{second}: ({table[first].iloc[i]}, "
            f"{table[second].iloc[i]}) is outside the network's extent"
        ),
    )
    good &= ~outside
    _flag_time_order(raw_user, seconds, good, rows, table["time"], flag)
    good = keep & ~np.isin(np.arange(n_rows), list(problems))
    lines = tuple(problems[i] for i in sorted(problems))
    shown = "; ".join(lines[:SHOWN_LINES]) + ("; ..." if len(lines) > SHOWN_LINES else "")
    if lines and strict:
        raise InputError(
            f"traces file {str(path)!r} has {_count(len(lines), 'bad row')} (strict): {shown}"
        )
    if not good.any():
        raise InputError(
            f"traces file {str(path)!r} has no good fix"
            + (f" ({len(lines)} bad rows: {shown})" if lines else "")
        )
    notes: tuple[str, ...] = (NAIVE_NOTE,) if naive else ()
    if origin is None and good.any():  # numeric times
        seconds = seconds * TIME_UNIT_SECONDS[time_unit]
        epoch_ms = epoch_ms_note(seconds[good]) if time_unit == "s" else None
        if epoch_ms is not None:
            notes += (epoch_ms,)
            warnings.warn(f"traces {path}: {epoch_ms}", TraceWarning, stacklevel=2)
    report = TraceReport(str(path), n_rows, int(good.sum()), lines, n_filtered, notes)
    if lines:
        warnings.warn(f"{report.summary()}: {shown}", TraceWarning, stacklevel=2)
    return _fixes(raw_user[good], seconds[good], xy[good], origin, report)


def epoch_ms_note(seconds: np.ndarray) -> str | None:
    """A note when numeric times read as seconds look like epoch milliseconds, else None."""
    if not len(seconds) or float(np.median(seconds)) < EPOCH_MS_FROM:
        return None
    span = float(seconds.max() - seconds.min())
    return (
        f"the times look like epoch milliseconds (first {seconds[0]:.0f}): read as seconds "
        f'they span {span:,.0f} s ({span / 1000:,.1f} s as ms); set [mobility] time_unit = "ms" '
        "if they are"
    )


def _numbers(column: pd.Series) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(values, not_a_finite_number, missing)`` of a column read as text or numbers."""
    missing = column.isna().to_numpy()
    values = pd.to_numeric(column, errors="coerce").to_numpy(dtype=float, na_value=np.nan)
    bad = ~missing & ~np.isfinite(values)
    return values, bad, missing


def _times(column: pd.Series):
    """``(seconds since the earliest, origin timestamp or None, bad, missing, kind, naive)``.

    The column's first value decides its kind: a number (seconds) or a time (ISO 8601 text
    or a timestamp column); a value of the other kind, a time zone that cannot be read or a
    year outside :data:`YEARS` is bad. ``naive``: some time had no time zone (read as UTC)."""
    missing = column.isna().to_numpy()
    numbers = pd.to_numeric(column, errors="coerce").to_numpy(dtype=float, na_value=np.nan)
    present = np.nonzero(~missing)[0]
    if pd.api.types.is_datetime64_any_dtype(column):
        naive = getattr(column.dtype, "tz", None) is None and bool(len(present))
        stamps = pd.to_datetime(column, utc=True)
    elif not len(present) or np.isfinite(numbers[present[0]]):
        bad = ~missing & ~np.isfinite(numbers)
        return numbers, None, bad, missing, "a number of seconds", False
    else:
        text = column.astype(str).str.strip()
        stamps = pd.to_datetime(text.where(~missing), utc=True, errors="coerce", format="ISO8601")
        zoned = text.str.contains(r"(?:Z|[T ]\d.*[+-]\d\d(?::?\d\d)?)$", case=False, regex=True)
        naive = bool((stamps.notna() & ~zoned).any())
    lo = pd.Timestamp(f"{YEARS[0]}-01-01", tz="UTC")
    hi = pd.Timestamp(f"{YEARS[1]}-12-31T23:59:59", tz="UTC")
    ok = (stamps.notna() & (stamps >= lo) & (stamps <= hi)).to_numpy()
    seconds = np.full(len(column), np.nan)
    origin = None
    if ok.any():
        ns = stamps[ok].to_numpy(dtype="datetime64[ns]")
        first = ns.min()
        origin = pd.Timestamp(first).tz_localize("UTC")
        seconds[ok] = (ns - first).astype(np.int64) / 1e9
    kind = f"an ISO 8601 time in the years {YEARS[0]}-{YEARS[1]}"
    return seconds, origin, ~missing & ~ok, missing, kind, naive


def _project(a: np.ndarray, b: np.ndarray, crs: str, graph_crs: str) -> np.ndarray:
    """``(F, 2)`` coordinates from ``crs`` (x/lon, y/lat) into ``graph_crs``."""
    import pyproj

    try:
        transformer = pyproj.Transformer.from_crs(crs, graph_crs, always_xy=True)
    except pyproj.exceptions.CRSError as exc:
        raise InputError(f"field mobility.crs = {crs!r} is not a CRS pyproj knows: {exc}") from None
    x, y = transformer.transform(a, b)
    return np.column_stack([x, y])


def _flag_time_order(raw_user, seconds, good, rows, raw_time, flag) -> None:
    """Flag good rows whose time is before (or equal to) the latest earlier good time of the
    same user. Rows that go back are dropped, so the reference is the running maximum."""
    idx = np.nonzero(good)[0]
    if not len(idx):
        return
    frame = pd.DataFrame({"user": raw_user.to_numpy()[idx].astype(str), "s": seconds[idx]})
    latest = frame.groupby("user", sort=False)["s"].cummax()
    before = latest.groupby(frame["user"], sort=False).shift(1).to_numpy(dtype=float)
    back = np.zeros(len(good), dtype=bool)
    same = np.zeros(len(good), dtype=bool)
    with np.errstate(invalid="ignore"):
        back[idx] = seconds[idx] < before
        same[idx] = seconds[idx] == before
    # for the message: the row that set the running maximum a bad row is compared with
    new_max = ~(frame["s"].to_numpy() <= before)  # NaN before (a user's first row): True
    frame["setter"] = np.where(new_max, idx, -1)
    frame["setter"] = frame.groupby("user", sort=False)["setter"].cummax()
    prev_row = np.full(len(good), -1)
    prev_row[idx] = frame.groupby("user", sort=False)["setter"].shift(1).fillna(-1).to_numpy()
    users = raw_user.to_numpy()

    def line(i: int, what: str) -> str:
        j = int(prev_row[i])
        return (
            f"row {rows[i]}, column time: {raw_time.iloc[i]} {what} row {rows[j]}'s "
            f"{raw_time.iloc[j]} for user {users[i]!r}"
        )

    flag(back, lambda i: line(i, "goes back from"))
    flag(same, lambda i: line(i, "repeats"))


def _fixes(raw_user: pd.Series, seconds, xy, origin, report: TraceReport) -> Fixes:
    """Sort the good fixes by user then time; times from the earliest good fix."""
    user_ids, user = np.unique(_ids(raw_user.to_numpy()), return_inverse=True)
    start = float(seconds.min())
    shifted = seconds - start
    if origin is not None:
        origin = origin + pd.Timedelta(seconds=start)
    order = np.lexsort((shifted, user))
    return Fixes(
        user_ids=user_ids,
        user=user[order].astype(np.int64),
        seconds=shifted[order],
        xy=xy[order],
        origin=origin,
        origin_s=start,
        report=report,
    )


def _ids(ids: np.ndarray) -> np.ndarray:
    """The users' ids as int64 if every one is an integer written plainly (``12``, ``-3``,
    a Parquet integer), else as text (module docstring)."""
    if ids.dtype.kind in "iu":
        return ids.astype(np.int64)
    text = np.array([str(v) for v in ids], dtype=object)
    if len(text) and all(_PLAIN_INT.fullmatch(t) for t in text):
        return np.array([int(t) for t in text], dtype=np.int64)
    return text.astype(str)


_PLAIN_INT = re.compile(r"-?(?:0|[1-9]\d{0,17})")


def _count(n: int, noun: str) -> str:
    """``n`` and ``noun``, plural unless ``n`` is 1 (``1 bad row``, ``2 fixes``)."""
    if n == 1:
        return f"1 {noun}"
    return f"{n} {noun}{'es' if noun.endswith('x') else 's'}"
