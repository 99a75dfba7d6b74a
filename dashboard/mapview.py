"""The live map: roads, reported locations, the attacker's estimates and true locations.

A deck.gl map with no basemap at all (no tiles, no style fetched), so it works offline:
pydeck's sentinel map style with ``map_provider=None`` tells Streamlit not to add its default
Carto basemap (``map_style=None`` would make Streamlit fetch one).
"""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pydeck as pdk
from pydeck.bindings.json_tools import default_serialize

#: Layer name -> (legend label, RGBA colour).
STYLE = {
    "roads": ("roads", [150, 150, 150, 255]),
    "true": ("true location", [33, 102, 172, 230]),
    "reported": ("reported location", [230, 97, 1, 230]),
    "estimate": ("attacker's estimate (single report)", [178, 24, 43, 230]),
    "tracking": ("attacker's estimate (tracking)", [118, 42, 131, 200]),
    "true_trace": ("true trace", [33, 102, 172, 255]),
    "tracked_trace": ("tracked trace (attack)", [202, 0, 32, 255]),
    "home": ("home (people model)", [77, 175, 74, 200]),
    "work": ("work place (people model)", [152, 78, 163, 200]),
}
_RADIUS_M = {"true": 14, "reported": 12, "estimate": 10, "tracking": 8, "home": 18, "work": 18}


class CompactDeck(pdk.Deck):
    """A deck whose JSON has no indentation: the same object as pydeck's ``to_json`` (which
    indents, so Python's pure encoder runs), a third of the bytes sent to the browser each
    time the live map is drawn and a fifth of the time (Helsinki: 264 kB in 12 ms, not
    907 kB in 58 ms)."""

    def to_json(self) -> str:
        return json.dumps(self, sort_keys=True, default=default_serialize)


def deck(
    roads: list[list[list[float]]],
    layers: dict[str, pd.DataFrame],
    *,
    show: tuple[str, ...] = ("reported", "estimate"),
    extra: tuple[pdk.Layer, ...] = (),
) -> CompactDeck:
    """A deck with the road paths, the point layers named in ``show`` (if present) and any
    ``extra`` layers on top (e.g. :func:`trace_layers`)."""
    drawn = [
        pdk.Layer(
            "PathLayer",
            id="roads",
            data=pd.DataFrame({"path": roads}),
            get_path="path",
            get_color=STYLE["roads"][1],
            width_min_pixels=1,
            get_width=2,
        )
    ]
    for name in show:
        frame = layers.get(name)
        if frame is None or frame.empty:
            continue
        drawn.append(
            pdk.Layer(
                "ScatterplotLayer",
                id=name,
                data=frame,
                get_position=["lon", "lat"],
                get_fill_color=STYLE[name][1],
                get_radius=_RADIUS_M[name],
                radius_min_pixels=3,
                pickable=True,
            )
        )
    drawn.extend(extra)
    return CompactDeck(
        layers=drawn,
        initial_view_state=view_of(roads),
        map_provider=None,
        tooltip={"text": "user {user}"},
    )


def tracked_trace_layers(
    x_xy_m: np.ndarray, crs, true_secrets: np.ndarray, tracked_secrets: np.ndarray
) -> list[pdk.Layer]:
    """:func:`trace_layers` of one user from secret indices: its true secrets per tick and the
    tracking attack's guesses (e.g. ``Tracking.guesses()[:, user]`` or ``.trace_[:, user]``)."""
    from mdpsim.dashboard.geo import lonlat

    return trace_layers(
        lonlat(x_xy_m[np.asarray(true_secrets)], crs),
        lonlat(x_xy_m[np.asarray(tracked_secrets)], crs),
    )


def trace_layers(true_lonlat: np.ndarray, tracked_lonlat: np.ndarray) -> list[pdk.Layer]:
    """One user's true trace and the attack's tracked trace (``(T, 2)`` lon/lat each, tick
    order) as two paths with a dot per tick; the tracked one dashed-looking thinner on top."""
    layers = []
    for name, path, width in (("true_trace", true_lonlat, 5), ("tracked_trace", tracked_lonlat, 3)):
        pts = np.asarray(path, dtype=float)
        colour = STYLE[name][1]
        layers.append(
            pdk.Layer(
                "PathLayer",
                id=name,
                data=pd.DataFrame({"path": [pts.tolist()], "name": [STYLE[name][0]]}),
                get_path="path",
                get_color=colour,
                get_width=width,
                width_min_pixels=width // 2 + 1,
                pickable=True,
            )
        )
        layers.append(
            pdk.Layer(
                "ScatterplotLayer",
                id=f"{name}_ticks",
                data=pd.DataFrame(
                    {"lon": pts[:, 0], "lat": pts[:, 1], "tick": np.arange(1, len(pts) + 1)}
                ),
                get_position=["lon", "lat"],
                get_fill_color=colour,
                get_radius=6,
                radius_min_pixels=2,
                pickable=True,
            )
        )
    return layers


def view_of(roads: list[list[list[float]]], *, width_px: int = 700, height_px: int = 480):
    """A view centred on the roads and zoomed so that they fit a ``width_px x height_px`` map."""
    ll = np.array([pt for path in roads for pt in path], dtype=float)
    lo, hi = ll.min(axis=0), ll.max(axis=0)
    lat = float((lo[1] + hi[1]) / 2)
    span_lon = max(float(hi[0] - lo[0]), 1e-6)
    span_lat = max(float(hi[1] - lo[1]), 1e-6) / np.cos(np.radians(lat))  # Mercator stretch
    # at zoom z the world (360 degrees) is 256 * 2**z pixels wide
    zoom = min(
        np.log2(width_px * 360 / (256 * span_lon)), np.log2(height_px * 360 / (256 * span_lat))
    )
    return pdk.ViewState(
        longitude=float((lo[0] + hi[0]) / 2), latitude=lat, zoom=round(float(zoom) - 0.2, 2)
    )
