"""Long runs stay flat: per-tick time and memory of a run of 1,000 ticks at 1,000 users.

One PrivacyModel (Helsinki walkways, em at eps 7/km, a budget that never runs out so every user
reports every tick) with the attacks bayes, tracking (filter, reach), tracking (learned, EM every
10 ticks), tracking (smooth, lag 3), places and linkage. Per window of ticks it prints the mean
wall time of a tick (all phases but the mechanism's generation, which happens once, at tick 0)
and of the attacks alone, the process's CPU time per tick (all threads; less sensitive to
other processes on a loaded machine) and its resident memory at the window's end. Targets
(issue 29): from tick 100 to the last, the per-tick time within 20 % and the memory growth at
most 50 MB.
Usage: ``nice -n 10 python bench/long_run.py [--users 1000] [--ticks 1000] [--n-points 200]
[--window 100]``; prints a Markdown table and the two verdicts.
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np

from mdpsim import scenario as sc
from mdpsim.model import PrivacyModel

ATTACKS = {
    "run": ["bayes", "tracking", "learned", "smooth", "places", "linkage"],
    "params": {
        "learned": {"attack": "tracking", "mobility": "learned", "learn_every_ticks": 10},
        "smooth": {"attack": "tracking", "method": "smooth", "lag_ticks": 3},
    },
    "upload": False,
}


def rss_mb() -> float:
    """Resident memory of this process (MB), from /proc."""
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS in /proc/self/status")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--users", type=int, default=1000)
    ap.add_argument("--ticks", type=int, default=1000)
    ap.add_argument("--n-points", type=int, default=200)
    ap.add_argument("--window", type=int, default=100)
    args = ap.parse_args()
    scenario = sc.from_dict(
        {
            "scenario": {"name": "long_run", "seed": 3, "ticks": args.ticks},
            "domain": {"n_points": args.n_points},
            "users": {"count": args.users, "budget_rho_per_km2": 1e12},
            "mechanism": {"name": "em", "epsilon_per_km": 7.0},
            "queries": {"every_ticks": 0},
            "attacks": ATTACKS,
            "output": {"per_user": False},
        }
    )
    start = time.perf_counter()
    model = PrivacyModel(scenario)
    print(f"# long run: {args.users:,} users, {args.n_points} points, {args.ticks:,} ticks")
    build_s = time.perf_counter() - start
    print(f"load average at start {os.getloadavg()[0]:.1f}; build {build_s:.1f} s\n")
    print("| ticks | tick (ms) | attacks (ms) | CPU per tick (ms) | RSS at end (MB) |")
    print("|---|---:|---:|---:|---:|")
    rows = []
    for w0 in range(0, args.ticks, args.window):
        cpu = time.process_time()
        for _ in range(min(args.window, args.ticks - w0)):
            model.step()
        cpu = (time.process_time() - cpu) / min(args.window, args.ticks - w0)
        timings = model.log.timings[-min(args.window, args.ticks - w0) :]
        tick = np.mean([sum(v for k, v in t.items() if k.endswith("_s") and k != "mechanism_s")
                        for t in timings])  # fmt: skip
        attack = np.mean([t["attack_s"] for t in timings])
        rows.append((w0, tick, attack, rss_mb(), cpu))
        cells = f"{tick * 1e3:.1f} | {attack * 1e3:.1f} | {cpu * 1e3:.1f} | {rows[-1][3]:.1f}"
        print(f"| {w0 + 1}-{model.tick} | {cells} |", flush=True)
    steady = [r for r in rows if r[0] >= min(100, rows[-1][0])]
    times = [r[1] for r in steady]
    spread = (max(times) - min(times)) / min(times)
    cpus = [r[4] for r in steady]
    cpu_spread = (max(cpus) - min(cpus)) / min(cpus)
    baseline = rows[max(0, rows.index(steady[0]) - 1)][3]  # RSS when the steady span starts
    growth = rows[-1][3] - baseline
    ratio = times[-1] / times[0]
    print(f"\nper-tick time from tick {steady[0][0] + 1}: min {min(times) * 1e3:.1f} ms, "
          f"max {max(times) * 1e3:.1f} ms, spread {spread:.0%} (target <= 20 %); CPU time "
          f"per tick spread {cpu_spread:.0%}; last window / first {ratio:.2f}")  # fmt: skip
    print(f"memory growth over the same span: {growth:+.1f} MB (target <= 50 MB)")
    print(
        f"load average at end {os.getloadavg()[0]:.1f}; total {time.perf_counter() - start:.0f} s"
    )


if __name__ == "__main__":
    main()
