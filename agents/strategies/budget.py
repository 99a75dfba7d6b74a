"""Budget policies: each user's privacy filter, its currency and what it guarantees.

Every charge of a run (a report, an upload, a query) is converted by the policy's
:meth:`BudgetPolicy.charge` / :meth:`BudgetPolicy.query_costs`, which call the one conversion
in :mod:`mdpsim.privacy.filters` (:func:`~mdpsim.privacy.filters.charge_of`). A mechanism or query
the policy cannot charge is refused by :meth:`BudgetPolicy.check` before the run starts.

* ``cgp``: today's CGP filter, ``rho_per_km2`` per user for the whole run;
* ``pure_gp``: a pure GP filter, ``epsilon_per_km`` per user (pure reports only: no PmDP
  uploads, no Gaussian queries);
* ``renewing``: a CGP filter renewed every ``window_ticks`` ticks. Everything a user releases
  in one window (ticks ``kW+1 .. (k+1)W``) is ``rho``-CGP; over ``T`` ticks the whole run
  composes to ``ceil(T / W) * rho``, which :meth:`BudgetPolicy.statement` states.
"""

from __future__ import annotations

import functools
import math
from abc import ABC, abstractmethod
from typing import ClassVar

import numpy as np

from mdpsim._core.component import Component, ReturnCheck
from mdpsim._core.registry import Registry
from mdpsim._core.validation import check_positive_int, check_scalar
from mdpsim.errors import InputError
from mdpsim.privacy.accounting import CGP, Notion, PureGP
from mdpsim.privacy.filters import (
    Charge,
    PopulationFilter,
    charge_of,
    check_chargeable,
    currency_of,
    query_costs_in,
)
from mdpsim.privacy.guarantees import Guarantee

BUDGET_POLICIES: Registry[BudgetPolicy] = Registry("budget policy")


class BudgetPolicy(Component, ABC):
    """A filter per user and the conversion of stated guarantees into its currency."""

    component_kind: ClassVar[str] = "budget policy"
    return_checks: ClassVar[dict[str, ReturnCheck]] = {
        "charge": lambda result, guarantee: (
            None if isinstance(result, Charge) else f"{type(result).__name__}, not a Charge"
        ),
        "new_filter": lambda result, n_users: (
            None
            if isinstance(result, PopulationFilter)
            else f"{type(result).__name__}, not a PopulationFilter"
        ),
    }

    @property
    @abstractmethod
    def notion(self) -> Notion:
        """The notion and budget ``B`` of each user's filter."""

    @property
    def currency(self) -> str:
        """``epsilon_per_km`` or ``rho_per_km2``."""
        return currency_of(self.notion)

    def new_filter(self, n_users: int) -> PopulationFilter:
        """The users' filters at the start of a run."""
        return PopulationFilter(self.notion, n_users)

    def charge(self, guarantee: Guarantee) -> Charge:
        """What one use of a mechanism stating ``guarantee`` costs (raises if it cannot;
        TypeError for anything but PureMDP / PMDP / Composition)."""
        return charge_of(self.notion, guarantee)

    def query_costs(self, rho_per_km2) -> np.ndarray:
        """Per-user CGP query spends in this budget's currency (raises if it cannot)."""
        return query_costs_in(self.notion, rho_per_km2)

    def check(self, *, report, upload, queries: bool, fitted: bool = True) -> None:
        """Refuse, before the run, a mechanism or query this policy cannot charge.

        ``report`` / ``upload`` are the mechanism's guarantees (``upload`` may be None): the
        fitted one's, the very ones its reports and uploads are then charged, or with
        ``fitted=False`` an unfitted one's claims, refused by kind before any fit
        (:func:`~mdpsim.privacy.filters.check_chargeable`).
        """
        for what, guarantee in (("report", report), ("upload", upload)):
            if guarantee is None:
                continue
            try:
                if fitted:
                    self.charge(guarantee)
                else:
                    check_chargeable(self.notion, guarantee)
            except InputError as exc:
                raise InputError(
                    f"budget policy {self.name!r} cannot charge the mechanism's {what} "
                    f"guarantee ({guarantee}): {exc}"
                ) from None
        if queries:
            try:
                self.query_costs(np.zeros(1))
            except InputError as exc:
                raise InputError(f"budget policy {self.name!r}: {exc}") from None

    def end_of_tick(self, tick: int, filters: PopulationFilter) -> None:
        """Called after each tick's data collection (a renewing budget renews here)."""

    def statement(self, ticks: int) -> str:
        """The guarantee every user gets from this filter over a run of ``ticks`` ticks."""
        return f"{self.notion} per user over the whole run ({ticks} ticks)"


@BUDGET_POLICIES.register("cgp")
class CGPBudget(BudgetPolicy):
    """A CGP filter with ``rho_per_km2`` (1/km^2) per user for the whole run."""

    def __init__(self, *, rho_per_km2: float = 200.0) -> None:
        self.rho_per_km2 = _positive(rho_per_km2, "rho_per_km2")

    @property
    def notion(self) -> Notion:
        return _notion(CGP, self.rho_per_km2)


@BUDGET_POLICIES.register("pure_gp")
class PureGPBudget(BudgetPolicy):
    """A pure GP filter with ``epsilon_per_km`` (1/km) per user for the whole run."""

    def __init__(self, *, epsilon_per_km: float = 20.0) -> None:
        self.epsilon_per_km = _positive(epsilon_per_km, "epsilon_per_km")

    @property
    def notion(self) -> Notion:
        return _notion(PureGP, self.epsilon_per_km)


@BUDGET_POLICIES.register("renewing")
class RenewingBudget(CGPBudget):
    """A CGP filter of ``rho_per_km2`` renewed every ``window_ticks`` ticks."""

    def __init__(self, *, rho_per_km2: float = 200.0, window_ticks: int = 10) -> None:
        super().__init__(rho_per_km2=rho_per_km2)
        self.window_ticks = check_positive_int(window_ticks, "window_ticks", owner="renewing")

    def end_of_tick(self, tick: int, filters: PopulationFilter) -> None:
        if tick % self.window_ticks == 0:
            filters.renew()

    def statement(self, ticks: int) -> str:
        windows = math.ceil(ticks / self.window_ticks)
        return (
            f"{self.notion} per user within each window of {self.window_ticks} ticks "
            f"(ticks kW+1..(k+1)W); over {ticks} ticks ({windows} windows) the run composes "
            f"to {windows * self.rho_per_km2:g}/km^2-CGP per user"
        )


def _positive(value, name: str) -> float:
    return check_scalar(value, name, min=0, include_boundaries="neither", owner="budget policy")


@functools.lru_cache(maxsize=64, typed=True)
def _notion(kind: type, budget: float) -> Notion:
    """The notion ``kind(budget)`` (frozen, so one per value: every charge and query cost
    reads the policy's notion, and building one checks its number again)."""
    return kind(budget)
