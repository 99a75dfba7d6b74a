"""Private range counting (paper §6.2): how many users are inside a range?

``phi = Proj_Gamma``, the signed distance to the range boundary (negative inside), which is
1-Lipschitz (paper Lemma 6.3). Baselines: ``BM0`` counts noisy locations inside the range,
``BM1`` counts noisy signed distances below 0. ``PM0``/``PM1`` run PIE-NI with
``nu_low = nu_high = 0``: users settled inside (``S1``) or outside (``S0``) stop paying; the
count is ``|S1|`` plus the baseline rule on the users still active after ``c`` rounds.

Locations and ranges are in metres; signed distances and budgets in km and 1/km^2.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from pydantic import Field

from mdpsim.errors import InputError
from mdpsim.queries.elimination import (
    QueryAnswer,
    Released,
    locations_in_km,
    pie_ni,
    release_locations,
)
from mdpsim.queries.kinds import QueryCall, QueryFields, register_kind


@dataclass(frozen=True)
class Rectangle:
    """Axis-aligned rectangle ``[xmin_m, xmax_m] x [ymin_m, ymax_m]`` (metres)."""

    xmin_m: float
    ymin_m: float
    xmax_m: float
    ymax_m: float

    def __post_init__(self) -> None:
        vals = (self.xmin_m, self.ymin_m, self.xmax_m, self.ymax_m)
        if not (_finite(vals) and self.xmin_m < self.xmax_m and self.ymin_m < self.ymax_m):
            raise InputError("Rectangle needs finite xmin_m < xmax_m and ymin_m < ymax_m")

    def signed_distance_km(self, points_km: np.ndarray) -> np.ndarray:
        """``Proj_Gamma``: distance (km) to the boundary, negative inside."""
        lo = np.array([self.xmin_m, self.ymin_m]) / 1000.0
        hi = np.array([self.xmax_m, self.ymax_m]) / 1000.0
        q = np.abs(points_km - (lo + hi) / 2.0) - (hi - lo) / 2.0
        qx, qy = q[:, 0], q[:, 1]
        outside = np.hypot(np.maximum(qx, 0.0), np.maximum(qy, 0.0))
        return outside + np.minimum(np.maximum(qx, qy), 0.0)


@dataclass(frozen=True)
class Disk:
    """Disk of ``radius_m`` around ``(cx_m, cy_m)`` (metres)."""

    cx_m: float
    cy_m: float
    radius_m: float

    def __post_init__(self) -> None:
        if not (_finite((self.cx_m, self.cy_m, self.radius_m)) and self.radius_m > 0):
            raise InputError("Disk needs a finite centre and radius_m > 0")

    def signed_distance_km(self, points_km: np.ndarray) -> np.ndarray:
        """``Proj_Gamma``: distance (km) to the circle, negative inside."""
        dx = points_km[:, 0] - self.cx_m / 1000.0
        dy = points_km[:, 1] - self.cy_m / 1000.0
        return np.hypot(dx, dy) - self.radius_m / 1000.0


Region = Rectangle | Disk


def _finite(values: tuple) -> bool:
    """Whether every one of a region's numbers is finite."""
    return all(math.isfinite(v) for v in values)


def true_count(locations_m, region: Region) -> int:
    """The exact number of locations strictly inside ``region``."""
    return int(np.count_nonzero(region.signed_distance_km(locations_in_km(locations_m)) < 0))


def range_count(
    locations_m,
    region: Region,
    rho_per_km2,
    *,
    method: str = "PM1",
    rng: np.random.Generator,
    c: int = 4,
    scheme: str = "even",
    beta: float = 0.1,
) -> QueryAnswer:
    """Privately count the users inside ``region``.

    Parameters
    ----------
    locations_m
        ``(n, 2)`` user locations in metres.
    rho_per_km2
        Each user's CGP budget for this query (scalar or ``(n,)``); users with 0 are not asked
        and not counted.
    method
        ``BM0``, ``BM1``, ``PM0`` or ``PM1``.
    c, scheme, beta
        PIE rounds, budget split (``even``/``doubling``) and failure probability; PIE uses
        ``beta0 = beta / 4`` (paper §6.2).

    Returns
    -------
    QueryAnswer
        ``value``: the private count (float); ``spent``: rho per user.
    """
    released = _released(
        locations_m, region, rho_per_km2, method=method, rng=rng, c=c, scheme=scheme, beta=beta
    )
    return released.answer(_private_count(released))


def _released(
    locations_m,
    region: Region,
    rho_per_km2,
    *,
    method: str,
    rng: np.random.Generator,
    c: int,
    scheme: str,
    beta: float,
) -> Released:
    """:func:`range_count`'s release: PIE-NI at 0 of the signed distance (or the baseline)."""
    return release_locations(
        method,
        locations_m,
        rho_per_km2,
        region.signed_distance_km,
        rng=rng,
        beta=beta,
        eliminate=lambda triple, rho, beta0: pie_ni(
            triple, rho, nu_low=0.0, nu_high=0.0, c=c, scheme=scheme, beta0=beta0
        ),
    )


def _private_count(released: Released) -> float:
    """The count: the users settled inside plus the deciding users' estimates inside."""
    users = released.deciding
    inside = float(np.count_nonzero(released.triple.estimate(users) < 0)) if len(users) else 0.0
    settled_inside = (
        float(np.count_nonzero(released.elimination.s1)) if released.elimination else 0.0
    )
    return settled_inside + inside


def count_err(estimate: float, truth: int) -> float:
    """CountErr: ``|C~ - C| / C`` (the absolute error when ``C = 0``)."""
    return abs(estimate - truth) / truth if truth > 0 else abs(estimate - truth)


class RangeFields(QueryFields):
    """``[queries.params.range]``."""

    radius_m: float = Field(default=250.0, gt=0, allow_inf_nan=False, description="disk radius")


@register_kind("range", label="range count error", fields=RangeFields)
def ask_range(call: QueryCall) -> tuple[QueryAnswer, float]:
    """A disk of ``radius_m`` around the point (PM1, or BM1 without saving)."""
    s = call.settings
    radius_m = RangeFields.of(s, "range").radius_m
    region = Disk(float(call.point_m[0]), float(call.point_m[1]), radius_m)
    method = "PM1" if s.saving else "BM1"
    released = _released(
        call.locations_m,
        region,
        call.budgets,
        method=method,
        rng=call.rng,
        c=4,
        scheme="even",
        beta=s.beta,
    )
    count = _private_count(released)
    asked = released.asked.nonzero()[0]  # true_count of the asked users' locations
    truth = int(np.count_nonzero(released.triple.true_values(asked) < 0))
    return released.answer(count), count_err(count, truth)
