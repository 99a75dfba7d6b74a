"""Attack cost per tick: each attack of mdpsim.attacks on 1,000 users over a 2,000-point domain.

Every user reports every tick (em at eps 7/km, Helsinki walkways). An attack's per-tick cost
is its ``observe`` plus the scoring of what it returned (mdpsim.attacks.suite), averaged over the
ticks after the first ``--warmup-ticks`` (while the beliefs and the memory allocator's pools
are first filled); the end-of-run work (``finish``: Viterbi, places, linkage) is reported
apart, and also spread over the ticks. The simulation's own tick (move + reports + queries,
from sim/experiments/run.py's timings, the same users and domain, same warm-up) is the yardstick.
Usage: ``python bench/attacks.py [--users 1000] [--n-points 2000] [--ticks 16]
[--warmup-ticks 4]``; prints a Markdown table. Run under ``flock /tmp/mdpsim-bench.lock``.
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np

from mdpsim._core.threads import available_cores
from mdpsim.attacks import AttackSuite, Observation, Release
from mdpsim.attacks.tracking import MAX_THREADS
from mdpsim.experiments.run import simulate
from mdpsim.mechanisms import make
from mdpsim.simulation import scenario as sc
from mdpsim.simulation.world import build_world

SPECS = [
    {"name": "bayes"},
    {"name": "tracking", "label": "tracking (filter, reach)"},
    {"name": "tracking", "label": "tracking (filter, reach, 1 thread)", "threads": 1},
    {"name": "tracking", "label": "tracking (smooth, lag 3)", "method": "smooth", "lag_ticks": 3},
    {"name": "tracking", "label": "tracking (viterbi)", "method": "viterbi"},
    {"name": "tracking", "label": "tracking (learned, EM every 4)", "mobility": "learned",
     "learn_every_ticks": 4},
    {"name": "places"},
    {"name": "linkage"},
]  # fmt: skip


def _sim_tick_seconds(
    n_users: int, n_points: int, ticks: int, warmup_ticks: int
) -> dict[str, float]:
    scenario = sc.from_dict(
        {
            "scenario": {"name": "bench", "seed": 1, "ticks": ticks},
            "domain": {"n_points": n_points},
            "users": {"count": n_users},
            "strategies": {"budget": {"name": "cgp", "rho_per_km2": 1e6}},
            "mechanism": {"name": "em", "epsilon_per_km": 7.0},
            "queries": {"rho_per_km2": 20.0},
            "attacks": {"run": ["bayes"]},
            "output": {"per_user": False},
        }
    )
    _, _, timings = simulate(scenario)
    steady = timings[timings["tick"] > warmup_ticks]
    own = steady[["move_s", "report_s", "query_s"]].sum(axis=1).mean()
    return {"own": float(own), "server_attacks": float(steady["attack_s"].mean())}


def _product_seconds(tracking, repeats: int = 5) -> float:
    """Median time of the filter's prediction, the sparse product over all users."""
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        tracking._predict32 @ tracking.belief_
        times.append(time.perf_counter() - start)
    return float(np.median(times))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--users", type=int, default=1000)
    parser.add_argument("--n-points", type=int, default=2000)
    parser.add_argument("--ticks", type=int, default=16)
    parser.add_argument("--warmup-ticks", type=int, default=4)
    args = parser.parse_args()
    world = build_world(
        sc.from_dict(
            {
                "scenario": {"name": "bench", "seed": 1, "ticks": args.ticks},
                "network": {"source": "helsinki", "network_type": "walk"},
                "domain": {"n_points": args.n_points},
                "users": {"count": args.users, "n_places": 40, "dwell_ticks": [1, 5],
                          "personal_places": 4},
                "mechanism": {"name": "em", "epsilon_per_km": 7.0},
                "attacks": {"run": ["bayes"]},
            }
        )
    )  # fmt: skip
    domain, traces = world.domain, world.walks_ahead(args.ticks)
    mech = make("em", epsilon=7.0).fit(domain)
    rng = np.random.default_rng(0)
    outputs = np.stack([mech.sample_many(traces[t], rng) for t in range(args.ticks)])
    pseudonyms = np.arange(args.users)
    nnz = world.context()
    print(
        f"{args.users:,} users, |X| = |Y| = {domain.n_x:,}, {args.ticks} ticks "
        f"(the first {args.warmup_ticks} not timed), em at 7/km, "
        f"everyone reports every tick; tracking threads by default: "
        f"{min(MAX_THREADS, available_cores())}; load average {os.getloadavg()[0]:.1f}\n"
    )
    print("| attack | per tick (ms) | release (ms) | end of run (ms) | per tick incl. end (ms) |")
    print("|---|---:|---:|---:|---:|")
    per_tick_s: dict[str, float] = {}
    for spec in SPECS:
        suite = AttackSuite.from_specs([spec])
        suite.start(nnz)
        start = time.perf_counter()
        suite.release(Release(tick=1, mechanism=mech))
        release_s = time.perf_counter() - start
        ticks_s = []
        for t in range(args.ticks):
            obs = Observation(tick=t + 1, outputs=outputs[t], pseudonyms=pseudonyms)
            start = time.perf_counter()
            suite.observe(obs, traces[t])
            ticks_s.append(time.perf_counter() - start)
        start = time.perf_counter()
        suite.finish()
        end_s = time.perf_counter() - start
        per_tick = float(np.mean(ticks_s[args.warmup_ticks :]))
        label = spec.get("label", spec["name"])
        per_tick_s[label] = per_tick
        if label == "tracking (filter, reach)":
            product_s = _product_seconds(suite.attacks[label])
        print(
            f"| {label} | {per_tick * 1e3:.1f} | {release_s * 1e3:.0f} | {end_s * 1e3:.0f} "
            f"| {(per_tick + end_s / args.ticks) * 1e3:.1f} |"
        )
    sim = _sim_tick_seconds(args.users, args.n_points, args.ticks, args.warmup_ticks)
    print(
        f"\nsimulation's own tick (move + reports + queries), same users and |X|: "
        f"{sim['own'] * 1e3:.0f} ms"
    )
    print(f"the filter's prediction alone (one sparse product, 1 thread): {product_s * 1e3:.1f} ms")
    for filter_label in ("tracking (filter, reach)", "tracking (filter, reach, 1 thread)"):
        pair = per_tick_s["bayes"] + per_tick_s[filter_label]
        print(
            f"bayes + {filter_label}: {pair * 1e3:.1f} ms per tick, "
            f"{pair / sim['own']:.2f}x the simulation's tick"
        )
    print(f"load average after: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
