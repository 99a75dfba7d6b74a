"""Traces out: a run's true, reported and estimated traces as GeoJSON or GeoParquet.

``mdpsim run --export geojson|geoparquet PATH`` writes one point per (trace, tick, user), with
columns ``trace`` (``true``, ``reported``, ``estimated``), ``attack`` (the attack label of an
estimate, empty otherwise), ``user`` (the traces file's ids for a trace-driven run, else the
user's index), ``tick``, ``time`` (UTC; tick ``t`` at the traces' origin + ``(t - 1)``
ticks, 1970-01-01 for synthetic walks), ``lon``, ``lat`` and the point geometry in WGS 84
(EPSG:4326) lon/lat, which QGIS and kepler.gl read as they are. GeoParquet is written by
geopandas (its ``geo`` metadata: version, encoding WKB, CRS); GeoJSON by pyogrio, times as
ISO 8601 text. Both are written to a temporary file beside PATH and renamed when complete.

The file is also a traces file (:mod:`mdpsim.simulation.traces`): ``[mobility] source =
"traces"`` reads
its ``true`` rows back (``keep_trace``), the round trip of tests/sim/test_traces_export.py.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from mdpsim._core.outputs import atomic_file, check_file
from mdpsim.errors import InputError
from mdpsim.simulation.traces import SYNTHETIC_ORIGIN, WGS84

if TYPE_CHECKING:
    from mdpsim.simulation.model import PrivacyModel

FORMATS = ("geojson", "geoparquet")
SUFFIXES = {"geojson": (".geojson", ".json"), "geoparquet": (".parquet", ".geoparquet")}
COLUMNS = ["trace", "attack", "user", "tick", "time", "lon", "lat"]


def check_target(
    fmt: str, path: str | Path, *, overwrite: bool = False, out: str | Path | None = None
) -> Path:
    """The export's path, checked before the run: format, suffix, a file this process can
    write (:func:`mdpsim._core.outputs.check_file`), not an existing file unless ``overwrite`` (the
    CLI's ``--force``) and it is an export of mdpsim (:func:`is_export`), not inside the run
    folder ``out`` (replaced whole)."""
    if fmt not in FORMATS:
        raise InputError(f"--export {fmt!r} must be one of {', '.join(FORMATS)}")
    path = check_file(path, flag=f"--export {fmt}")
    if not path.name.lower().endswith(SUFFIXES[fmt]):
        raise InputError(
            f"--export {fmt} {str(path)!r}: the file name must end in {' or '.join(SUFFIXES[fmt])}"
        )
    if path.exists() and not overwrite:
        raise InputError(
            f"--export {fmt} {str(path)!r} exists; choose another file name or pass --force"
        )
    if path.exists() and not is_export(fmt, path):
        raise InputError(
            f"--export {fmt} {str(path)!r} exists and is not a traces export of mdpsim, so "
            "--force does not replace it; choose another file name"
        )
    if out is not None:
        folder = Path(out).expanduser().resolve()
        if folder in path.expanduser().resolve().parents:
            raise InputError(
                f"--export {fmt} {str(path)!r} is inside --out {str(out)!r}, which the run "
                "replaces whole; write the export beside it"
            )
    return path


def is_export(fmt: str, path: Path) -> bool:
    """Whether ``path`` is a ``fmt`` traces export of mdpsim: a file whose fields are exactly
    :data:`COLUMNS` (and the geometry), read from its header, not its rows."""
    try:
        if fmt == "geoparquet":
            import pyarrow.parquet as pq

            fields = [n for n in pq.read_schema(path).names if n != "geometry"]
        else:
            import pyogrio

            fields = list(pyogrio.read_info(path)["fields"])
    except (OSError, ValueError, RuntimeError):  # unreadable as that format: not an export
        return False
    return fields == COLUMNS


class TraceRecorder:
    """Collects a model's traces tick by tick: :meth:`start` before the first tick, then
    :meth:`after_tick` after every tick (``run_model(recorder=...)`` does both)."""

    def __init__(self) -> None:
        self.frames: list[pd.DataFrame] = []

    def start(self, model: PrivacyModel) -> None:
        """Follow ``model`` from its next tick."""
        self.model = model
        self.next_true = model.population.position.copy()  # where users are at the next tick

    def after_tick(self, model: PrivacyModel) -> None:
        """Record tick ``model.tick``: every user's secret, the reports, the attacks' guesses."""
        domain, tick = model.domain, model.tick
        users = np.arange(len(self.next_true))
        self._add("true", "", tick, users, domain.x_xy[self.next_true])
        reports = model.last_reports
        self._add("reported", "", tick, reports.users, domain.y_xy[reports.outputs])
        result = model.last_attacks
        for label, scored in (result.scores if result is not None else {}).items():
            for s in scored:
                if s.guess is None or s.tick is None:
                    continue
                xy = domain.x_xy if s.space == "x" else domain.y_xy
                self._add("estimated", label, s.tick, s.users, xy[s.guess])
        self.next_true = model.population.position.copy()

    def _add(self, trace: str, attack: str, tick: int, users: np.ndarray, xy: np.ndarray) -> None:
        if len(users):
            self.frames.append(
                pd.DataFrame(
                    {
                        "trace": trace,
                        "attack": attack,
                        "user": np.asarray(users, dtype=np.int64),
                        "tick": tick,
                        "x": xy[:, 0],
                        "y": xy[:, 1],
                    }
                )
            )

    def table(self) -> pd.DataFrame:
        """Every recorded point: :data:`COLUMNS` (lon/lat in WGS 84), sorted by trace, attack,
        tick and user."""
        import pyproj

        model = self.model
        frame = pd.concat(self.frames, ignore_index=True)
        kind = pd.CategoricalDtype(["true", "reported", "estimated"], ordered=True)
        frame["trace"] = frame["trace"].astype(kind)
        frame = frame.sort_values(["trace", "attack", "tick", "user"], kind="stable")
        frame["trace"] = frame["trace"].astype(str)
        to_wgs84 = pyproj.Transformer.from_crs(model.graph.graph["crs"], WGS84, always_xy=True)
        frame["lon"], frame["lat"] = to_wgs84.transform(
            frame["x"].to_numpy(), frame["y"].to_numpy()
        )
        tick_seconds = model.config.scenario.tick_seconds
        traces = model.world.traces
        origin, offset_s = (
            (SYNTHETIC_ORIGIN, 0.0) if traces is None else traces.tick_time(tick_seconds)
        )
        seconds = offset_s + (frame["tick"].to_numpy() - 1) * tick_seconds
        frame["time"] = origin + pd.to_timedelta(seconds, unit="s")
        if traces is not None:
            frame["user"] = traces.user_ids[frame["user"].to_numpy()]
        return frame[COLUMNS].reset_index(drop=True)


def write(table: pd.DataFrame, fmt: str, path: str | Path) -> Path:
    """Write :meth:`TraceRecorder.table` as ``fmt`` to ``path`` (whole or not at all)."""
    with writing(table, fmt, path) as target:
        return target


@contextmanager
def writing(table: pd.DataFrame, fmt: str, path: str | Path) -> Iterator[Path]:
    """Write the table to a temporary file beside ``path``, yield ``path``, and rename the
    file to it when the body ends well: ``mdpsim run`` writes its folder in the body, so a
    failing export leaves no run folder and a failing run folder no export."""
    import geopandas as gpd

    path = check_target(fmt, path, overwrite=True)  # refused up front unless --force
    frame = gpd.GeoDataFrame(
        table, geometry=gpd.points_from_xy(table["lon"], table["lat"]), crs=WGS84
    )
    with atomic_file(path) as tmp:
        if fmt == "geoparquet":
            frame.to_parquet(tmp, index=False)
        else:
            frame = frame.assign(time=frame["time"].dt.strftime("%Y-%m-%dT%H:%M:%S.%fZ"))
            # the layer's name is the file's, not the temporary one's (".t.geojson")
            frame.to_file(tmp, driver="GeoJSON", engine="pyogrio", layer=path.stem)
        yield path
