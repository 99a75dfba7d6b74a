"""Bayesian remapping (RMP; Chatzikokolakis et al., PETS'17) of EM or planar Laplace.

A base mechanism ``Z0`` (eps-mDP) reports ``y_k``; the server-known prior ``pi`` gives the
posterior ``Pr[x_i | y_k] ∝ pi_i Z0[i,k]``, and ``y_k`` is replaced by

    R(k) = argmin_{k'} sum_i pi_i Z0[i,k] c(x_i, y_k')     (c = dist_xy, km).

The released matrix ``Z[i,k'] = sum_{k: R(k) = k'} Z0[i,k]`` is eps-mDP by post-processing:
a ratio of sums of entries is at most the largest ratio of the entries.
"""

from __future__ import annotations

from typing import ClassVar

import numpy as np

from mdpsim.errors import InputError
from mdpsim.mechanisms.base import Mechanism, register
from mdpsim.mechanisms.em import EM_EPS_DIAMETER_RANGE, ExponentialMechanism
from mdpsim.mechanisms.laplace import PlanarLaplace

_BASES = {"em": ExponentialMechanism, "laplace": PlanarLaplace}


def bayesian_remap(Z0: np.ndarray, prior: np.ndarray, cost: np.ndarray) -> np.ndarray:
    """For each output k, the output minimising the posterior expected cost (ties: lowest)."""
    expected = (Z0 * prior[:, None]).T @ cost  # [k, k'] = sum_i pi_i Z0[i,k] c(x_i, y_k')
    remap = np.argmin(expected, axis=1)
    unused = ~((Z0 * prior[:, None]).sum(axis=0) > 0)
    remap[unused] = np.nonzero(unused)[0]  # never reported: keep as is
    return remap


@register("rmp")
class BayesianRemap(Mechanism):
    """EM or planar Laplace followed by the Bayesian remap under the domain's prior.

    Parameters
    ----------
    epsilon
        Privacy budget per km (all of it goes to the base mechanism).
    base
        ``"em"`` or ``"laplace"``.
    """

    # EM's range; with base = "laplace" the base's own fit refuses what laplace cannot do.
    eps_diameter_range: ClassVar[tuple[float, float]] = EM_EPS_DIAMETER_RANGE

    def __init__(self, epsilon: float, *, base: str = "em") -> None:
        super().__init__(epsilon)
        if base not in _BASES:
            raise InputError(f"base={base!r} must be one of {', '.join(_BASES)}")
        self.base = base

    def _fit(self, domain) -> tuple[np.ndarray, dict]:
        inner = _BASES[self.base](self.epsilon).fit(domain)
        Z0 = inner.matrix_
        remap = bayesian_remap(Z0, domain.prior, domain.dist_xy)
        Z = np.zeros_like(Z0)
        np.add.at(Z.T, remap, Z0.T)
        info = {
            "base_info": inner.info_,
            "n_outputs_used": int(len(np.unique(remap))),
            "base_expected_loss_km": inner.expected_loss(),
        }
        return Z, info
