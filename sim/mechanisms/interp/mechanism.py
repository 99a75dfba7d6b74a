"""Interpolation-based lp-norm mDP (docs/design.md §4): anchors on a grid, log-convex interpolation.

An LP optimises the output distributions at anchors on a regular grid over the secrets'
bounding box under per-axis budgets ``eps_1`` (x) and ``eps_2`` (y); every other location
gets the normalised log-convex (bilinear in log space) interpolation of its cell's four
anchor rows. The anchors' log-ratio bounds are corrected (``correction.anchor_deltas``) so
that ``|log P(x)(k) - log P(x')(k)| <= eps_1 |dx| + eps_2 |dy|`` holds for ALL locations of
the plane, which is ``||(eps_1, eps_2)||_q ||x - x'||_p`` by Hölder. Derivation and numerics:
docs/interp.md. Outputs are the domain's output points ``domain.y_xy``.
"""

from __future__ import annotations

import dataclasses
import math
from typing import ClassVar

import numpy as np
from scipy import optimize, sparse

from mdpsim._core.validation import check_choice, check_scalar
from mdpsim.errors import InputError
from mdpsim.mechanisms.base import Mechanism, register
from mdpsim.mechanisms.interp.anchor_lp import AnchorSolution, solve_anchor_lp
from mdpsim.mechanisms.interp.correction import (
    AxisWarp,
    anchor_deltas,
    dual_norm,
    linear_slope_bound,
    split_budget,
)
from mdpsim.mechanisms.interp.grid import AnchorGrid, as_locations
from mdpsim.privacy.guarantees import PureMDP
from mdpsim.privacy.sampling import sample_rows

P_OF_METRIC = {"l1": 1.0, "l2": 2.0, "linf": math.inf, "road": 2.0}
# Bounds of the budget split searched by budget_split="optimize" (0 or 1 starve one axis).
_SPLIT_BOUNDS = (0.02, 0.98)
_SPLIT_XATOL = 0.01
_CHUNK = 4096
_RATIO_ROWS = 256  # secrets per block when comparing lp and domain distances


