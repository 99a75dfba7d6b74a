"""GPX traces in: the track points of a GPX file as a traces table (docs/traces.md, "GPX").

:func:`read_gpx` reads the ``track_points`` and ``tracks`` layers with pyogrio (GDAL's GPX
driver) into one row per track point, in file order, with columns ``user``, ``time`` (the
``<time>`` as ISO 8601 text with its zone, as GDAL renders it; missing when a point has
none), ``lat``, ``lon``, ``track`` (1-based, file order), every GPX field of the point
(``name``, ``desc``, ``type``, ``sym``, ...) and the track's, prefixed ``track_``
(``track_name``, ``track_type``, ...). A user is a track: its ``<name>`` when every track has
one (tracks of one name are one user), else its number. ``user_field`` (``[mobility] columns``'
``user``) names a field as the id instead; then there is no default ``user`` column, so
:func:`mdpsim.simulation.traces.renamed` maps that field to ``user``. Waypoints, routes,
elevation and ``<extensions>`` are not read. The rows are then checked like a CSV's
(:func:`mdpsim.simulation.traces.read_fixes`).
"""

from __future__ import annotations

import warnings
from pathlib import Path

import pandas as pd

from mdpsim.errors import InputError

#: GDAL's GPX layers a file may hold points in; only ``track_points`` is read.
UNREAD_LAYERS = ("waypoints", "route_points")


def _layer(path: Path, layer: str, **kw) -> pd.DataFrame:
    """One layer of a GPX file as a DataFrame (a file GDAL cannot read: one InputError line)."""
    import pyogrio

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # GDAL's notes on unknown fields
            return pyogrio.read_dataframe(path, layer=layer, datetime_as_string=True, **kw)
    except (OSError, ValueError, RuntimeError) as exc:
        first = (str(exc).splitlines() or [type(exc).__name__])[0].split("; It might help")[0]
        raise InputError(f"traces file {str(path)!r} cannot be read as GPX: {first}") from None


def read_gpx(path: Path, user_field: str | None = None) -> pd.DataFrame:
    """The track points of the GPX file ``path`` as a traces table (module docstring).

    Parameters
    ----------
    path
        A ``.gpx`` file.
    user_field
        A field of the file (``[mobility] columns``' ``user``) that is the id; None: the track.

    Returns
    -------
    pandas.DataFrame
        One row per track point, in file order.
    """
    points = _layer(path, "track_points")
    if points.empty:
        unread = sum(len(_layer(path, name, read_geometry=False)) for name in UNREAD_LAYERS)
        extra = f" (waypoints and route points, not read: {unread})" if unread else ""
        raise InputError(
            f"traces file {str(path)!r} has no track points{extra}; mdpsim reads <trk><trkseg>"
            "<trkpt> with a <time>"
        )
    tracks = _layer(path, "tracks", read_geometry=False, fid_as_index=True)
    tracks = tracks.drop(columns=[c for c in tracks.columns if c == "number"], errors="ignore")
    fid = points["track_fid"].to_numpy()
    table = pd.DataFrame(
        {
            "time": points["time"].astype(object).where(points["time"].notna(), None),
            "lat": points.geometry.y.to_numpy(),
            "lon": points.geometry.x.to_numpy(),
            "track": fid + 1,
        }
    )
    skip = {"geometry", "time", "track_fid", "track_seg_id", "track_seg_point_id", "ele"}
    for col in points.columns:
        if col not in skip and (points[col].notna().any() or col == user_field):
            table[col] = points[col].to_numpy()
    for col in tracks.columns:
        if tracks[col].notna().any() or f"track_{col}" == user_field:
            table[f"track_{col}"] = tracks[col].reindex(fid).to_numpy()
    if user_field is None:
        names = table.get("track_name")
        named = names is not None and bool(names.notna().all())
        table.insert(0, "user", names if named else table["track"])
    return table
