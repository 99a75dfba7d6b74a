"""The compiled nearest-site sweep against a brute force over every site."""

from __future__ import annotations

import numpy as np
import pytest

from mdpsim.geo import _kernels


def _brute(points: np.ndarray, sites: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The nearest site (first of the smallest) and unsure flags, every pair compared."""
    dx = points[:, None, 0] - sites[None, :, 0]
    dy = points[:, None, 1] - sites[None, :, 1]
    d2 = dx * dx + dy * dy
    nearest = np.argmin(np.where(np.isnan(d2), np.inf, d2), axis=1)
    best = d2[np.arange(len(points)), nearest]
    rest = d2.copy()
    rest[np.arange(len(points)), nearest] = np.inf
    second = np.min(np.where(np.isnan(rest), np.inf, rest), axis=1, initial=np.inf)
    unsure = np.isnan(best) | ~(second - best > 1e-9 * best + 1e-6)
    return nearest, unsure


@pytest.mark.parametrize("seed", range(6))
def test_sweep_is_the_brute_force(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 150))
    sites = rng.uniform(0.0, 2000.0, (n, 2)) + [385_000.0, 6_672_000.0]
    if seed % 2:  # shared x values and exact ties
        sites[:, 0] = np.round(sites[:, 0], -2)
    points = np.vstack(
        [
            rng.uniform(-200.0, 2200.0, (3000, 2)) + [385_000.0, 6_672_000.0],
            sites[rng.integers(n, size=50)],
            (sites[rng.integers(n, size=50)] + sites[rng.integers(n, size=50)]) / 2,
            [[np.nan, 6_672_000.0], [385_000.0, np.nan]],
        ]
    )
    by_x = np.argsort(sites[:, 0], kind="stable")
    nearest, unsure = _kernels.nearest_sites(points, sites, by_x)
    want, want_unsure = _brute(points, sites)
    assert np.array_equal(unsure, want_unsure)
    assert np.array_equal(nearest[~unsure], want[~unsure])
    assert np.all(nearest[np.isnan(points).any(axis=1)] == -1)
