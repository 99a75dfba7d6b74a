"""Where people live and where they go: relevance maps over the secrets of a road domain.

Two maps, one weight per secret (docs/mobility.md, "Relevance"):

- ``housing``: floor area (footprint m^2 x storeys, OSM ``building:levels``; one when
  untagged) of the OSM extract's buildings that can house people (not
  ``BUSINESS_BUILDINGS``), counted at the secret nearest each building's centroid. Homes are
  drawn from it.
- ``activity``: the extract's points of interest (``amenity``, ``shop``, ``office``) and
  business buildings, one each, counted the same way. Work places and explored places are
  drawn from it by gravity.

Both are blended with the road-node density (graph nodes counted per nearest secret) by
``NODE_FLOOR``, so a secret with no building still has some weight. A network that is not a
``.pbf`` (pyrosm reads only those) or an extract without buildings gets node density alone. A
user's relevance file (CSV: ``lat``, ``lon``, ``weight``) replaces both maps.
"""

from __future__ import annotations

import csv
import functools
from dataclasses import dataclass
from pathlib import Path
from weakref import WeakKeyDictionary

import numpy as np
from scipy.spatial import cKDTree

from mdpsim.errors import InputError

#: Share of each map given to road-node density (the fallback), so no secret weighs zero.
NODE_FLOOR = 0.1
#: Up to this many secrets, the nearest one is found by a compiled sweep, not the KD-tree's query.
_SWEEP_SECRETS = 128
#: OSM building values that house activity, not people.
BUSINESS_BUILDINGS = frozenset(
    {
        "office", "retail", "commercial", "industrial", "warehouse", "public", "civic",
        "church", "cathedral", "chapel", "university", "school", "college", "kindergarten",
        "hospital", "train_station", "transportation", "kiosk", "supermarket", "hotel",
        "government", "shed", "garage", "garages", "roof", "utility", "tower", "pavilion",
        "service", "parking",
    }
)  # fmt: skip


@dataclass(frozen=True)
class Relevance:
    """Per-secret weights (each sums to 1) and where they came from."""

    housing: np.ndarray
    activity: np.ndarray
    source: str  # "osm buildings", "node density" or "file <path>"


def relevance_map(domain, *, path: Path | None = None) -> Relevance:
    """The relevance maps of ``domain`` (its graph's OSM extract, else node density; ``path``:
    a user's CSV of ``lat, lon, weight`` rows, which replaces both)."""
    secrets = cKDTree(domain.x_xy)  # one tree: every map counts at the same secrets
    nodes = _node_density(domain, secrets)
    if path is not None:
        weight = _from_file(domain, Path(path), secrets)
        return Relevance(_blend(weight, nodes), _blend(weight, nodes), f"file {path}")
    graph = domain.graph
    points = (
        _osm_points(str(graph.graph.get("mdpsim_source", "")), str(graph.graph.get("crs")))
        if graph
        else None
    )
    if points is None:
        return Relevance(nodes, nodes, "node density")
    housing = _counted(secrets, domain.n_x, *points[0])
    activity = _counted(secrets, domain.n_x, *points[1])
    return Relevance(_blend(housing, nodes), _blend(activity, nodes), "osm buildings")


@functools.lru_cache(maxsize=4)
def _osm_points(source: str, crs: str):
    """:func:`_osm_features` of ``source`` projected to ``crs`` (metres), read-only; None
    without them (cached: every new seed of a game places its people on the same features)."""
    features = _osm_features(source)
    if features is None:
        return None
    projected = tuple(_project(part, crs) for part in features)
    for xy, weight in projected:
        xy.setflags(write=False)
        weight.setflags(write=False)
    return projected


def _blend(weight: np.ndarray, nodes: np.ndarray) -> np.ndarray:
    total = weight.sum()
    if total <= 0:
        return nodes
    out = (1.0 - NODE_FLOOR) * weight / total + NODE_FLOOR * nodes
    return out / out.sum()


def _counted(secrets: cKDTree, n_x: int, xy: np.ndarray, weight: np.ndarray) -> np.ndarray:
    """``weight`` summed at the secret nearest each point ``xy`` (metres, the domain's CRS;
    ``secrets``: the KD-tree of the domain's ``n_x`` secrets)."""
    out = np.zeros(n_x)
    if len(xy):
        nearest = _nearest(secrets, xy)
        np.add.at(out, nearest, weight)
    return out


def _nearest(secrets: cKDTree, xy: np.ndarray) -> np.ndarray:
    """The index of the secret nearest each point ``xy``: the tree's query, or for a small
    domain a compiled sweep over the secrets by x (cheaper there), which asks the tree only
    about the points it is unsure of (another secret within a hair: the tree's tie-breaking
    decides)."""
    if secrets.n > _SWEEP_SECRETS:
        return secrets.query(xy)[1]
    from mdpsim.geo import _kernels

    sites = secrets.data
    by_x = np.argsort(sites[:, 0], kind="stable")
    nearest, unsure = _kernels.nearest_sites(np.ascontiguousarray(xy, dtype=float), sites, by_x)
    if unsure.any():
        nearest[unsure] = secrets.query(xy[unsure])[1]
    return nearest


