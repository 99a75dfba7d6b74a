"""COPT's two WEM forms against the EM and the optimal LP on the Helsinki walk network.

Prints a Markdown table (kept in docs/copt.md): expected loss (km) of the optimal LP (only up
to ``--lp-max-n``), COPT with the EM-normalised form (default) and the plain form, the EM,
and COPT's fit time in seconds. "infeasible" marks a plain-form LP that HiGHS proved
infeasible (``SolverError``); every released COPT matrix passed the exact verifier.

    MDPSIM_CACHE=/tmp/mdpcache python bench/copt.py --sizes 40 100 200 400 --lp-max-n 100
"""

from __future__ import annotations

import argparse
import time

from mdpsim.errors import SolverError
from mdpsim.geo.domain import Domain
from mdpsim.geo.network import load_network
from mdpsim.mechanisms import make


def _copt(domain: Domain, eps: float, form: str, n_exempt: int) -> tuple[str, float]:
    """Loss (or "infeasible") and fit seconds of one COPT fit."""
    start = time.perf_counter()
    try:
        mech = make("copt", epsilon=eps, n_exempt=n_exempt, wem_form=form).fit(domain)
    except SolverError as err:
        if "Infeasible" not in str(err):
            raise
        return "infeasible", time.perf_counter() - start
    return f"{mech.expected_loss():.4f}", time.perf_counter() - start


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sizes", type=int, nargs="+", default=[40, 100, 200, 400])
    p.add_argument("--eps", type=float, nargs="+", default=[4.0, 7.0, 10.0])
    p.add_argument("--n-exempt", type=int, default=10)
    p.add_argument("--lp-max-n", type=int, default=100)
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args()
    G = load_network("helsinki", network_type="walk")
    print(f"n_exempt = {args.n_exempt}, road metric, seed {args.seed}\n")
    print("| N | eps/km | LP | COPT (em) | COPT (plain) | EM | COPT (em) fit s |")
    print("|---:|---:|---:|---:|---:|---:|---:|")
    for n in args.sizes:
        domain = Domain.from_network(G, n_points=n, metric="road", seed=args.seed)
        for eps in args.eps:
            lp = "–"
            if n <= args.lp_max_n:
                lp = f"{make('lp', epsilon=eps).fit(domain).expected_loss():.4f}"
            em_loss, em_s = _copt(domain, eps, "em", args.n_exempt)
            plain_loss, _ = _copt(domain, eps, "plain", args.n_exempt)
            em = make("em", epsilon=eps).fit(domain).expected_loss()
            print(f"| {n} | {eps:g} | {lp} | {em_loss} | {plain_loss} | {em:.4f} | {em_s:.2f} |")


if __name__ == "__main__":
    main()
