"""Query kinds by name: what ``queries.kinds`` in a scenario may list.

A kind is one function, registered where it is defined with ``@register_kind(name)``: given
one :class:`QueryCall` (the ``[queries]`` settings, the users' locations, a public query point
drawn from the prior, each user's budget and the run's rng) it asks the query and returns the
answer and its error. The registration also gives the kind's label, its own scenario fields
(a :class:`QueryFields` model, set in ``[queries.params.<kind>]`` and read with
``call.settings.params_of(kind)``) and the prior's answer the environment's reward uses. The
planners (agents/strategies/query_planner.py) ask every kind through :func:`query_kind`, so a
new kind is one module that registers itself (docs/design.md).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol, Self

import numpy as np
from pydantic import BaseModel, ConfigDict

from mdpsim._core.registry import Catalog
from mdpsim.queries.elimination import QueryAnswer


class QuerySettings(Protocol):
    """What the queries read of the scenario's ``[queries]`` table (sim/simulation/scenario/)."""

    kinds: list[str]
    every_ticks: int
    rho_per_km2: float
    beta: float
    saving: bool

    def params_of(self, kind: str) -> QueryFields:
        """Query ``kind``'s own fields (``[queries.params.<kind>]`` over its defaults)."""
        ...


class QueryFields(BaseModel):
    """A query kind's own scenario fields: subclass with typed, described fields that all
    have defaults (strict types, unknown fields refused, immutable)."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)

    @classmethod
    def of(cls, settings: QuerySettings, kind: str) -> Self:
        """Query ``kind``'s fields in ``settings``, typed as this class (its registration's)."""
        fields = settings.params_of(kind)
        if not isinstance(fields, cls):
            raise TypeError(f"query kind {kind!r} has fields {type(fields).__name__}, not {cls}")
        return fields


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
#: Each kind's own scenario fields (a :class:`QueryFields` subclass; none: no fields).
QUERY_FIELDS: Catalog[type[QueryFields]] = Catalog("query kind's fields")
#: The prior's answer of each query kind, by the kind's name: ``fn(call) -> expected error``
#: with a :class:`mdpsim.env.prior_answers.PriorCall` (the environment's reward for not asking).
PRIOR_ANSWERS: Catalog[Callable[[Any], float]] = Catalog("prior answer")


def register_kind(
    name: str,
    *,
    label: str | None = None,
    fields: type[QueryFields] = QueryFields,
    prior_answer: Callable[[Any], float] | None = None,
) -> Callable[[QueryKindFn], QueryKindFn]:
    """Decorator: make ``fn(call) -> (answer, error)`` the query kind ``name``.

    ``label`` names its error in the tick table's outputs (default ``"{name} query error"``);
    the run writes ``{name}_error`` and ``{name}_privacy_saving`` and every output reads them
    from here. ``fields`` is its own scenario fields (``[queries.params.<name>]``, validated
    by the scenario, read with ``settings.params_of(name)``); ``prior_answer`` the prior's
    answer of the environment's reward (:mod:`mdpsim.env.prior_answers`)."""

    def deco(fn: QueryKindFn) -> QueryKindFn:
        QUERY_KINDS.register(name)(fn)
        ERROR_LABELS.add(name, label or f"{name} query error")
        QUERY_FIELDS.add(name, fields)
        if prior_answer is not None:
            PRIOR_ANSWERS.add(name, prior_answer)
        return fn

    return deco


def available_kinds() -> list[str]:
    """Registered query kinds, in registration order."""
    return QUERY_KINDS.available()


def query_kind(name: str) -> QueryKindFn:
    """The function of query kind ``name`` (one InputError line when there is none)."""
    return QUERY_KINDS.get(name)
