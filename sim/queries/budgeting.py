"""Budgeting across a sequence of queries with savings reused (paper §5.1, Algorithm 3).

Every user starts with budget ``B_i`` (the capacity of a :class:`PopulationFilter`) for ``m``
queries asked one after another (possibly on different components or time steps, which
compose under ``dist_inf``). Query ``l`` gets a per-user allocation computed from what the user
has left; a privacy-saving algorithm (``PM*``) may spend less than its allocation, and the
savings flow to later queries. Strategies:

* ``fixed``: ``B / m`` per query, savings never reused (the baseline schedule);
* ``even``: ``B_i^rem / (m - l + 1)``, savings spread evenly over the remaining queries;
* ``proportion``: ``B / m + p * S_i`` with the savings ``S_i = B_i^rem - (m - l + 1) B / m``
  and a fixed proportion ``p`` (3/4 in the paper) used at once;
* ``linear``: the same with ``p`` rising linearly from 3/4 at query 2 to 1 at query ``m``, so
  the last query uses everything left.

Allocations never exceed the rounded-down remaining budget, so charging the spend through the
filter never fails for an algorithm that respects its allocation.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

import numpy as np

from mdpsim._core.validation import check_choice, check_positive_int, check_scalar
from mdpsim.errors import PrivacyBudgetError
from mdpsim.queries.elimination import QueryAnswer

STRATEGIES = ("fixed", "even", "proportion", "linear")


class BudgetAccount(Protocol):
    """What :class:`QueryBudgeter` drives: a :class:`~mdpsim.privacy.filters.PopulationFilter`,
    or a share of one (``mdpsim.agents.strategies.query_planner.QueryShare``)."""

    @property
    def capacity(self) -> np.ndarray: ...

    @property
    def remaining(self) -> np.ndarray: ...

    def affordable(self, costs) -> np.ndarray: ...

    def spend(self, costs, *, component=None) -> None: ...


def allocate(
    remaining,
    *,
    total_budget,
    m: int,
    l: int,
    strategy: str = "linear",
    proportion: float = 0.75,
) -> np.ndarray:
    """Per-user budget for query ``l`` (1-based) of ``m``, in the filter's currency.

    Parameters
    ----------
    remaining
        Each user's remaining budget (rounded down, as :attr:`PopulationFilter.remaining`).
    total_budget
        Each user's initial budget ``B_i`` (scalar or array).
    """
    check_choice(strategy, "strategy", STRATEGIES)
    check_scalar(l, "query index l", kind=int, min=1, max=m)
    check_scalar(proportion, "proportion", min=0, max=1)
    rem = np.asarray(remaining, dtype=float)
    base = np.asarray(total_budget, dtype=float) / m
    left = m - l + 1
    if strategy == "fixed":
        alloc = base
    elif strategy == "even":
        alloc = rem / left
    else:
        p = proportion
        if strategy == "linear" and l >= 2:
            p = 1.0 if m == 2 else proportion + (1.0 - proportion) * (l - 2) / (m - 2)
        savings = np.maximum(rem - left * base, 0.0)
        # p = 1 means "use everything left": exactly rem (base + (rem - base) may round off).
        alloc = rem if p == 1.0 else base + p * savings
    return np.minimum(np.broadcast_to(alloc, rem.shape), rem)


class QueryBudgeter:
    """Algorithm 3 driven one query at a time: allocate, let the query run, charge its spend.

    Parameters
    ----------
    population
        The users' filters (their capacities are the ``B_i``).
    m
        Number of queries planned.
    strategy, proportion
        See :func:`allocate`.
    """

    def __init__(
        self,
        population: BudgetAccount,
        m: int,
        *,
        strategy: str = "linear",
        proportion: float = 0.75,
    ) -> None:
        self.population = population
        self.m = check_positive_int(m, "m")
        self.strategy = check_choice(strategy, "strategy", STRATEGIES)
        self.proportion = proportion
        self.asked = 0

    def next_allocation(self) -> np.ndarray:
        """Per-user budget for the next query (0 for halted or exhausted users)."""
        if self.asked >= self.m:
            raise PrivacyBudgetError(f"all m={self.m} planned queries have been asked")
        return allocate(
            self.population.remaining,
            total_budget=self.population.capacity,
            m=self.m,
            l=self.asked + 1,
            strategy=self.strategy,
            proportion=self.proportion,
        )

    def run(self, query: Callable[[np.ndarray], QueryAnswer], *, component=None) -> QueryAnswer:
        """Allocate, run ``query(allocation)``, charge its ``spent`` (atomically) and return it."""
        alloc = self.next_allocation()
        if not np.all(self.population.affordable(alloc)):  # fail closed before any release
            raise PrivacyBudgetError("an allocation exceeds a user's remaining budget")
        answer = query(alloc)
        spent = np.asarray(answer.spent, dtype=float)
        if spent.shape != alloc.shape or np.any(spent > alloc):
            raise PrivacyBudgetError("the query spent more than its allocation")
        self.population.spend(spent, component=self.asked if component is None else component)
        self.asked += 1
        return answer
