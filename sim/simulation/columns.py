"""The tick table's headline columns, named and labelled once.

``mdpsim.simulation.model`` writes them, ``mdpsim.experiments.run`` summarises them,
``mdpsim.experiments.report``
tabulates and
plots them and the dashboard charts them; all read the names here. Attack columns are not
listed: every attack of a run writes ``{label}_{metric}`` (mdpsim.attacks.suite) for the metric
family :data:`mdpsim.attacks.base.METRICS`, so they are read off the columns a table has
(:func:`attack_columns`) and a new attack shows in every output with no edit here.
"""

from __future__ import annotations

from collections.abc import Iterable

from mdpsim.queries.kinds import ERROR_LABELS, QUERY_KINDS, query_columns

#: Headline per-tick metrics of the mechanism (means over the users of a tick); the query
#: kinds' errors follow, from their registration (:func:`query_metrics`).
TICK_METRICS: dict[str, str] = {
    "utility_loss_km": "utility loss (km)",
    "expected_loss_km": "mechanism's expected loss over the prior (km)",
    "em_expected_loss_km": "EM's expected loss at the same eps (km)",
}
#: The savings of all queries of a tick together.
QUERY_SAVING = {"query_privacy_saving": "query privacy saving"}


def query_metrics() -> dict[str, str]:
    """Every registered query kind's ``{kind}_error`` -> its label, then the tick's saving."""
    return {**{f"{k}_error": ERROR_LABELS.get(k) for k in QUERY_KINDS}, **QUERY_SAVING}


#: Label of each attack metric (the keys of METRICS, and the scorer's Bayes-bound flag).
ATTACK_METRICS: dict[str, str] = {
    "error_km": "expected error (km)",
    "guess_error_km": "guess error (km)",
    "hit": "top-1 hit rate",
    "entropy_bits": "posterior entropy (bits)",
    "leakage_per_km": "posterior leakage (1/km)",
    "bound_violation": "reports over the Bayes bound (rate)",
}
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

_LONGEST_FIRST = sorted(ATTACK_METRICS, key=len, reverse=True)  # guess_error_km before error_km


def attack_metric(column: str, columns: Iterable[str] = ()) -> tuple[str, str] | None:
    """``(label, metric)`` of an attack column ``{label}_{metric}``, else ``None``.

    A label may itself end like a metric (``prior_guess`` + ``error_km`` reads as ``prior`` +
    ``guess_error_km`` too): every attack's estimates score ``hit``, so of the readings the
    one whose ``{label}_hit`` is among ``columns`` wins, else the longest metric.
    """
    if column in TICK_METRICS or column in query_columns() or column in QUERY_SAVING:
        return None
    readings = [
        (column[: -len(m) - 1], m)
        for m in _LONGEST_FIRST
        if column.endswith(f"_{m}") and len(column) > len(m) + 1
    ]
    present = set(columns)
    scored = [r for r in readings if f"{r[0]}_hit" in present]
    return (scored or readings)[0] if readings else None


def attack_columns(columns: Iterable[str], metrics: Iterable[str] = ATTACK_METRICS) -> dict:
    """The attack columns among ``columns`` whose metric is in ``metrics`` -> their labels,
    ordered by metric, then as in ``columns``."""
    columns = [str(c) for c in columns]
    found = [(col, parsed) for col in columns if (parsed := attack_metric(col, columns))]
    return {
        col: f"{label} attack: {ATTACK_METRICS[metric]}"
        for wanted in metrics
        for col, (label, metric) in found
        if metric == wanted
    }


def tick_metrics(columns: Iterable[str]) -> dict[str, str]:
    """Headline metrics of a tick table with ``columns``: :data:`TICK_METRICS`, then every
    attack's columns, each with its label."""
    columns = list(columns)
    return {**TICK_METRICS, **query_metrics(), **attack_columns(columns)}


def attack_charts(columns: Iterable[str]) -> dict[str, list[str]]:
    """One chart per attack metric of :data:`ATTACK_CHARTS` that ``columns`` have, with a line
    per attack, whatever attacks the run has."""
    columns = list(columns)
    panels: dict[str, list[str]] = {}
    for metric, title in ATTACK_CHARTS.items():
        picked = list(attack_columns(columns, [metric]))
        if picked:
            panels[title] = picked
    return panels


def charts(columns: Iterable[str]) -> dict[str, list[str]]:
    """The dashboard's charts for a tick table with ``columns``: :func:`attack_charts` (the
    report's bound beside the leakage), then :data:`CHARTS` with the queries' savings (every
    registered kind's) after the utility loss."""
    panels = attack_charts(columns)
    if ATTACK_CHARTS["leakage_per_km"] in panels:
        panels[ATTACK_CHARTS["leakage_per_km"]].append("report_epsilon_per_km")  # the bound
    savings = [*QUERY_SAVING, *(f"{k}_privacy_saving" for k in QUERY_KINDS)]
    utility, *others = CHARTS.items()
    return {**panels, **dict([utility]), SAVINGS_CHART: savings, **dict(others)}
