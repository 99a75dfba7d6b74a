"""Time and memory of the exact verifier (full and pairs mode) on an N x N EM matrix.

Usage: python bench/verify_scale.py [N ...]   (default 1000 6000). Prints a Markdown table.
Peak memory is the process's peak resident set (ru_maxrss) and the verifier's own peak
allocation on top of the matrix and distances (tracemalloc).
"""

from __future__ import annotations

import resource
import sys
import time
import tracemalloc

import numpy as np

from mdpsim.geo.domain import implied_free_pairs, lp_distances
from mdpsim.mechanisms.em import exponential_matrix
from mdpsim.privacy import verify


def main(sizes: list[int]) -> None:
    print("| N = K | mode | seconds | verifier peak alloc (MiB) | process peak RSS (MiB) |")
    print("|---:|---|---:|---:|---:|")
    for n in sizes:
        rng = np.random.default_rng(0)
        pts = rng.uniform(0, 2000.0, size=(n, 2))  # metres, a 2 x 2 km square
        dist = lp_distances(pts, pts, "l2")
        Z = exponential_matrix(dist, 4.0)
        modes = [("all pairs", None)]
        if n <= 1500:
            modes.append(("constraint pairs", implied_free_pairs(dist)))
        for label, pairs in modes:
            tracemalloc.start()
            start = time.perf_counter()
            result = verify(Z, dist, 4.0, pairs=pairs)
            elapsed = time.perf_counter() - start
            _, peak = tracemalloc.get_traced_memory()
            tracemalloc.stop()
            rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
            assert result.passed, result
            print(f"| {n:,} | {label} | {elapsed:.1f} | {peak / 2**20:.1f} | {rss:.0f} |")
        del Z, dist


if __name__ == "__main__":
    main([int(a) for a in sys.argv[1:]] or [1000, 6000])
