"""Single-report Bayesian attack and posterior leakage.

For a mechanism ``Z`` (N x K) and prior ``pi``, a report ``y_k`` gives the posterior
``Pr[x_i | y_k] = pi_i Z[i,k] / sum_j pi_j Z[j,k]``. Everything the attack needs depends on
``k`` only, so it is tabulated once per mechanism:

* the MAP estimate (top-1 guess) of each output;
* the expected-error-optimal estimate ``argmin_x' sum_i Pr[x_i|y_k] d(x_i, x')`` and its
  expected error (the adversary's expected error of Shokri et al.);
* the posterior leakage of each output: the largest posterior-to-prior log ratio between two
  secrets, normalised by their distance, ``max_{i != j} |ln Z[i,k] - ln Z[j,k]| / d(i,j)``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

_CHUNK = 256


@dataclass(frozen=True)
class BayesAttack:
    """Per-output tables of the optimal single-report attack."""

    map_estimate: np.ndarray  # (K,) secret index
    optimal_estimate: np.ndarray  # (K,) secret index minimising expected error
    expected_error_km: np.ndarray  # (K,) the adversary's expected error at its estimate
    leakage_per_km: np.ndarray  # (K,) posterior leakage of each output

    @classmethod
    def fit(cls, matrix: np.ndarray, prior: np.ndarray, dist_xx: np.ndarray, *, pairs=None):
        """Tabulate the attack for a mechanism over secrets with distances ``dist_xx`` (km)."""
        joint = prior[:, None] * matrix  # (N, K)
        mass = joint.sum(axis=0)
        post = np.divide(joint, mass, out=np.zeros_like(joint), where=mass > 0)
        k = matrix.shape[1]
        optimal = np.empty(k, dtype=np.int64)
        exp_err = np.empty(k)
        for start in range(0, k, _CHUNK):
            block = post[:, start : start + _CHUNK]  # (N, c)
            risk = dist_xx @ block  # risk[x', c] = sum_i d(x', x_i) post(x_i | y_c)
            optimal[start : start + _CHUNK] = risk.argmin(axis=0)
            exp_err[start : start + _CHUNK] = risk.min(axis=0)
        return cls(
            map_estimate=post.argmax(axis=0),
            optimal_estimate=optimal,
            expected_error_km=exp_err,
            leakage_per_km=posterior_leakage_per_output(matrix, dist_xx, pairs=pairs),
        )


def posterior_leakage_per_output(matrix: np.ndarray, dist_xx: np.ndarray, *, pairs=None):
    """``max_{i != j} |ln Z[i,k] - ln Z[j,k]| / d(i,j)`` for every output k (per km).

    Posterior over prior ratios cancel the prior: ``ln(post_i/post_j) - ln(pi_i/pi_j) =
    ln Z[i,k] - ln Z[j,k]``. With ``pairs`` (a domain's constraint pairs) only those pairs are
    scanned; this is exact, because along a shortest path the ratio of a sum of log
    differences to a sum of distances is at most the largest single ratio (mediant inequality).
    A positive entry against a zero entry leaks infinitely; two zeros leak nothing.
    """
    with np.errstate(divide="ignore"):
        logz = np.log(matrix)
    n = matrix.shape[0]
    if pairs is None:
        ii, jj = np.triu_indices(n, k=1)
    else:
        ii, jj = pairs[:, 0], pairs[:, 1]
    out = np.zeros(matrix.shape[1])
    for start in range(0, len(ii), 4096):
        a, b = ii[start : start + 4096], jj[start : start + 4096]
        la, lb = logz[a], logz[b]
        both_zero = np.isneginf(la) & np.isneginf(lb)
        with np.errstate(invalid="ignore"):
            diff = np.abs(la - lb)
        diff[both_zero] = 0.0
        d = dist_xx[a, b][:, None]
        with np.errstate(divide="ignore", invalid="ignore"):
            ratio = np.where(diff > 0, diff / d, 0.0)
        out = np.maximum(out, ratio.max(axis=0))
    return out
