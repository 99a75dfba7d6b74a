"""The auditor's power against planted leaks on road domains of 50-2,000 points, and its false
alarms on correct mechanisms, by domain size and sample budget.

Domains: the test extract's walk network (``helsinki-test``), road metric, seed 0, Y = X.
Claimed eps 4/km. Planted leaks (each claims eps but truly satisfies more, by the exact
verifier): EM tuned to a true 1.2 and 1.5 eps (the whole matrix), and tight EM with one output
raised to a 1.5x ratio at the closest pair and at the chaining pair whose eps d is nearest 1.
Correct: EM tuned to a true eps exactly. Samplers give counts of n draws per call (a
multinomial over the row, the exact distribution of n draws), so 3e8 draws cost milliseconds;
the auditor is told the chaining pairs and the outputs' distances (both public).
Usage: ``python bench/audit_power.py [--sizes 50,100,200,500,2000] [--budgets 3e7,3e8]
[--runs 10] [--false-alarm-runs 100] [--only TEXT]``; prints a Markdown table.
"""

from __future__ import annotations

import argparse
import functools
import os
import time
from collections.abc import Iterator

import numpy as np
from scipy.optimize import brentq

from mdpsim.geo.domain import Domain
from mdpsim.geo.network import load_network
from mdpsim.mechanisms.em import exponential_matrix
from mdpsim.privacy.audit import audit, matrix_sampler
from mdpsim.privacy.verifier import verify

EPS = 4.0  # claimed, per km
NETWORK = "helsinki-test"


@functools.cache
def road_domain(n_points: int) -> Domain:
    """The audited road domain (test extract, walk, seed 0)."""
    return Domain.from_network(load_network(NETWORK), n_points=n_points, seed=0)


def smallest_epsilon(matrix: np.ndarray, dist_km: np.ndarray) -> float:
    """The exact verifier's smallest epsilon (the mechanism's true mDP level, per km)."""
    return verify(matrix, dist_km, 1e9).smallest_epsilon


def em_with_true_epsilon(dist_km: np.ndarray, true_epsilon: float) -> np.ndarray:
    """EM whose smallest epsilon is exactly ``true_epsilon`` (its parameter by root finding;
    EM's own bound is loose by the normaliser)."""

    def gap(e: float) -> float:
        return smallest_epsilon(exponential_matrix(dist_km, e), dist_km) - true_epsilon

    e = brentq(gap, true_epsilon, 2.5 * true_epsilon, xtol=1e-9 * true_epsilon)
    return exponential_matrix(dist_km, e)


def one_output_leak(matrix: np.ndarray, dist_km: np.ndarray, i: int, j: int, factor: float):
    """``matrix`` with x = ``i``'s most likely output raised until its ratio to x' = ``j`` is
    ``exp(factor eps d)`` (row ``i`` renormalised)."""
    k = int(np.argmax(matrix[i]))
    z = matrix.copy()
    target = np.exp(factor * EPS * dist_km[i, j]) * z[j, k]  # wanted z[i, k] after renormalising
    if not target < 1:
        raise ValueError(f"pair ({i}, {j}) cannot carry a {factor}x leak on one output")
    rest = z[i].sum() - z[i, k]
    z[i, k] = target * rest / (1.0 - target)  # z[i,k] / (rest + z[i,k]) = target
    z[i] /= z[i].sum()
    return z


def leak_pairs(domain: Domain) -> dict[str, tuple[int, int]]:
    """The closest pair, and the chaining pair whose eps d is nearest 1 (within 0.25), else
    the pair of any kind (at 2,000 points no chaining pair is that far apart: the leak then
    shows, larger, on the chaining pairs of its path)."""
    pairs, d = domain.constraint_pairs, domain.dist_xx
    dp = d[pairs[:, 0], pairs[:, 1]]
    closest = pairs[np.argmin(np.where(dp > 0, dp, np.inf))]
    unit = pairs[np.argmin(np.abs(EPS * dp - 1.0))]
    if abs(EPS * d[unit[0], unit[1]] - 1.0) > 0.25:
        ii, jj = np.triu_indices(len(d), k=1)
        k = np.argmin(np.abs(EPS * d[ii, jj] - 1.0))
        unit = np.array([ii[k], jj[k]])
    return {"closest pair": (int(closest[0]), int(closest[1])), "eps d ~ 1": (int(unit[0]),
            int(unit[1]))}  # fmt: skip


def cases(n_points: int) -> Iterator[tuple[str, bool, np.ndarray]]:
    """``(label, is_bug, matrix)`` for one domain size."""
    dom = road_domain(n_points)
    d = dom.dist_xx
    tight = em_with_true_epsilon(d, EPS)
    for factor in (1.2, 1.5):
        yield f"EM at {factor} eps", True, em_with_true_epsilon(d, factor * EPS)
    for where, (i, j) in leak_pairs(dom).items():
        m = f"{d[i, j] * 1000:.0f} m"
        yield f"one output 1.5x, {where} ({m})", True, one_output_leak(tight, d, i, j, 1.5)
    yield "correct: tight EM", False, tight


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="50,100,200,500,2000")
    parser.add_argument("--budgets", default="3e7,3e8", help="draws per audit")
    parser.add_argument("--runs", type=int, default=10, help="audits per leak row and budget")
    parser.add_argument("--false-alarm-runs", type=int, default=100, help="audits per correct row")
    parser.add_argument("--only", default="", help="rows whose label contains this text")
    args = parser.parse_args()
    budgets = [int(float(b)) for b in args.budgets.split(",")]
    print(f"load: {os.getloadavg()[0]:.2f} (1-min average) on {os.cpu_count()} cores\n")
    head = " | ".join(f"flagged at {b:.0e} | median bound" for b in budgets)
    print(f"| points | sampler | true eps (claimed 4) | {head} | s / audit |")
    print("|---:|---|---:|" + "---:|---:|" * len(budgets) + "---:|")
    for n_points in (int(s) for s in args.sizes.split(",")):
        dom = road_domain(n_points)
        for label, is_bug, matrix in cases(n_points):
            if args.only not in label:
                continue
            runs = args.runs if is_bug else args.false_alarm_runs
            cells, start = [], time.perf_counter()
            for budget in budgets:
                found, bounds = 0, []
                for run in range(runs):
                    result = audit(
                        matrix_sampler(matrix), dom.dist_xx, EPS, total_samples=budget,
                        pairs=dom.constraint_pairs, output_dist_km=dom.dist_xy,
                        rng=np.random.default_rng(1000 + run),
                    )  # fmt: skip
                    found += not result.passed
                    bounds.append(result.epsilon_lower_bound)
                cells.append(f"{found}/{runs} | {float(np.median(bounds)):.3g}")
            secs = (time.perf_counter() - start) / (runs * len(budgets))
            true_eps = smallest_epsilon(matrix, dom.dist_xx)
            print(f"| {n_points:,} | {label} | {true_eps:.3f} | {' | '.join(cells)} | "
                  f"{secs:.1f} |", flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
