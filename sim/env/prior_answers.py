"""The server's answer without data: what not asking a query costs it (docs/env.md, "Rewards").

A query the schedule asks for at a tick is owed an answer. Asked, its error is the query's own
(the planner's ``<kind>_error``); not asked (or answered by nobody), the server answers from the
public prior alone, and this module gives that answer's error: its expectation over the query
point, drawn from the prior as :func:`~mdpsim.agents.strategies.query_planner.ask_one` draws it,
against the true locations of the users the query would address (those whose filter has not
halted). The expectation is exact (a sum over the domain's secrets), so it draws no random
number and a run's streams are untouched.

* ``range``: the prior's expected count, ``n`` times the prior's mass inside the disk (error:
  :func:`~mdpsim.queries.range_query.count_err`);
* ``kde``: the prior's mean kernel at the point;
* ``knn``: ``k`` users named without data (the first ``k``; any choice is as good a priori).

A query kind gives its prior answer when it registers
(``register_kind(name, prior_answer=fn)``, :mod:`mdpsim.queries.kinds`), or later with
:func:`register_prior_answer`; both file it in :data:`PRIOR_ANSWERS`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from mdpsim.errors import InputError
from mdpsim.geo.domain import Domain
from mdpsim.queries.kde_query import KdeFields
from mdpsim.queries.kinds import PRIOR_ANSWERS, QuerySettings
from mdpsim.queries.knn_query import KnnFields
from mdpsim.queries.range_query import RangeFields


@dataclass(frozen=True)
class PriorCall:
    """One owed answer: the ``[queries]`` settings, the domain and the addressed users'
    secrets (indices into the domain), plus the domain's planar distances (km, cached)."""

    settings: QuerySettings
    domain: Domain
    positions: np.ndarray
    planar_km: np.ndarray  # (N, N) Euclidean distances between the secrets
    kept: dict = field(default_factory=dict)  # the domain's tables, kept between calls

    def table(self, key: tuple, build: Callable[[], np.ndarray]) -> np.ndarray:
        """``build()``, kept in :attr:`kept` under ``key``: an ``(N, N)`` table the domain and
        the settings fix (the environment keeps one ``kept`` per domain across ticks)."""
        if key not in self.kept:
            self.kept[key] = build()
        return self.kept[key]


PriorAnswerFn = Callable[[PriorCall], float]


def register_prior_answer(kind: str) -> Callable[[PriorAnswerFn], PriorAnswerFn]:
    """Decorator: ``fn(call) -> expected error`` is the prior's answer to query ``kind``."""
    return PRIOR_ANSWERS.register(kind)


def prior_answer(kind: str) -> PriorAnswerFn:
    """The prior-answer function of ``kind``; one line naming the fix when there is none."""
    if kind not in PRIOR_ANSWERS:
        raise InputError(
            f"query kind {kind!r} has no prior answer, which the server's reward for not "
            "asking needs: give register_kind(..., prior_answer=fn) or register one with "
            "mdpsim.env.prior_answers.register_prior_answer"
        )
    return PRIOR_ANSWERS.get(kind)


def planar_distances_km(domain: Domain) -> np.ndarray:
    """Euclidean distances (km) between the secrets, the plane the queries work in."""
    xy = domain.x_xy / 1000.0
    return np.linalg.norm(xy[:, None, :] - xy[None, :, :], axis=2)


@register_prior_answer("range")
def range_prior(call: PriorCall) -> float:
    """Expected CountErr of ``n * prior(disk)`` over the query point."""
    prior = call.domain.prior
    radius_km = RangeFields.of(call.settings, "range").radius_m / 1000.0
    inside = call.table(("range", radius_km), lambda: call.planar_km < radius_km)  # [point, x]
    counts = np.bincount(call.positions, minlength=len(prior))
    truth = inside @ counts
    estimate = len(call.positions) * (inside @ prior)
    gap = np.abs(estimate - truth)  # CountErr (count_err), every query point at once
    errors = np.where(truth > 0, gap / np.maximum(truth, 1), gap)
    return float(prior @ errors)


@register_prior_answer("kde")
def kde_prior(call: PriorCall) -> float:
    """Expected l1-Err of the prior's mean Gaussian kernel over the query point."""
    prior = call.domain.prior
    b_km = KdeFields.of(call.settings, "kde").bandwidth_m / 1000.0
    kernel = call.table(
        ("kde", b_km), lambda: np.exp(-(call.planar_km**2) / (2.0 * b_km * b_km))
    )  # [point, secret]
    n = len(call.positions)
    truth = kernel[:, call.positions].mean(axis=1) if n else np.zeros(len(prior))
    return float(prior @ np.abs(kernel @ prior - truth))


@register_prior_answer("knn")
def knn_prior(call: PriorCall) -> float:
    """Expected DistErr of the first ``k`` users over the query point."""
    prior = call.domain.prior
    n = len(call.positions)
    k = min(KnnFields.of(call.settings, "knn").k, n)
    if k == 0 or k == n:
        return 0.0  # nobody to name, or everyone: exact without data
    dist = call.planar_km[:, call.positions]  # [point, user]
    best = np.partition(dist, k - 1, axis=1)[:, :k].sum(axis=1)
    got = dist[:, :k].sum(axis=1)
    errors = np.where(best > 0, (got - best) / np.where(best > 0, best, 1.0), got - best)
    return float(prior @ errors)