def _node_density(domain, secrets: cKDTree) -> np.ndarray:
    graph = domain.graph
    if graph is None:
        return np.full(domain.n_x, 1.0 / domain.n_x)
    xy = _node_xy(graph)
    counts = _counted(secrets, domain.n_x, xy, np.ones(len(xy))) + 1.0  # +1: between nodes
    return counts / counts.sum()


#: Per road graph, its nodes' coordinates (read-only), dropped with the graph.
_NODE_XY: WeakKeyDictionary = WeakKeyDictionary()


def _node_xy(graph) -> np.ndarray:
    """``(nodes, 2)`` coordinates of ``graph``'s nodes, read once per graph (a game's every
    new seed counts the same nodes; graphs are never changed once loaded)."""
    if graph not in _NODE_XY:
        xy = np.array([(d["x"], d["y"]) for _, d in graph.nodes(data=True)], dtype=float)
        xy.setflags(write=False)
        _NODE_XY[graph] = xy
    return _NODE_XY[graph]


def _project(lonlat_w: tuple[np.ndarray, np.ndarray], crs: str) -> tuple[np.ndarray, np.ndarray]:
    from pyproj import Transformer

    lonlat, weight = lonlat_w
    if not len(lonlat):
        return np.zeros((0, 2)), weight
    x, y = Transformer.from_crs("EPSG:4326", crs, always_xy=True).transform(
        lonlat[:, 0], lonlat[:, 1]
    )
    return np.column_stack([x, y]), weight


@functools.lru_cache(maxsize=4)
def _osm_features(source: str):
    """``((lonlat, floor_m2), (lonlat, ones))`` of the housing buildings and the activities of
    the pbf behind network ``source``; None when it is not a pbf or has no buildings."""
    from mdpsim.geo.network import _resolve

    try:
        kind, pbf = _resolve(source)
    except InputError:
        return None
    if kind != "pbf" or pbf is None:
        return None
    import pyrosm

    osm = pyrosm.OSM(str(pbf))
    buildings = osm.get_buildings()
    if buildings is None or not len(buildings):
        return None
    pois = osm.get_pois(custom_filter={"amenity": True, "shop": True, "office": True})
    kind_of = buildings["building"].fillna("yes").astype(str)
    business = kind_of.isin(BUSINESS_BUILDINGS).to_numpy()
    metric = buildings.to_crs(buildings.estimate_utm_crs())
    area_m2 = metric.geometry.area.to_numpy()
    storeys = _storeys(buildings)
    centroid = metric.geometry.centroid.to_crs("EPSG:4326")
    lonlat = np.column_stack([centroid.x.to_numpy(), centroid.y.to_numpy()])
    housing = (lonlat[~business], (area_m2 * storeys)[~business])
    act_xy = [lonlat[business]]
    if pois is not None and len(pois):
        pts = pois.to_crs(pois.estimate_utm_crs()).geometry.centroid.to_crs("EPSG:4326")
        act_xy.append(np.column_stack([pts.x.to_numpy(), pts.y.to_numpy()]))
    act = np.concatenate(act_xy)
    return housing, (act, np.ones(len(act)))


def _storeys(buildings) -> np.ndarray:
    if "building:levels" not in buildings:
        return np.ones(len(buildings))
    raw = buildings["building:levels"].astype(str).str.extract(r"^\s*(\d+(?:\.\d+)?)")[0]
    storeys = raw.astype(float).to_numpy()
    return np.where(np.isfinite(storeys) & (storeys >= 1), storeys, 1.0)


def _from_file(domain, path: Path, secrets: cKDTree) -> np.ndarray:
    """A user's relevance CSV (``lat, lon, weight``) counted per nearest secret."""
    field = "field mobility.relevance_path"
    if not path.is_file():
        raise InputError(f"{field} = {str(path)!r}: no such file; give a CSV of lat, lon, weight")
    with path.open(newline="") as fh:
        rows = list(csv.DictReader(fh))
    if not rows or not {"lat", "lon", "weight"} <= set(rows[0]):
        raise InputError(f"{field} = {str(path)!r} needs columns lat, lon and weight")
    try:
        arr = np.array([[float(r["lon"]), float(r["lat"]), float(r["weight"])] for r in rows])
    except ValueError as exc:
        raise InputError(f"{field} = {str(path)!r}: a row is not numbers ({exc})") from None
    if not np.all(np.isfinite(arr)) or np.any(arr[:, 2] < 0) or arr[:, 2].sum() <= 0:
        raise InputError(f"{field} = {str(path)!r}: weights must be finite, >= 0, not all 0")
    crs = str(domain.graph.graph["crs"]) if domain.graph is not None else None
    if crs is None:
        raise InputError(f"{field} needs a road network domain (its CRS places the rows)")
    xy, weight = _project((arr[:, :2], arr[:, 2]), crs)
    return _counted(secrets, domain.n_x, xy, weight)
