"""PAnDA (Liu & Qiu, CCS'25), anchor-based two-phase LP, in a pure eps-mDP form.

As the DistA-LP paper describes the baseline: each user selects a small set of anchor
records and the server solves a compact LP on the reduced (anchor) domain. Here:

1. Anchors: ``n_anchors`` secrets chosen by farthest-point (k-centre) sampling, starting at
   the secret of largest prior; public, so free.
2. Phase I (anchor selection, exponential decay): a user at ``x_i`` picks anchor ``a`` with
   ``P[a | i] ∝ exp(-eps d(x_i, a) / 2)`` -- an exponential mechanism over the anchors, hence
   eps-mDP on the FULL domain. Its mass sits on the few nearest anchors (its "anchor set";
   ``info_["anchor_set_size_median"]`` counts those carrying 99 % of it).
3. Phase II (compact LP): the server solves, with HiGHS, the eps-mDP LP on anchors x outputs,
   ``min sum_a sum_k W[a,k] C[a,k]`` with ``C[a,k] = sum_i pi_i P[a|i] c(x_i, y_k)`` (the
   expected cost of the users who pick a), ``W[a,k] <= exp(eps d(a,b)) W[b,k]`` on the
   anchor constraint pairs and rows summing to 1. The user reports ``y ~ W[a]``.

The released matrix is ``Z = P W``. It is eps-mDP on the full domain by post-processing of
Phase I (y depends on x only through a), whatever W is; even the pair (a, y) is eps-mDP.
PAnDA proper uses the anchor as a surrogate for the true record, so its LP constraints hold
only between anchors and it spends extra budget (and settles for probabilistic mDP) to cover
the anchor distance error; in this construction that extra budget is zero and the
approximation is paid in utility instead. See docs/mechanisms.md.
"""

from __future__ import annotations

from typing import ClassVar

import numpy as np
from scipy import sparse

from mdpsim._core.validation import check_positive_int
from mdpsim.errors import InputError
from mdpsim.geo.domain import farthest_points
from mdpsim.mechanisms.base import Mechanism, register
from mdpsim.mechanisms.em import exponential_matrix
from mdpsim.mechanisms.lp.highs import HighsLP
from mdpsim.mechanisms.lp.solver import MAX_LOG_GAIN

_ANCHOR_SET_MASS = 0.99


def anchor_lp(cost: np.ndarray, dist_aa: np.ndarray, pairs: np.ndarray, epsilon: float):
    """Solve the eps-mDP LP on anchors; returns (W, objective). Raises SolverError.

    Pairs with ``eps d > MAX_LOG_GAIN`` are left out (their gain passes HiGHS's largest matrix
    value). W is post-processing of the anchor draw, so this cannot affect privacy.
    """
    m, k = cost.shape
    pairs = pairs[epsilon * dist_aa[pairs[:, 0], pairs[:, 1]] <= MAX_LOG_GAIN]
    a = np.concatenate([pairs[:, 0], pairs[:, 1]])
    b = np.concatenate([pairs[:, 1], pairs[:, 0]])
    factor = np.exp(epsilon * dist_aa[a, b])
    n_rows = len(a) * k
    rows = np.repeat(np.arange(n_rows), 2)
    col_a = (a[:, None] * k + np.arange(k)[None, :]).ravel()
    col_b = (b[:, None] * k + np.arange(k)[None, :]).ravel()
    cols = np.column_stack([col_a, col_b]).ravel()
    vals = np.column_stack([np.ones(n_rows), -np.repeat(factor, k)]).ravel()
    A_mdp = sparse.csr_array((vals, (rows, cols)), shape=(n_rows, m * k))
    A_sum = sparse.kron(sparse.eye(m), np.ones((1, k)), format="csr")
    res = HighsLP(
        cost.ravel(),
        sparse.vstack([A_mdp, A_sum]),
        np.concatenate([np.full(n_rows, -np.inf), np.ones(m)]),
        np.concatenate([np.zeros(n_rows), np.ones(m)]),
        name="PAnDA anchor LP",
    ).solve()
    W = np.maximum(res.x.reshape(m, k), 0.0)
    return W / W.sum(axis=1, keepdims=True), res.objective


@register("panda")
class Panda(Mechanism):
    """Anchor-based two-phase mechanism (PAnDA), pure eps-mDP on the full domain.

    Parameters
    ----------
    epsilon
        Privacy budget per km.
    n_anchors
        Size of the reduced domain (anchors drawn from the secrets), at most N.
    """

    conformance_params: ClassVar[dict] = {"n_anchors": 8}

    def __init__(self, epsilon: float, *, n_anchors: int = 32) -> None:
        super().__init__(epsilon)
        self.n_anchors = check_positive_int(n_anchors, "n_anchors")

    def check_domain_size(self, n_x: int, n_y: int) -> None:
        """The anchors are secrets: ``n_anchors`` may not exceed ``n_x``."""
        if self.n_anchors > n_x:
            raise InputError(
                f"n_anchors={self.n_anchors} exceeds the {n_x} secrets; use n_anchors <= {n_x} "
                "or more secrets"
            )

    def _fit(self, domain) -> tuple[np.ndarray, dict]:
        # k-centre anchors from the largest-prior secret
        anchors = farthest_points(domain.dist_xx, int(np.argmax(domain.prior)), self.n_anchors)
        P = exponential_matrix(domain.dist_xx[:, anchors], self.epsilon)
        cost = (P * domain.prior[:, None]).T @ domain.dist_xy
        reduced = domain.restrict(anchors)
        W, objective = anchor_lp(cost, reduced.dist_xx, reduced.constraint_pairs, self.epsilon)
        Z = P @ W
        sorted_p = -np.sort(-P, axis=1)
        set_size = (np.cumsum(sorted_p, axis=1) < _ANCHOR_SET_MASS).sum(axis=1) + 1
        info = {
            "anchors": anchors,
            "lp_objective_km": objective,
            "anchor_set_size_median": float(np.median(set_size)),
        }
        return Z, info
