"""Benchmark every registered mechanism on Helsinki: loss, exact smallest eps, time, memory.

Usage: ``python bench/mechanisms.py [--sections reference search table] [--sizes 100 500 2000]
[--eps 4 7 10] [--cap 120] [--reference-sizes 50 100] [--reference-eps 4]
[--reference-cap 2400] [--search 50 75 100 150 200 300 400] [--search-cap 60]``.
Prints Markdown tables:

* ``reference``: the optimal LP against the naive all-pairs LP a user would write
  (``scipy.optimize.linprog``, method "highs"; dense matrices where they fit in memory,
  N <= 30, sparse above) on the SAME LP at the same eps: wall and CPU time of each, the speed
  ratio and the relative difference of the optima (must be <= 1e-6). Ours is
  ``mdpsim.mechanisms.lp.solver.solve_optimal`` (the raw LP; the released mechanism adds the margin,
  repair and exact check, timed in the main table).
* ``search``: the largest N the optimal LP mechanism (``make("lp")``, eps = 4/km, fit incl.
  repair and check) fits within ``--search-cap`` seconds; stops at the first N that does not.
* ``table``: every mechanism at each size and eps. Each fit runs in a forked child with a
  wall-clock cap; a mechanism that hits the cap (or raises) at some N is skipped at every
  larger N, with a row that says why. Peak memory is the child's peak RSS (includes the
  ~0.3 GB interpreter + network baseline). The smallest eps and violation ratio come from
  ``mdpsim.privacy.verifier`` with the domain's chaining pairs (exact, docs/design.md §1).
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import resource
import time

import numpy as np
from scipy import sparse
from scipy.optimize import linprog

from mdpsim.geo.domain import Domain
from mdpsim.geo.network import load_network
from mdpsim.mechanisms import available, make
from mdpsim.mechanisms.lp.solver import solve_optimal
from mdpsim.privacy.verifier import verify

DENSE_NAIVE_MAX_N = 30


def naive_linprog(domain: Domain, eps: float) -> float:
    """The all-pairs LP (N (N-1) K mDP rows) through scipy.optimize.linprog(method='highs')."""
    n, k = domain.n_x, domain.n_y
    i, j = np.nonzero(~np.eye(n, dtype=bool))
    gain = np.exp(eps * domain.dist_xx[i, j])
    m = len(i) * k
    r = np.arange(m)
    out = np.tile(np.arange(k), len(i))
    cols = np.concatenate([np.repeat(i, k) * k + out, np.repeat(j, k) * k + out])
    vals = np.concatenate([np.ones(m), -np.repeat(gain, k)])
    A = sparse.csr_array((vals, (np.concatenate([r, r]), cols)), shape=(m, n * k))
    if n <= DENSE_NAIVE_MAX_N:
        A = A.toarray()
    A_eq = sparse.kron(sparse.eye(n), np.ones((1, k))).tocsr()
    c = (domain.prior[:, None] * domain.dist_xy).ravel()
    res = linprog(c, A_ub=A, b_ub=np.zeros(m), A_eq=A_eq, b_eq=np.ones(n), method="highs")
    if res.status != 0:
        raise RuntimeError(f"linprog status {res.status}: {res.message}")
    return float(res.fun)


def ours_lp(domain: Domain, eps: float) -> float:
    """The same LP through ``solve_optimal`` (chaining pairs, constraint generation)."""
    pairs = domain.constraint_pairs
    weighted = domain.prior[:, None] * domain.dist_xy
    _, sol = solve_optimal(weighted, pairs, domain.dist_xx[pairs[:, 0], pairs[:, 1]], eps)
    return sol.objective


def _cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _child(task: str, name: str, eps: float, domain: Domain, queue) -> None:
    start, cpu = time.perf_counter(), _cpu_seconds()
    try:
        if task == "lp-objective":
            objective = {"naive": naive_linprog, "ours": ours_lp}[name](domain, eps)
            row = {"objective": objective}
        else:
            mech = make(name, epsilon=eps).fit(domain)
            row = {"loss": mech.expected_loss()}
        row["seconds"] = time.perf_counter() - start
        row["cpu"] = _cpu_seconds() - cpu
        if task == "fit":
            fitted = mech.domain_  # the users' union U for dista_lp, else ``domain``
            check = verify(mech.matrix_, fitted.dist_xx, eps, pairs=fitted.constraint_pairs)
            row["smallest_eps"] = check.smallest_epsilon
            row["violation_ratio"] = check.violation_ratio
    except Exception as err:  # reported in the table, never hidden
        row = {"error": f"{type(err).__name__}: {str(err)[:70]}"}
    row["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    queue.put(row)


def run_capped(task: str, name: str, eps: float, domain: Domain, cap: float) -> dict:
    """Run ``task`` in a forked child; ``{"error": ...}`` if it raises or passes ``cap`` s."""
    ctx = mp.get_context("fork")
    queue = ctx.Queue()
    proc = ctx.Process(target=_child, args=(task, name, eps, domain, queue))
    proc.start()
    proc.join(cap)
    if proc.is_alive():
        proc.kill()
        proc.join()
        return {"error": f"> {cap:g} s cap"}
    return queue.get() if not queue.empty() else {"error": f"exit code {proc.exitcode}"}


def reference(G, sizes, epsilons, cap: float) -> None:
    print(
        "| N = K | eps /km | pairs kept / all | ours (s wall / CPU) | naive linprog (s wall / CPU) "
        "| speed ratio wall (CPU) | optimum ours (km) | optimum naive (km) | rel. diff |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for n in sizes:
        domain = Domain.from_network(G, n_points=n)
        kept = f"{len(domain.constraint_pairs):,} / {n * (n - 1) // 2:,}"
        for eps in epsilons:
            ours = run_capped("lp-objective", "ours", eps, domain, cap)
            naive = run_capped("lp-objective", "naive", eps, domain, cap)
            cells = [f"{n}", f"{eps:g}", kept]
            for row in (ours, naive):
                cells.append(row["error"] if "error" in row else _secs(row))
            if "error" in ours or "error" in naive:
                cells += ["", "", "", ""]
            else:
                ratio = naive["seconds"] / ours["seconds"]
                cpu_ratio = naive["cpu"] / ours["cpu"]
                diff = abs(ours["objective"] - naive["objective"]) / abs(naive["objective"])
                cells += [
                    f"{ratio:.0f}x ({cpu_ratio:.0f}x)",
                    f"{ours['objective']:.10f}",
                    f"{naive['objective']:.10f}",
                    f"{diff:.1e}",
                ]
            print("| " + " | ".join(cells) + " |", flush=True)


def search(G, sizes, eps: float, cap: float) -> None:
    print(f"| N = K | optimal LP mechanism at eps = {eps:g}/km (s wall / CPU) |")
    print("|---|---|")
    for n in sizes:
        row = run_capped("fit", "lp", eps, Domain.from_network(G, n_points=n), cap)
        print(f"| {n} | {row['error'] if 'error' in row else _secs(row)} |", flush=True)
        if "error" in row:
            break


def table(G, sizes, epsilons, names, cap: float) -> None:
    print(
        "| N | mechanism | eps /km | loss (km) | smallest eps /km | violation ratio "
        "| time (s) | CPU (s) | peak RSS (MB) | note |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    skipped: dict[str, str] = {}
    for n in sizes:
        domain = Domain.from_network(G, n_points=n)
        for name in names:
            if name in skipped:
                print(f"| {n} | {name} | | | | | | | | not run: {skipped[name]} |", flush=True)
                continue
            for eps in epsilons:
                row = run_capped("fit", name, eps, domain, cap)
                if "error" in row:
                    skipped[name] = f"{row['error']} at N = {n}"
                    print(f"| {n} | {name} | {eps:g} | | | | | | | {row['error']} |", flush=True)
                    break
                print(
                    f"| {n} | {name} | {eps:g} | {row['loss']:.4f} | "
                    f"{row['smallest_eps']:.4f} | {row['violation_ratio']:.3g} | "
                    f"{row['seconds']:.2f} | {row['cpu']:.2f} | {row['peak_rss_mb']:.0f} | |",
                    flush=True,
                )


def _secs(row: dict) -> str:
    return f"{row['seconds']:.2f} / {row['cpu']:.2f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--sections",
        nargs="+",
        default=["reference", "search", "table"],
        choices=["reference", "search", "table"],
    )
    parser.add_argument("--sizes", type=int, nargs="+", default=[100, 500, 2000])
    parser.add_argument("--eps", type=float, nargs="+", default=[4.0, 7.0, 10.0])
    parser.add_argument("--cap", type=float, default=120.0)
    parser.add_argument("--reference-sizes", type=int, nargs="+", default=[50, 100])
    parser.add_argument("--reference-eps", type=float, nargs="+", default=[4.0])
    parser.add_argument("--reference-cap", type=float, default=2400.0)
    parser.add_argument("--search", type=int, nargs="+", default=[50, 75, 100, 150, 200, 300, 400])
    parser.add_argument("--search-cap", type=float, default=60.0)
    parser.add_argument("--mechanisms", nargs="*", default=None)
    args = parser.parse_args()
    os.environ.setdefault("MDPSIM_CACHE", "/tmp/mdpcache")
    G = load_network("helsinki")
    print(f"load average at start: {os.getloadavg()[0]:.2f} (1 min)\n")
    if "reference" in args.sections:
        reference(G, args.reference_sizes, args.reference_eps, args.reference_cap)
        print()
    if "search" in args.sections:
        search(G, args.search, 4.0, args.search_cap)
        print()
    if "table" in args.sections:
        table(G, args.sizes, args.eps, args.mechanisms or available(), args.cap)
        print()
    print(f"load average at end: {os.getloadavg()[0]:.2f} (1 min)")


if __name__ == "__main__":
    main()
