"""Tracking attack: a forward filter over the mobility model across ticks.

The server knows the mobility model's reach: between consecutive ticks a user moves at most
``reach_km`` along the roads. Its transition kernel is uniform over the secrets within that
reach (staying put included), and its belief about each user is updated per report:

``b_t(x) ∝ Z[x, y_t] * sum_x' b_{t-1}(x') T[x', x]``.

Users that do not report at a tick only get the prediction step. Beliefs of all users are one
(U, N) array, so a tick is one sparse product and one elementwise product.
"""

from __future__ import annotations

import numpy as np
from scipy import sparse


class TrackingAttack:
    """Forward-filter beliefs of all users."""

    def __init__(self, dist_xx: np.ndarray, prior: np.ndarray, *, reach_km: float, n_users: int):
        rows, cols = np.nonzero(dist_xx <= reach_km)
        kernel = sparse.csr_matrix(
            (np.ones(len(rows)), (rows, cols)), shape=dist_xx.shape, dtype=float
        )
        out_degree = np.asarray(kernel.sum(axis=1)).ravel()
        self.kernel_t = (sparse.diags(1.0 / out_degree) @ kernel).T.tocsr()  # column-stochastic
        self.belief = np.tile(prior, (n_users, 1))

    def step(self, matrix: np.ndarray, reporting: np.ndarray, outputs: np.ndarray) -> np.ndarray:
        """Advance one tick; ``outputs[u]`` is the report of user ``reporting[u]``.

        Returns the MAP guess of every user's secret.
        """
        self.belief = np.asarray((self.kernel_t @ self.belief.T).T)
        if len(reporting):
            updated = self.belief[reporting] * matrix[:, outputs].T
            mass = updated.sum(axis=1, keepdims=True)
            # a report impossible under the belief (mass 0) restarts that user from the likelihood
            restart = mass[:, 0] <= 0
            updated[restart] = matrix[:, outputs[restart]].T
            mass[restart] = updated[restart].sum(axis=1, keepdims=True)
            self.belief[reporting] = updated / mass
        return self.belief.argmax(axis=1)
