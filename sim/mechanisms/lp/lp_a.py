"""LP-A: the optimal LP on a coarse g x g grid, mapped to the fine domain (provably eps-mDP).

Coarse secrets are the non-empty grid cells over the bounding box of X; each fine secret uses
the row of its cell. Coarse outputs are the fine outputs nearest (l2) to the cell centres;
a coarse output is released as that fine output. Two choices make the result eps-mDP under
the TRUE fine distances with no loss of budget (docs/lp.md):

* the coarse distance between cells a, b is ``D(a, b) = min_{i in a, j in b} d(x_i, x_j)``
  (true distances), replaced by its metric closure ``D' <= D`` (shortest paths over cells), so
  for fine ``i in a``, ``j in b``: ``Z[i,k] / Z[j,k] <= e^{eps D'(a,b)} <= e^{eps d(i,j)}``; two
  secrets in the same cell get identical rows (ratio 1);
* the coarse cost ``C[a, c] = sum_{i in a} pi_i d(x_i, y_{h(c)})`` makes the coarse LP minimise
  exactly the fine expected loss of the mapped mechanism.

The coarse LP is released like ``lp`` (margin, Lipschitz-envelope repair, exact check at eps
against ``D'``); ``Mechanism.fit`` then checks the fine matrix against the fine distances.
Cell-centre distances (the paper's LP-A) are not offered: they break mDP on the fine domain.
"""

from __future__ import annotations

import numpy as np
from scipy.sparse import csgraph
from scipy.spatial import cKDTree

from mdpsim._core.validation import check_scalar
from mdpsim.geo.domain import implied_free_pairs
from mdpsim.mechanisms.base import register
from mdpsim.mechanisms.lp.optimal import OptimalLP
from mdpsim.mechanisms.lp.repair import FIRST_MARGIN
from mdpsim.mechanisms.lp.solver import release_optimal

#: Most cells per side: the cell centres are ``grid^2`` points held at once (16 MB at 1,000).
MAX_GRID = 1_000


def coarse_cells(x_xy: np.ndarray, grid: int) -> tuple[np.ndarray, np.ndarray]:
    """Cell index (row-major over ``grid x grid``) of each point, and the cell centres (m)."""
    lo, hi = x_xy.min(axis=0), x_xy.max(axis=0)
    width = np.maximum(hi - lo, 1e-9) / grid
    ij = np.minimum(((x_xy - lo) / width).astype(np.int64), grid - 1)
    centres_1d = [lo[a] + (np.arange(grid) + 0.5) * width[a] for a in (0, 1)]
    cx, cy = np.meshgrid(*centres_1d, indexing="xy")
    return ij[:, 1] * grid + ij[:, 0], np.column_stack([cx.ravel(), cy.ravel()])


def min_cell_distances(dist_xx: np.ndarray, cell_of: np.ndarray) -> np.ndarray:
    """``D[a, b] = min`` true distance between members of cells a and b (dense cell ids)."""
    order = np.argsort(cell_of, kind="stable")
    starts = np.flatnonzero(np.r_[True, np.diff(cell_of[order]) != 0])
    by_row = np.minimum.reduceat(dist_xx[order], starts, axis=0)
    return np.minimum.reduceat(by_row[:, order], starts, axis=1)


@register("lp_a")
class CoarseLP(OptimalLP):
    """LP-A: the optimal LP on a ``grid x grid`` partition, eps-mDP on the fine domain.

    Parameters as :class:`~mdpsim.mechanisms.lp.optimal.OptimalLP`, plus ``grid`` (cells per side,
    default 8, at most ``MAX_GRID``).
    """

    def __init__(
        self,
        epsilon: float,
        *,
        grid: int = 8,
        margin: float = FIRST_MARGIN,
        side: str = "upper",
        time_limit_s: float | None = None,
        threads: int | None = None,
    ) -> None:
        super().__init__(
            epsilon, margin=margin, side=side, time_limit_s=time_limit_s, threads=threads
        )
        self.grid = check_scalar(grid, "grid", kind=int, min=1, max=MAX_GRID, owner="lp_a")

    def _fit(self, domain) -> tuple[np.ndarray, dict]:
        cell_raw, centres = coarse_cells(domain.x_xy, self.grid)
        cells, cell_of = np.unique(cell_raw, return_inverse=True)
        D = min_cell_distances(domain.dist_xx, cell_of)
        np.fill_diagonal(D, 0.0)
        D = csgraph.shortest_path(D, method="FW", directed=False)
        np.fill_diagonal(D, 0.0)
        outputs = np.unique(cKDTree(domain.y_xy).query(centres)[1])
        n_cells = len(cells)
        weighted = domain.prior[:, None] * domain.dist_xy[:, outputs]
        cost = np.zeros((n_cells, len(outputs)))
        np.add.at(cost, cell_of, weighted)
        pairs = implied_free_pairs(D)
        released, sol = release_optimal(
            cost,
            D,
            pairs,
            self.epsilon,
            margin=self.margin,
            side=self.side,
            options=self._options(),
        )
        matrix = np.zeros((domain.n_x, domain.n_y))
        matrix[:, outputs] = released.matrix[cell_of]
        info = {
            "solver_status": sol.status,
            "coarse_cells": n_cells,
            "coarse_outputs": len(outputs),
            "lp_epsilon": self.epsilon * (1 - released.margin),
            "margin_used": released.margin,
            "iterations": sol.iterations,
            "solve_seconds": sol.seconds,
            "lp_rows": 2 * len(pairs) * len(outputs) + n_cells,
        }
        return matrix, info
