"""Benchmark every registered mechanism on Helsinki: loss, exact smallest eps, time, memory.

Usage: ``python bench/mechanisms.py [--sizes 100 500 2000] [--eps 4 7 10] [--cap 60]
[--naive-sizes 20 100]``. Prints a Markdown table.

Each fit runs in a forked child with a wall-clock cap (``--cap`` seconds); a mechanism that
hits the cap (or raises) at some N is skipped at every larger N. Peak memory is the child's
peak RSS (includes the ~0.3 GB interpreter + network baseline). The smallest eps and violation
ratio come from ``sim.privacy.verify`` with the domain's chaining pairs (exact, SPEC §1).
Reference rows: the naive all-pairs LP a user would write with ``scipy.optimize.linprog``
(method "highs"); dense matrices where they fit in memory (N <= 30), sparse above.
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

from sim.domain import Domain
from sim.mechanisms import available, make
from sim.network import load_network
from sim.privacy.verify import verify

DENSE_NAIVE_MAX_N = 30


def _fit_child(name: str, eps: float, domain: Domain, queue) -> None:
    start = time.perf_counter()
    try:
        if name == "naive-linprog":
            loss = naive_linprog(domain, eps)
            row = {"loss": loss, "seconds": time.perf_counter() - start}
        else:
            mech = make(name, epsilon=eps).fit(domain)
            seconds = time.perf_counter() - start
            check = verify(mech.matrix_, domain.dist_xx, eps, pairs=domain.constraint_pairs)
            row = {
                "loss": mech.expected_loss(),
                "seconds": seconds,
                "smallest_eps": check.smallest_epsilon,
                "violation_ratio": check.violation_ratio,
            }
    except Exception as err:  # reported in the table, never hidden
        row = {"error": f"{type(err).__name__}: {str(err)[:60]}"}
    row["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    queue.put(row)


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


def run_capped(name: str, eps: float, domain: Domain, cap: float) -> dict:
    ctx = mp.get_context("fork")
    queue = ctx.Queue()
    proc = ctx.Process(target=_fit_child, args=(name, eps, domain, queue))
    start = time.perf_counter()
    proc.start()
    proc.join(cap)
    if proc.is_alive():
        proc.kill()
        proc.join()
        return {"error": f"> {cap:g} s cap", "capped": True}
    row = queue.get() if not queue.empty() else {"error": f"exit code {proc.exitcode}"}
    row.setdefault("wall", time.perf_counter() - start)
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[100, 500, 2000])
    parser.add_argument("--eps", type=float, nargs="+", default=[4.0, 7.0, 10.0])
    parser.add_argument("--cap", type=float, default=60.0)
    parser.add_argument("--naive-sizes", type=int, nargs="*", default=[20, 100])
    parser.add_argument("--mechanisms", nargs="*", default=None)
    args = parser.parse_args()
    os.environ.setdefault("MDPSIM_CACHE", "/tmp/mdpcache")
    G = load_network("helsinki")
    names = args.mechanisms or available()
    skipped: set[str] = set()
    print(
        "| N | mechanism | eps /km | loss (km) | smallest eps /km | violation ratio "
        "| time (s) | peak RSS (MB) | note |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for n in sorted(set(args.sizes) | set(args.naive_sizes)):
        domain = Domain.from_network(G, n_points=n)
        runs = [m for m in names if n in args.sizes and m not in skipped]
        runs += ["naive-linprog"] if n in args.naive_sizes else []
        for name in runs:
            for eps in args.eps:
                row = run_capped(name, eps, domain, args.cap)
                note = row.get("error", "")
                if "error" in row:
                    skipped.add(name)
                    print(f"| {n} | {name} | {eps:g} | | | | | | {note} (skipped above) |")
                    break
                extra = ""
                if name == "naive-linprog":
                    extra = "reference: all pairs, " + (
                        "dense" if n <= DENSE_NAIVE_MAX_N else "sparse"
                    )
                print(
                    f"| {n} | {name} | {eps:g} | {row['loss']:.4f} | "
                    f"{row.get('smallest_eps', float('nan')):.4f} | "
                    f"{row.get('violation_ratio', float('nan')):.3g} | {row['seconds']:.2f} | "
                    f"{row['peak_rss_mb']:.0f} | {extra} |",
                    flush=True,
                )


if __name__ == "__main__":
    main()
