"""Long runs stay flat: per-tick time and memory of a run of 1,000 ticks at 1,000 users.

One PrivacyModel (Helsinki walkways, em at eps 7/km, a budget that never runs out so every user
reports every tick) with the attacks bayes, tracking (filter, reach), tracking (learned, EM every
10 ticks), tracking (smooth, lag 3), places and linkage. Per window of ticks it prints the
wall time of a tick (``model.step``; the mechanism is generated once, at tick 0) and the
process's CPU time per tick (all threads; less sensitive to other processes on a loaded
machine), each as the median of the window's ticks (a tick slowed by another process moves
the median little) and the mean, and the resident memory at the window's end. Then, from
tick 101 to the last, a Theil-Sen line through every tick's time: its change over the span
says whether the cost grows, which window-to-window noise on a shared machine hides. Targets
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
from scipy import stats

from mdpsim.simulation import scenario as sc
from mdpsim.simulation.model import PrivacyModel

ATTACKS = {
    "run": ["bayes", "tracking", "learned", "smooth", "places", "linkage"],
    "params": {
        "learned": {"attack": "tracking", "mobility": "learned", "learn_every_ticks": 10},
        "smooth": {"attack": "tracking", "method": "smooth", "lag_ticks": 3},
    },
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
            "users": {"count": args.users},
            "strategies": {"budget": {"name": "cgp", "rho_per_km2": 1e12}},
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
    print(
        "| ticks | wall per tick, median (ms) | mean (ms) | CPU per tick, median (ms) "
        "| mean (ms) | RSS at end (MB) |"
    )
    print("|---|---:|---:|---:|---:|---:|")
    wall_s, cpu_s, rows = [], [], []
    for w0 in range(0, args.ticks, args.window):
        for _ in range(min(args.window, args.ticks - w0)):
            wall, cpu = time.perf_counter(), time.process_time()
            model.step()
            wall_s.append(time.perf_counter() - wall)
            cpu_s.append(time.process_time() - cpu)
        w, c = np.array(wall_s[w0:]), np.array(cpu_s[w0:])
        rows.append((w0, float(np.median(w)), float(np.median(c)), rss_mb()))
        cells = " | ".join(
            f"{v * 1e3:.1f}" for v in (np.median(w), w.mean(), np.median(c), c.mean())
        )
        print(f"| {w0 + 1}-{model.tick} | {cells} | {rows[-1][3]:.1f} |", flush=True)
    first = next((i for i, r in enumerate(rows) if r[0] >= 100), 0)  # the window from tick 101
    baseline = rows[max(0, first - 1)][3]  # RSS when that span starts
    print(f"\nfrom tick {rows[first][0] + 1} to {args.ticks}:")
    for what, per_tick, col in (("wall", wall_s, 1), ("CPU", cpu_s, 2)):
        medians = [r[col] for r in rows[first:]]
        t0 = rows[first][0]
        slope, low, high, level = trend(np.asarray(per_tick[t0:]), t0)
        span = len(per_tick) - t0
        print(
            f"- {what} time per tick: window medians {min(medians) * 1e3:.1f}-"
            f"{max(medians) * 1e3:.1f} ms, last window / first {medians[-1] / medians[0]:.2f} "
            f"(target within 20 %); fitted line {level * 1e3:.1f} ms at tick {t0 + 1}, "
            f"{slope * span / level:+.1%} over {span} ticks "
            f"(95 %: {low * span / level:+.1%} to {high * span / level:+.1%})"
        )
    print(f"- memory growth: {rows[-1][3] - baseline:+.1f} MB (target <= 50 MB)")
    print(
        f"load average at end {os.getloadavg()[0]:.1f}; total {time.perf_counter() - start:.0f} s"
    )


def trend(per_tick_s: np.ndarray, first_tick: int) -> tuple[float, float, float, float]:
    """Theil-Sen line through the ticks' times (the median of pairwise slopes, which the
    spikes of other processes move little): slope (s per tick), its 95 % interval, and the
    line's value at the first tick (s)."""
    ticks = np.arange(first_tick, first_tick + len(per_tick_s), dtype=float)
    slope, intercept, low, high = stats.theilslopes(per_tick_s, ticks)
    return float(slope), float(low), float(high), float(intercept + slope * first_tick)


if __name__ == "__main__":
    main()
