"""How far the DistA-LP surrogate parameters are from Lipschitz in the user's location.

The upload noise must hide the parameter difference between two records relative to their
distance (PmDP normalises the privacy loss by it). For each of ``--records`` secrets and its
nearest other secret, and for a random other secret, this prints the median l1 difference of
the fitted (noise-free) parameters, per block, as a ratio nearest / random, next to the
median distance ratio. Lipschitz parameters would give a ratio near the distance ratio.

    python bench/dista_lp_continuity.py --size 500 --records 40
"""

from __future__ import annotations

import argparse
import os

import numpy as np

from mdpsim.geo.domain import Domain
from mdpsim.geo.network import load_network
from mdpsim.mechanisms.dista_lp.calibration import _fit_record
from mdpsim.mechanisms.dista_lp.user import UploadConfig, public_scales

FAMILIES = ("gaussian", "polynomial", "rbf", "svd")
BLOCKS = ("dx", "dy", "cy")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--size", type=int, default=500)
    p.add_argument("--records", type=int, default=40)
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args()
    os.environ.setdefault("MDPSIM_CACHE", "/tmp/mdpcache")
    domain = Domain.from_network(load_network("helsinki"), n_points=args.size, seed=args.seed)
    rng = np.random.default_rng(args.seed)
    records = rng.choice(args.size, args.records, replace=False)
    dist = np.asarray(domain.dist_xx)
    masked = dist + np.diag(np.full(args.size, np.inf))
    nearest = np.argmin(masked[records], axis=1)
    others = np.array([rng.choice(np.delete(records, i)) for i in range(len(records))])
    d_ratio = np.median(dist[records, nearest]) / np.median(dist[records, others])
    print(
        f"|X| = {args.size:,}, {args.records} records; median distance to the nearest secret "
        f"{1000 * np.median(dist[records, nearest]):.0f} m, to a random record "
        f"{1000 * np.median(dist[records, others]):.0f} m (ratio {d_ratio:.3f})\n"
    )
    print("| surrogate | " + " | ".join(f"{b}: nearest / random" for b in BLOCKS) + " |")
    print("|---|" + "---|" * len(BLOCKS))
    scales = public_scales(domain)
    for family in FAMILIES:
        config = UploadConfig(epsilon=7.0, family=family)
        cache: dict[int, dict] = {}

        def thetas(x: int, config=config, cache=cache) -> dict:
            if x not in cache:  # the fit a user at x would run, seeded per record
                cache[x] = _fit_record(domain, x, config, scales, 1000 + x).thetas
            return cache[x]

        cells = []
        for b in BLOCKS:
            near = [np.abs(thetas(int(x))[b] - thetas(int(y))[b]).sum() for x, y in
                    zip(records, nearest, strict=True)]  # fmt: skip
            far = [np.abs(thetas(int(x))[b] - thetas(int(z))[b]).sum() for x, z in
                   zip(records, others, strict=True)]  # fmt: skip
            cells.append(f"{np.median(near) / np.median(far):.2f}")
        print(f"| {family} | " + " | ".join(cells) + " |", flush=True)


if __name__ == "__main__":
    main()
