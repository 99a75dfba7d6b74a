"""N against time for the exact optimal LP and for ``lp_medoids`` on Helsinki (road metric).

Usage: ``python bench/lp_scale.py [--sections exact medoids] [--exact-sizes 50 100 150 200]
[--exact-eps 4 7 10] [--exact-cap 120] [--no-coarse-to-fine] [--medoid-sizes 2000 4000 6000]
[--medoid-eps 4 7 10] [--medoid-cap 600] [--medoid-params laplace_outputs=True]
[--plot docs/img/lp_scale.png]``. Prints Markdown tables:

* ``exact``: ``make("lp")`` fit (incl. the coarse-to-fine warm start, margin, repair, exact
  check) per N and eps, with the nonzeros of the full chaining LP (``N K`` row-sum entries plus
  4 per mDP constraint pair and output: ``N K + 4 P K``), the subsets solved first and their
  time, the generation rounds of the full solve, the wall time per nonzero and the 1-min load
  after the fit; stops at the first N over the cap.
* ``medoids``: ``make("lp_medoids")`` fit per N and eps: loss, EM's loss, the ratio, the
  certified lower bound on the optimal LP and the gap (loss / bound), the bound's kind
  (``prices``, ``grouped`` or ``split`` with its parts; docs/lp.md), fit time split into
  the mechanism (medoids, LP, repair, exact check) and the bound, CPU, peak RSS, the 1-min
  load average after the fit, exact check (smallest eps with the domain's chaining pairs).
  A fit over the cap is reported with its peak RSS up to the kill.

Each fit runs in a forked child with a wall-clock cap; peak RSS is the child's (includes the
interpreter, the network and the domain). ``--plot`` writes a log-log plot of N against
wall time for both.
"""

from __future__ import annotations

import argparse
import ast
import multiprocessing as mp
import os
import resource
import time

import numpy as np

from mdpsim.geo.domain import Domain
from mdpsim.geo.network import load_network
from mdpsim.mechanisms import make
from mdpsim.privacy.verifier import verify


