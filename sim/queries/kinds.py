"""Query kinds by name: what ``queries.kinds`` in a scenario may list.

A kind is one function, registered where it is defined with ``@register_kind(name)``: given
one :class:`QueryCall` (the ``[queries]`` settings, the users' locations, a public query point
drawn from the prior, each user's budget and the run's rng) it asks the query and returns the
answer and its error. The planners (agents/strategies/query_planner.py) ask every kind through
:func:`query_kind`, so a new kind is one module that registers itself (docs/design.md).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from mdpsim._core.registry import Catalog
from mdpsim.queries.elimination import QueryAnswer


class QuerySettings(Protocol):
    """What the queries read of the scenario's ``[queries]`` table (sim/simulation/scenario/)."""

    kinds: list[str]
    every_ticks: int
    rho_per_km2: float
    beta: float
    range_radius_m: float
    kde_bandwidth_m: float
    knn_k: int
    saving: bool


@dataclass(frozen=True)
class QueryCall:
    """One query: settings (the ``[queries]`` table), locations (m), point (m), budgets, rng."""

    settings: QuerySettings
    locations_m: np.ndarray
    point_m: np.ndarray
    budgets: np.ndarray
    rng: np.random.Generator


QueryKindFn = Callable[[QueryCall], tuple[QueryAnswer, float]]
#: The query kinds by name, in registration order.
QUERY_KINDS: Catalog[QueryKindFn] = Catalog("query kind")
#: Each kind's label of its error column ``{kind}_error`` (tables, reports, charts).
ERROR_LABELS: Catalog[str] = Catalog("query kind's error label")


def register_kind(name: str, *, label: str | None = None) -> Callable[[QueryKindFn], QueryKindFn]:
    """Decorator: make ``fn(call) -> (answer, error)`` the query kind ``name``; ``label`` names
    its error in the tick table's outputs (default ``"{name} query error"``). The run writes
    ``{name}_error`` and ``{name}_privacy_saving``, and every output reads them from here."""

    def deco(fn: QueryKindFn) -> QueryKindFn:
        QUERY_KINDS.register(name)(fn)
        ERROR_LABELS.add(name, label or f"{name} query error")
        return fn

    return deco


def query_columns() -> dict[str, str]:
    """The tick-table columns of every registered kind -> their labels: ``{kind}_error`` and
    ``{kind}_privacy_saving``."""
    out = {f"{k}_error": ERROR_LABELS.get(k) for k in QUERY_KINDS}
    out.update({f"{k}_privacy_saving": f"{k} query privacy saving" for k in QUERY_KINDS})
    return out


def available_kinds() -> list[str]:
    """Registered query kinds, in registration order."""
    return QUERY_KINDS.available()


def query_kind(name: str) -> QueryKindFn:
    """The function of query kind ``name`` (one InputError line when there is none)."""
    return QUERY_KINDS.get(name)
