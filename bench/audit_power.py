"""The auditor's power against leaks of 1.2x eps on road domains, and its false alarms.

Each row audits one sampler ``--runs`` times with independent seeds at the auditor's defaults
(3e7 samples per audit, family-wise false-alarm rate 1e-6) and counts the violations reported.
The domains are road-metric domains of both bundled networks. A "1.2x" mechanism truly
satisfies ``1.2 eps`` (its smallest epsilon under the exact verifier) and claims ``eps``; a
"tight" one satisfies exactly ``eps``. Usage: ``python bench/audit_power.py [--runs 10]
[--false-alarm-runs 100] [--registered-runs 10] [--only TEXT]``; prints a Markdown table.
"""

from __future__ import annotations

import argparse
import functools
import os
import time
from collections.abc import Iterator

import numpy as np
from scipy.optimize import brentq

from mdpsim.audit import audit, mechanism_sampler
from mdpsim.domain import Domain
from mdpsim.mechanisms import available, make
from mdpsim.network import load_network
from mdpsim.privacy.verifier import verify
from mdpsim.sampling import sample_rows

EPS = 4.0  # claimed, per km
LEAK = 1.2
DOMAINS = {"helsinki-test": 50, "helsinki": 70}  # network: road-domain secrets


# Where each mechanism's own epsilon lies, relative to its smallest epsilon
_BRACKETS = {"em": (0.9, 2.5), "laplace": (1.0, 1.05), "lp": (1.0, 1.05)}


@functools.cache
def road_domain(network: str) -> Domain:
    """The audited road domain of one bundled network (walk, seed 0)."""
    return Domain.from_network(load_network(network), n_points=DOMAINS[network], seed=0)


def smallest_epsilon(matrix: np.ndarray, dist_km: np.ndarray) -> float:
    """The exact verifier's smallest epsilon (the mechanism's true mDP level, per km)."""
    return verify(matrix, dist_km, 1e9).smallest_epsilon


def tuned(name: str, domain: Domain, true_epsilon: float) -> np.ndarray:
    """The matrix of registered ``name`` whose smallest epsilon is exactly ``true_epsilon``
    (its own parameter found by root finding; EM's bound is loose by the normaliser)."""

    def gap(e: float) -> float:
        return smallest_epsilon(make(name, epsilon=e).fit(domain).matrix_, domain.dist_xx) - (
            true_epsilon
        )

    low, high = _BRACKETS[name]
    e = brentq(gap, low * true_epsilon, high * true_epsilon, xtol=1e-9 * true_epsilon)
    return make(name, epsilon=e).fit(domain).matrix_


def single_output_leak(
    matrix: np.ndarray, dist_km: np.ndarray, eps: float, rank: int = 0
) -> np.ndarray:
    """``matrix`` with one leaking entry: for the ``rank``-th closest pair (x, x'; 0 = the
    closest), x's most likely output is raised until its ratio to x' is ``exp(1.2 eps d)``
    (row renormalised)."""
    ii, jj = np.triu_indices(len(dist_km), k=1)
    pick = np.argsort(dist_km[ii, jj], kind="stable")[rank]
    i, j = ii[pick], jj[pick]
    k = int(np.argmax(matrix[i]))
    z = matrix.copy()
    target = np.exp(LEAK * eps * dist_km[i, j]) * z[j, k]  # wanted z[i, k] after renormalising
    rest = z[i].sum() - z[i, k]
    z[i, k] = target * rest / (1.0 - target)  # z[i,k] / (rest + z[i,k]) = target
    z[i] /= z[i].sum()
    return z


def matrix_sampler(matrix: np.ndarray):
    """The exact sampler of a row-stochastic matrix, as a black box."""

    def sample(i: int, n: int, rng: np.random.Generator) -> np.ndarray:
        return sample_rows(matrix, np.full(n, i), rng)

    return sample


def raising_on_odd(inner):
    """A correct sampler that raises for odd inputs: the refusal itself leaks."""

    def sample(i: int, n: int, rng: np.random.Generator) -> np.ndarray:
        if i % 2 == 1:
            raise ValueError("input not supported")
        return inner(i, n, rng)

    return sample


def cases() -> Iterator[tuple[str, bool, np.ndarray | None, object, np.ndarray]]:
    """``(label, is_bug, matrix or None, sampler, dist_km)`` for every row of the table."""
    for network, n in DOMAINS.items():
        dom = road_domain(network)
        d = dom.dist_xx
        where = f"{network}, {n} pts"
        for name, label in (("em", "EM"), ("laplace", "planar Laplace"), ("lp", "optimal LP")):
            bug = tuned(name, dom, LEAK * EPS)
            yield f"bug: {label} at 1.2 eps ({where})", True, bug, matrix_sampler(bug), d
        em = tuned("em", dom, EPS)
        leak = single_output_leak(em, d, EPS)
        yield f"bug: one output, closest pair, 1.2 eps ({where})", True, leak, matrix_sampler(
            leak), d  # fmt: skip
        leak = single_output_leak(em, d, EPS, rank=4)
        yield f"bug: one output, 5th-closest pair, 1.2 eps ({where})", True, leak, (
            matrix_sampler(leak)), d  # fmt: skip
        yield f"bug: tight EM raising on odd inputs ({where})", True, None, raising_on_odd(
            matrix_sampler(em)), d  # fmt: skip
        for name, label in (("em", "EM"), ("laplace", "planar Laplace"), ("lp", "optimal LP")):
            z = em if name == "em" else tuned(name, dom, EPS)
            yield f"correct: tight {label} ({where})", False, z, matrix_sampler(z), d
    dom = road_domain("helsinki-test")
    for name in available():
        params = getattr(type(make(name, epsilon=1.0)), "conformance_params", {})
        mech = make(name, epsilon=EPS, **params).fit(dom)
        yield f"correct: registered `{name}` (helsinki-test, 50 pts)", False, mech.matrix_, (
            mechanism_sampler(mech)), mech.domain_.dist_xx  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10, help="audits per bug row")
    parser.add_argument(
        "--false-alarm-runs", type=int, default=100, help="audits per tight correct row"
    )
    parser.add_argument(
        "--registered-runs", type=int, default=10, help="audits per registered mechanism row"
    )
    parser.add_argument("--only", default="", help="rows whose label contains this text")
    args = parser.parse_args()
    print(f"load: {os.getloadavg()[0]:.2f} (1-min average) on {os.cpu_count()} cores\n")
    print("| sampler | true eps (claimed 4) | violations reported | median eps lower bound | "
          "samples / audit | s / audit |")  # fmt: skip
    print("|---|---:|---:|---:|---:|---:|")
    for label, is_bug, matrix, sample, dist in cases():
        if args.only not in label:
            continue
        runs = args.runs if is_bug else args.false_alarm_runs
        runs = args.registered_runs if "registered" in label else runs
        true_eps = "-" if matrix is None else f"{smallest_epsilon(matrix, dist):.3f}"
        found, bounds, samples, start = 0, [], 0, time.perf_counter()
        for run in range(runs):
            result = audit(sample, dist, EPS, rng=np.random.default_rng(1000 + run))
            found += not result.passed
            bounds.append(result.epsilon_lower_bound)
            samples = max(samples, result.total_samples)
        secs = (time.perf_counter() - start) / runs
        med = float(np.median(bounds))
        print(f"| {label} | {true_eps} | {found}/{runs} | {med:.3g} | {samples:.2g} | "
              f"{secs:.1f} |", flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
