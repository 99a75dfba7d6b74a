"""Benchmark the optimal user strategy LP (``mdpsim.mechanisms.lp.stackelberg``) on Helsinki.

Usage: ``python bench/stackelberg.py [--sizes 100 200 300] [--mdp-sizes 60 100]
[--qualities 0.361 0.602 0.903] [--eps 4] [--seed 11] [--cap 600]``.

One HiGHS thread. Domains: ``Domain.from_network(helsinki walk, n_points=N, seed)``, X = Y,
both metrics road km. Each (N, Q) solve runs in a forked child with a wall-clock cap of
``--cap`` seconds; the first N that passes it ends its section. Prints one Markdown table:
N, eps (``—``: no mDP constraint), Q (km), seconds of the raw LP solve
(``solve_stackelberg`` / ``solve_stackelberg_mdp``, no repair), solves, adversary rows and mDP
rows in the final model (of ``N K`` and ``2 P K``), outputs with mass, and the optimum.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import time

from mdpsim.geo.domain import Domain
from mdpsim.geo.network import load_network
from mdpsim.mechanisms.lp.highs import HighsOptions
from mdpsim.mechanisms.lp.stackelberg import solve_stackelberg, solve_stackelberg_mdp


def _solve(n: int, seed: int, q: float, eps: float | None, out) -> None:
    graph = load_network("helsinki", network_type="walk")
    domain = Domain.from_network(graph, n_points=n, seed=seed)
    options = HighsOptions(threads=1)
    start = time.perf_counter()
    if eps is None:
        Z, sol = solve_stackelberg(domain.prior, domain.dist_xy, domain.dist_xx, q, options=options)
        full = 0
    else:
        pairs = domain.constraint_pairs
        Z, sol = solve_stackelberg_mdp(
            domain.prior,
            domain.dist_xy,
            domain.dist_xx,
            q,
            pairs=pairs,
            pair_dist_km=domain.dist_xx[pairs[:, 0], pairs[:, 1]],
            epsilon=eps,
            options=options,
        )
        full = 2 * len(pairs) * n
    out.put(
        (
            time.perf_counter() - start,
            sol.rounds,
            sol.adversary_rows,
            sol.mdp_rows,
            full,
            int((Z.sum(axis=0) > 1e-9).sum()),
            sol.adversary_error_km,
        )
    )


def run_one(n: int, seed: int, q: float, eps: float | None, cap: float):
    """``(seconds, rounds, adversary rows, mdp rows, full mdp rows, used outputs, optimum)``,
    or ``None`` if the child passed the cap."""
    ctx = mp.get_context("fork")
    out = ctx.Queue()
    child = ctx.Process(target=_solve, args=(n, seed, q, eps, out))
    child.start()
    child.join(cap)
    if child.is_alive():
        child.kill()
        child.join()
        return None
    return out.get() if child.exitcode == 0 else None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sizes", type=int, nargs="+", default=[100, 200, 300])
    parser.add_argument("--mdp-sizes", type=int, nargs="+", default=[60, 100])
    parser.add_argument("--qualities", type=float, nargs="+", default=[0.361, 0.602, 0.903])
    parser.add_argument("--eps", type=float, default=4.0)
    parser.add_argument("--seed", type=int, default=11)
    parser.add_argument("--cap", type=float, default=600.0)
    args = parser.parse_args()
    print(f"load {os.getloadavg()[0]:.2f} (1 min) at start")
    print("| N | eps (1/km) | Q (km) | seconds | solves | adversary rows | mDP rows | "
          "outputs used | adversary error (km) |")  # fmt: skip
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for eps, sizes in ((None, args.sizes), (args.eps, args.mdp_sizes)):
        for n in sizes:
            passed = False
            for q in args.qualities:
                r = run_one(n, args.seed, q, eps, args.cap)
                label = "—" if eps is None else f"{eps:g}"
                if r is None:
                    print(f"| {n} | {label} | {q:g} | > {args.cap:g} (cap) | | | | | |", flush=True)
                    passed = True
                    continue
                sec, rounds, adv, mdp, full, used, opt = r
                mdp_text = "—" if eps is None else f"{mdp:,} of {full:,}"
                print(
                    f"| {n} | {label} | {q:g} | {sec:.2f} | {rounds} | {adv:,} of {n * n:,} | "
                    f"{mdp_text} | {used} | {opt:.4f} |",
                    flush=True,
                )
            if passed:
                break
    print(f"load {os.getloadavg()[0]:.2f} (1 min) at end")


if __name__ == "__main__":
    main()
