"""DistA-LP server side: conservative repair of reconstructed blocks, and their quality.

All repairs are post-processing of the released parameters (free in privacy). They only
*lower* distances, so mDP constraints written with the repaired distances are at least as
strict as with the reconstructed ones (paper eq. 62-67):

* :func:`metric_closure`: Floyd-Warshall on ``A_dx`` (zero diagonal, symmetric, every
  triangle inequality), after clipping negatives to 0;
* :func:`triangle_tighten`: ``B(i,k) <- min_j A_dx(i,j) + B(j,k)`` for ``A_dy`` and ``A_cy``;
  afterwards ``B(i,k) <= A_dx(i,j) + B(j,k)`` for all i, j, k, which is what makes every
  WEM-WEM pair of the LP mDP by itself;
* :func:`gamma_repair`: ``max(d - gamma, 0)`` (conservative once ``gamma`` exceeds the largest
  overestimate).
"""

from __future__ import annotations

import numpy as np

from mdpsim._core.validation import check_scalar
from mdpsim.errors import InputError


def metric_closure(dx: np.ndarray) -> np.ndarray:
    """Shortest-path closure of a reconstructed ``n x n`` distance block (km)."""
    d = np.asarray(dx, dtype=float)
    if d.ndim != 2 or d.shape[0] != d.shape[1]:
        raise InputError(f"metric_closure: need a square block, got shape {d.shape}")
    if not np.all(np.isfinite(d)):
        raise InputError("metric_closure: the block has NaN or inf entries")
    d = np.maximum(np.minimum(d, d.T), 0.0)
    np.fill_diagonal(d, 0.0)
    for k in range(len(d)):
        d = np.minimum(d, d[:, k : k + 1] + d[k : k + 1, :])
    return d


def triangle_tighten(dx_closed: np.ndarray, block: np.ndarray) -> np.ndarray:
    """``B(i,k) <- min_j dx(i,j) + B(j,k)`` for a rectangular block against a closed ``dx``."""
    d = np.asarray(dx_closed, dtype=float)
    b = np.maximum(np.asarray(block, dtype=float), 0.0)
    if b.ndim != 2 or b.shape[0] != d.shape[0]:
        raise InputError(f"triangle_tighten: block rows {b.shape} do not match dx {d.shape}")
    out = b.copy()
    for j in range(len(d)):
        out = np.minimum(out, d[:, j : j + 1] + b[j : j + 1, :])
    return out


def gamma_repair(block: np.ndarray, gamma: float) -> np.ndarray:
    """``max(d - gamma, 0)`` (km)."""
    gamma = check_scalar(gamma, "gamma", min=0, unit="km")
    return np.maximum(np.asarray(block, dtype=float) - gamma, 0.0)


def repair_blocks(blocks: dict[str, np.ndarray], *, gamma_km: float = 0.0) -> dict[str, np.ndarray]:
    """The server's conservative repair of one user's reconstructed ``dx``, ``dy``, ``cy``.

    Order: gamma-repair of the distance blocks, metric closure of ``dx``, then triangle
    tightening of ``dy`` against it. ``cy`` (costs) is only clipped at 0: it is an objective,
    not a constraint, and lowering it would not make the LP safer.
    """
    for key in ("dx", "dy", "cy"):
        if key not in blocks:
            raise InputError(f"repair_blocks: missing block {key!r}")
    dx = metric_closure(gamma_repair(blocks["dx"], gamma_km))
    dy = triangle_tighten(dx, gamma_repair(blocks["dy"], gamma_km))
    return {"dx": dx, "dy": dy, "cy": np.maximum(np.asarray(blocks["cy"], dtype=float), 0.0)}


def relative_error(true: np.ndarray, approx: np.ndarray) -> float:
    """RelErr: ``||A - A_hat||_F / ||A||_F`` (paper eq. 37)."""
    a, b = np.asarray(true, dtype=float), np.asarray(approx, dtype=float)
    if a.shape != b.shape:
        raise InputError(f"relative_error: shapes {a.shape} and {b.shape} differ")
    norm = float(np.linalg.norm(a))
    if norm == 0:
        raise InputError("relative_error: the true block is all zero")
    return float(np.linalg.norm(a - b)) / norm


def violation_ratio(
    true: np.ndarray, approx: np.ndarray, *, exclude_diagonal: bool = False, rtol: float = 1e-9
) -> float:
    """ViolRatio: fraction of entries whose reconstruction exceeds the truth (eq. 39).

    An entry counts when ``approx > true * (1 + rtol)`` (relative, never absolute slack);
    ``exclude_diagonal`` drops the diagonal of a square ``dx`` block (0 on both sides).
    """
    a, b = np.asarray(true, dtype=float), np.asarray(approx, dtype=float)
    if a.shape != b.shape:
        raise InputError(f"violation_ratio: shapes {a.shape} and {b.shape} differ")
    over = b > a * (1.0 + rtol)
    if exclude_diagonal:
        mask = ~np.eye(len(a), dtype=bool)
        return float(over[mask].mean())
    return float(over.mean())
