"""Query planners: which queries the server asks at a tick, and each user's budget for them.

The ``[queries]`` table says what a query is (kinds, radius, bandwidth, k, beta, PM or BM);
the planner says when they are asked and with what per-user budget. Answers come from the
users' true locations (users compute them locally); what the server sees is the answer and
each user's spend, and every spend is charged through the budget policy's conversion.

* ``per_query``: every ``queries.every_ticks`` ticks, each kind with budget
  ``queries.rho_per_km2``; users who cannot afford it are asked and halt (today's planner);
* ``budgeter``: the same schedule, but each user's budget for query ``l`` of the ``m``
  planned comes from :class:`~mdpsim.queries.budgeting.QueryBudgeter` (Algorithm 3 of the
  budgeting paper), which hands what PM queries saved to later queries. Queries may use
  ``share`` of each user's capacity; users never halt on a query. The plan covers one budget
  window: the whole run, or with a renewing budget (``window_ticks``) the queries due in the
  current window, with ``share`` of the renewed capacity, so what it plans per window is
  what the filter checks per window (``Budgeter.plan_``).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from mdpsim._core.component import Component, ReturnCheck, bool_problem
from mdpsim._core.registry import Registry
from mdpsim._core.validation import check_choice, check_scalar
from mdpsim.privacy.filters import PopulationFilter, add_up, fits, sub_down
from mdpsim.queries.budgeting import STRATEGIES, QueryBudgeter
from mdpsim.queries.elimination import QueryAnswer
from mdpsim.queries.kinds import QueryCall, QuerySettings, query_kind
from mdpsim.queries.outcome import UNANSWERED, QueryOutcome

QUERY_PLANNERS: Registry[QueryPlanner] = Registry("query planner")


@dataclass
class QueryRound:
    """Everything one tick's queries need: settings, users' answers' inputs, filters, rng."""

    settings: QuerySettings
    locations_m: np.ndarray
    domain: Any
    filters: PopulationFilter
    budget: Any  # the run's BudgetPolicy (its query_costs is the one conversion)
    rng: np.random.Generator


class QueryPlanner(Component, ABC):
    """When queries are asked and with which budgets."""

    component_kind: ClassVar[str] = "query planner"
    return_checks: ClassVar[dict[str, ReturnCheck]] = {
        "due": lambda result, tick: bool_problem(result, "queries at this tick or not"),
        "ask": lambda result, round_: _outcomes_problem(result),
    }

    def bind(self, settings: QuerySettings, *, horizon_ticks: int) -> None:
        """Called once before the run with the ``[queries]`` table and the run's length."""
        self.settings = settings
        self.horizon_ticks = horizon_ticks

    def due(self, tick: int) -> bool:
        """Whether queries are asked at ``tick`` (a public schedule)."""
        every = self.settings.every_ticks
        return bool(every and self.settings.kinds and tick % every == 0)

    @abstractmethod
    def ask(self, round_: QueryRound) -> dict[str, QueryOutcome]:
        """Ask this tick's queries; the outcome of each kind asked (its error, and the budget
        asked and spent), by kind, for the tick's row."""


@QUERY_PLANNERS.register("per_query")
class PerQuery(QueryPlanner):
    """Each query gets ``queries.rho_per_km2`` from every user who can afford it."""

    def ask(self, round_: QueryRound) -> dict[str, QueryOutcome]:
        settings, filters = round_.settings, round_.filters
        rho = settings.rho_per_km2
        outcomes: dict[str, QueryOutcome] = {}
        cost = float(round_.budget.query_costs(np.array([rho]))[0])  # every kind's charge
        for kind in settings.kinds:
            if filters.halted.all():  # nobody left to ask
                outcomes[kind] = UNANSWERED
                continue
            # users who cannot afford the query are asked (and halt); the others may answer
            cannot = filters.short_of(cost)
            nobody = False
            if cannot.any():  # (a request of nobody changes nothing)
                filters.request(np.where(cannot, cost, 0.0), component=f"query_{kind}")
                nobody = bool(filters.halted.all())
            if nobody or not rho > 0:  # no budget > 0: np.where(halted, 0.0, rho) <= 0
                outcomes[kind] = UNANSWERED
                continue
            budgets = np.where(filters.halted, 0.0, rho)
            answer, error = ask_one(kind, round_, budgets)
            filters.spend(round_.budget.query_costs(answer.spent), component=f"query_{kind}")
            outcomes[kind] = QueryOutcome(error, float(budgets.sum()), _total(answer.spent))
        return outcomes


