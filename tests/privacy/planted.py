"""Reference samplers for testing the auditor: correct ones, and ones with planted bugs.

All are black boxes ``sample(i, n, rng)`` over a domain's secrets (km distances), as the
auditor sees mechanisms. The correct ones are exactly eps-mDP (proofs in the docstrings); each
bug breaks the claim in a way real code does.
"""

from __future__ import annotations

import numpy as np


def clamped_geometric(x_km: np.ndarray, step_km: float, epsilon: float):
    """Two-sided geometric noise on a line of points ``step_km`` apart, clamped to the ends.

    The unclamped geometric mechanism on the integer grid is exactly ``eps * step``-DP between
    neighbouring points, with the bound attained by every output beyond both points; clamping
    is post-processing. So it is eps-mDP under ``|x - x'|`` and no better: a tight reference.
    """
    n = len(x_km)
    p = 1.0 - np.exp(-epsilon * step_km)

    def sample(i: int, size: int, rng: np.random.Generator) -> np.ndarray:
        noise = rng.geometric(p, size) - rng.geometric(p, size)
        return np.clip(i + noise, 0, n - 1)

    return sample


def planar_laplace(points_km: np.ndarray, epsilon: float, *, scale_km: float | None = None):
    """Planar Laplace (Andrés et al.) around a secret, remapped to the nearest secret.

    The continuous density ``eps^2/(2 pi) exp(-eps r)`` is eps-mDP under l2; remapping is
    post-processing. ``scale_km`` overrides the radial scale ``1/eps`` (the planted bug sets
    it to ``eps``).
    """
    from scipy.spatial import cKDTree

    scale = 1.0 / epsilon if scale_km is None else scale_km
    tree = cKDTree(points_km)

    def sample(i: int, size: int, rng: np.random.Generator) -> np.ndarray:
        r = rng.gamma(2.0, scale, size)  # the radius of planar Laplace is Gamma(2, 1/eps)
        theta = rng.uniform(0.0, 2 * np.pi, size)
        z = points_km[i] + np.column_stack([r * np.cos(theta), r * np.sin(theta)])
        return tree.query(z)[1]

    return sample


def identity(i: int, size: int, rng: np.random.Generator) -> np.ndarray:
    """Reports the secret itself (no privacy at all)."""
    return np.full(size, i)


def raising_on_odd(inner):
    """Wraps a correct sampler but raises for odd inputs: the refusal itself leaks."""

    def sample(i: int, size: int, rng: np.random.Generator) -> np.ndarray:
        if i % 2 == 1:
            raise ValueError("input not supported")
        return inner(i, size, rng)

    return sample


def em_with_true_epsilon(dist_km: np.ndarray, true_epsilon: float) -> np.ndarray:
    """EM whose smallest epsilon (exact verifier) is exactly ``true_epsilon``: its parameter
    by root finding (EM's own bound is loose by the normaliser)."""
    from scipy.optimize import brentq

    from mdpsim.mechanisms.em import exponential_matrix
    from mdpsim.privacy.verifier import verify

    def gap(e: float) -> float:
        return verify(exponential_matrix(dist_km, e), dist_km, 1e9).smallest_epsilon - true_epsilon

    e = brentq(gap, true_epsilon, 2.5 * true_epsilon, xtol=1e-9 * true_epsilon)
    return exponential_matrix(dist_km, e)


def one_output_leak(matrix: np.ndarray, dist_km: np.ndarray, i: int, j: int, log_ratio: float):
    """``matrix`` with x = ``i``'s most likely output raised until its log-ratio to x' = ``j``
    is ``log_ratio`` (row ``i`` renormalised): a leak on one output of one row."""
    k = int(np.argmax(matrix[i]))
    z = matrix.copy()
    target = np.exp(log_ratio) * z[j, k]  # wanted z[i, k] after renormalising
    assert target < 1, "this pair cannot carry that leak on one output"
    rest = z[i].sum() - z[i, k]
    z[i, k] = target * rest / (1.0 - target)  # z[i,k] / (rest + z[i,k]) = target
    z[i] /= z[i].sum()
    return z
