"""Planar Laplace (Andrés et al., CCS'13) remapped to the nearest output.

The continuous mechanism adds noise with density ``eps'^2 / (2 pi) exp(-eps' |z - x|)`` in the
plane and reports the output whose (Euclidean) Voronoi cell ``V_k`` contains the noisy point,
so ``Z[i,k] = integral over V_k of that density centred at x_i``. It is eps'-mDP for the
Euclidean distance ``e`` of the secrets' coordinates, and post-processing keeps that. The
domain metric ``d`` may differ from ``e`` (road distance, l1, linf, projection error), so

    eps' = eps * min(1, min_{i != j} d(i,j) / e(i,j)) * (1 - QUADRATURE_MARGIN)

gives ``eps' e(i,j) <= eps d(i,j)`` for every pair: Z is eps-mDP under ``d``. The margin
absorbs the quadrature error (relative ~1e-14) and the base class certifies the released
matrix with the exact verifier. Derivation and accuracy: docs/mechanisms.md.

The cell integrals are computed, not sampled: a convex cell (clipped to a box so wide that the
density's mass outside is below 1e-40) splits into triangles with apex x; over the triangle
of edge e the radial integral is closed-form, ``1 - G(r)`` with ``G(r) = (1 + eps' r)
exp(-eps' r)``, leaving one smooth angular integral per edge, done by Gauss-Legendre panels
after the substitution ``t = h sinh v`` (``h`` = distance from x to the edge's line).
"""

from __future__ import annotations

import math
from typing import ClassVar

import numpy as np
from scipy.spatial import ConvexHull, Delaunay, HalfspaceIntersection, QhullError

from mdpsim.geo.domain import lp_distances
from mdpsim.mechanisms.base import Mechanism, register

QUADRATURE_MARGIN = 1e-6
_BOX_PAD = 100.0  # box half-margin in units of 1/eps': mass beyond < 101 e^-100
_PANEL_WIDTH = 0.5  # in v = asinh(t / h); the integrand's features are O(1) wide in v
_GL_X, _GL_W = np.polynomial.legendre.leggauss(8)
_EDGES_PER_CHUNK = 100_000


def effective_epsilon(epsilon: float, x_xy: np.ndarray, dist_xx: np.ndarray) -> tuple[float, float]:
    """``(eps', rho)``, ``rho = min(1, min d/e)`` over distinct secrets; ``x_xy`` in metres."""
    e = lp_distances(x_xy, x_xy, "l2")
    off = ~np.eye(len(x_xy), dtype=bool)
    if np.any(off & (e == 0) & (dist_xx > 0)):
        raise RuntimeError("two secrets share coordinates but not a location; cannot use laplace")
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(off & (e > 0), dist_xx / e, np.inf)
    rho = float(min(1.0, ratio.min())) if len(x_xy) > 1 else 1.0
    if not rho > 0:
        raise RuntimeError("a pair of secrets at distance 0 has distinct coordinates")
    return epsilon * rho * (1.0 - QUADRATURE_MARGIN), rho


def voronoi_cells(y_km: np.ndarray, box: tuple[float, float, float, float]) -> list[np.ndarray]:
    """The Euclidean Voronoi cell of each output clipped to ``box``, vertices counter-clockwise."""
    k = len(y_km)
    if len(np.unique(y_km, axis=0)) != k:
        raise RuntimeError("outputs must have distinct coordinates for the Voronoi remap")
    xmin, ymin, xmax, ymax = box
    walls = np.array([[1, 0, -xmax], [-1, 0, xmin], [0, 1, -ymax], [0, -1, ymin]], dtype=float)
    neighbours = _delaunay_neighbours(y_km)
    cells = []
    for c in range(k):
        others = y_km[neighbours[c]]
        # |z - y_c|^2 <= |z - y_l|^2  <=>  2 (y_l - y_c) . z - (|y_l|^2 - |y_c|^2) <= 0
        normal = 2.0 * (others - y_km[c])
        offset = -((others**2).sum(axis=1) - (y_km[c] ** 2).sum())
        halfspaces = np.vstack([np.column_stack([normal, offset]), walls])
        vertices = HalfspaceIntersection(halfspaces, y_km[c]).intersections
        hull = ConvexHull(vertices)
        cells.append(vertices[hull.vertices])  # 2-D hulls list vertices counter-clockwise
    return cells