@QUERY_PLANNERS.register("budgeter")
class Budgeter(QueryPlanner):
    """Algorithm 3: per-user allocations that reuse the savings of earlier queries."""

    def __init__(self, *, strategy: str = "linear", proportion: float = 0.75, share: float = 0.5):
        self.strategy = check_choice(strategy, "strategy", STRATEGIES, owner="budgeter")
        self.proportion = check_scalar(proportion, "proportion", min=0, max=1, owner="budgeter")
        self.share = check_scalar(
            share, "share", min=0, max=1, include_boundaries="right", owner="budgeter"
        )
        self._budgeter: QueryBudgeter | None = None

    def bind(self, settings: QuerySettings, *, horizon_ticks: int) -> None:
        super().bind(settings, horizon_ticks=horizon_ticks)
        self._budgeter = None
        self.plan_: dict[str, Any] = {}

    def planned_queries(self, first_tick: int, last_tick: int) -> int:
        """How many queries the schedule asks in ticks ``first_tick..last_tick``."""
        every = self.settings.every_ticks
        if not every:
            return 0
        due = last_tick // every - (first_tick - 1) // every
        return len(self.settings.kinds) * max(due, 0)

    def _plan(self, round_: QueryRound) -> QueryBudgeter:
        """The budgeter of the current budget window (a new one when the filter renewed)."""
        window = round_.filters.windows
        if self._budgeter is not None and self.plan_["window"] == window:
            return self._budgeter
        length = getattr(round_.budget, "window_ticks", None) or self.horizon_ticks
        first = window * length + 1
        last = min((window + 1) * length, self.horizon_ticks)
        m = self.planned_queries(first, last)
        account = QueryShare(round_.filters, self.share, round_.budget)
        self._budgeter = QueryBudgeter(
            account, max(m, 1), strategy=self.strategy, proportion=self.proportion
        )
        self.plan_ = {"window": window, "ticks": (first, last), "m": m,
                      "capacity": account.capacity}  # fmt: skip
        return self._budgeter

    def ask(self, round_: QueryRound) -> dict[str, QueryOutcome]:
        budgeter = self._plan(round_)
        outcomes: dict[str, QueryOutcome] = {}
        for kind in round_.settings.kinds:
            if budgeter.asked >= budgeter.m:  # the run outlived its plan: no budget left
                outcomes[kind] = UNANSWERED
                continue
            result: dict[str, Any] = {}

            def query(allocation: np.ndarray, kind=kind, result=result) -> QueryAnswer:
                if not np.any(allocation > 0):
                    result["error"] = float("nan")
                    return QueryAnswer(
                        value=float("nan"),
                        spent=np.zeros_like(allocation),
                        participants=np.array([], dtype=np.int64),
                        method="none",
                    )
                answer, result["error"] = ask_one(kind, round_, allocation)
                result["allocation"] = allocation
                return answer

            answer = budgeter.run(query, component=f"query_{kind}")
            asked = float(result["allocation"].sum()) if "allocation" in result else 0.0
            spent = _total(answer.spent) if asked > 0 else 0.0
            outcomes[kind] = QueryOutcome(result["error"], asked, spent)
        return outcomes


class QueryShare:
    """The part of each user's filter queries may use: ``share`` of its capacity.

    Has the interface :class:`~mdpsim.queries.budgeting.QueryBudgeter` drives (``capacity``,
    ``remaining``, ``affordable``, ``spend``); every spend is charged to the user's filter
    through the budget policy's conversion.
    """

    def __init__(self, filters: PopulationFilter, share: float, budget) -> None:
        self.filters, self.budget = filters, budget
        self.capacity = filters.capacity * share
        self._spent = np.zeros(filters.n_users)
        self._window = filters.windows

    @property
    def spent(self) -> np.ndarray:
        """Query spend in the current budget window (a renewing budget starts it over)."""
        if self._window != self.filters.windows:
            self._spent, self._window = np.zeros(self.filters.n_users), self.filters.windows
        return self._spent

    @property
    def remaining(self) -> np.ndarray:
        return np.minimum(self.filters.remaining, sub_down(self.capacity, self.spent))

    def affordable(self, costs) -> np.ndarray:
        c = np.asarray(costs, dtype=float)
        own = (c == 0) | fits(self.spent, c, self.capacity)
        return own & self.filters.affordable(self.budget.query_costs(c))

    def spend(self, costs, *, component=None) -> None:
        c = np.asarray(costs, dtype=float)
        self.filters.spend(self.budget.query_costs(c), component=component)
        self._spent = add_up(self.spent, c)


def ask_one(kind: str, round_: QueryRound, budgets: np.ndarray) -> tuple[QueryAnswer, float]:
    """One query of ``kind`` (sim/queries/kinds.py) at a point drawn from the prior."""
    domain, rng = round_.domain, round_.rng
    point = domain.x_xy[domain.draw_secret(rng)]
    return query_kind(kind)(QueryCall(round_.settings, round_.locations_m, point, budgets, rng))


def _total(spent) -> float:
    """``float(np.sum(spent))`` (the same reduction) without ``np.sum``'s dispatch."""
    return float(np.asarray(spent).sum())


def _outcomes_problem(outcomes: Any) -> str | None:
    """Why a planner's ``ask`` result is not a ``{kind: QueryOutcome}`` dict, or ``None``."""
    if not isinstance(outcomes, dict):
        return f"{type(outcomes).__name__}, not a dict of query kind -> QueryOutcome"
    for key, value in outcomes.items():
        if not isinstance(key, str) or not isinstance(value, QueryOutcome):
            return f"the entry {key!r}: {value!r}, not a query kind and a QueryOutcome"
    return None
