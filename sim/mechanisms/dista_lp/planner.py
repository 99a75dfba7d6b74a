"""DistA-LP's server planners: one exactly ``eps_pt``-mDP matrix over all of X from the plan.

The server plans for a weight per secret (the prior, the posteriors of location uploads, or
the prior on the neighbourhoods it located) and releases one matrix over all of X:

* ``"lp_medoids"``: the city-scale LP over prior-weighted medoid outputs
  (sim/mechanisms/lp/medoids.py) for the weights; the default for ``none`` / ``location``.
* ``"blocks"``: the EM over X improved block by block (full_domain.py), on the rows the upload
  scheme asks for, else on tiles of ``tile_size`` secrets; the only planner for the surrogate
  modes. ``n_near`` outputs are optimised freely per row, ``sweeps`` passes over the blocks.
"""

from __future__ import annotations

import numpy as np

from mdpsim._core.validation import check_positive_int
from mdpsim.mechanisms.base import make
from mdpsim.mechanisms.dista_lp.full_domain import release_full_domain, tiles

PLANNERS = ("blocks", "lp_medoids")
TILE_SIZE, N_NEAR, SWEEPS = 40, 15, 2


def plan(
    name: str,
    domain,
    eps_pt: float,
    weights: np.ndarray,
    blocks: list[np.ndarray] | None,
    *,
    margin: float,
    tile_size: int = TILE_SIZE,
    n_near: int = N_NEAR,
    sweeps: int = SWEEPS,
) -> tuple[np.ndarray, dict]:
    """The matrix planner ``name`` releases for ``weights`` (per secret, unnormalised) and
    its info (``n_blocks``: how many blocks were improved)."""
    if name == "lp_medoids":
        planned = make("lp_medoids", epsilon=eps_pt, margin=margin, bound=None)
        planned.fit(domain.with_prior(weights / weights.sum()))
        return planned.matrix_, {"n_blocks": 0, "planner_info": planned.info_}
    rows = tiles(domain.x_xy, tile_size) if blocks is None else blocks
    Z, info = release_full_domain(
        domain, eps_pt, rows, weights, n_near=n_near, sweeps=sweeps, margin=margin
    )
    return Z, {"n_blocks": len(rows), **info}


def check_blocks_params(tile_size: int, n_near: int, sweeps: int) -> tuple[int, int, int]:
    """The blocks planner's parameters, validated."""
    return (
        check_positive_int(tile_size, "tile_size", minimum=2),
        check_positive_int(n_near, "n_near"),
        check_positive_int(sweeps, "sweeps", minimum=0),
    )
