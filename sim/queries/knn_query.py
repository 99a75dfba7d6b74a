"""Private k nearest neighbours among the users (paper §6.4).

Which k users are nearest to a query point ``p``? ``phi = len_p``. Baselines: the k smallest
noisy distances, from noisy locations (``BM0``) or noisy distances (``BM1``). ``PM0``/``PM1``
run PIE-k; if exactly k users survive they are the answer (with probability ``1 - beta/4``
the true k nearest), otherwise the baseline rule picks among the survivors.

Locations and ``p`` in metres; budgets in 1/km^2; ``value`` is an array of user indices.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from pydantic import Field

from mdpsim._core.validation import check_choice, check_positive_int
from mdpsim.queries.elimination import (
    METHODS,
    QueryAnswer,
    budgets_for,
    distance_to,
    locations_in_km,
    pie_k,
    point_in_km,
    release_km,
)
from mdpsim.queries.kinds import QueryCall, QueryFields, register_kind


def true_knn(locations_m, point_m, k: int) -> np.ndarray:
    """Indices of the k locations nearest to ``point_m`` (ties broken by index)."""
    dist = distance_to(point_in_km(point_m))(locations_in_km(locations_m))
    return np.sort(np.argsort(dist, kind="stable")[:k])


def knn(
    locations_m,
    point_m,
    k: int,
    rho_per_km2,
    *,
    method: str = "PM1",
    rng: np.random.Generator,
    c: int = 4,
    scheme: str = "even",
    beta: float = 0.1,
) -> QueryAnswer:
    """Privately find the k asked users nearest to ``point_m``.

    With at most k users asked the answer is all of them and nobody pays (it does not depend
    on their data). Other parameters as in :func:`mdpsim.queries.range_query.range_count`.
    """
    xy, len_p, k, rho = _checked(locations_m, point_m, k, rho_per_km2, method)
    return _knn(xy, len_p, k, rho, method=method, rng=rng, c=c, scheme=scheme, beta=beta)


def _checked(
    locations_m, point_m, k: int, rho_per_km2, method: str
) -> tuple[np.ndarray, Callable[[np.ndarray], np.ndarray], int, np.ndarray]:
    """:func:`knn`'s checks: the locations (km), the distance to the point, ``k``, budgets."""
    check_choice(method, "method", METHODS)
    k = check_positive_int(k, "k")
    xy, len_p = locations_in_km(locations_m), distance_to(point_in_km(point_m))
    return xy, len_p, k, budgets_for(rho_per_km2, len(xy))


def _knn(
    xy: np.ndarray,
    len_p: Callable[[np.ndarray], np.ndarray],
    k: int,
    rho: np.ndarray,
    *,
    method: str,
    rng: np.random.Generator,
    c: int,
    scheme: str,
    beta: float,
) -> QueryAnswer:
    """:func:`knn` of checked locations (km), distance, ``k`` and budgets."""
    asked = rho > 0
    if np.count_nonzero(asked) <= k:
        return QueryAnswer(asked.nonzero()[0], np.zeros(len(xy)), asked, method)

    released = release_km(
        method,
        xy,
        rho,
        len_p,
        rng=rng,
        beta=beta,
        eliminate=lambda triple, rho, beta0: pie_k(
            triple, rho, k=k, c=c, scheme=scheme, beta0=beta0
        ),
    )
    survivors = released.deciding
    if released.elimination is not None and len(survivors) == k:
        return released.answer(survivors)
    return released.answer(_k_smallest(released.triple, survivors, k))


def dist_err(chosen, locations_m, point_m) -> float:
    """DistErr: ``(Dist(J~, p) - Dist(J*, p)) / Dist(J*, p)``, Dist = summed distance."""
    return _dist_err(chosen, distance_to(point_in_km(point_m))(locations_in_km(locations_m)))


def _dist_err(chosen, dist: np.ndarray) -> float:
    """:func:`dist_err` of the users' distances ``dist`` (km) to the point."""
    chosen = np.asarray(chosen, dtype=np.int64)
    best = np.sort(dist)[: len(chosen)].sum()
    got = dist[chosen].sum()
    return float((got - best) / best) if best > 0 else float(got - best)


def _k_smallest(triple, users: np.ndarray, k: int) -> np.ndarray:
    est = triple.estimate(users)
    return np.sort(users[np.argsort(est, kind="stable")[:k]])


class KnnFields(QueryFields):
    """``[queries.params.knn]``."""

    k: int = Field(default=5, ge=1, description="how many nearest users the query names")


@register_kind("knn", label="kNN error", fields=KnnFields)
def ask_knn(call: QueryCall) -> tuple[QueryAnswer, float]:
    """The ``k`` users nearest to the point (PM1, or BM1)."""
    s = call.settings
    method = "PM1" if s.saving else "BM1"
    k = KnnFields.of(s, "knn").k
    xy, len_p, k, rho = _checked(call.locations_m, call.point_m, k, call.budgets, method)
    answer = _knn(xy, len_p, k, rho, method=method, rng=call.rng, c=4, scheme="even", beta=s.beta)
    return answer, _dist_err(answer.value, len_p(xy))
