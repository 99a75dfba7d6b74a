"""The exact expected error of an owed query's answer (docs/env.md, "The server's best response").

The server's per-tick reward holds ``-query_weight`` times the error of each owed answer. Over
users placed independently by the prior (what every player assumes at a tick) and a query
point drawn from the prior (as :func:`~mdpsim.agents.strategies.query_planner.ask_one` draws
it), that error's expectation is a finite sum for the ``range`` query:

* **asked** (``per_query``, ``queries.saving = false``: ``BM1``): each of the ``n`` asked users
  releases its signed distance to the disk plus ``N(0, 1 / (2 rho))`` and is counted when the
  release is below 0. Given the point ``p``, a user is inside with probability ``sum_x pi(x)
  [phi_p(x) < 0]`` and counted with probability ``Phi(-phi_p(x) sqrt(2 rho))`` given its place
  ``x``; users are independent, so the pair (true count, noisy count) is a sum of ``n``
  independent four-valued terms, whose law is ``n`` two-dimensional convolutions. The error is
  ``count_err`` summed against that law, then averaged over ``p``;
* **not asked** (the prior's answer ``n q_p``, :mod:`mdpsim.env.prior_answers`): the true
  count is ``Binomial(n, q_p)`` with ``q_p`` the prior's mass inside the disk.

Both are tabulated for ``n = 0 .. n_users`` once per domain. The ``kde`` and ``knn`` answers
have no such sum (an absolute value of a sum of continuous kernel terms; the order statistics
of Gaussian distances), and the ``PM`` methods (``queries.saving``) charge by place: those
cases get one line from :func:`range_error_tables`' callers.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.special import ndtr

from mdpsim.errors import InputError
from mdpsim.geo.domain import Domain
from mdpsim.privacy.accounting import gaussian_noise_std_km
from mdpsim.queries.elimination import locations_in_km
from mdpsim.queries.kinds import QuerySettings
from mdpsim.queries.range_query import Disk, RangeFields

EXACT_KINDS = ("range",)


@dataclass(frozen=True)
class ErrorTables:
    """Per number of users ``n`` (index): the expected error of an owed range answer."""

    asked: np.ndarray  # (n_users + 1,) n users asked (BM1)
    prior: np.ndarray  # (n_users + 1,) the prior's answer over n users


def refuse_inexact(settings: QuerySettings) -> None:
    """One line naming the query kind or method whose expected error is no finite sum."""
    other = [k for k in settings.kinds if k not in EXACT_KINDS]
    if other:
        raise InputError(
            f"no exact best response for the server: the expected error of a {other[0]!r} "
            "answer is no finite sum (an absolute value of continuous noise terms); use "
            f"queries.kinds = {list(EXACT_KINDS)}"
        )
    if settings.kinds and settings.saving:
        raise InputError(
            "no exact best response for the server: with queries.saving the users' query "
            "charges follow their places (iterative elimination); use queries.saving = false"
        )


def _count_err(estimate: np.ndarray, truth: np.ndarray) -> np.ndarray:
    """:func:`~mdpsim.queries.range_query.count_err`, elementwise."""
    gap = np.abs(estimate - truth)
    return np.where(truth > 0, gap / np.maximum(truth, 1), gap)


def _inside_and_phi(settings: QuerySettings, domain: Domain) -> tuple[np.ndarray, np.ndarray]:
    """``[point, secret]``: the signed distance (km) to the disk around the point, as the
    query computes it (:class:`~mdpsim.queries.range_query.Disk`)."""
    xy_km = locations_in_km(domain.x_xy)
    radius_m = RangeFields.of(settings, "range").radius_m
    phi = np.stack(
        [Disk(float(p[0]), float(p[1]), radius_m).signed_distance_km(xy_km)
         for p in domain.x_xy]
    )  # fmt: skip
    return phi < 0, phi


def asked_range_errors(settings: QuerySettings, domain: Domain, n_users: int) -> np.ndarray:
    """``E[count_err]`` of a BM1 range count over ``n = 0 .. n_users`` asked users."""
    prior = domain.prior
    inside, phi = _inside_and_phi(settings, domain)
    std = float(gaussian_noise_std_km(np.array([settings.rho_per_km2]))[0])
    counted = ndtr(-phi / std)  # P(noisy signed distance < 0 | place)
    # per point: P(inside, counted) for the four (inside, counted) pairs
    p11 = (inside * counted) @ prior
    p10 = (inside * (1 - counted)) @ prior
    p01 = (~inside * counted) @ prior
    p00 = 1.0 - p11 - p10 - p01
    m = n_users + 1
    law = np.zeros((len(prior), m, m))  # [point, true count, noisy count]
    law[:, 0, 0] = 1.0
    grid = np.arange(m, dtype=float)
    err = _count_err(grid[None, :], grid[:, None])  # [truth, estimate]
    out = np.zeros(m)
    for n in range(1, m):
        nxt = law * p00[:, None, None]
        nxt[:, :, 1:] += law[:, :, :-1] * p01[:, None, None]
        nxt[:, 1:, :] += law[:, :-1, :] * p10[:, None, None]
        nxt[:, 1:, 1:] += law[:, :-1, :-1] * p11[:, None, None]
        law = nxt
        out[n] = prior @ (law * err[None]).sum(axis=(1, 2))
    return out


def prior_range_errors(
    settings: QuerySettings, domain: Domain, planar_km: np.ndarray, n_users: int
) -> np.ndarray:
    """``E[count_err]`` of the prior's answer ``n q_p`` over ``n = 0 .. n_users`` users."""
    from scipy.stats import binom

    prior = domain.prior
    inside = planar_km < RangeFields.of(settings, "range").radius_m / 1000.0  # as range_prior
    q = inside @ prior
    out = np.zeros(n_users + 1)
    for n in range(1, n_users + 1):
        t = np.arange(n + 1)
        pmf = binom.pmf(t[None, :], n, q[:, None])  # [point, true count]
        out[n] = prior @ (pmf * _count_err(n * q[:, None], t[None, :])).sum(axis=1)
    return out


def range_error_tables(
    settings: QuerySettings, domain: Domain, planar_km: np.ndarray, n_users: int
) -> ErrorTables:
    """Both tables for the ``range`` kind (:func:`refuse_inexact` first)."""
    return ErrorTables(
        asked=asked_range_errors(settings, domain, n_users),
        prior=prior_range_errors(settings, domain, planar_km, n_users),
    )
