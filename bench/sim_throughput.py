"""Simulation throughput: microseconds per user per tick, by phase, on Helsinki.

Mechanism generation is reported apart (it happens once per refresh, not per tick), and so is
the process's one-off cost of loading the compiled kernels (numba's cache; a small run before
the table pays it, and its seconds are printed).
Usage: ``python bench/sim_throughput.py [--users 100 1000 10000] [--ticks 10]
[--mechanism em] [--n-points 1000]``; prints a Markdown table.
"""

from __future__ import annotations

import argparse
import json
import time

from mdpsim.experiments.run import simulate
from mdpsim.simulation import scenario as sc

PHASES = ("move_s", "report_s", "query_s", "attack_s")


def _scenario(n_users: int, ticks: int, mechanism: str, n_points: int):
    return sc.from_dict(
        {
            "scenario": {"name": "throughput", "seed": 1, "ticks": ticks},
            "domain": {"n_points": n_points},
            "users": {"count": n_users},
            "strategies": {"budget": {"name": "cgp", "rho_per_km2": 1e6}},
            "mechanism": {"name": mechanism, "epsilon_per_km": 7.0},
            "queries": {"rho_per_km2": 20.0},
            "output": {"per_user": True},
        }
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--users", type=int, nargs="+", default=[100, 1000, 10000])
    parser.add_argument("--ticks", type=int, default=10)
    parser.add_argument("--mechanism", default="em")
    parser.add_argument("--n-points", type=int, default=1000)
    args = parser.parse_args()
    print(
        f"mechanism {args.mechanism}, |X| = {args.n_points}, {args.ticks} ticks, "
        "range + KDE + kNN queries with elimination, single-report and tracking attacks\n"
    )
    start = time.perf_counter()
    simulate(_scenario(20, 2, args.mechanism, 100))  # the kernels load (or compile) here
    print(f"warm-up (kernels loaded, a 20-user run): {time.perf_counter() - start:.2f} s\n")
    print("| users | move | report | queries | attacks | total (µs/user/tick) "
          "| mechanism generation (s) |")  # fmt: skip
    print("|---:|---:|---:|---:|---:|---:|---:|")
    for n in args.users:
        _, _, timings = simulate(_scenario(n, args.ticks, args.mechanism, args.n_points))
        steady = timings[timings["tick"] > 0]  # tick 0 generates the first mechanism
        per = {p: steady[p].mean() / n * 1e6 for p in PHASES}
        gen = float(timings.loc[timings["regenerated"], "mechanism_s"].mean())
        cells = " | ".join(f"{per[p]:.1f}" for p in PHASES)
        print(f"| {n:,} | {cells} | **{sum(per.values()):.1f}** | {gen:.2f} |")
    print("\n" + json.dumps({"note": "wall-clock on a shared 2-core machine"}))


if __name__ == "__main__":
    main()