def cell_masses(x_km: np.ndarray, cells: list[np.ndarray], epsilon: float) -> np.ndarray:
    """``M[i,k]`` = planar-Laplace(epsilon) mass of cell k around x_i (km, per km)."""
    starts = np.concatenate([[0], np.cumsum([len(c) for c in cells])])
    p = np.concatenate(cells)
    q = np.concatenate([np.roll(c, -1, axis=0) for c in cells])
    owner = np.repeat(np.arange(len(cells)), np.diff(starts))
    length = np.hypot(*(q - p).T)
    keep = length > 0
    p, q, owner, length = p[keep], q[keep], owner[keep], length[keep]
    unit = (q - p) / length[:, None]
    out = np.empty((len(x_km), len(cells)))
    rows = max(1, _EDGES_PER_CHUNK // len(p))
    for r0 in range(0, len(x_km), rows):
        x = x_km[r0 : r0 + rows]
        out[r0 : r0 + len(x)] = _chunk_masses(x, p, q, unit, length, owner, len(cells), epsilon)
    return out


def _chunk_masses(x, p, q, unit, length, owner, n_cells, eps) -> np.ndarray:
    rel_p = p[None, :, :] - x[:, None, :]
    rel_q = q[None, :, :] - x[:, None, :]
    cross = rel_p[..., 0] * rel_q[..., 1] - rel_p[..., 1] * rel_q[..., 0]
    h = np.abs(cross) / length
    sigma = np.sign(cross)
    sigma[h <= 1e-15] = 0.0  # x on the edge's line: the triangle has no area
    tp = (rel_p * unit).sum(axis=2)
    tq = tp + length
    safe_h = np.where(sigma != 0, h, 1.0)
    span = np.arctan2(tq, safe_h) - np.arctan2(tp, safe_h)
    winding = _per_cell(sigma * span, owner, n_cells) / (2 * math.pi)
    winding = np.round(2 * winding) / 2  # exactly 0, 1 (or 1/2 on a cell boundary)
    tail = _edge_tails(h, tp, tq, sigma, eps)
    return winding - _per_cell(sigma * tail, owner, n_cells) / (2 * math.pi)


def _edge_tails(h, tp, tq, sigma, eps) -> np.ndarray:
    """``integral over the edge's angular span of G(r(theta)) d theta`` for each (x, edge)."""
    out = np.zeros(h.shape)
    idx = np.nonzero(sigma)
    hh = h[idx]
    vp, vq = np.arcsinh(tp[idx] / hh), np.arcsinh(tq[idx] / hh)
    panels = np.maximum(1, np.ceil((vq - vp) / _PANEL_WIDTH)).astype(np.int64)
    width = (vq - vp) / panels
    which = np.repeat(np.arange(len(hh)), panels)
    first = np.repeat(np.cumsum(panels) - panels, panels)
    left = vp[which] + width[which] * (np.arange(len(which)) - first)
    half = 0.5 * width[which]
    v = (left + half)[:, None] + half[:, None] * _GL_X[None, :]
    cosh = np.cosh(v)
    r = hh[which][:, None] * cosh
    g = (1.0 + eps * r) * np.exp(-eps * r) / cosh
    panel_sums = (g @ _GL_W) * half
    out[idx] = np.bincount(which, weights=panel_sums, minlength=len(hh))
    return out


def _per_cell(values: np.ndarray, owner: np.ndarray, n_cells: int) -> np.ndarray:
    """Sum ``values[:, e]`` over the edges e of each cell."""
    out = np.zeros((values.shape[0], n_cells))
    np.add.at(out.T, owner, values.T)
    return out


def _delaunay_neighbours(y_km: np.ndarray) -> list[np.ndarray]:
    """Voronoi neighbour candidates of each output (all others when Delaunay cannot help)."""
    k = len(y_km)
    everyone = [np.delete(np.arange(k), c) for c in range(k)]
    if k < 4:
        return everyone
    try:
        indptr, indices = Delaunay(y_km).vertex_neighbor_vertices
    except QhullError:  # collinear outputs: every other output is a candidate
        return everyone
    return [indices[indptr[c] : indptr[c + 1]] for c in range(k)]


@register("laplace")
class PlanarLaplace(Mechanism):
    """Planar Laplace noise remapped to the nearest output, as an exact N x K matrix.

    Parameters
    ----------
    epsilon
        Privacy budget per km; the noise uses the effective ``eps'`` of the module doc
        (``info_["epsilon_effective"]``).
    """

    # Measured (docs/reliability.md): the quadrature loses far cells' masses from eps x
    # diameter 215 (40 places, l2) and the padded box grows past Qhull's precision below 1e-4.
    eps_diameter_range: ClassVar[tuple[float, float]] = (1e-2, 100.0)

    def __init__(self, epsilon: float) -> None:
        super().__init__(epsilon)

    def _fit(self, domain) -> tuple[np.ndarray, dict]:
        x_km = np.asarray(domain.x_xy) / 1000.0
        y_km = np.asarray(domain.y_xy) / 1000.0
        eps_eff, rho = effective_epsilon(self.epsilon, np.asarray(domain.x_xy), domain.dist_xx)
        centre = np.vstack([x_km, y_km]).mean(axis=0)
        x_c, y_c = x_km - centre, y_km - centre
        pts = np.vstack([x_c, y_c])
        pad = _BOX_PAD / eps_eff
        lo, hi = pts.min(axis=0) - pad, pts.max(axis=0) + pad
        cells = voronoi_cells(y_c, (lo[0], lo[1], hi[0], hi[1]))
        masses = cell_masses(x_c, cells, eps_eff)
        if not masses.min() > 0:
            raise RuntimeError(
                f"laplace: a computed cell mass is {masses.min():.3g} <= 0 (quadrature failed)"
            )
        defect = float(np.abs(masses.sum(axis=1) - 1.0).max())
        masses /= masses.sum(axis=1, keepdims=True)
        info = {"epsilon_effective": eps_eff, "metric_ratio": rho, "mass_defect": defect}
        return masses, info
