"""Pluggable behaviour of the players, one small interface and registry per kind.

=================  ======================  ==============================================
kind               registry                registered
=================  ======================  ==============================================
report policy      ``REPORT_POLICIES``     ``always``, ``budget_aware``, ``threshold``
budget policy      ``BUDGET_POLICIES``     ``cgp``, ``pure_gp``, ``renewing``
query planner      ``QUERY_PLANNERS``      ``per_query``, ``budgeter``
refresh schedule   ``REFRESH_SCHEDULES``   ``every``, ``on_release``
pseudonyms         ``PSEUDONYM_STRATEGIES`` ``fixed``, ``change_at``
=================  ======================  ==============================================

A scenario names each with its parameters (``[strategies]``); :func:`from_scenario` builds
them. Strategies hold no random state: every random draw of a run comes from the model's
seeded streams, so the order in which strategies are built changes nothing.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any

from mdpsim._core.component import Component
from mdpsim._core.registry import Registry
from mdpsim.agents.strategies.budget import BUDGET_POLICIES, BudgetPolicy
from mdpsim.agents.strategies.pseudonyms import PSEUDONYM_STRATEGIES, PseudonymStrategy
from mdpsim.agents.strategies.query_planner import QUERY_PLANNERS, QueryPlanner
from mdpsim.agents.strategies.refresh import REFRESH_SCHEDULES, RefreshSchedule
from mdpsim.agents.strategies.report_policy import REPORT_POLICIES, ReportContext, ReportPolicy
from mdpsim.errors import InputError

REGISTRIES: dict[str, Registry] = {
    "report": REPORT_POLICIES,
    "budget": BUDGET_POLICIES,
    "query_planner": QUERY_PLANNERS,
    "refresh": REFRESH_SCHEDULES,
    "pseudonyms": PSEUDONYM_STRATEGIES,
}
#: The base class a strategy of each kind subclasses (a plug-in's too); a kind missing here
#: takes any Component.
BASES: dict[str, type] = {
    "report": ReportPolicy,
    "budget": BudgetPolicy,
    "query_planner": QueryPlanner,
    "refresh": RefreshSchedule,
    "pseudonyms": PseudonymStrategy,
}
# Plug-ins by entry point, group mdpsim.strategies.<kind> (a name kept from the old layout:
# plug-ins use it) (docs/plugins.md).
for _kind, _registry in REGISTRIES.items():
    _registry.open_to_plugins(f"mdpsim.strategies.{_kind}", BASES.get(_kind, Component))


@dataclass(frozen=True)
class Strategies:
    """The strategies of one run; a kind registered in :data:`REGISTRIES` without a field
    here is an attribute too (kept in ``extra``), so a new kind needs no edit of this class."""

    report: ReportPolicy
    budget: BudgetPolicy
    query_planner: QueryPlanner
    refresh: RefreshSchedule
    pseudonyms: PseudonymStrategy
    extra: dict[str, Any] = field(default_factory=dict)

    def __getattr__(self, kind: str) -> Any:
        if kind != "extra" and kind in self.extra:
            return self.extra[kind]
        raise AttributeError(kind)


def specs_of(scenario) -> dict[str, Any]:
    """The strategy specs (name or ``{name, **params}``) a scenario asks for; an unset kind
    is its first registered strategy with its defaults (every user reporting, a CGP budget
    of 200 rho/km^2, the per-query planner, no refresh after tick 0, fixed pseudonyms)."""
    given = _strategies_table(scenario)
    return {
        kind: REGISTRIES[kind].available()[0] if given.get(kind) is None else _plain(given[kind])
        for kind in REGISTRIES
    }


def from_scenario(scenario, **overrides: Any) -> Strategies:
    """Build the scenario's strategies; ``overrides`` (by kind) may be specs or instances."""
    specs = specs_of(scenario)
    unknown = [k for k in overrides if k not in REGISTRIES]
    if unknown:
        raise InputError(f"unknown strategy kind {unknown[0]!r}; kinds: {', '.join(REGISTRIES)}")
    specs.update(overrides)
    built = {kind: REGISTRIES[kind].from_spec(specs[kind]) for kind in REGISTRIES}
    named = {f.name for f in fields(Strategies)} - {"extra"}
    extra = {kind: built.pop(kind) for kind in list(built) if kind not in named}
    return Strategies(**built, extra=extra)


def _plain(spec: Any) -> Any:
    return dict(spec) if isinstance(spec, dict) else spec


def _strategies_table(scenario) -> dict[str, Any]:
    table = scenario.strategies
    return {kind: getattr(table, kind, None) for kind in REGISTRIES}


__all__ = [
    "BUDGET_POLICIES",
    "PSEUDONYM_STRATEGIES",
    "QUERY_PLANNERS",
    "REFRESH_SCHEDULES",
    "REGISTRIES",
    "REPORT_POLICIES",
    "BudgetPolicy",
    "PseudonymStrategy",
    "QueryPlanner",
    "RefreshSchedule",
    "ReportContext",
    "ReportPolicy",
    "Strategies",
    "from_scenario",
    "specs_of",
]
