"""The exponential mechanism (EM): ``Z[i,k] ∝ exp(-eps d(x_i, y_k) / 2)``.

eps-mDP for any metric in which ``dist_xy`` obeys the triangle inequality with ``dist_xx``:
``|d(x_i,y) - d(x_j,y)| <= d(x_i,x_j)`` bounds the numerator ratio by ``exp(eps d / 2)`` and
the normaliser ratio by the same factor. Computed in log space (row maximum subtracted first),
so no entry underflows to 0 unless it is below ~1e-308 of its row maximum.
"""

from __future__ import annotations

from typing import ClassVar

import numpy as np

from mdpsim.mechanisms.base import Mechanism, register

#: EM's ratios within a column reach only ``e^(eps x diameter / 2)`` (times the normalisers'
#: ratio): twice the default ceiling, less ln K <= 10 for the normaliser (docs/reliability.md).
EM_EPS_DIAMETER_RANGE = (1e-3, 1380.0)


def exponential_matrix(dist_xy: np.ndarray, epsilon: float) -> np.ndarray:
    """Row-normalised ``exp(-epsilon * dist_xy / 2)`` (``dist_xy`` in km, ``epsilon`` per km)."""
    logits = dist_xy * (-0.5 * epsilon)
    logits -= logits.max(axis=1, keepdims=True)
    Z = np.exp(logits)
    Z /= Z.sum(axis=1, keepdims=True)
    return Z


@register("em")
class ExponentialMechanism(Mechanism):
    """EM over the domain's outputs with the domain's metric.

    Parameters
    ----------
    epsilon
        Privacy budget per km.
    """

    eps_diameter_range: ClassVar[tuple[float, float]] = EM_EPS_DIAMETER_RANGE

    def __init__(self, epsilon: float) -> None:
        super().__init__(epsilon)

    def _fit(self, domain) -> tuple[np.ndarray, dict]:
        return exponential_matrix(domain.dist_xy, self.epsilon), {}
