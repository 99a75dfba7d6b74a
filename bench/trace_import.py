"""How long a traces file takes to import (issue 26: 100,000 fixes in at most 30 s on one core).

Writes synthetic files of N fixes (users walking the central-Helsinki walk network, a fix a
minute, GPS-like noise of 10 m, 1 % bad rows of every kind) as CSV and Parquet, then times the
import: reading and checking every row (:func:`mdpsim.simulation.traces.read_fixes`), snapping to
the
secrets and resampling to 20 s ticks along the roads (:meth:`Fixes.walks`: two of every
three ticks fall between fixes and are walked), and the whole ``build_world`` of a
trace-driven scenario (network and domain cached: loaded once before). Then a second table:
walks seen one fix every 5 ticks, resampled along the road or to the nearest fix. One thread
(``OMP_NUM_THREADS=1``); CPU seconds of this process. Run under the bench lock:

    flock /work/rooms/bench.lock nice -n 10 .venv/bin/python bench/trace_import.py
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")

import argparse
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pyproj

from mdpsim.simulation import scenario as sc
from mdpsim.simulation.trace_walks import RoadPaths
from mdpsim.simulation.traces import read_fixes
from mdpsim.simulation.world import build_domain, build_world, load_graph, network_extent

BASE = {
    "scenario": {"seed": 1, "tick_seconds": 20.0},  # 3 ticks a fix: 2 walked along the road
    "domain": {"n_points": 500},
    "mechanism": {"name": "em", "epsilon_per_km": 4.0},
    "queries": {"every_ticks": 0},
    "attacks": {"run": ["bayes"]},
}


def synthetic_file(folder: Path, n_fixes: int, *, n_users: int, graph, domain, suffix: str):
    """``n_fixes`` fixes of ``n_users`` at random secrets, 10 m noise, 1 % bad rows."""
    rng = np.random.default_rng(n_fixes)
    per_user = n_fixes // n_users
    secrets = rng.integers(domain.n_x, size=n_users * per_user)
    xy = domain.x_xy[secrets] + rng.normal(0, 10.0, size=(len(secrets), 2))
    to = pyproj.Transformer.from_crs(graph.graph["crs"], "EPSG:4326", always_xy=True)
    lon, lat = to.transform(xy[:, 0], xy[:, 1])
    start = pd.Timestamp("2026-05-01T06:00:00Z")
    frame = pd.DataFrame(
        {
            "user": np.repeat([f"taxi{u:05d}" for u in range(n_users)], per_user),
            "time": (start + pd.to_timedelta(np.tile(np.arange(per_user) * 60, n_users), "s"))
            .strftime("%Y-%m-%dT%H:%M:%SZ")
            .astype(object),
            "lat": lat.astype(object),
            "lon": lon,
        }
    )
    bad = rng.choice(len(frame), size=len(frame) // 100, replace=False)
    kinds = np.arange(len(bad)) % 4
    frame.loc[bad[kinds == 0], "lat"] = "n/a"  # non-numeric
    frame.loc[bad[kinds == 1], "lat"] = 10.0  # outside the extent
    frame.loc[bad[kinds == 2], "lat"] = None  # missing
    dup = bad[kinds == 3]
    dup = dup[dup % per_user > 0]
    frame.loc[dup, "time"] = frame["time"].to_numpy()[dup - 1]  # a repeated time
    path = folder / f"fixes_{n_fixes}{suffix}"
    if suffix == ".csv":
        frame.to_csv(path, index=False)
    else:
        frame.astype({"lat": str}).to_parquet(path, index=False)
    return path


def sparse_fixes_table(scenario, graph, domain, *, every: int = 5) -> None:
    """Synthetic walks (the truth, one position a tick) seen one fix every ``every`` ticks, no
    noise, replayed both ways: how far from the truth, and how many moves beyond the public
    reach of one tick (the adversary's prior calls those impossible). Walkers that dwell
    (the default users: 1-5 ticks at each place) and walkers that never stop."""
    from mdpsim.simulation.trace_walks import moves_beyond_reach, resample

    ticks = 60
    print(f"\nfixes every {every} ticks (60 s), no noise, 200 users x {ticks} ticks:")
    print("| walkers | resample | on the true secret | mean error (km) | moves beyond reach |")
    print("|---|---|---:|---:|---:|")
    for label, dwell in (("dwell 1-5 ticks", [1, 5]), ("never stop", [0, 0])):
        world = build_world(
            scenario.replace(
                **{"users.count": 200, "scenario.ticks": ticks, "users.dwell_ticks": dwell,
                   "scenario.tick_seconds": 60.0}
            ),
            graph=graph,
            domain=domain,
        )  # fmt: skip
        truth = world.walks_ahead(ticks)  # (ticks, users)
        seen = np.arange(0, ticks, every)
        users = np.repeat(np.arange(truth.shape[1]), len(seen))
        seconds = np.tile(seen * 60.0, truth.shape[1])
        value = truth[seen].T.ravel()
        for how in ("road", "nearest"):
            along = RoadPaths(domain) if how == "road" else None
            walks = resample(users, seconds, value, truth.shape[1], 60.0, along=along)
            t = len(walks)
            hit = float(np.mean(walks == truth[:t]))
            err = float(domain.dist_xx[walks, truth[:t]].mean())
            beyond = moves_beyond_reach(walks, domain.dist_xx, world.mobility.reach_km)
            print(f"| {label} | {how} | {hit:.1%} | {err:.3f} | {beyond:.1%} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default="10000,100000", help="fixes per file, comma-separated")
    parser.add_argument("--users", type=int, default=200)
    args = parser.parse_args()
    scenario = sc.from_dict(BASE)
    graph = load_graph(scenario)
    domain = build_domain(scenario, graph, seed=1)
    extent = network_extent(graph)
    print(f"load: {os.getloadavg()[0]:.2f} (1 min), {os.cpu_count()} cores; N = {domain.n_x}")
    head = ["fixes", "file", "read + check (s)", "snap + resample (s)", "build_world (s)", "kept"]
    print("| " + " | ".join([*head, "dropped"]) + " |")
    print("|---:|---|---:|---:|---:|---:|---:|")
    with tempfile.TemporaryDirectory() as tmp:
        for n in (int(v) for v in args.sizes.split(",")):
            for suffix in (".csv", ".parquet"):
                path = synthetic_file(
                    Path(tmp), n, n_users=args.users, graph=graph, domain=domain, suffix=suffix
                )
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    t0 = time.process_time()
                    fixes = read_fixes(path, graph_crs=graph.graph["crs"], extent_xy=extent)
                    t1 = time.process_time()
                    fixes.walks(domain, 20.0)
                    t2 = time.process_time()
                    traced = scenario.replace(
                        **{"mobility.source": "traces", "mobility.path": str(path)}
                    )
                    build_world(traced, graph=graph, domain=domain)
                    t3 = time.process_time()
                r = fixes.report
                print(
                    f"| {n:,} | {suffix[1:]} | {t1 - t0:.2f} | {t2 - t1:.2f} | {t3 - t2:.2f} | "
                    f"{r.n_kept:,} | {r.n_dropped:,} |"
                )
    sparse_fixes_table(scenario, graph, domain)


if __name__ == "__main__":
    main()
