"""Single-report Bayesian attack and posterior leakage.

For a mechanism ``Z`` (N x K) and prior ``pi``, a report ``y_k`` gives the posterior
``Pr[x_i | y_k] = pi_i Z[i,k] / sum_j pi_j Z[j,k]``. Everything the attack needs depends on
``k`` only, so it is tabulated once per mechanism:

* the MAP estimate (top-1 guess) of each output;
* the expected-error-optimal estimate ``argmin_x' sum_i Pr[x_i|y_k] d(x_i, x')`` and its
  expected error (the adversary's expected error of Shokri et al.);
* the risk table ``sum_i Pr[x_i|y_k] d(x, x_i)`` for every truth x: a scored report's
  expected error is one lookup in it;
* the posterior leakage of each output: the largest posterior-to-prior log ratio between two
  secrets, normalised by their distance, ``max_{i != j} |ln Z[i,k] - ln Z[j,k]| / d(i,j)``.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from weakref import WeakKeyDictionary

import numpy as np

from mdpsim.attacks.base import (
    Attack,
    LocationEstimate,
    Observation,
    Release,
    TabulatedPosterior,
    entropy_bits,
    register,
)
from mdpsim.attacks.release_tables import kept_per_release


@dataclass(frozen=True)
class BayesAttack:
    """Per-output tables of the optimal single-report attack."""

    map_estimate: np.ndarray  # (K,) secret index
    optimal_estimate: np.ndarray  # (K,) secret index minimising expected error
    expected_error_km: np.ndarray  # (K,) the adversary's expected error at its estimate
    risk_km: np.ndarray  # (N, K) expected distance of each output's posterior to each secret
    leakage_per_km: np.ndarray  # (K,) posterior leakage of each output
    posterior: np.ndarray  # (N, K) Pr[x | y_k], columns sum to 1 (0 for impossible outputs)

    @classmethod
    def fit(cls, matrix: np.ndarray, prior: np.ndarray, dist_xx: np.ndarray, *, pairs=None):
        """Tabulate the attack for a mechanism over secrets with distances ``dist_xx`` (km)."""
        post = posterior_table(matrix, prior)
        risk = dist_xx @ post  # risk[x', k] = sum_i d(x', x_i) post(x_i | y_k)
        return cls(
            map_estimate=post.argmax(axis=0),
            optimal_estimate=risk.argmin(axis=0),
            expected_error_km=risk.min(axis=0),
            risk_km=risk,
            leakage_per_km=posterior_leakage_per_output(matrix, dist_xx, pairs=pairs),
            posterior=post,
        )


@register("bayes")
class Bayes(Attack):
    """The optimal single-report attack: each report alone, against the public prior.

    Point estimate: the expected-error-optimal secret (Shokri et al.'s optimal attack);
    hit: the MAP secret. Leakage: the report's posterior leakage (the prior cancels), which an
    eps-mDP mechanism keeps at most eps; the scorer flags any report above it.
    """

    def __init__(self) -> None:
        self.tables_: BayesAttack | None = None

    def release(self, release: Release) -> None:
        """Tabulate posteriors, estimates and leakage for every output of the new matrix."""
        tables, self.posterior_t_, self.entropy_ = _tabulated(release)
        self.guess_ = tables.optimal_estimate
        self.top_ = tables.map_estimate
        self.tables_ = tables

    def observe(self, obs: Observation) -> list[LocationEstimate]:
        """One estimate per reporting slot, from its report alone."""
        if self.tables_ is None:
            raise RuntimeError("bayes: observe() before any release()")
        users = obs.reporting
        out = obs.outputs[users]
        return [
            LocationEstimate(
                tick=obs.tick,
                users=users,
                guess=self.guess_[out],
                posterior=TabulatedPosterior(self.posterior_t_, out, self.tables_.risk_km),
                leakage_per_km=self.tables_.leakage_per_km[out],
                top=self.top_[out],
                entropy_bits=self.entropy_[out],
            )
        ]


#: Per released mechanism, its matrix's identity and :func:`_tabulated`'s tables of it.
_TABLES: WeakKeyDictionary = WeakKeyDictionary()


def _tabulated(release: Release) -> tuple[BayesAttack, np.ndarray, np.ndarray]:
    """The attack's tables of the released matrix, its ``(K, N)`` posterior rows and their
    entropies (bits); kept per mechanism while its matrix stays the same, so a mechanism an
    environment keeps across resets is tabulated once (the tables are only read)."""
    return kept_per_release(_TABLES, release, functools.partial(_tables_of, release.mechanism))


def _tables_of(mechanism, matrix: np.ndarray) -> tuple[BayesAttack, np.ndarray, np.ndarray]:
    sub = mechanism.domain_
    tables = BayesAttack.fit(matrix, sub.prior, sub.dist_xx, pairs=sub.constraint_pairs)
    rows = np.ascontiguousarray(tables.posterior.T)  # (K, N): rows
    return tables, rows, entropy_bits(tables.posterior.T)


def posterior_table(matrix: np.ndarray, prior: np.ndarray) -> np.ndarray:
    """``Pr[x_i | y_k]`` for every output, ``(N, K)``; 0 columns for impossible outputs."""
    joint = prior[:, None] * matrix
    mass = joint.sum(axis=0)
    return np.divide(joint, mass, out=np.zeros_like(joint), where=mass > 0)


def posterior_leakage_per_output(matrix: np.ndarray, dist_xx: np.ndarray, *, pairs=None):
    """``max_{i != j} |ln Z[i,k] - ln Z[j,k]| / d(i,j)`` for every output k (per km).

    Posterior over prior ratios cancel the prior: ``ln(post_i/post_j) - ln(pi_i/pi_j) =
    ln Z[i,k] - ln Z[j,k]``. With ``pairs`` (a domain's constraint pairs) only those pairs are
    scanned; this is exact, because along a shortest path the ratio of a sum of log
    differences to a sum of distances is at most the largest single ratio (mediant inequality).
    A positive entry against a zero entry leaks infinitely; two zeros leak nothing.
    """
    with np.errstate(divide="ignore"):
        logz = np.log(matrix)  # numpy's log: its bits, whatever libm a kernel would call
    n = matrix.shape[0]
    if pairs is None:
        ii, jj = np.triu_indices(n, k=1)
    else:
        ii, jj = pairs[:, 0], pairs[:, 1]
    from mdpsim.attacks import _kernels  # on first use: import mdpsim loads no numba

    out = np.zeros(matrix.shape[1])
    _kernels.pair_leakage(
        logz,
        np.ascontiguousarray(dist_xx, dtype=float),
        ii.astype(np.int64),
        jj.astype(np.int64),
        out,
    )
    return out