def _cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _child(name: str, eps: float, domain: Domain, queue, params: dict) -> None:
    start, cpu = time.perf_counter(), _cpu_seconds()
    try:
        mech = make(name, epsilon=eps, **params).fit(domain)
        row = {"loss": mech.expected_loss(), "info": {
            k: v for k, v in mech.info_.items() if isinstance(v, (int, float, str))
        }}  # fmt: skip
        row["seconds"] = time.perf_counter() - start
        row["cpu"] = _cpu_seconds() - cpu
        check = verify(mech.matrix_, domain.dist_xx, eps, pairs=domain.constraint_pairs)
        row["smallest_eps"] = check.smallest_epsilon
    except Exception as err:  # reported in the table, never hidden
        row = {"error": f"{type(err).__name__}: {str(err)[:70]}"}
    row["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    queue.put(row)


def _peak_rss_mb(pid: int) -> float:
    """Peak resident memory (MB) of a running process (Linux ``VmHWM``; NaN if unknown)."""
    try:
        with open(f"/proc/{pid}/status") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return float("nan")


def run_capped(name: str, eps: float, domain: Domain, cap: float, **params) -> dict:
    """Fit in a forked child; ``{"error": ...}`` if it raises or passes ``cap`` s."""
    ctx = mp.get_context("fork")
    queue = ctx.Queue()
    proc = ctx.Process(target=_child, args=(name, eps, domain, queue, params))
    proc.start()
    deadline = time.perf_counter() + cap
    while proc.is_alive() and queue.empty() and time.perf_counter() < deadline:
        time.sleep(0.2)
    if queue.empty():
        peak_mb = _peak_rss_mb(proc.pid)
        proc.kill()
        proc.join()
        return {"error": f"> {cap:g} s cap", "peak_rss_mb": peak_mb}
    row = queue.get()
    proc.join()
    return row


def exact(G, sizes, epsilons, cap: float, points: list, coarse_to_fine: bool) -> None:
    print("| N = K | eps /km | pairs P | LP nonzeros | loss (km) | time (s) | CPU (s) "
          "| subsets | subsets (s) | rounds | us per nonzero | peak RSS (MB) | load |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for eps in epsilons:
        for n in sizes:
            domain = Domain.from_network(G, n_points=n)
            p = len(domain.constraint_pairs)
            nnz = n * n + 4 * p * n
            row = run_capped("lp", eps, domain, cap, coarse_to_fine=coarse_to_fine)
            load = os.getloadavg()[0]
            if "error" in row:
                print(f"| {n} | {eps:g} | {p:,} | {nnz:,} | {row['error']} | | | | | | | | "
                      f"{load:.1f} |", flush=True)  # fmt: skip
                break
            info = row["info"]
            points.append(("lp", eps, n, row["seconds"]))
            print(
                f"| {n} | {eps:g} | {p:,} | {nnz:,} | {row['loss']:.4f} | {row['seconds']:.1f} "
                f"| {row['cpu']:.1f} | {info['subsets'] or '-'} | {info['subset_seconds']:.1f} "
                f"| {info['rounds']} | {1e6 * row['seconds'] / nnz:.2f} "
                f"| {row['peak_rss_mb']:.0f} | {load:.1f} |",
                flush=True,
            )


def medoids(G, sizes, epsilons, cap: float, points: list, params: dict) -> None:
    print("| N | eps /km | outputs | loss (km) | EM (km) | loss / EM | lower bound (km) | gap "
          "| bound | fit (s) | mechanism (s) | bound (s) | CPU (s) | peak RSS (MB) | load "
          "| smallest eps /km |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for n in sizes:
        domain = Domain.from_network(G, n_points=n)
        for eps in epsilons:
            em = make("em", epsilon=eps).fit(domain).expected_loss()
            row = run_capped("lp_medoids", eps, domain, cap, **params)
            load = os.getloadavg()[0]
            if "error" in row:
                print(f"| {n} | {eps:g} | | {row['error']} | {em:.4f} | | | | | | | | | "
                      f"{row['peak_rss_mb']:.0f} | {load:.1f} | |", flush=True)  # fmt: skip
                continue
            info = row["info"]
            bound_s = info["lower_bound_seconds"]
            points.append(("lp_medoids", eps, n, row["seconds"]))
            print(
                f"| {n} | {eps:g} | {info['outputs_used']} | {row['loss']:.4f} | {em:.4f} "
                f"| {row['loss'] / em:.3f} | {info['lower_bound_km']:.4f} | {info['gap']:.2f} "
                f"| {_bound_kind(info)} | {info['fit_seconds']:.1f} "
                f"| {info['fit_seconds'] - bound_s:.1f} | {bound_s:.1f} | {row['cpu']:.1f} "
                f"| {row['peak_rss_mb']:.0f} | {load:.1f} "
                f"| {row['smallest_eps']:.4f} |",
                flush=True,
            )


def _bound_kind(info: dict) -> str:
    """The certified bound's kind; the split bound with its parts."""
    kind = info["lower_bound_kind"]
    return f"split ({info['lower_bound_subsets']})" if kind == "split" else kind


def _param(text: str) -> tuple[str, object]:
    """``name=value``: a Python literal (``laplace_outputs=True``) or else a string."""
    name, _, value = text.partition("=")
    try:
        return name, ast.literal_eval(value)
    except (ValueError, SyntaxError):
        return name, value


def plot(points: list, path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4))
    for name, marker in (("lp", "o"), ("lp_medoids", "s")):
        for eps in sorted({p[1] for p in points if p[0] == name}):
            pts = sorted((p[2], p[3]) for p in points if p[0] == name and p[1] == eps)
            if pts:
                ax.plot(*np.array(pts).T, marker=marker, label=f"{name}, eps {eps:g}/km")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("|X| (secrets)")
    ax.set_ylabel("fit wall time (s)")
    ax.set_title("Helsinki walk, road metric")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sections", nargs="+", default=["exact", "medoids"],
                        choices=["exact", "medoids"])  # fmt: skip
    parser.add_argument("--exact-sizes", type=int, nargs="+", default=[50, 100, 150, 200])
    parser.add_argument("--exact-eps", type=float, nargs="+", default=[4.0, 7.0, 10.0])
    parser.add_argument("--exact-cap", type=float, default=120.0)
    parser.add_argument(
        "--no-coarse-to-fine", action="store_true", help="make('lp', coarse_to_fine=False)"
    )
    parser.add_argument("--medoid-sizes", type=int, nargs="+", default=[2000, 4000, 6000])
    parser.add_argument("--medoid-eps", type=float, nargs="+", default=[4.0, 7.0, 10.0])
    parser.add_argument("--medoid-cap", type=float, default=600.0)
    parser.add_argument("--medoid-params", type=_param, nargs="*", default=[],
                        help="lp_medoids parameters, e.g. laplace_outputs=True")  # fmt: skip
    parser.add_argument("--plot", default=None)
    args = parser.parse_args()
    os.environ.setdefault("MDPSIM_CACHE", "/tmp/mdpcache")
    G = load_network("helsinki")
    print(f"load average at start: {os.getloadavg()[0]:.2f} (1 min)\n")
    points: list = []
    if "medoids" in args.sections:
        medoids(G, args.medoid_sizes, args.medoid_eps, args.medoid_cap, points,
                dict(args.medoid_params))  # fmt: skip
        print()
    if "exact" in args.sections:
        seeded = not args.no_coarse_to_fine
        exact(G, args.exact_sizes, args.exact_eps, args.exact_cap, points, seeded)
        print()
    print(f"load average at end: {os.getloadavg()[0]:.2f} (1 min)")
    if args.plot:
        plot(points, args.plot)
        print(f"plot: {args.plot}")


if __name__ == "__main__":
    main()
