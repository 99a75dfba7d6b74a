"""People at scale (issue 48 item 4): the people model with the default attacks at N users,
the tick's phase split from the model's own timings, CPU seconds and peak memory.

``python bench/people_scale.py --users 1000,10000 --ticks 288`` (Helsinki, 1,000 secrets,
5-minute ticks from 00:00, EM at 4/km, no queries, ``[output] per_user = false``; one process
per row is the fair comparison, so run one size per call when the peak memory matters).
"""

from __future__ import annotations

import argparse
import resource
import time

from mdpsim.simulation.model import PrivacyModel
from mdpsim.simulation.scenario import from_dict

PHASES = ("move_s", "mechanism_s", "report_s", "query_s", "attack_s")


def scenario(users: int, ticks: int):
    """The measured scenario at ``users`` x ``ticks``."""
    return from_dict(
        {
            "scenario": {"name": "scale", "seed": 2026, "ticks": ticks, "tick_seconds": 300.0},
            "network": {"source": "helsinki"},
            "domain": {"n_points": 1000},
            "users": {"count": users},
            "mobility": {"model": "epr"},
            "mechanism": {"name": "em", "epsilon_per_km": 4.0},
            "strategies": {"budget": {"name": "pure_gp", "epsilon_per_km": 1e9}},
            "queries": {"every_ticks": 0},
            "output": {"per_user": False},
        }
    )


def measure(users: int, ticks: int) -> dict[str, float]:
    """Build and run once; the phases' seconds, the build, CPU and peak RSS."""
    wall0, cpu0 = time.perf_counter(), time.process_time()
    model = PrivacyModel(scenario(users, ticks))
    build_s = time.perf_counter() - wall0
    model.run(ticks)
    row = {"users": users, "ticks": ticks, "build_s": build_s}
    for phase in PHASES:
        row[phase] = sum(t.get(phase, 0.0) for t in model.log.timings[1:])
    row["wall_s"] = time.perf_counter() - wall0
    row["cpu_s"] = time.process_time() - cpu0
    row["us_per_user_tick"] = 1e6 * (row["wall_s"] - build_s) / (users * ticks)
    row["peak_rss_gb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--users", default="1000,10000", help="comma-separated user counts")
    parser.add_argument("--ticks", type=int, default=288, help="ticks of 300 s (288: a day)")
    args = parser.parse_args()
    cols = (
        "users",
        "ticks",
        "build_s",
        *PHASES,
        "wall_s",
        "cpu_s",
        "us_per_user_tick",
        "peak_rss_gb",
    )
    print("| " + " | ".join(cols) + " |\n|" + "---|" * len(cols))
    for users in (int(u) for u in args.users.split(",")):
        row = measure(users, args.ticks)
        print(
            "| "
            + " | ".join(
                f"{row[c]:.3g}" if isinstance(row[c], float) else str(row[c]) for c in cols
            )
            + " |"
        )


if __name__ == "__main__":
    main()
