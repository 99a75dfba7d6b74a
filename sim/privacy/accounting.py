"""Geo-privacy notions, the conversions between them, and the Gaussian CGP mechanism.

Units: distances in km, ``epsilon`` in 1/km, ``rho`` in 1/km^2 (the CGP metric is in km),
``lambda_km`` (the Lambda of approximate GP) in km. Locations elsewhere are in metres; convert
to km (divide by 1000) before privatising them with :func:`gaussian_release`.

Notions (Liang & Yi, *Adaptive Privacy Budgeting*, §3):

* pure GP, ``epsilon``: ``Pr[M(x) in S] <= exp(epsilon d(x, x')) Pr[M(x') in S]``;
* CGP, ``rho``: ``D_alpha(M(x) || M(x')) <= rho alpha d(x, x')^2`` for all ``alpha > 1``;
* approximate GP, ``(epsilon, delta, Lambda)``: the pure inequality plus ``delta``, for pairs
  with ``d(x, x') <= Lambda``.

Conversions (derivations in ``docs/budgeting.md``): pure ``epsilon`` implies CGP
``epsilon^2 / 2``; ``(rho, Lambda)``-CGP implies ``(epsilon, delta, Lambda)``-GP with
``epsilon = min_alpha rho alpha Lambda + (log(1/delta) + log f(alpha)) / ((alpha-1) Lambda)``,
``f(alpha) = (1/alpha) (1 - 1/alpha)^(alpha-1)``. Every numerical optimisation over ``alpha``
returns the formula evaluated at the chosen ``alpha``, so an imperfect optimiser can only
make a conversion looser, never unsound.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np
from scipy import optimize, stats

from mdpsim._core.validation import check_probability, check_scalar
from mdpsim.errors import InputError

# One ulp-ish relative margin, applied in the safe direction wherever a float is rounded.
_SAFETY = 1e-12
# Grid over a = alpha - 1 (log-spaced) before a bounded refinement.
_A_GRID = np.logspace(-9, 9, 1801)


@dataclass(frozen=True)
class PureGP:
    """Pure geo-privacy: ``epsilon_per_km``-GP, as a notion a budget is kept in.

    The same inequality as :class:`~mdpsim.privacy.guarantees.PureMDP` (geo-privacy and
    metric DP name one notion); PureMDP is what a mechanism promises, PureGP the unit a
    privacy filter counts in, and a PureMDP release is charged as ``PureGP(eps)``
    (:mod:`mdpsim.privacy.filters`).
    """

    epsilon_per_km: float

    def __post_init__(self) -> None:
        check_scalar(self.epsilon_per_km, "epsilon_per_km", min=0)


@dataclass(frozen=True)
class CGP:
    """Concentrated geo-privacy: ``rho_per_km2``-CGP (Rényi, metric in km)."""

    rho_per_km2: float

    def __post_init__(self) -> None:
        check_scalar(self.rho_per_km2, "rho_per_km2", min=0)


@dataclass(frozen=True)
class ApproxGP:
    """Approximate geo-privacy ``(epsilon_per_km, delta, lambda_km)``."""

    epsilon_per_km: float
    delta: float
    lambda_km: float

    def __post_init__(self) -> None:
        check_scalar(self.epsilon_per_km, "epsilon_per_km", min=0)
        check_probability(self.delta, "delta")
        _check_lambda(self.lambda_km)


Notion = PureGP | CGP | ApproxGP


# --------------------------------------------------------------------------- conversions
def gp_to_cgp(epsilon_per_km: float) -> float:
    """CGP parameter (1/km^2) implied by pure ``epsilon_per_km``-GP: ``epsilon^2 / 2``."""
    eps = check_scalar(epsilon_per_km, "epsilon_per_km", min=0)
    return eps * eps / 2.0 * (1.0 + _SAFETY)


def cgp_to_approx_gp(rho_per_km2: float, *, delta: float, lambda_km: float) -> ApproxGP:
    """Smallest ``epsilon`` (1/km) this module certifies for ``(rho, Lambda)``-CGP at ``delta``.

    Uses the Rényi-to-hockey-stick bound of Canonne, Kamath & Steinke (2020, Prop. 12) at
    distance ``Lambda``, which dominates every shorter distance (``docs/budgeting.md``).
    """
    rho = check_scalar(rho_per_km2, "rho_per_km2", min=0)
    check_probability(delta, "delta")
    _check_lambda(lambda_km)
    if rho == 0.0:
        return ApproxGP(0.0, delta, lambda_km)
    log_inv_delta = -math.log(delta)

    def eps_at(a):
        return rho * (1.0 + a) * lambda_km + (log_inv_delta + _log_f(a)) / (a * lambda_km)

    a = _best_a(eps_at, minimise=True)
    eps = float(eps_at(a)) * (1.0 + _SAFETY)
    return ApproxGP(max(eps, 0.0), delta, lambda_km)


def approx_gp_to_cgp_budget(epsilon_per_km: float, *, delta: float, lambda_km: float) -> float:
    """Largest total CGP ``rho`` (1/km^2) whose conversion stays within ``(eps, delta, Lambda)``.

    This is how the approximate-GP filter of the paper (its Theorem 4.5) becomes a CGP filter:
    composed CGP costs ``sum_j r_j <= rho_max`` is equivalent to the converted
    ``epsilon(sum_j r_j) <= epsilon``. Rounded down.
    """
    eps = check_scalar(epsilon_per_km, "epsilon_per_km", min=0)
    check_probability(delta, "delta")
    _check_lambda(lambda_km)
    log_inv_delta = -math.log(delta)

    def rho_at(a):
        num = eps * a * lambda_km - log_inv_delta - _log_f(a)
        return num / ((1.0 + a) * a * lambda_km**2)

    a = _best_a(rho_at, minimise=False)
    rho = float(rho_at(a)) * (1.0 - _SAFETY)
    return max(rho, 0.0)


def cgp_delta(rho_per_km2: float, *, epsilon_per_km: float, lambda_km: float) -> float:
    """The ``delta`` certified for ``(rho, Lambda)``-CGP read as ``epsilon``-GP within Lambda."""
    rho = check_scalar(rho_per_km2, "rho_per_km2", min=0)
    eps = check_scalar(epsilon_per_km, "epsilon_per_km", min=0)
    _check_lambda(lambda_km)
    if rho == 0.0:
        return 0.0

    def log_delta_at(a):
        return a * (rho * (1.0 + a) * lambda_km**2 - eps * lambda_km) + _log_f(a)

    a = _best_a(log_delta_at, minimise=True)
    return min(1.0, math.exp(float(log_delta_at(a))) * (1.0 + _SAFETY))


def _log_f(a):
    """``log f(alpha)`` with ``alpha = 1 + a``: ``a log a - (1 + a) log(1 + a)`` (<= 0)."""
    a = np.asarray(a, dtype=float)
    return a * np.log(a) - (1.0 + a) * np.log1p(a)


def _best_a(fun, *, minimise: bool) -> float:
    """``a = alpha - 1 > 0`` optimising ``fun``: log grid, then a bounded Brent refinement."""
    sign = 1.0 if minimise else -1.0
    values = sign * fun(_A_GRID)
    best = int(np.nanargmin(values))
    lo = math.log(_A_GRID[max(best - 1, 0)])
    hi = math.log(_A_GRID[min(best + 1, len(_A_GRID) - 1)])
    res = optimize.minimize_scalar(
        lambda t: sign * float(fun(math.exp(t))), bounds=(lo, hi), method="bounded"
    )
    a_ref = math.exp(res.x)
    return a_ref if sign * float(fun(a_ref)) <= values[best] else float(_A_GRID[best])


# --------------------------------------------------------------------------- Gaussian mechanism
def gaussian_noise_std_km(rho_per_km2, *, lipschitz: float = 1.0) -> np.ndarray:
    """Per-coordinate noise std (km) of the ``rho``-CGP Gaussian mechanism: ``K / sqrt(2 rho)``.

    Rounded up by a relative ``1e-12`` so float rounding never shrinks the noise.
    """
    rho = np.asarray(rho_per_km2, dtype=float)
    if not (np.isfinite(rho).all() and (rho > 0).all()):
        raise InputError("rho_per_km2 must be finite and > 0 for every user released")
    k = check_scalar(lipschitz, "lipschitz", min=0)
    if k == 0.0:
        raise InputError("lipschitz must be > 0 (a constant function needs no privacy)")
    return k / np.sqrt(2.0 * rho) * (1.0 + _SAFETY)


def gaussian_release(
    values_km, rho_per_km2, *, rng: np.random.Generator, lipschitz: float = 1.0
) -> np.ndarray:
    """``phi(u) + N(0, K^2 / (2 rho) I)``: the Gaussian mechanism, ``rho``-CGP (Lemma 3.4).

    Parameters
    ----------
    values_km
        ``phi(u)`` per user, shape ``(n,)`` or ``(n, d)``, in km, with ``phi`` K-Lipschitz
        from the metric (km) to the Euclidean norm (km).
    rho_per_km2
        A scalar or one ``rho`` per user, in 1/km^2.
    """
    vals = np.asarray(values_km, dtype=float)
    std = gaussian_noise_std_km(rho_per_km2, lipschitz=lipschitz)
    if std.ndim == 1 and vals.ndim == 2:
        std = std[:, None]
    return vals + rng.standard_normal(vals.shape) * std


def gaussian_norm_bound(d: int, beta) -> np.ndarray:
    """``lambda(d, beta)``: ``Pr[||Z|| > lambda] = beta`` for ``Z ~ N(0, I_d)`` (exact).

    The exact upper ``beta`` quantile of the chi distribution with ``d`` degrees of freedom.
    :func:`laurent_massart_bound` is the paper's closed-form upper bound of it.
    """
    beta = np.asarray(beta, dtype=float)
    if beta.ndim == 0:
        return np.asarray(chi_quantile(d, float(beta)))  # a fresh array: the cache is shared
    _check_beta(beta)
    return stats.chi.isf(beta, df=int(d))


def chi_quantile(d: int, beta: float) -> float:
    """:func:`gaussian_norm_bound` of one ``beta`` as a float (the elimination asks the same
    few quantiles every round)."""
    if not 0.0 < beta < 1.0:
        raise InputError(_BETA_RANGE)
    return _chi_isf(int(d), float(beta))


@functools.lru_cache(maxsize=256)
def _chi_isf(d: int, beta: float) -> float:
    """``stats.chi.isf(beta, df=d)`` of one ``beta``, kept (scipy's call costs 0.5 ms)."""
    return float(stats.chi.isf(beta, df=d))


def laurent_massart_bound(d: int, beta) -> np.ndarray:
    """``sqrt(d + 2 sqrt(d log(1/beta)) + 2 log(1/beta))`` >= :func:`gaussian_norm_bound`."""
    beta = np.asarray(beta, dtype=float)
    _check_beta(beta)
    x = -np.log(beta)
    return np.sqrt(d + 2.0 * np.sqrt(d * x) + 2.0 * x)


_BETA_RANGE = "beta must lie strictly between 0 and 1"


def _check_beta(beta: np.ndarray) -> None:
    if not ((beta > 0) & (beta < 1)).all():
        raise InputError(_BETA_RANGE)


def _check_lambda(lambda_km) -> float:
    """CGP implies approximate GP only for pairs within a bounded distance: finite, > 0."""
    return check_scalar(lambda_km, "lambda_km", min=0, include_boundaries="neither", unit="km")