@register("interp")
class InterpMechanism(Mechanism):
    """Anchor LP + corrected log-convex interpolation; eps-mDP for the lp norm everywhere.

    Parameters
    ----------
    epsilon
        Budget per km.
    spacing_m
        Largest anchor spacing in metres (the grid exactly spans the secrets' box).
    p
        1, 2 or ``math.inf`` (or ``"inf"``); ``None`` takes it from the domain's metric
        (``road`` uses 2: road distance >= straight-line distance).
    budget_split
        Fraction in [0, 1] setting ``(eps_1, eps_2)`` on ``||.||_q = epsilon`` (0.5 =
        equal, see ``correction.split_budget``), or ``"optimize"``: minimise the utility
        loss on the secrets over the split (bounded scalar search, one LP per step).
    warp
        Take the interpolation steps at a warped speed (slow next to the anchors, where the
        normaliser moves most), which lets the anchors use more of the budget
        (``correction.AxisWarp``); ``False``: plain steps with the linear bound.
    naive
        Skip the correction: anchors at the full per-axis budgets, plain steps. Kept only to
        show the off-anchor violations; its guarantee is the larger budget it truly meets.
    """

    conformance_params: ClassVar[dict] = {"spacing_m": 500.0}
    # Measured (docs/reliability.md): HiGHS refuses the anchor LP's e^delta coefficients from
    # eps x diameter 179 (40 places, l2, 500 m spacing).
    eps_diameter_range: ClassVar[tuple[float, float]] = (1e-3, 100.0)

    def __init__(
        self,
        epsilon: float,
        *,
        spacing_m: float = 100.0,
        p: float | str | None = None,
        budget_split: float | str = 0.5,
        warp: bool = True,
        naive: bool = False,
    ) -> None:
        super().__init__(epsilon)
        self.spacing_m = check_scalar(
            spacing_m, "spacing_m", min=0, include_boundaries="neither", unit="m"
        )
        self.p = None if p is None else _check_p(p)
        if budget_split != "optimize":
            budget_split = check_scalar(
                budget_split, "budget_split", min=0, max=1, unit="or 'optimize'"
            )
        self.budget_split = budget_split
        self.warp = check_scalar(warp, "warp", kind=bool)
        self.naive = check_scalar(naive, "naive", kind=bool)

    # ------------------------------------------------------------------ fitting
    def _fit(self, domain) -> tuple[np.ndarray, dict]:
        p = self.p if self.p is not None else P_OF_METRIC[domain.metric]
        scale = _norm_to_metric_ratio(domain, p)
        base = AnchorGrid.covering(domain.x_xy, spacing_m=self.spacing_m)
        eps = self.epsilon / scale

        def solve(fraction: float) -> tuple[AnchorSolution, AnchorGrid, tuple, tuple]:
            eps_xy = split_budget(eps, p, fraction)
            deltas = self._deltas(base, eps_xy)
            grid = base
            if self.warp and not self.naive:
                grid = dataclasses.replace(
                    base,
                    warp_x=AxisWarp.for_deltas(deltas[0], deltas[1]),
                    warp_y=AxisWarp.for_deltas(deltas[1], deltas[0]),
                )
            cost = _surrogate_cost(grid, domain)
            sol = solve_anchor_lp(grid, cost, delta_x=deltas[0], delta_y=deltas[1])
            return sol, grid, eps_xy, deltas

        n_solves = 0
        if self.budget_split == "optimize" and p != 1 and base.nx > 1 and base.ny > 1:
            cache: dict[float, tuple] = {}

            def loss(fraction: float) -> float:
                cache[fraction] = solve(fraction)
                sol, grid = cache[fraction][:2]
                return _true_loss(grid, sol, domain)

            res = optimize.minimize_scalar(
                loss, bounds=_SPLIT_BOUNDS, method="bounded", options={"xatol": _SPLIT_XATOL}
            )
            fraction = float(res.x)
            n_solves = len(cache)
            sol, grid, eps_xy, deltas = cache.get(fraction) or solve(fraction)
        else:
            fraction = 0.5 if self.budget_split == "optimize" else float(self.budget_split)
            sol, grid, eps_xy, deltas = solve(fraction)
            n_solves = 1
        self.grid_ = grid
        self.p_ = p
        self.metric_scale_ = scale
        self.eps_xy_ = eps_xy
        self.outputs_xy_ = domain.y_xy
        self._solution = sol
        rates = self._certified_rates(grid, sol)
        self.certified_epsilon_ = dual_norm(rates, p) * scale
        matrix = self.distribution_at(domain.x_xy)
        info = {
            "p": p,
            "n_anchors": grid.n_anchors,
            "anchor_shape": (grid.nx, grid.ny),
            "anchor_spacing_m": (grid.hx, grid.hy),
            "warped": grid.warp_x is not None,
            "eps_1": eps_xy[0],
            "eps_2": eps_xy[1],
            "budget_split": fraction,
            "delta_1": sol.delta_x,
            "delta_2": sol.delta_y,
            "delta_targets": deltas,
            "certified_epsilon": self.certified_epsilon_,
            "metric_scale": scale,
            "surrogate_loss_km": sol.objective,
            "n_lp_solves": n_solves,
            "solver_status": sol.status,
            "anchor_lp_margin": sol.margin,
        }
        return matrix, info

    def _deltas(self, grid: AnchorGrid, eps_xy: tuple[float, float]) -> tuple[float, float]:
        """Anchor log-ratio bounds per edge (km budgets times spacings in km)."""
        tx = eps_xy[0] * grid.hx / 1000.0 if grid.nx > 1 else 0.0
        ty = eps_xy[1] * grid.hy / 1000.0 if grid.ny > 1 else 0.0
        if self.naive:
            return tx, ty
        return anchor_deltas(tx, ty, warp=self.warp)

    @staticmethod
    def _certified_rates(grid: AnchorGrid, sol: AnchorSolution) -> tuple[float, float]:
        """Per-axis rates (per km) implied by the realised anchor log-ratios."""
        dx, dy = sol.delta_x, sol.delta_y
        if grid.warp_x is not None and grid.warp_y is not None:
            per_cell = (grid.warp_x.rate_for(dx, dy), grid.warp_y.rate_for(dy, dx))
        else:
            per_cell = (linear_slope_bound(dx, dy), linear_slope_bound(dy, dx))
        rx = per_cell[0] / (grid.hx / 1000.0) if grid.nx > 1 else 0.0
        ry = per_cell[1] / (grid.hy / 1000.0) if grid.ny > 1 else 0.0
        return rx, ry

    # --------------------------------------------------------------- guarantee
    @property
    def guarantee(self) -> PureMDP:
        """Pure eps-mDP for the lp norm at every location; naive: the budget it truly meets."""
        if not self.naive:
            note = "lp-norm mDP at every location of the plane (anchor interpolation)"
            return PureMDP(self.epsilon, note=note)
        # Naive anchors: per-axis slope <= 2 delta always; after fitting, the formula's bound.
        eps = getattr(self, "certified_epsilon_", 2.0 * self.epsilon)
        note = "naive interpolation: anchors at the full budget, weaker off the anchors"
        return PureMDP(min(eps, 2.0 * self.epsilon), note=note)

    # ------------------------------------------------------- continuous locations
    def log_distribution_at(self, xy) -> np.ndarray:
        """Log-probabilities over the outputs at locations (metres): ``(K,)`` or ``(n, K)``."""
        sol = self._fitted_solution()
        pts = as_locations(xy)
        out = np.full((len(pts), len(sol.support)), -np.inf)
        for start in range(0, len(pts), _CHUNK):
            block = slice(start, start + _CHUNK)
            out[block, sol.support] = self.grid_.interpolate_log(sol.log_rows, pts[block])
        return out[0] if np.ndim(xy) == 1 else out

    def distribution_at(self, xy) -> np.ndarray:
        """Probabilities over the outputs ``outputs_xy_`` at locations (metres)."""
        P = np.exp(self.log_distribution_at(xy))
        return P / P.sum(axis=-1, keepdims=True)

    def sample_at(self, xy, rng: np.random.Generator) -> np.ndarray | int:
        """Output index (or indices) drawn exactly for location(s) in metres."""
        P = np.atleast_2d(self.distribution_at(xy))
        draws = sample_rows(P, np.arange(len(P)), rng)
        return int(draws[0]) if np.ndim(xy) == 1 else draws

    def _fitted_solution(self) -> AnchorSolution:
        try:
            return self._solution
        except AttributeError:
            raise RuntimeError("InterpMechanism is not fitted; call fit(domain)") from None


