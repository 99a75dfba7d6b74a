"""Private Gaussian kernel density estimate at a point (paper §6.3).

``f = (1/n) sum_i exp(-|x_i - p|^2 / (2 b^2))``. ``phi = len_p = |x - p|`` (1-Lipschitz).
Baselines ``BM0`` (noisy locations) and ``BM1`` (noisy distances). ``PM0``/``PM1`` run
one-sided PIE-NI (``nu_low = -inf``, ``nu_high = 6 b``): users settled farther than ``6 b``
contribute at most ``e^-18`` each and stop paying; if nobody is left the answer is 0.

Locations, the query point and the bandwidth are in metres; budgets in 1/km^2.
"""

from __future__ import annotations

import math

import numpy as np
from pydantic import Field

from mdpsim._core.validation import check_scalar
from mdpsim.queries.elimination import (
    QueryAnswer,
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
    dist = distance_to(point_in_km(point_m))(xy)
    kernel = np.exp(-(dist**2) / (2.0 * b * b))
    return float(np.add.reduce(kernel) / len(kernel)) if len(xy) else 0.0  # np.mean's bits


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
    released = release_locations(
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
    n = int(np.count_nonzero(released.asked))
    users = released.deciding
    est = released.triple.estimate(users) if len(users) else np.zeros(0)
    kept = float(np.exp(-(est**2) / (2.0 * b * b)).sum())
    if released.elimination is not None:
        bias = float(np.count_nonzero(released.elimination.s0)) * TAIL
        if tail_bias and bias <= kept:
            kept += bias
    return released.answer(kept / n if n else 0.0)


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
    b = KdeFields.of(s, "kde").bandwidth_m
    method = "PM0" if s.saving else "BM0"
    answer = kde(
        call.locations_m, call.point_m, b, call.budgets, method=method, rng=call.rng, beta=s.beta
    )
    truth = true_kde(call.locations_m[call.budgets > 0], call.point_m, b)
    return answer, l1_err(float(answer.value), truth)  # type: ignore[arg-type]
