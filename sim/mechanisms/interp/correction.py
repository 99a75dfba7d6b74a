"""The corrected per-edge budgets of log-convex interpolation (derivation: docs/interp.md).

Anchor rows ``P_a`` (normalised) satisfy ``|log P_b(k) - log P_a(k)| <= delta`` on every
anchor edge. Normalised log-convex interpolation between such rows changes ``log P(k)`` at a
rate of at most ``r (1 + tanh(r / 2))`` per cell width along one axis, where
``r = delta_own + min(delta_own, kl(delta_other) / 2)`` and ``kl(d) = d tanh(d / 2)`` bounds
the KL divergence between two rows whose log-ratio is at most ``d``. The anchors' budgets are
chosen so that this rate is at most ``eps_axis * spacing_axis``.
"""

from __future__ import annotations

import math

import numpy as np

from sim.errors import InputError

# Relative margin kept below the per-axis target, for float rounding in the interpolation
# and for the LP repair (docs/interp.md, "Numerics").
SAFETY = 1e-6


def kl_bound(delta: float) -> float:
    """Largest KL divergence between two distributions whose log-ratio is within ``delta``."""
    return delta * math.tanh(delta / 2.0)


def slope_bound(delta_own: float, delta_other: float) -> float:
    """Largest change of ``log P(k)`` across one cell width along an axis (no unit).

    ``delta_own`` is the anchors' log-ratio bound along that axis, ``delta_other`` along the
    other axis. With ``delta_other = 0`` this is the one-dimensional bound
    ``delta (1 + tanh(delta / 2))``.
    """
    r = delta_own + min(delta_own, kl_bound(delta_other) / 2.0)
    return r * (1.0 + math.tanh(r / 2.0))


def anchor_deltas(target_x: float, target_y: float) -> tuple[float, float]:
    """Anchor log-ratio bounds ``(delta_1, delta_2)`` whose slopes meet the targets.

    ``target_x = eps_1 * h_x`` and ``target_y = eps_2 * h_y`` (no unit). The deltas are
    ``alpha * target`` with the largest ``alpha`` in (0, 1] (by bisection) such that
    ``slope_bound`` stays within ``(1 - SAFETY) * target`` on both axes.
    """
    tx, ty = float(target_x), float(target_y)
    if not (tx >= 0 and ty >= 0 and math.isfinite(tx) and math.isfinite(ty)):
        raise InputError(f"per-axis budgets must be finite and >= 0, got {tx!r}, {ty!r}")

    def fits(alpha: float) -> bool:
        dx, dy = alpha * tx, alpha * ty
        return slope_bound(dx, dy) <= (1 - SAFETY) * tx and slope_bound(dy, dx) <= (1 - SAFETY) * ty

    lo, hi = 0.0, 1.0
    for _ in range(60):
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if fits(mid) else (lo, mid)
    return lo * tx, lo * ty


def split_budget(epsilon: float, p: float, fraction: float) -> tuple[float, float]:
    """Per-axis budgets ``(eps_1, eps_2)`` with ``||(eps_1, eps_2)||_q = epsilon``.

    ``q`` is the dual exponent of ``p`` (``1/p + 1/q = 1``). ``fraction`` in [0, 1] moves the
    split from all-on-y (0) through equal (0.5) to all-on-x (1): for ``p = 1`` (``q = inf``)
    both budgets are ``epsilon`` whatever the fraction; for ``p = 2`` the split is
    ``epsilon (cos, sin)`` of the angle ``(1 - fraction) pi / 2``; for ``p = inf`` (``q = 1``)
    it is ``epsilon (fraction, 1 - fraction)``.
    """
    if not 0.0 <= fraction <= 1.0:
        raise InputError(f"budget_split={fraction!r} must lie in [0, 1] (0.5 = equal)")
    if p == 1:
        return epsilon, epsilon
    if p == 2:
        angle = (1.0 - fraction) * math.pi / 2.0
        return epsilon * math.cos(angle), epsilon * math.sin(angle)
    if p == math.inf:
        return epsilon * fraction, epsilon * (1.0 - fraction)
    raise InputError(f"p={p!r} is not supported; use 1, 2 or inf")


def dual_norm(eps_xy: tuple[float, float], p: float) -> float:
    """``||(eps_1, eps_2)||_q`` with ``1/p + 1/q = 1``: the lp-mDP budget the axes compose to."""
    v = np.abs(np.asarray(eps_xy, dtype=float))
    if p == 1:
        return float(v.max())
    if p == 2:
        return float(math.hypot(*v))
    return float(v.sum())
