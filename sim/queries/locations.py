"""Query locations in km and the distance-to-a-point ``len_p`` of KDE and kNN, validated."""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from mdpsim.errors import InputError


@functools.cache
def _compiled():
    """The queries' compiled kernels, imported on first use (``import mdpsim`` loads no numba)."""
    from mdpsim.queries import _kernels

    return _kernels


def locations_in_km(locations_m) -> np.ndarray:
    """``(n, 2)`` metres -> km, validated."""
    xy = np.asarray(locations_m, dtype=float)
    if xy.ndim != 2 or xy.shape[1] != 2 or not _compiled().all_finite(xy):
        raise InputError("locations_m must be an (n, 2) array of finite coordinates in metres")
    return xy / 1000.0


def point_in_km(point_m) -> np.ndarray:
    """A query point: two metres -> km, validated."""
    p = np.asarray(point_m, dtype=float)
    if p.shape != (2,) or not _compiled().all_finite(p):
        raise InputError("point_m must be two finite coordinates in metres")
    return p / 1000.0


@dataclass(frozen=True)
class DistanceTo:
    """``len_p``: the Euclidean distance (km) of ``(n, 2)`` points (km) to ``point_km``,
    1-Lipschitz (KDE and kNN); the elimination's compiled rounds compute it themselves."""

    point_km: np.ndarray

    def __call__(self, points_km: np.ndarray) -> np.ndarray:
        return _row_norms(points_km - self.point_km)


def distance_to(point_km: np.ndarray) -> Callable[[np.ndarray], np.ndarray]:
    """``len_p`` of ``point_km`` (:class:`DistanceTo`)."""
    return DistanceTo(point_km)


def _row_norms(d: np.ndarray) -> np.ndarray:
    """``np.linalg.norm(d, axis=1)`` as that function computes it (the same bits), without its
    dispatch: ``sqrt`` of each row's sum of squares."""
    return np.sqrt(np.add.reduce(d * d, axis=1))
