"""The anchor grid and normalised log-convex interpolation between its rows.

Anchors sit on a regular grid covering a bounding box; anchor ``a = j * nx + i`` is at
``(x0 + i * hx, y0 + j * hy)`` (metres). A location in the cell with lower-left anchor
``(i, j)`` and local coordinates ``t, s`` in [0, 1] gets

    log P(k) = (1-t)(1-s) L[i,j,k] + t(1-s) L[i+1,j,k] + (1-t)s L[i,j+1,k] + ts L[i+1,j+1,k]
               - logsumexp_k(...)

which is one log-convex step along x on the cell's two horizontal edges followed by one
along y (normalising in between only rescales, so the order does not matter). With axis warps
(``correction.AxisWarp``) the weights use ``phi_x(t)`` and ``phi_y(s)`` instead of ``t`` and
``s``: the same steps, taken at a varying speed. Locations outside the box are clamped to it
first (clamping shrinks every coordinate difference).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from mdpsim.errors import InputError
from mdpsim.mechanisms.interp.correction import AxisWarp

#: Most anchors a grid may have: the anchor LP has one variable per anchor and output, and a
#: 100 x 100 grid is already minutes (docs/reliability.md, "Absurd numbers").
MAX_ANCHORS = 10_000


@dataclass(frozen=True)
class AnchorGrid:
    """A regular grid of anchors: origin and spacings in metres, counts along x and y, and
    optional warps of the local coordinate along each axis (``None``: linear)."""

    x0: float
    y0: float
    hx: float
    hy: float
    nx: int
    ny: int
    warp_x: AxisWarp | None = None
    warp_y: AxisWarp | None = None

    @classmethod
    def covering(cls, xy: np.ndarray, *, spacing_m: float) -> AnchorGrid:
        """The coarsest grid with spacing at most ``spacing_m`` whose box is ``xy``'s box."""
        lo, hi = xy.min(axis=0), xy.max(axis=0)
        width = hi - lo
        per_axis = [float(w) / spacing_m + 2.0 if w > 0 else 1.0 for w in width]  # no overflow
        if per_axis[0] * per_axis[1] > MAX_ANCHORS:
            fewest = max(width) / (math.isqrt(MAX_ANCHORS) - 2)
            raise InputError(
                f"interp: spacing_m={spacing_m:g} puts about {per_axis[0] * per_axis[1]:.3g} "
                f"anchors on the secrets' {width[0]:.0f} x {width[1]:.0f} m box, above "
                f"{MAX_ANCHORS:,} (one LP variable per anchor and output); use spacing_m >= "
                f"{math.ceil(fewest)}"
            )
        counts = [max(1, math.ceil(w / spacing_m - 1e-9)) + 1 if w > 0 else 1 for w in width]
        steps = [w / (c - 1) if c > 1 else 1.0 for w, c in zip(width, counts, strict=True)]
        return cls(float(lo[0]), float(lo[1]), steps[0], steps[1], counts[0], counts[1])

    @property
    def n_anchors(self) -> int:
        """Number of anchors ``nx * ny``."""
        return self.nx * self.ny

    @property
    def xy(self) -> np.ndarray:
        """Anchor coordinates in metres, shape ``(nx * ny, 2)``, x fastest."""
        gx, gy = np.meshgrid(
            self.x0 + self.hx * np.arange(self.nx), self.y0 + self.hy * np.arange(self.ny)
        )
        return np.column_stack([gx.ravel(), gy.ravel()])

    def edges(self) -> tuple[np.ndarray, np.ndarray]:
        """Anchor index pairs ``(a, b)`` of the x-edges and of the y-edges, each ``(E, 2)``."""
        idx = np.arange(self.n_anchors).reshape(self.ny, self.nx)
        ex = np.column_stack([idx[:, :-1].ravel(), idx[:, 1:].ravel()])
        ey = np.column_stack([idx[:-1, :].ravel(), idx[1:, :].ravel()])
        return ex, ey

    def locate(self, xy: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Cell corners ``(i, j)`` and (warped) local coordinates ``(t, s)`` in [0, 1]."""
        xy = as_locations(xy)
        i, t = _axis(xy[:, 0], self.x0, self.hx, self.nx)
        j, s = _axis(xy[:, 1], self.y0, self.hy, self.ny)
        if self.warp_x is not None:
            t = self.warp_x(t)
        if self.warp_y is not None:
            s = self.warp_y(s)
        return i, j, t, s

    def weights(self, xy: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Corner anchors ``(n, 4)`` and bilinear weights ``(n, 4)`` of points."""
        i, j, t, s = self.locate(xy)
        i1 = np.minimum(i + 1, self.nx - 1)
        j1 = np.minimum(j + 1, self.ny - 1)
        corners = np.column_stack(
            [j * self.nx + i, j * self.nx + i1, j1 * self.nx + i, j1 * self.nx + i1]
        )
        w = np.column_stack([(1 - t) * (1 - s), t * (1 - s), (1 - t) * s, t * s])
        return corners, w

    def interpolate_log(self, log_rows: np.ndarray, xy: np.ndarray) -> np.ndarray:
        """Normalised log-probabilities ``(n, K)`` at points, from anchor log rows ``(A, K)``.

        Entries of ``log_rows`` must be finite (outputs with zero probability are dropped
        by the caller).
        """
        corners, w = self.weights(xy)
        f = np.einsum("nc,nck->nk", w, log_rows[corners])
        peak = f.max(axis=1, keepdims=True)
        f -= peak
        f -= np.log(np.exp(f).sum(axis=1, keepdims=True))
        return f


def as_locations(xy) -> np.ndarray:
    """Locations in metres as a float ``(n, 2)`` array (one location may be given as ``(2,)``)."""
    arr = np.asarray(xy, dtype=float)
    if arr.ndim == 1:
        arr = arr[None, :]
    if arr.ndim != 2 or arr.shape[1] != 2:
        raise InputError(f"locations must have shape (2,) or (n, 2) in metres, got {arr.shape}")
    if not np.all(np.isfinite(arr)):
        raise InputError("locations contain NaN or inf")
    return arr


def _axis(v: np.ndarray, origin: float, step: float, count: int) -> tuple[np.ndarray, np.ndarray]:
    """Cell index in [0, count-2] and offset in [0, 1] along one axis (clamped)."""
    if count == 1:
        return np.zeros(len(v), dtype=np.int64), np.zeros(len(v))
    u = np.clip((v - origin) / step, 0.0, count - 1.0)
    cell = np.minimum(np.floor(u).astype(np.int64), count - 2)
    return cell, u - cell