# ------------------------------------------------------------------ helpers
def _check_p(p) -> float:
    if isinstance(p, str) and p.lower() in ("inf", "infinity"):
        return math.inf
    return float(check_choice(p, "p", (1, 2, math.inf)))


def _norm_to_metric_ratio(domain, p: float) -> float:
    """``max(1, max_ij ||x_i - x_j||_p / d(x_i, x_j))`` (1 when the metric is that lp norm).

    The mechanism bounds losses by ``eps * ||dx||_p``; dividing eps by this ratio makes that
    at most ``eps * d`` on the domain (e.g. road lengths a hair shorter than the chord).
    """
    if domain.metric == {1.0: "l1", 2.0: "l2", math.inf: "linf"}[p]:
        return 1.0
    xy_km = domain.x_xy / 1000.0
    worst = 0.0
    for start in range(0, domain.n_x, _RATIO_ROWS):
        rows = slice(start, start + _RATIO_ROWS)
        norm = np.linalg.norm(xy_km[rows, None, :] - xy_km[None, :, :], ord=p, axis=2)
        d = domain.dist_xx[rows]
        if np.any((d <= 0) & (norm > 0)):
            raise InputError("two secrets at distinct places have distance 0 in the domain metric")
        with np.errstate(divide="ignore", invalid="ignore"):
            worst = max(worst, float(np.where(d > 0, norm / d, 0.0).max()))
    return max(1.0, worst)


def _true_loss(grid: AnchorGrid, sol: AnchorSolution, domain) -> float:
    """Expected loss (km) on the secrets of the interpolated rows (not the LP surrogate)."""
    P = np.exp(grid.interpolate_log(sol.log_rows, domain.x_xy))
    return float(domain.prior @ (P * domain.dist_xy[:, sol.support]).sum(axis=1))


def _surrogate_cost(grid: AnchorGrid, domain) -> np.ndarray:
    """``C[a, k] = sum_i pi_i w_ia dist_xy[i, k]``: secrets' loss spread on their anchors."""
    corners, w = grid.weights(domain.x_xy)
    n = domain.n_x
    W = sparse.csr_matrix(
        ((w * domain.prior[:, None]).ravel(), (np.repeat(np.arange(n), 4), corners.ravel())),
        shape=(n, grid.n_anchors),
    )
    return np.asarray(W.T @ domain.dist_xy)
