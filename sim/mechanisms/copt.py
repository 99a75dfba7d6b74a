"""COPT (Imola et al. UAI'22): the weighted exponential mechanism with an LP on exempt entries.

For each output ``y_k`` the exempt set ``I(y_k)`` is its ``n_exempt`` nearest secrets; every
other entry is ``w_k exp(-eps d(x_i, y_k) / 2)``. The LP (sim/mechanisms/wem_lp.py) optimises
the exempt entries and ``w``; exempt-exempt constraints use the domain's chaining pairs
(valid, see docs/dista_lp.md). The LP runs at ``epsilon * (1 - margin)`` and the released
matrix must pass the exact verifier at ``epsilon``.
"""

from __future__ import annotations

from typing import ClassVar

import numpy as np

from sim.errors import InputError, SolverError
from sim.mechanisms.base import Mechanism, check_positive_int, register
from sim.mechanisms.wem_lp import (
    build_block,
    check_budget_margin,
    nearest_secrets_exempt,
    released_matrix,
    solve_direct,
)


@register("copt")
class COPT(Mechanism):
    """WEM + LP over the whole domain.

    Parameters
    ----------
    epsilon
        Budget in 1/km.
    n_exempt
        Size of each exempt set ``I(y_k)`` (the r nearest secrets of ``y_k``).
    margin
        The LP is solved at ``epsilon * (1 - margin)`` to absorb solver round-off.
    time_limit_s
        HiGHS time limit in seconds (``None``: no limit); hitting it raises ``SolverError``.
    """

    conformance_params: ClassVar[dict] = {"n_exempt": 16}

    def __init__(
        self,
        epsilon: float,
        *,
        n_exempt: int = 10,
        margin: float = 1e-4,
        time_limit_s: float | None = None,
    ) -> None:
        super().__init__(epsilon)
        self.n_exempt = check_positive_int(n_exempt, "n_exempt")
        self.margin = check_budget_margin(margin)
        if time_limit_s is not None and not (float(time_limit_s) > 0):
            raise InputError(f"time_limit_s={time_limit_s!r} must be > 0 seconds or None")
        self.time_limit_s = time_limit_s

    def _fit(self, domain) -> tuple[np.ndarray, dict]:
        eps_lp = self.epsilon * (1.0 - self.margin)
        exempt = nearest_secrets_exempt(domain.dist_xy, self.n_exempt)
        block = build_block(
            domain.dist_xx,
            domain.dist_xy,
            domain.prior[:, None] * domain.dist_xy,
            exempt,
            eps_lp,
            pairs=domain.constraint_pairs,
            check_wem_pairs=False,  # the domain's distances are a metric on X and Y
        )
        try:
            sol = solve_direct([block], time_limit_s=self.time_limit_s)
        except SolverError as err:
            raise SolverError(
                f"COPT (n_exempt={self.n_exempt}): {err}; an infeasible WEM+LP means no common "
                "weights w fit every row: a larger n_exempt widens the exempt sets"
            ) from err
        Z, info = released_matrix(
            block.assemble(sol.z[0], sol.w),
            domain.dist_xx,
            self.epsilon,
            pairs=domain.constraint_pairs,
            margin=self.margin,
            who="COPT",
        )
        return Z, {**sol.info, **info, "lp_objective": sol.objective, "n_exempt_vars": block.n_z}
