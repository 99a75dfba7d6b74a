"""The auditor's power against planted bugs and its false-alarm rate on correct mechanisms.

Each row audits one sampler ``--runs`` times with independent seeds, 10^5 samples per side and
stage, overall false-alarm rate 1e-6, and counts how often it reported a violation.
Usage: ``python bench/audit_power.py [--runs 10]``; prints a Markdown table.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from sim import planted
from sim.audit import audit, mechanism_sampler
from sim.domain import Domain
from sim.mechanisms import available, make
from sim.network import load_network

EPS = 2.0
LINE_STEP_KM = 0.1
LINE_KM = np.arange(40) * LINE_STEP_KM
LINE_DIST = np.abs(LINE_KM[:, None] - LINE_KM[None, :])
GRID_KM = np.stack(np.meshgrid(np.arange(9.0), np.arange(9.0)), axis=-1).reshape(-1, 2)
GRID_DIST = np.linalg.norm(GRID_KM[:, None] - GRID_KM[None, :], axis=2)


def _cases():
    geometric = planted.clamped_geometric(LINE_KM, LINE_STEP_KM, EPS)
    yield (
        "bug: geometric using 1.2 eps",
        True,
        (planted.clamped_geometric(LINE_KM, LINE_STEP_KM, 1.2 * EPS), LINE_DIST, EPS),
    )
    yield (
        "bug: planar Laplace with scale eps (eps = 0.5/km)",
        True,
        (planted.planar_laplace(GRID_KM, 0.5, scale_km=0.5), GRID_DIST, 0.5),
    )
    yield "bug: identity", True, (planted.identity, LINE_DIST, EPS)
    yield "bug: raises on odd inputs", True, (planted.raising_on_odd(geometric), LINE_DIST, EPS)
    yield "correct: clamped geometric (tight)", False, (geometric, LINE_DIST, EPS)
    yield (
        "correct: planar Laplace (eps = 0.5/km)",
        False,
        (planted.planar_laplace(GRID_KM, 0.5), GRID_DIST, 0.5),
    )
    domain = Domain.from_network(load_network("helsinki"), n_points=40, seed=1, metric="l2")
    for name in available():
        params = getattr(type(make(name, epsilon=1.0)), "conformance_params", {})
        mech = make(name, epsilon=EPS, **params).fit(domain)
        yield f"correct: registered `{name}` (Helsinki, 40 points, l2)", False, (
            mechanism_sampler(mech), mech.domain_.dist_xx, EPS)  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10)
    args = parser.parse_args()
    print(f"{args.runs} audits per row, 10^5 samples per side and stage, alpha = 1e-6\n")
    print("| sampler | violations reported | median eps lower bound (claimed) | s / audit |")
    print("|---|---:|---:|---:|")
    for label, _is_bug, (sample, dist, eps) in _cases():
        found, bounds, start = 0, [], time.perf_counter()
        for run in range(args.runs):
            result = audit(sample, dist, eps, rng=np.random.default_rng(1000 + run))
            found += not result.passed
            bounds.append(result.epsilon_lower_bound)
        secs = (time.perf_counter() - start) / args.runs
        med = float(np.median(bounds))
        print(f"| {label} | {found}/{args.runs} | {med:.3g} ({eps:g}) | {secs:.1f} |")


if __name__ == "__main__":
    main()
