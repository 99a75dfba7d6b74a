"""The optimal mechanism (Bordenabe et al., CCS'14): ``make("lp")``, an LP solved by HiGHS.

The LP and its solver (output and constraint generation on the dual) are in
``solver.py``; this module is the registered mechanism and ``lp_path``.

Release: the LP is solved at ``eps (1 - margin)`` (default 1e-6), its solution repaired by the
Lipschitz envelope (sim/mechanisms/lp/repair.py) and verified EXACTLY at ``eps``; if the check
fails the margin grows tenfold (up to 1/2, where the repair is proven for any input) and the
LP is solved again, warm-started from the constraints that bound before. A solver that does
not reach optimality raises :class:`~mdpsim.errors.SolverError`; nothing unverified is released.
"""

from __future__ import annotations

import dataclasses
import time
from typing import ClassVar

import numpy as np

from mdpsim._core.validation import check_epsilon, check_margin, check_scalar
from mdpsim.errors import InputError
from mdpsim.mechanisms.base import Mechanism, register
from mdpsim.mechanisms.lp.coarse_to_fine import coarse_to_fine_warm_start
from mdpsim.mechanisms.lp.highs import HighsSettings
from mdpsim.mechanisms.lp.repair import FIRST_MARGIN, MAX_MARGIN, SIDES
from mdpsim.mechanisms.lp.solver import release_optimal


@register("lp")
class OptimalLP(HighsSettings, Mechanism):
    """The optimal eps-mDP mechanism for the domain's prior and loss (an LP, HiGHS).

    Parameters
    ----------
    epsilon
        Budget per km.
    margin
        The LP is solved at ``epsilon (1 - margin)`` so the repaired matrix verifies at
        ``epsilon``; tenfold on a failed exact check, up to 1/2. Default ``FIRST_MARGIN``
        (1e-6: the loss is ~1e-6 relative above the optimum, docs/lp.md).
    side
        Envelope side of the repair, ``"upper"`` (default) or ``"lower"``.
    coarse_to_fine
        Warm-start the LP from the same LP on nested subsets of the secrets, coarsest first
        (:func:`~mdpsim.mechanisms.lp.coarse_to_fine.coarse_to_fine_warm_start`; only for
        N >= 141 and without an ``lp_path`` warm start). Same optimum, fewer generation
        rounds. Default True (``levels`` before this round).
    time_limit_s, threads
        Wall-clock limit for the whole LP solve in seconds, the subsets included (hitting it
        raises ``SolverError``), HiGHS worker threads.
    """

    warm_start_: np.ndarray | None  # binding constraints of a smaller budget (lp_path)
    retired_params: ClassVar[dict[str, str]] = {
        **HighsSettings.retired_params,
        "levels": "coarse_to_fine",
    }

    def __init__(
        self,
        epsilon: float,
        *,
        margin: float = FIRST_MARGIN,
        side: str = "upper",
        coarse_to_fine: bool = True,
        time_limit_s: float | None = None,
        threads: int | None = None,
    ) -> None:
        super().__init__(epsilon)
        if side not in SIDES:
            raise InputError(f"side={side!r} must be one of {', '.join(SIDES)}")
        self.margin = check_margin(margin, MAX_MARGIN)
        self.side = side
        self.coarse_to_fine = check_scalar(coarse_to_fine, "coarse_to_fine", kind=bool)
        self._set_highs(time_limit_s, threads)

    def _fit(self, domain) -> tuple[np.ndarray, dict]:
        start = time.perf_counter()
        warm = getattr(self, "warm_start_", None)  # set by lp_path
        options = self._options()
        sizes: list[int] = []
        if warm is None and self.coarse_to_fine:
            lp_eps = self.epsilon * (1 - self.margin)
            warm, sizes = coarse_to_fine_warm_start(domain, lp_eps, options=options)
        subset_seconds = time.perf_counter() - start
        if options.time_limit_s is not None:
            options = dataclasses.replace(
                options, time_limit_s=max(options.time_limit_s - subset_seconds, 0.0)
            )
        weighted = domain.prior[:, None] * domain.dist_xy
        released, sol = release_optimal(
            weighted,
            domain.dist_xx,
            domain.constraint_pairs,
            self.epsilon,
            margin=self.margin,
            side=self.side,
            options=options,
            warm=warm,
            dual_restarts=True,
        )
        self.binding_ = sol.binding
        info = {
            "solver_status": sol.status,
            "lp_objective_km": sol.objective,
            "lp_epsilon": self.epsilon * (1 - released.margin),
            "margin_used": released.margin,
            "iterations": sol.iterations,
            "rounds": sol.rounds,
            "solve_seconds": sol.seconds,
            "warm_started": getattr(self, "warm_start_", None) is not None,
            "subsets": ",".join(map(str, sizes)),
            "subset_seconds": subset_seconds,
            "lp_rows": sol.full + domain.n_x,
            "generated_constraints": sol.generated,
            "outputs_in_model": sol.outputs,
            "pricing_solves": sol.priced,
            "repair_max_change": released.max_change,
            "verified_smallest_epsilon": released.verification.smallest_epsilon,
        }
        return released.matrix, info


def lp_path(domain, epsilons, **params) -> list[OptimalLP]:
    """Fit ``OptimalLP`` at each budget in ``epsilons``, each seeded with the constraints that
    bound at the previous budget (``binding_``)."""
    fitted, warm = [], None
    for eps in epsilons:
        mech = OptimalLP(check_epsilon(eps), **params)
        mech.warm_start_ = warm
        mech.fit(domain)
        warm = mech.binding_
        fitted.append(mech)
    return fitted
