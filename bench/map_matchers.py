"""Map-matching for traces in: the nearest-secret snap against two map-matchers (docs/traces.md).

The users of a trace-driven run live on the secrets of the domain, points on the roads, so a
fix has to end on a secret. Three ways, measured on synthetic walks (the truth known) with
GPS-like noise (isotropic Gaussian, sigma metres):

* ``kdtree``: the nearest secret to the fix (scipy's cKDTree; what mdpsim.simulation.traces does);
* ``leuven``: leuvenmapmatching's DistanceMatcher (an HMM over the road edges), then the
  nearest secret to the matched point on the road;
* ``mappymatch``: mappymatch's LCSSMatcher on an NxMap of the same osmnx graph, then the
  nearest secret to the matched point.

Two steps, because mappymatch needs pandas < 3 and mdpsim runs on pandas 3, so they cannot
share a venv (that alone rules it out as a dependency):

    .venv/bin/python bench/map_matchers.py prepare DIR      # mdpsim's venv: walks, fixes, graph
    OTHER_VENV/bin/python bench/map_matchers.py match DIR  # numpy, scipy, osmnx, pyproj and
                                                           # the matchers (pip install
                                                           # mappymatch leuvenmapmatching)

``match`` prints the table (accuracy: the fraction of fixes that end on their true secret;
fixes per second of one core, matcher and snap together).
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

NOISE_M = (0.0, 10.0, 30.0)
DOMAINS = (300, 3000)  # secrets on the central-Helsinki walk network: ~340 m and ~34 m apart
USERS, TICKS = 30, 60  # synthetic walks: 1.4 m/s, one fix a minute (84 m apart when moving)
HMM_USERS = 10  # every method runs on this many users' traces (the HMM matchers are slow)


def prepare(out: Path) -> None:
    """Walks, noisy fixes, secrets and the projected graph, written to ``out``."""
    import osmnx as ox

    from mdpsim.simulation import scenario as sc
    from mdpsim.simulation.world import build_world

    out.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(7)
    for n_points in DOMAINS:
        s = sc.from_dict(
            {
                "scenario": {"seed": 1, "ticks": TICKS},
                "domain": {"n_points": n_points},
                "users": {"count": USERS, "dwell_ticks": [0, 2]},
                "mechanism": {"name": "em", "epsilon_per_km": 4.0},
            }
        )
        world = build_world(s)
        truth = world.walks_ahead(TICKS)  # (ticks, users)
        np.save(out / f"secrets_{n_points}.npy", world.domain.x_xy)
        np.save(out / f"truth_{n_points}.npy", truth)
        for noise in NOISE_M:
            fixes = world.domain.x_xy[truth] + rng.normal(0, noise, size=(*truth.shape, 2))
            np.save(out / f"fixes_{n_points}_{noise:g}.npy", fixes)
    ox.save_graphml(world.graph, out / "graph.graphml")
    (out / "meta.json").write_text(json.dumps({"crs": str(world.graph.graph["crs"])}))


def match(folder: Path) -> None:
    """Run the three methods on every prepared case and print the table."""
    from scipy.spatial import cKDTree

    crs = json.loads((folder / "meta.json").read_text())["crs"]
    matchers = {"kdtree": None, "leuven": _leuven(folder), "mappymatch": _mappymatch(folder, crs)}
    print("| secrets | noise (m) | method | fixes | on the true secret | fixes/s |")
    print("|---:|---:|---|---:|---:|---:|")
    for n_points in DOMAINS:
        secrets = np.load(folder / f"secrets_{n_points}.npy")
        truth = np.load(folder / f"truth_{n_points}.npy")
        tree = cKDTree(secrets)
        for noise in NOISE_M:
            fixes = np.load(folder / f"fixes_{n_points}_{noise:g}.npy")
            for name, matcher in matchers.items():
                users = HMM_USERS  # the same users' fixes for every method
                start = time.process_time()
                got = np.empty((TICKS, users), dtype=np.int64)
                for u in range(users):
                    points = fixes[:, u] if matcher is None else matcher(fixes[:, u])
                    got[:, u] = tree.query(points)[1]
                seconds = time.process_time() - start
                hit = float(np.mean(got == truth[:, :users]))
                n = TICKS * users
                print(
                    f"| {n_points} | {noise:g} | {name} | {n} | {hit:.1%} | "
                    f"{n / max(seconds, 1e-9):,.0f} |"
                )


def _leuven(folder: Path):
    """fixes (T, 2) metres -> matched points (T, 2): leuvenmapmatching's DistanceMatcher."""
    import osmnx as ox
    from leuvenmapmatching.map.inmem import InMemMap
    from leuvenmapmatching.matcher.distance import DistanceMatcher

    G = ox.load_graphml(folder / "graph.graphml")
    graph = InMemMap("roads", use_latlon=False, use_rtree=False, index_edges=True)
    for node, d in G.nodes(data=True):
        graph.add_node(node, (d["y"], d["x"]))
    for u, v, _ in G.edges(keys=True):
        graph.add_edge(u, v)
    graph.purge()

    def run(fixes: np.ndarray) -> np.ndarray:
        matcher = DistanceMatcher(
            graph,
            max_dist=200,
            obs_noise=30,
            obs_noise_ne=60,
            max_lattice_width=8,
            non_emitting_states=True,
        )
        path = [(float(y), float(x)) for x, y in fixes]
        matcher.match(path)
        best = matcher.lattice_best
        points = fixes.copy()
        for m in best:
            if not m.is_emitting():
                continue
            y, x = m.edge_m.pi
            points[m.obs] = (x, y)
        return points

    return run


def _mappymatch(folder: Path, crs: str):
    """fixes (T, 2) metres -> matched points (T, 2): mappymatch's LCSSMatcher."""
    import geopandas as gpd
    import osmnx as ox
    import pyproj
    from mappymatch.constructs.trace import Trace
    from mappymatch.maps.nx.nx_map import NxMap
    from mappymatch.maps.nx.readers.osm_readers import NetworkType, parse_osmnx_graph
    from mappymatch.matchers.lcss.lcss import LCSSMatcher
    from shapely.geometry import Point

    G = ox.load_graphml(folder / "graph.graphml")
    for _, _, d in G.edges(data=True):
        d["maxspeed"] = "5"  # walkways carry no speeds; osmnx's travel times need one
    road_map = NxMap(parse_osmnx_graph(G, NetworkType.WALK))
    matcher = LCSSMatcher(road_map)
    back = pyproj.Transformer.from_crs(road_map.crs, crs, always_xy=True)

    def run(fixes: np.ndarray) -> np.ndarray:
        frame = gpd.GeoDataFrame(geometry=gpd.points_from_xy(fixes[:, 0], fixes[:, 1]), crs=crs)
        trace = Trace.from_geo_dataframe(frame, xy=True)
        result = matcher.match_trace(trace)
        points = fixes.copy()
        for i, m in enumerate(result.matches):
            if m.road is None:
                continue
            c: Point = m.coordinate.geom
            on_road = m.road.geom.interpolate(m.road.geom.project(c))
            points[i] = back.transform(on_road.x, on_road.y)
        return points

    return run


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("step", choices=["prepare", "match"])
    parser.add_argument("folder", type=Path)
    args = parser.parse_args()
    (prepare if args.step == "prepare" else match)(args.folder)
