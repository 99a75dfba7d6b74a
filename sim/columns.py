"""The tick table's headline columns, named and labelled once.

``mdpsim.model`` writes them, ``mdpsim.run`` summarises them, ``mdpsim.report`` tabulates and
plots them and the dashboard charts them; all read the names here. Attack columns are the
attack suite's ``{label}_{metric}`` (:data:`mdpsim.attacks.base.METRICS`) for the default
labels ``bayes``, ``tracking`` and ``upload``.
"""

from __future__ import annotations

#: Headline per-tick metrics (means over the users of a tick): name -> label.
TICK_METRICS: dict[str, str] = {
    "utility_loss_km": "utility loss (km)",
    "expected_loss_km": "mechanism's expected loss over the prior (km)",
    "em_expected_loss_km": "EM's expected loss at the same eps (km)",
    "bayes_error_km": "single-report attack: expected error (km)",
    "bayes_hit": "single-report attack: top-1 hit rate",
    "tracking_error_km": "tracking attack: expected error (km)",
    "tracking_hit": "tracking attack: top-1 hit rate",
    "bayes_leakage_per_km": "posterior leakage of a report (1/km)",
    "bayes_bound_violation": "reports over the Bayes bound (rate)",
    "upload_guess_error_km": "upload attack error (km)",
    "range_error": "range count error",
    "kde_error": "KDE error",
    "knn_error": "kNN error",
    "query_privacy_saving": "query privacy saving",
}

#: Dashboard charts: title -> tick-table columns (those missing in a run are skipped).
CHARTS: dict[str, list[str]] = {
    "Utility loss (km)": ["utility_loss_km"],
    "Attack error (km)": ["bayes_error_km", "tracking_error_km", "upload_guess_error_km"],
    "Attack hit rate": ["bayes_hit", "tracking_hit"],
    "Posterior leakage (1/km)": ["bayes_leakage_per_km", "report_epsilon_per_km"],
    "Privacy savings of queries": [
        "query_privacy_saving",
        "range_privacy_saving",
        "kde_privacy_saving",
        "knn_privacy_saving",
    ],
    "Halted users": ["n_halted"],
    "Remaining budget": ["remaining_budget_mean", "remaining_budget_min"],
}
