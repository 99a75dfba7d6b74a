"""COPT (Imola et al. UAI'22): the weighted exponential mechanism with an LP on exempt entries.

For each output ``y_k`` the exempt set ``I(y_k)`` is its ``n_exempt`` nearest secrets; every
other entry follows the WEM. Two WEM forms (docs/copt.md):

* ``"em"`` (default): ``Z[i,k] = w_k exp(-eps d_ik / 2) / S_i`` with the EM's row normaliser
  ``S_i`` fixed in advance. ``w = 1`` with the exempt entries at their EM values is the EM, a
  feasible point, so the LP is always feasible and COPT's loss is at most the EM's.
* ``"plain"``: ``Z[i,k] = w_k exp(-eps d_ik / 2)`` (the WEM form of docs/design.md §2). Every
  entry of a column is tied to one ``w_k`` within narrow bands, so no ``w`` may make every
  row sum to 1 (Helsinki road, |X| = 200-400, eps 4/km, r = 10): then ``SolverError``.

The LP (sim/mechanisms/lp/wem.py) optimises the exempt entries and ``w``; exempt-exempt
constraints use the domain's chaining pairs (valid, see docs/dista_lp.md). The LP runs at
``epsilon * (1 - margin)`` and the released matrix must pass the exact verifier at ``epsilon``.
"""

from __future__ import annotations

import numpy as np

from mdpsim._core.validation import check_margin, check_positive_int
from mdpsim.errors import InputError, SolverError
from mdpsim.mechanisms.base import Mechanism, register
from mdpsim.mechanisms.em import exponential_matrix
from mdpsim.mechanisms.lp.repair import FIRST_MARGIN, MAX_MARGIN
from mdpsim.mechanisms.lp.wem import (
    BlockLP,
    build_block,
    em_log_normaliser,
    nearest_secrets_exempt,
    released_matrix,
    solve_direct,
)

WEM_FORMS = ("em", "plain")


def domain_block(domain, exempt: np.ndarray, epsilon: float, *, em_form: bool) -> BlockLP:
    """COPT's WEM+LP over the whole domain: one block, cost ``pi_i d(x_i, y_k)``, the
    domain's chaining pairs, and the EM-normalised WEM form if ``em_form``."""
    return build_block(
        domain.dist_xx,
        domain.dist_xy,
        domain.prior[:, None] * domain.dist_xy,
        exempt,
        epsilon,
        pairs=domain.constraint_pairs,
        check_wem_pairs=False,  # the domain's distances are a metric on X and Y
        log_row_norm=em_log_normaliser(domain.dist_xy, epsilon) if em_form else None,
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
    wem_form
        ``"em"``: WEM factors divided by the EM's row normaliser (always feasible);
        ``"plain"``: the unnormalised factors (may be infeasible: ``SolverError``).
    margin
        The LP is solved at ``epsilon * (1 - margin)`` to absorb solver round-off (default
        ``FIRST_MARGIN``, 1e-6; the release grows it tenfold while the exact check fails).
    time_limit_s
        HiGHS time limit in seconds (``None``: no limit); hitting it raises ``SolverError``.
    """

    def __init__(
        self,
        epsilon: float,
        *,
        n_exempt: int = 10,
        wem_form: str = "em",
        margin: float = FIRST_MARGIN,
        time_limit_s: float | None = None,
    ) -> None:
        super().__init__(epsilon)
        self.n_exempt = check_positive_int(n_exempt, "n_exempt")
        if wem_form not in WEM_FORMS:
            raise InputError(f"wem_form={wem_form!r} must be one of {WEM_FORMS}")
        self.wem_form = wem_form
        self.margin = check_margin(margin, MAX_MARGIN, include_boundaries="left")
        if time_limit_s is not None and not (float(time_limit_s) > 0):
            raise InputError(f"time_limit_s={time_limit_s!r} must be > 0 seconds or None")
        self.time_limit_s = time_limit_s

    def _fit(self, domain) -> tuple[np.ndarray, dict]:
        eps_lp = self.epsilon * (1.0 - self.margin)
        exempt = nearest_secrets_exempt(domain.dist_xy, self.n_exempt)
        em_form = self.wem_form == "em"
        block = domain_block(domain, exempt, eps_lp, em_form=em_form)
        try:
            sol = solve_direct([block], time_limit_s=self.time_limit_s)
        except SolverError as err:
            hint = (
                "the EM is a feasible point of this form: the LP is not infeasible, see the status"
                if em_form
                else "an infeasible plain WEM+LP means no common weights w fit every row: use "
                'wem_form="em" (always feasible) or a larger n_exempt'
            )
            raise SolverError(
                f"COPT (n_exempt={self.n_exempt}, wem_form={self.wem_form!r}): {err}; {hint}"
            ) from err
        Z, info = released_matrix(
            block.assemble(sol.z[0], sol.w),
            domain.dist_xx,
            self.epsilon,
            pairs=domain.constraint_pairs,
            margin=self.margin,
            who="COPT",
        )
        info = {
            **sol.info,
            **info,
            "lp_objective": sol.objective,
            "n_exempt_vars": block.n_z,
            "wem_form": self.wem_form,
        }
        if em_form:  # the objective at the feasible point (w = 1, z = EM): an upper bound
            cost = domain.prior[:, None] * domain.dist_xy
            info["em_point_objective"] = float(
                np.sum(cost * exponential_matrix(domain.dist_xy, eps_lp))
            )
        return Z, info
