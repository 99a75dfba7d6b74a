"""The corrected per-edge budgets of log-convex interpolation (derivation: docs/interp.md).

Anchor rows ``P_a`` (normalised) satisfy ``|log P_b(k) - log P_a(k)| <= delta`` on every
anchor edge. Inside a cell, at a fixed position across the axis, moving along the axis is a
one-dimensional log-convex step ``P_tau ∝ R_0^(1-tau) R_1^tau`` between two normalised rows
whose log-ratio ``D`` lies within ``r = delta_own + cross(delta_other)``, and

    d/dtau log P_tau(k) = g_k - E_{P_tau}[g]   (g = the own-axis log-ratios, |g| <= delta_own)

so the rate is at most ``r + |m(tau)|`` with ``m(tau) = E_{P_tau}[D]`` the slope of the step's
log-normaliser: ``m`` is nondecreasing with ``0 <= m' <= delta_own^2`` (a variance),
``integral_0^1 m = 0`` and ``|m(0)|, |m(1)| <= K = min(kl(r), delta_own^2 / 2)``.

With a plain (linear) step the rate bound is ``r + K`` (:func:`linear_slope_bound`). A warped
step (:class:`AxisWarp`) moves through ``tau`` slowly near the anchors, where ``|m|`` can be
``K``, and fast in the middle, where it cannot: its rate bound is the *average* over ``tau`` of
``r + b(tau)`` with ``b`` the sharp bound on ``|m(tau)|`` above.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from mdpsim.errors import InputError

# Relative margin kept below the per-axis target, for float rounding in the interpolation
# and for the LP repair (docs/interp.md, "Numerics").
SAFETY = 1e-6
# Pieces of the piecewise-linear warp (uniform in tau).
WARP_PIECES = 32
# Bisection steps: 2^-48 ~ 4e-15 of the bracket, far below SAFETY (the bounds keep the safe end).
_BISECT = 48


def kl_bound(delta: float) -> float:
    """Largest KL divergence between two distributions whose log-ratio is within ``delta``."""
    return delta * math.tanh(delta / 2.0)


def cross_bound(delta_own: float, delta_other: float) -> float:
    """Bound on the change of the other axis' log-normaliser across a cell, ``|c|``.

    Along an edge of the other axis ``log Z`` is convex, zero at both ends, with end slopes
    within ``kl(delta_other)`` and curvature at most ``delta_other^2``; so it lies in
    ``[-min(kl/2, delta_other^2/8), 0]``. Also ``|c| <= delta_own`` (a log-mean of ``e^g``).
    """
    return min(delta_own, kl_bound(delta_other) / 2.0, delta_other * delta_other / 8.0)


def _step_bounds(delta_own: float, delta_other: float) -> tuple[float, float, float]:
    """``(r, K, V)``: row log-ratio bound, end-slope bound and curvature bound of a step."""
    r = delta_own + cross_bound(delta_own, delta_other)
    curvature = delta_own * delta_own
    return r, min(kl_bound(r), curvature / 2.0), curvature


def linear_slope_bound(delta_own: float, delta_other: float) -> float:
    """Largest change of ``log P(k)`` per cell width along an axis with a plain step.

    ``delta_own`` is the anchors' log-ratio bound along that axis, ``delta_other`` along the
    other axis. With ``delta_other = 0`` this is ``delta (1 + tanh(delta / 2))``, which two
    outputs attain next to an anchor.
    """
    r, k, _ = _step_bounds(delta_own, delta_other)
    return min(r + k, 2.0 * delta_own)


def normaliser_slope_bound(tau: np.ndarray, k: float, v: float) -> np.ndarray:
    """Sharp upper bound on ``|m(tau)|`` given ``0 <= m' <= v``, ``int m = 0``, ends within k.

    For ``m(tau) = -c``: ``m <= -c`` before ``tau`` and ``m(s) <= min(k, -c + v (s - tau))``
    after it, so ``c`` is feasible only if that largest integral is ``>= 0``; bisection on
    ``c`` keeps the upper end. ``m(tau) = +c`` is the mirror image at ``1 - tau``.
    """
    tau = np.asarray(tau, dtype=float)
    return np.maximum(_negative_side(tau, k, v), _negative_side(1.0 - tau, k, v))


def _negative_side(tau: np.ndarray, k: float, v: float) -> np.ndarray:
    if v <= 0.0 or k <= 0.0:
        return np.zeros_like(tau)
    rest = 1.0 - tau

    def largest_integral(c: np.ndarray) -> np.ndarray:
        rho = (k + c) / v  # time for the ramp to reach k
        ramp_only = -c * rest + v * rest * rest / 2.0
        capped = -c * rho + v * rho * rho / 2.0 + k * (rest - rho)
        return -c * tau + np.where(rho >= rest, ramp_only, capped)

    lo, hi = np.zeros_like(tau), np.full_like(tau, k)
    done = largest_integral(hi) >= 0.0
    for _ in range(_BISECT):
        mid = 0.5 * (lo + hi)
        ok = largest_integral(mid) >= 0.0
        lo, hi = np.where(ok, mid, lo), np.where(ok, hi, mid)
    return np.where(done, k, hi)


@dataclass(frozen=True)
class AxisWarp:
    """Piecewise-linear map ``tau = phi(t)`` of a cell's local coordinate along one axis.

    ``t_knots`` and ``tau_knots`` increase from 0 to 1. On piece i the slope of ``phi`` is
    ``rate / M_i`` with ``M_i`` the bound of the step's rate over that piece of ``tau``, so the
    warped step changes ``log P(k)`` by at most ``rate`` per cell width.
    """

    t_knots: tuple[float, ...]
    tau_knots: tuple[float, ...]
    rate: float

    @classmethod
    def for_deltas(cls, delta_own: float, delta_other: float, pieces: int = WARP_PIECES):
        """The warp whose rate bound is smallest for rows within these deltas."""
        tau = np.linspace(0.0, 1.0, pieces + 1)
        bound = _piece_bounds(tau, delta_own, delta_other)
        widths = np.diff(tau) * bound
        rate = float(widths.sum())
        if rate <= 0.0:
            return cls((0.0, 1.0), (0.0, 1.0), 0.0)
        t = np.concatenate([[0.0], np.cumsum(widths) / rate])
        t[-1] = 1.0
        return cls(tuple(t.tolist()), tuple(tau.tolist()), rate)

    def rate_for(self, delta_own: float, delta_other: float) -> float:
        """Rate bound of this warp for rows within (possibly smaller) deltas."""
        t, tau = np.asarray(self.t_knots), np.asarray(self.tau_knots)
        slope = np.diff(tau) / np.diff(t)
        return float((slope * _piece_bounds(tau, delta_own, delta_other)).max())

    def __call__(self, t: np.ndarray) -> np.ndarray:
        """``tau = phi(t)`` for local coordinates in [0, 1]."""
        return np.interp(t, self.t_knots, self.tau_knots)


def _piece_bounds(tau: np.ndarray, delta_own: float, delta_other: float) -> np.ndarray:
    """Bound of the step's rate over each piece ``[tau_i, tau_(i+1)]``.

    The negative-side bound decreases in ``tau`` and the positive-side one increases, so each
    is largest at one end of the piece.
    """
    r, k, v = _step_bounds(delta_own, delta_other)
    neg, pos = _negative_side(np.concatenate([tau[:-1], 1.0 - tau[1:]]), k, v).reshape(2, -1)
    return np.minimum(r + np.maximum(neg, pos), 2.0 * delta_own)


def anchor_deltas(target_x: float, target_y: float, *, warp: bool) -> tuple[float, float]:
    """Anchor log-ratio bounds ``(delta_1, delta_2)`` whose rates meet the targets.

    ``target_x = eps_1 * h_x`` and ``target_y = eps_2 * h_y`` (no unit). The deltas are
    ``alpha * target`` with the largest ``alpha`` in (0, 1] (by bisection) such that the rate
    bound (warped step if ``warp``, else plain) stays within ``(1 - SAFETY) * target`` on both
    axes.
    """
    tx, ty = float(target_x), float(target_y)
    if not (tx >= 0 and ty >= 0 and math.isfinite(tx) and math.isfinite(ty)):
        raise InputError(f"per-axis budgets must be finite and >= 0, got {tx!r}, {ty!r}")
    rate = step_rate if warp else linear_slope_bound

    def fits(alpha: float) -> bool:
        dx, dy = alpha * tx, alpha * ty
        return rate(dx, dy) <= (1 - SAFETY) * tx and rate(dy, dx) <= (1 - SAFETY) * ty

    lo, hi = 0.0, 1.0
    for _ in range(_BISECT):
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if fits(mid) else (lo, mid)
    return lo * tx, lo * ty


def step_rate(delta_own: float, delta_other: float) -> float:
    """Rate bound per cell width of the warped step for these deltas."""
    return AxisWarp.for_deltas(delta_own, delta_other).rate


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
