"""Dense numerical privacy check of a fitted ``interp`` mechanism off the anchors."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

_BLOCK = 50_000


@dataclass(frozen=True)
class DenseCheck:
    """Worst normalised loss ``max_k |log P(a)(k) - log P(b)(k)| / (eps ||a - b||_p)``."""

    n_pairs: int
    max_ratio: float
    violation_ratio: float  # fraction of pairs above 1 + rtol


def random_pairs(mech, n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Pairs of locations (metres) over the anchor box plus a margin.

    Half are close pairs (separation log-uniform from 1 mm to 1 km, random direction), with a
    quarter of all first points placed exactly on an anchor line; the rest are independent.
    """
    g = mech.grid_
    lo = np.array([g.x0, g.y0]) - g.hx / 2
    hi = np.array([g.x0 + (g.nx - 1) * g.hx, g.y0 + (g.ny - 1) * g.hy]) + g.hx / 2
    a = rng.uniform(lo, hi, size=(n, 2))
    b = rng.uniform(lo, hi, size=(n, 2))
    close = n // 2
    on_line = n // 4
    a[:on_line, 0] = g.x0 + g.hx * rng.integers(0, g.nx, on_line)
    radius = 10.0 ** rng.uniform(-3.0, 3.0, close)
    angle = rng.uniform(0.0, 2.0 * np.pi, close)
    b[:close] = a[:close] + radius[:, None] * np.column_stack([np.cos(angle), np.sin(angle)])
    return a, b


def dense_check(mech, n_pairs: int, *, seed: int = 0, rtol: float = 1e-9) -> DenseCheck:
    """Worst loss of ``n_pairs`` random continuous pairs against ``mech.epsilon``."""
    rng = np.random.default_rng(seed)
    support = np.isfinite(mech.log_distribution_at(mech.grid_.xy[0]))
    worst, broken = 0.0, 0
    for start in range(0, n_pairs, _BLOCK):
        a, b = random_pairs(mech, min(_BLOCK, n_pairs - start), rng)
        loss = np.abs(
            mech.log_distribution_at(a)[:, support] - mech.log_distribution_at(b)[:, support]
        ).max(axis=1)
        ratio = loss / (mech.epsilon * np.linalg.norm(a - b, ord=mech.p_, axis=1) / 1000.0)
        worst = max(worst, float(ratio.max()))
        broken += int((ratio > 1 + rtol).sum())
    return DenseCheck(n_pairs, worst, broken / n_pairs)
