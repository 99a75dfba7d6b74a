"""Metres in the network's UTM projection to longitude / latitude, and the roads as paths.

The map draws roads and points in lon/lat on a deck.gl map without basemap tiles, so the
dashboard works offline; this module does the projection once per network.
"""

from __future__ import annotations

import numpy as np
from pyproj import Transformer

_DECIMALS = 6  # ~0.1 m in latitude: enough for a map, keeps the page payload small


def lonlat(xy_m: np.ndarray, crs) -> np.ndarray:
    """``(n, 2)`` projected coordinates (metres, in ``crs``) to ``(n, 2)`` lon/lat degrees."""
    xy = np.asarray(xy_m, dtype=float).reshape(-1, 2)
    to_wgs84 = Transformer.from_crs(crs, "EPSG:4326", always_xy=True)
    lon, lat = to_wgs84.transform(xy[:, 0], xy[:, 1])
    return np.round(np.column_stack([lon, lat]), _DECIMALS)


def road_paths(G) -> list[list[list[float]]]:
    """Every road of a projected graph once (not once per direction), as lon/lat polylines.

    Edges keep their curved ``geometry`` where osmnx stored one, else the straight segment
    between their end nodes.
    """
    seen: set[tuple] = set()
    pieces: list[np.ndarray] = []
    for u, v, key, data in G.edges(keys=True, data=True):
        edge = (min(u, v), max(u, v), key)
        if edge in seen:
            continue
        seen.add(edge)
        geometry = data.get("geometry")
        if geometry is not None:
            pieces.append(np.asarray(geometry.coords, dtype=float)[:, :2])
        else:
            a, b = G.nodes[u], G.nodes[v]
            pieces.append(np.array([[a["x"], a["y"]], [b["x"], b["y"]]]))
    if not pieces:
        return []
    points = lonlat(np.concatenate(pieces), G.graph["crs"])
    splits = np.cumsum([len(p) for p in pieces])[:-1]
    return [part.tolist() for part in np.split(points, splits)]
