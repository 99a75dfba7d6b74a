"""Time and peak memory to load Helsinki and build road domains of 2,000 / 4,000 / 6,000 points.

Each row runs in a fresh subprocess so that peak memory (ru_maxrss) belongs to that row alone.
Usage: ``python bench/network_domain.py [--sizes 2000 4000 6000]``; prints a Markdown table.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile

_CHILD = r"""
import json, resource, sys, time
from mdpsim.geo.network import load_network
from mdpsim.geo.domain import Domain
n = int(sys.argv[1]); cold = sys.argv[2] == "cold"
t0 = time.perf_counter(); G = load_network("helsinki"); t_load = time.perf_counter() - t0
row = {"n": n, "cache": sys.argv[2], "load_s": t_load}
if n:
    t0 = time.perf_counter(); d = Domain.from_network(G, n_points=n, seed=0)
    row["domain_s"] = time.perf_counter() - t0
    row["pairs"] = len(d.constraint_pairs); row["domain_mib"] = d.memory_bytes / 2**20
row["peak_mib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
print(json.dumps(row))
"""


def _run(n: int, cache: str, env: dict) -> dict:
    out = subprocess.run(
        [sys.executable, "-c", _CHILD, str(n), cache], env=env, capture_output=True, text=True
    )
    if out.returncode != 0:
        raise RuntimeError(out.stderr)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[2000, 4000, 6000])
    args = parser.parse_args()
    env = dict(os.environ, MDPSIM_CACHE=tempfile.mkdtemp(prefix="mdpsim-bench-"))
    rows = [_run(0, "cold", env), _run(0, "warm", env)]
    rows += [_run(n, "warm", env) for n in args.sizes]
    print("| task | graph cache | load (s) | domain build (s) | constraint pairs "
          "| domain arrays (MiB) | peak RSS (MiB) |")  # fmt: skip
    print("|---|---|---:|---:|---:|---:|---:|")
    for r in rows:
        task = f"road domain, N = {r['n']:,}" if r["n"] else "load Helsinki walk network"
        build = f"{r['domain_s']:.2f}" if "domain_s" in r else "-"
        pairs = f"{r['pairs']:,}" if "pairs" in r else "-"
        mib = f"{r['domain_mib']:.0f}" if "domain_mib" in r else "-"
        print(f"| {task} | {r['cache']} | {r['load_s']:.2f} | {build} | {pairs} | {mib} "
              f"| {r['peak_mib']:.0f} |")  # fmt: skip


if __name__ == "__main__":
    main()
