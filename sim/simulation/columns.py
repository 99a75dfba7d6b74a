"""The tick table's headline columns, labelled once, found by what they were declared to be.

``mdpsim.simulation.model`` writes them, ``mdpsim.experiments.run`` summarises them,
``mdpsim.experiments.report`` tabulates and plots them and the dashboard charts them; all read
the labels here and find a table's query and attack columns in its declarations
(:class:`~mdpsim.simulation.tick_row.TickColumns`: each column's group, query kind or attack
label, and metric), so a new attack or query kind shows in every output with no edit here.
"""

from __future__ import annotations

from collections.abc import Iterable

import pandas as pd

from mdpsim.queries.kinds import ERROR_LABELS, QUERY_KINDS
from mdpsim.simulation.tick_row import QUERY_SAVING_COLUMN, Column, TickColumns

#: Headline per-tick metrics of the mechanism (means over the users of a tick); the query
#: kinds' errors follow, from their registration (:func:`query_metrics`).
TICK_METRICS: dict[str, str] = {
    "utility_loss_km": "utility loss (km)",
    "expected_loss_km": "mechanism's expected loss over the prior (km)",
    "em_expected_loss_km": "EM's expected loss at the same eps (km)",
}
#: The savings of all queries of a tick together.
QUERY_SAVING = {QUERY_SAVING_COLUMN: "query privacy saving"}


def _query_columns(declared: TickColumns, metric: str) -> list[Column]:
    """The declared columns of the query kinds' ``metric``, registered kinds first in their
    registration order (the total saving, which no kind owns, is left out)."""
    order = {kind: i for i, kind in enumerate(QUERY_KINDS)}
    found = [c for c in declared.of_group("query") if c.metric == metric and c.owner]
    return sorted(found, key=lambda c: order.get(c.owner, len(order)))


def query_metrics(declared: TickColumns) -> dict[str, str]:
    """Every declared query kind's error column -> its label, then the tick's saving."""
    errors = {
        c.name: ERROR_LABELS.get(c.owner) if c.owner in ERROR_LABELS else f"{c.owner} query error"
        for c in _query_columns(declared, "error")
    }
    return {**errors, **QUERY_SAVING}


#: Label of each attack metric (the keys of METRICS, and the scorer's Bayes-bound flag).
ATTACK_METRICS: dict[str, str] = {
    "error_km": "expected error (km)",
    "guess_error_km": "guess error (km)",
    "hit": "top-1 hit rate",
    "entropy_bits": "posterior entropy (bits)",
    "leakage_per_km": "posterior leakage (1/km)",
    "bound_violation": "reports over the Bayes bound (rate)",
}
#: Whole-run attack scores in the order ``mdpsim attack``'s table and the live page show them;
#: any other score an attack reports follows (:func:`whole_run_metrics`).
WHOLE_RUN_ORDER = ("hit", "error_km", "entropy_bits", "leakage_per_km", "precision_at_k",
                   "recall_at_k", "work_hit", "pair_hit", "anonymity_set", "unique", "linked_k1",
                   "linked_k2", "linked_k3", "linked_k4", "chance")  # fmt: skip


def whole_run_metrics(table: pd.DataFrame, ids: Iterable[str] = ("attack",)) -> list[str]:
    """The score columns of a table of attacks' scores (one row per attack and setting):
    :data:`WHOLE_RUN_ORDER`'s first, then every other numeric column but ``ids``, as in the
    table, so a new attack's scores show with no edit here."""
    skip = set(ids)
    first = [m for m in WHOLE_RUN_ORDER if m in table]
    rest = [
        str(c)
        for c in table.columns
        if c not in skip and c not in first and pd.api.types.is_numeric_dtype(table[c])
    ]
    return [*first, *rest]


#: The attack metrics of the report's tables and the pivots (the rest stay in summary.csv).
HEADLINE_ATTACK_METRICS = ("error_km", "hit", "leakage_per_km")

#: Chart titles of the attack metrics, one chart per metric with a line per attack.
ATTACK_CHARTS = {
    "error_km": "Attack expected error (km)",
    "hit": "Attack top-1 hit rate",
    "entropy_bits": "Attack posterior entropy (bits)",
    "leakage_per_km": "Posterior leakage (1/km)",
}

#: The dashboard chart of the queries' savings (one line per registered kind, and the total).
SAVINGS_CHART = "Privacy savings of queries"
#: Dashboard charts other than the attacks' and the queries': title -> tick-table columns
#: (missing: skipped).
CHARTS: dict[str, list[str]] = {
    "Utility loss (km)": ["utility_loss_km"],
    "Halted users": ["n_halted"],
    "Remaining budget": ["remaining_budget_mean", "remaining_budget_min"],
}


def attack_columns(declared: TickColumns, metrics=ATTACK_METRICS) -> dict[str, str]:
    """The declared attack columns whose metric is in ``metrics`` -> their labels, ordered
    by metric, then as declared."""
    found = declared.of_group("attack")
    return {
        c.name: f"{c.owner} attack: {ATTACK_METRICS[metric]}"
        for metric in metrics
        for c in found
        if c.metric == metric
    }


def tick_metrics(declared: TickColumns) -> dict[str, str]:
    """Headline metrics of a tick table: :data:`TICK_METRICS`, the query kinds' errors and
    saving, then every attack's columns, each with its label."""
    return {**TICK_METRICS, **query_metrics(declared), **attack_columns(declared)}


def attack_charts(declared: TickColumns) -> dict[str, list[str]]:
    """One chart per attack metric of :data:`ATTACK_CHARTS` a table has, with a line per
    attack, whatever attacks the run has."""
    panels: dict[str, list[str]] = {}
    for metric, title in ATTACK_CHARTS.items():
        picked = list(attack_columns(declared, [metric]))
        if picked:
            panels[title] = picked
    return panels


def charts(declared: TickColumns) -> dict[str, list[str]]:
    """The dashboard's charts for a tick table: :func:`attack_charts` (the report's bound
    beside the leakage), then :data:`CHARTS` with the queries' savings (the total and every
    declared kind's) after the utility loss."""
    panels = attack_charts(declared)
    if ATTACK_CHARTS["leakage_per_km"] in panels:
        panels[ATTACK_CHARTS["leakage_per_km"]].append("report_epsilon_per_km")  # the bound
    savings = [*QUERY_SAVING, *(c.name for c in _query_columns(declared, "privacy_saving"))]
    utility, *others = CHARTS.items()
    return {**panels, **dict([utility]), SAVINGS_CHART: savings, **dict(others)}
