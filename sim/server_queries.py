"""The server's adaptive queries of one tick: range count, Gaussian KDE, kNN.

Each query is asked of every user whose filter can still afford ``rho`` (users who cannot are
halted by their filter). Users answer with iterative elimination (``PM``) or the one-shot
baseline (``BM``) and pay only what they spent; the difference is their privacy saving.
Query points are secrets drawn from the prior with the model's ``queries`` stream.
"""

from __future__ import annotations

import numpy as np

from sim.queries.kde import kde, l1_err, true_kde
from sim.queries.knn import dist_err, knn
from sim.queries.range_count import Disk, count_err, range_count, true_count


def ask_queries(model) -> dict[str, float]:
    """Run this tick's queries; returns errors and savings for the tick's row."""
    settings = model.config.queries
    every = settings.every_ticks
    if every == 0 or model.tick % every != 0 or not settings.kinds:
        return {}
    rng = model.streams["queries"]
    filters = model.filters
    rho = settings.rho_per_km2
    locations_m = model.domain.x_xy[model.population.position]
    row: dict[str, float] = {}
    asked_total = spent_total = 0.0
    for kind in settings.kinds:
        # users who cannot afford the query are asked (and halt); the others may answer
        cannot = ~filters.halted & (filters.remaining < rho)
        filters.request(np.where(cannot, rho, 0.0), component=f"query_{kind}")
        budgets = np.where(filters.halted, 0.0, rho)
        if not np.any(budgets > 0):
            row[f"{kind}_error"] = float("nan")
            continue
        point = model.domain.x_xy[rng.choice(model.domain.n_x, p=model.domain.prior)]
        answer, error = _ask(kind, settings, locations_m, point, budgets, rng)
        filters.spend(answer.spent, component=f"query_{kind}")
        row[f"{kind}_error"] = error
        row[f"{kind}_privacy_saving"] = _saving(budgets, answer.spent)
        asked_total += float(budgets.sum())
        spent_total += float(answer.spent.sum())
    if asked_total > 0:
        row["query_privacy_saving"] = 1.0 - spent_total / asked_total
    return row


def _ask(kind, settings, locations_m, point, budgets, rng):
    saving, beta = settings.saving, settings.beta
    if kind == "range":
        region = Disk(float(point[0]), float(point[1]), settings.range_radius_m)
        answer = range_count(
            locations_m, region, budgets, method="PM1" if saving else "BM1", rng=rng, beta=beta
        )
        return answer, count_err(float(answer.value), true_count(locations_m[budgets > 0], region))
    if kind == "kde":
        b = settings.kde_bandwidth_m
        answer = kde(
            locations_m, point, b, budgets, method="PM0" if saving else "BM0", rng=rng, beta=beta
        )
        return answer, l1_err(float(answer.value), true_kde(locations_m[budgets > 0], point, b))
    k = settings.knn_k
    answer = knn(
        locations_m, point, k, budgets, method="PM1" if saving else "BM1", rng=rng, beta=beta
    )
    return answer, dist_err(answer.value, locations_m, point)


def _saving(budgets: np.ndarray, spent: np.ndarray) -> float:
    """PrivSav: the fraction of the asked budget that users did not spend."""
    asked = budgets.sum()
    return float(1.0 - spent.sum() / asked) if asked > 0 else float("nan")
