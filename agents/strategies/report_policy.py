"""Report policies: whether each user reports at a tick.

A user decides at the start of the tick from what it knows then (:class:`ReportContext`): its
own budget and the public facts of the mechanism in force (what a report costs, its expected
loss). Whether a user reports is visible to the server, so no policy here looks at the user's
location: the decision adds nothing to what the server learns beyond the accounted reports.

* ``always``: report whenever the filter can pay;
* ``budget_aware``: never spend ahead of a linear schedule, so the budget lasts the horizon:
  report at tick ``t`` iff ``spent + cost <= B * t / horizon``;
* ``threshold``: report iff the mechanism's expected loss (prior-averaged, km) is at most
  ``max_expected_loss_km``.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from mdpsim._core.component import Component, ReturnCheck, array_problem
from mdpsim._core.registry import Registry
from mdpsim._core.validation import check_scalar

REPORT_POLICIES: Registry[ReportPolicy] = Registry("report policy")


@dataclass(frozen=True)
class ReportContext:
    """What users know when they decide (arrays are per user)."""

    tick: int
    horizon_ticks: int
    remaining: np.ndarray
    capacity: np.ndarray
    halted: np.ndarray
    report_cost: float
    expected_loss_km: float


class ReportPolicy(Component, ABC):
    """Decides, for all users at once, who reports at the coming tick."""

    component_kind: ClassVar[str] = "report policy"
    return_checks: ClassVar[dict[str, ReturnCheck]] = {
        "decide": lambda result, ctx: array_problem(
            result, ctx.halted.shape, "b", "one bool per user"
        )
    }

    @abstractmethod
    def decide(self, ctx: ReportContext) -> np.ndarray:
        """Boolean per user: report this tick (the filter still has the last word)."""


@REPORT_POLICIES.register("always")
class Always(ReportPolicy):
    """Report whenever possible."""

    def decide(self, ctx: ReportContext) -> np.ndarray:
        return ~ctx.halted


@REPORT_POLICIES.register("budget_aware")
class BudgetAware(ReportPolicy):
    """Spend no faster than ``B * t / horizon``; ``horizon_ticks = 0``: the run's length."""

    def __init__(self, *, horizon_ticks: int = 0) -> None:
        self.horizon_ticks = check_scalar(
            horizon_ticks, "horizon_ticks", kind=int, min=0, owner="budget_aware"
        )

    def decide(self, ctx: ReportContext) -> np.ndarray:
        horizon = self.horizon_ticks or ctx.horizon_ticks
        allowance = ctx.capacity * min(ctx.tick / horizon, 1.0)
        spent = ctx.capacity - ctx.remaining
        return ~ctx.halted & (spent + ctx.report_cost <= allowance)


@REPORT_POLICIES.register("threshold")
class Threshold(ReportPolicy):
    """Report iff the mechanism's expected loss is at most ``max_expected_loss_km``."""

    def __init__(self, *, max_expected_loss_km: float = 0.5) -> None:
        self.max_expected_loss_km = check_scalar(
            max_expected_loss_km, "max_expected_loss_km", min=0, finite=False, owner="threshold"
        )

    def decide(self, ctx: ReportContext) -> np.ndarray:
        return ~ctx.halted & bool(ctx.expected_loss_km <= self.max_expected_loss_km)
