"""Private Gaussian kernel density estimate at a point (paper §6.3).

``f = (1/n) sum_i exp(-|x_i - p|^2 / (2 b^2))``. ``phi = len_p = |x - p|`` (1-Lipschitz).
Baselines ``BM0`` (noisy locations) and ``BM1`` (noisy distances). ``PM0``/``PM1`` run
one-sided PIE-NI (``nu_low = -inf``, ``nu_high = 6 b``): users settled farther than ``6 b``
contribute at most ``e^-18`` each and stop paying; if nobody is left the answer is 0.

Locations, the query point and the bandwidth are in metres; budgets in 1/km^2.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
from pydantic import Field

from mdpsim._core.validation import check_scalar
from mdpsim.queries.elimination import (
    QueryAnswer,
    Released,
    distance_to,
    locations_in_km,
    pie_ni,
    point_in_km,
    release_locations,
)
from mdpsim.queries.kinds import QueryCall, QueryFields, register_kind

CUTOFF_BANDWIDTHS = 6.0
TAIL = math.exp(-(CUTOFF_BANDWIDTHS**2) / 2.0)  # e^-18: a settled far point's largest term


def true_kde(locations_m, point_m, bandwidth_m: float) -> float:
    """The exact Gaussian KDE value at ``point_m``."""
    xy, b = locations_in_km(locations_m), _bandwidth_km(bandwidth_m)
    return _mean_kernel(distance_to(point_in_km(point_m))(xy), b)


def _mean_kernel(dist: np.ndarray, b: float) -> float:
    """The Gaussian KDE of the distances ``dist`` (km) with bandwidth ``b`` (km)."""
    kernel = np.exp(-(dist**2) / (2.0 * b * b))
    return float(np.add.reduce(kernel) / len(kernel)) if len(dist) else 0.0  # np.mean's bits


def kde(
    locations_m,
    point_m,
    bandwidth_m: float,
    rho_per_km2,
    *,
    method: str = "PM0",
    rng: np.random.Generator,
    c: int = 4,
    scheme: str = "even",
    beta: float = 0.1,
    tail_bias: bool = True,
) -> QueryAnswer:
    """Privately estimate the Gaussian KDE at ``point_m`` over the asked users.

    ``tail_bias`` adds ``|S0| e^-18 / n`` for the eliminated users, omitted when it exceeds
    the kept users' term (paper §6.3). Other parameters as in
    :func:`mdpsim.queries.range_query.range_count`; ``value`` is the estimate (unitless).
    """
    len_p, b = distance_to(point_in_km(point_m)), _bandwidth_km(bandwidth_m)
    released = _released(
        locations_m, len_p, b, rho_per_km2, method=method, rng=rng, c=c, scheme=scheme, beta=beta
    )
    return released.answer(_private_kde(released, b, tail_bias=tail_bias))


def _released(
    locations_m,
    len_p: Callable[[np.ndarray], np.ndarray],
    b: float,
    rho_per_km2,
    *,
    method: str,
    rng: np.random.Generator,
    c: int,
    scheme: str,
    beta: float,
) -> Released:
    """:func:`kde`'s release of the distances ``len_p`` with bandwidth ``b`` (km): one-sided
    PIE-NI at ``6 b``."""
    return release_locations(
        method,
        locations_m,
        rho_per_km2,
        len_p,
        rng=rng,
        beta=beta,
        eliminate=lambda triple, rho, beta0: pie_ni(
            triple,
            rho,
            nu_low=-math.inf,
            nu_high=CUTOFF_BANDWIDTHS * b,
            c=c,
            scheme=scheme,
            beta0=beta0,
        ),
    )


def _private_kde(released: Released, b: float, *, tail_bias: bool) -> float:
    """The estimate: the deciding users' kernels (and the tail bias), over the asked users."""
    n = int(np.count_nonzero(released.asked))
    users = released.deciding
    est = released.triple.estimate(users) if len(users) else np.zeros(0)
    kept = float(np.exp(-(est**2) / (2.0 * b * b)).sum())
    if released.elimination is not None:
        bias = float(np.count_nonzero(released.elimination.s0)) * TAIL
        if tail_bias and bias <= kept:
            kept += bias
    return kept / n if n else 0.0


def l1_err(estimate: float, truth: float) -> float:
    """l1-Err: ``|A~ - A|``."""
    return abs(estimate - truth)


def _bandwidth_km(bandwidth_m: float) -> float:
    check_scalar(bandwidth_m, "bandwidth_m", min=0, include_boundaries="neither", unit="m")
    return float(bandwidth_m) / 1000.0


class KdeFields(QueryFields):
    """``[queries.params.kde]``."""

    bandwidth_m: float = Field(
        default=100.0, gt=0, allow_inf_nan=False, description="Gaussian kernel bandwidth b"
    )


@register_kind("kde", label="KDE error", fields=KdeFields)
def ask_kde(call: QueryCall) -> tuple[QueryAnswer, float]:
    """The Gaussian KDE of bandwidth ``bandwidth_m`` at the point (PM0, or BM0)."""
    s = call.settings
    len_p = distance_to(point_in_km(call.point_m))
    b = _bandwidth_km(KdeFields.of(s, "kde").bandwidth_m)
    method = "PM0" if s.saving else "BM0"
    released = _released(
        call.locations_m,
        len_p,
        b,
        call.budgets,
        method=method,
        rng=call.rng,
        c=4,
        scheme="even",
        beta=s.beta,
    )
    value = _private_kde(released, b, tail_bias=True)
    asked = released.asked.nonzero()[0]  # true_kde of the asked users' locations
    truth = _mean_kernel(released.triple.true_values(asked), b)
    return released.answer(value), l1_err(value, truth)
