"""Budget split of DistA-LP: three upload budgets and the report budget (paper Eq. 20, Prop. 1).

Each user spends ``eps_dx``, ``eps_dy``, ``eps_cy`` (1/km) on the three privatised surrogate
uploads and ``eps_pt`` on the final report. Sequential composition (Prop. 1) gives an
end-to-end loss of ``eps_dx + eps_dy + eps_cy + eps_pt``; the accountant refuses any split
whose sum passes the total, and any NaN, infinite, negative or zero part (fail closed).
Failure probabilities of the probabilistic (PmDP) upload parts add up the same way and must
stay below 1.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from mdpsim._core.validation import check_epsilon
from mdpsim.errors import PrivacyBudgetError

BLOCKS = ("dx", "dy", "cy")
# Default fractions of the total budget: 10 % for each upload block, 70 % for the report.
DEFAULT_FRACTIONS = {"dx": 0.1, "dy": 0.1, "cy": 0.1, "pt": 0.7}
# Sums are compared with a relative slack of this size: rounding of the parts, never more.
_SUM_RTOL = 1e-12


def _check_part(value, name: str) -> float:
    return check_epsilon(value, name, error=PrivacyBudgetError)


@dataclass(frozen=True)
class BudgetSplit:
    """A validated split of ``total`` (1/km) into the four DistA-LP releases."""

    total: float
    dx: float
    dy: float
    cy: float
    pt: float

    def __post_init__(self) -> None:
        for name in ("total", "dx", "dy", "cy", "pt"):
            object.__setattr__(self, name, _check_part(getattr(self, name), f"eps_{name}"))
        spent = self.spent
        if spent > self.total * (1.0 + _SUM_RTOL):
            raise PrivacyBudgetError(
                f"eps_dx + eps_dy + eps_cy + eps_pt = {spent:.6g} exceeds the total "
                f"epsilon {self.total:.6g} per km; lower the parts so they sum to at most it"
            )

    @property
    def spent(self) -> float:
        """The composed end-to-end budget (Prop. 1), in 1/km."""
        return math.fsum((self.dx, self.dy, self.cy, self.pt))

    @property
    def upload(self) -> dict[str, float]:
        """Per-block upload budgets, keyed ``"dx"``, ``"dy"``, ``"cy"``."""
        return {b: getattr(self, b) for b in BLOCKS}

    @classmethod
    def default(cls, total: float) -> BudgetSplit:
        """10 % of ``total`` per upload block and 70 % for the report."""
        t = _check_part(total, "epsilon")
        return cls(t, *(t * DEFAULT_FRACTIONS[k] for k in ("dx", "dy", "cy", "pt")))


def compose_pmdp(parts) -> tuple[float, float]:
    """Sequential composition of ``(eps, delta)`` PmDP parts (Prop. 1): sums, delta < 1.

    ``eps`` must be finite and >= 0, ``delta`` in ``[0, 1)``; the summed delta must stay < 1.
    """
    eps_sum, delta_sum = [], []
    for i, (eps, delta) in enumerate(parts):
        e, d = float(eps), float(delta)
        if not math.isfinite(e) or e < 0:
            raise PrivacyBudgetError(f"part {i}: eps={eps!r} must be finite and >= 0")
        if not math.isfinite(d) or not 0 <= d < 1:
            raise PrivacyBudgetError(f"part {i}: delta={delta!r} must be in [0, 1)")
        eps_sum.append(e)
        delta_sum.append(d)
    total_delta = math.fsum(delta_sum)
    if total_delta >= 1:
        raise PrivacyBudgetError(f"composed delta {total_delta:.6g} must stay < 1 (Prop. 1)")
    return math.fsum(eps_sum), total_delta
