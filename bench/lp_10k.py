"""``lp_medoids`` at |X| = 10,000 and a 20-tick, 1,000-user run on it (issue 28 section 4).

Usage: ``python bench/lp_10k.py [--scenario scenarios/lp_10k.toml] [--n-points N]
[--ticks T] [--users U]``. Builds the scenario's domain, runs the model through
:func:`mdpsim.experiments.run.run_model` (its tick-0 generation is the fit: ``make("lp_medoids",
epsilon=7, n_outputs=20, bound=None)``, the scenario's ``[mechanism]``), then checks
the released matrix exactly over X and prints one Markdown row for the fit and one for the
run. Peak RSS is this process's (``ru_maxrss``: interpreter, network, domain, fit, run).
"""

from __future__ import annotations

import argparse
import os
import resource
import time

from mdpsim.experiments.run import run_model
from mdpsim.geo.network import load_network
from mdpsim.privacy.verifier import verify
from mdpsim.simulation import scenario as scenarios
from mdpsim.simulation.world import build_domain


def _peak_gb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20


class _Ticks:
    """A recorder (``run_model(recorder=...)``) that prints wall time and peak RSS per tick."""

    def __init__(self) -> None:
        self.start_s = time.perf_counter()

    def start(self, model) -> None:
        items = model.server.mechanism.info_.items()
        info = {k: v for k, v in items if isinstance(v, (int, float))}
        print(f"fit done: {model.server.generation_seconds:.1f} s, peak {_peak_gb():.2f} GB, "
              f"load {os.getloadavg()[0]:.1f}, info {info}", flush=True)  # fmt: skip
        self.start_s = time.perf_counter()

    def after_tick(self, model) -> None:
        print(f"tick {model.tick}: {time.perf_counter() - self.start_s:.1f} s, "
              f"peak {_peak_gb():.2f} GB", flush=True)  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scenario", default="scenarios/lp_10k.toml")
    parser.add_argument("--n-points", type=int, default=None)
    parser.add_argument("--ticks", type=int, default=None)
    parser.add_argument("--users", type=int, default=None)
    args = parser.parse_args()
    raw = scenarios.load(args.scenario).model_dump()
    if args.n_points is not None:
        raw["domain"]["n_points"] = args.n_points
    if args.users is not None:
        raw["users"]["count"] = args.users
    scenario = scenarios.from_dict(raw)
    print(f"load at start: {os.getloadavg()[0]:.2f}", flush=True)
    t0 = time.perf_counter()
    graph = load_network(scenario.network.source, network_type=scenario.network.network_type)
    domain = build_domain(scenario, graph, seed=scenario.scenario.seed)
    domain_s = time.perf_counter() - t0
    n_x, n_pairs = len(domain.x_xy), len(domain.constraint_pairs)
    print(f"domain: N = {n_x}, {n_pairs:,} pairs, {domain_s:.1f} s, peak {_peak_gb():.2f} GB",
          flush=True)  # fmt: skip
    t1 = time.perf_counter()
    ticks = _Ticks()
    model = run_model(scenario, ticks=args.ticks, graph=graph, domain=domain, recorder=ticks)
    run_s = time.perf_counter() - t1
    server, eps = model.server, scenario.mechanism.epsilon_per_km
    mech, info = server.mechanism, server.mechanism.info_
    check = verify(mech.matrix_, domain.dist_xx, eps, pairs=domain.constraint_pairs)
    loss, em = server.expected_loss_km, server.em_expected_loss_km
    print("\n| N | eps /km | loss (km) | EM (km) | loss / EM | bound (km) | gap | fit (s) "
          "| peak GB | load | smallest eps /km |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    print(f"| {n_x} | {eps:g} | {loss:.4f} | {em:.4f} | {loss / em:.3f} "
          f"| {info.get('lower_bound_km', float('nan')):.4f} | {info.get('gap', float('nan')):.2f} "
          f"| {server.generation_seconds:.1f} | {_peak_gb():.2f} | {os.getloadavg()[0]:.1f} "
          f"| {check.smallest_epsilon:.4f} |")  # fmt: skip
    print(f"\nrun: {model.tick} ticks, {model.population.n_users} users, domain {domain_s:.1f} s, "
          f"model (fit + EM + ticks) {run_s:.1f} s, ticks {time.perf_counter() - ticks.start_s:.1f}"
          f" s, peak {_peak_gb():.2f} GB, load {os.getloadavg()[0]:.1f}")  # fmt: skip


if __name__ == "__main__":
    main()
