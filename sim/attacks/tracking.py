"""Tracking attack: a forward filter over the mobility model across ticks.

The server knows the mobility model's reach: between consecutive ticks a user at secret x'
moves at most ``reach_km[x']`` along the roads. Its transition kernel is uniform over the
secrets within that reach (staying put included), and its belief about each user is updated
per report:

``b_t(x) ∝ Z[x, y_t] * sum_x' b_{t-1}(x') T[x', x]``.

Users that do not report at a tick only get the prediction step. Beliefs of all users are one
(N, U) array, so a tick is one sparse product and one elementwise product.
"""

from __future__ import annotations

import numpy as np
from scipy import sparse


class TrackingAttack:
    """Forward-filter beliefs of all users."""

    def __init__(self, dist_xx: np.ndarray, prior: np.ndarray, *, reach_km, n_users: int):
        reach = np.broadcast_to(np.asarray(reach_km, dtype=float), (len(dist_xx),))
        rows, cols = np.nonzero(dist_xx <= reach[:, None])
        kernel = sparse.csr_matrix(
            (np.ones(len(rows)), (rows, cols)), shape=dist_xx.shape, dtype=float
        )
        out_degree = np.asarray(kernel.sum(axis=1)).ravel()
        self.kernel_t = (sparse.diags(1.0 / out_degree) @ kernel).T.tocsr()  # column-stochastic
        self._belief_t = np.tile(prior[:, None], (1, n_users))  # (N, U)

    @property
    def belief(self) -> np.ndarray:
        """Current posterior of every user, shape (U, N)."""
        return self._belief_t.T

    def step(self, matrix: np.ndarray, reporting: np.ndarray, outputs: np.ndarray) -> np.ndarray:
        """Advance one tick; ``outputs[u]`` is the report of user ``reporting[u]``.

        Returns the MAP guess of every user's secret.
        """
        self._belief_t = self.kernel_t @ self._belief_t
        if len(reporting):
            everyone = len(reporting) == self._belief_t.shape[1]
            cols = slice(None) if everyone else reporting  # avoid a gather when all report
            updated = self._belief_t[:, cols]
            updated *= matrix[:, outputs]
            mass = updated.sum(axis=0)
            # a report impossible under the belief (mass 0) restarts that user from the likelihood
            restart = mass <= 0
            updated[:, restart] = matrix[:, outputs[restart]]
            mass[restart] = updated[:, restart].sum(axis=0)
            updated /= mass
            if not everyone:
                self._belief_t[:, reporting] = updated
        return self._belief_t.argmax(axis=0)
