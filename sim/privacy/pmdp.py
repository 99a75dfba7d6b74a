"""Probabilistic mDP (PmDP) auditor: Monte Carlo over exact log-density ratios.

Definition 3 of the DistA-LP paper: a release ``M`` is ``(eps, delta)``-PmDP when, for an input
pair ``(x_i, x_j)`` drawn uniformly and ``z ~ M(x_i)``, the privacy loss
``PL(z) = ln(p(z | x_i) / p(z | x_j)) / d(x_i, x_j)`` exceeds ``eps`` with probability
``p <= delta``.

One audit sample draws an ordered pair ``i != j`` uniformly from the audited population and
one ``z ~ M(x_i)``; whether ``PL(z) > eps`` is then an exact Bernoulli(``p``) draw, because the
mechanism reports its EXACT log-density (no histogram, no kernel estimate). ``S`` independent
samples with ``k`` violations give:

* ``confidence``: the one-sided Clopper-Pearson confidence that ``p <= delta``, i.e.
  ``1 - BinomCDF(k; S, delta)`` (one minus the p-value of the exact test of ``H0: p >= delta``).
  It is exact for a binomial count, so it is the number we report and calibrate against.
* ``p_upper``: the one-sided Clopper-Pearson upper bound of ``p`` at the requested confidence
  (``scipy.stats.binomtest(...).proportion_ci(method="exact")``); it is ``<= delta`` exactly
  when ``confidence`` reaches the requested one.
* ``hoeffding_confidence``: the paper's Proposition 2, ``1 - 2 exp(-2 S (delta - p_hat)^2)``
  (clipped at 0), reported only to show how loose it is (vacuous for ``S = 100``,
  ``delta = 1e-4``).
* ``samples_needed``: the ``S`` at which ``k = 0`` violations reach the requested confidence,
  ``ceil(ln(1 - c) / ln(1 - delta))`` (46 050 for ``c = 0.99``, ``delta = 1e-4``).

The auditor imports no mechanism: it sees a release through the :class:`Release` protocol.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

import numpy as np
from scipy import stats

from mdpsim._core.validation import check_epsilon, check_probability
from mdpsim.errors import InputError, PrivacyBudgetError

_CHUNK_ELEMENTS = 1 << 19  # samples x coordinates per vectorised chunk
# A loss counts as a violation only above eps * (1 + RTOL): floating-point rounding of an
# exact equality, the same relative tolerance as the verifier (never an absolute slack).
RTOL = 1e-9
_COARSE_SAMPLES = 3000


class Release(Protocol):
    """A randomised release of a parameter vector with an exact density (seen by the auditor
    only through the log-likelihood ratios it yields on a population of records)."""

    def for_records(self, thetas: np.ndarray) -> RecordRelease:
        """The release over audited records ``thetas`` (R, d), one parameter row each."""


class RecordRelease(Protocol):
    """A release applied to a known population of records."""

    def log_ratios(self, i: np.ndarray, j: np.ndarray, uniforms: np.ndarray) -> np.ndarray:
        """For ``z`` released by record ``i`` from ``uniforms`` (S, d): ``ln p(z | i) - ln
        p(z | j)``, shape (S,) (``+inf`` where ``z`` is impossible under ``j``)."""


@dataclass(frozen=True)
class AuditResult:
    """What one PmDP audit measured (``epsilon`` in 1/km)."""

    epsilon: float
    delta: float
    n_samples: int
    n_violations: int
    p_hat: float
    confidence: float
    hoeffding_confidence: float
    requested_confidence: float
    p_upper: float
    samples_needed: int
    n_infinite: int
    pl_median: float
    pl_q99: float

    @property
    def passed(self) -> bool:
        """True when the Clopper-Pearson confidence reaches the requested one."""
        return self.confidence >= self.requested_confidence


def samples_needed(delta: float, confidence: float) -> int:
    """Smallest ``S`` such that zero violations certify ``p <= delta`` at ``confidence``."""
    d, c = check_probability(delta, "delta"), check_probability(confidence, "confidence")
    return math.ceil(math.log1p(-c) / math.log1p(-d))


def clopper_pearson_confidence(n_violations: int, n_samples: int, delta: float) -> float:
    """One-sided confidence that ``p <= delta`` after ``n_violations`` in ``n_samples``.

    ``1 - binomtest(k, S, delta, alternative="less").pvalue``, with the upper tail computed
    directly (``binom.sf``) so that confidences close to 1 keep their digits.
    """
    return float(stats.binom.sf(n_violations, n_samples, delta))


def clopper_pearson_upper(k: int, n: int, confidence: float) -> float:
    """One-sided exact (Clopper-Pearson) upper bound at ``confidence`` of a proportion seen
    ``k`` times in ``n`` (the one Clopper-Pearson of the package: the PmDP and the mDP
    auditors both use it)."""
    test = stats.binomtest(k, n, alternative="less")
    return float(test.proportion_ci(confidence_level=confidence, method="exact").high)


def clopper_pearson_lower(k: int, n: int, confidence: float) -> float:
    """One-sided exact (Clopper-Pearson) lower bound at ``confidence`` (as the upper one)."""
    test = stats.binomtest(k, n, alternative="greater")
    return float(test.proportion_ci(confidence_level=confidence, method="exact").low)


def hoeffding_confidence(p_hat: float, n_samples: int, delta: float) -> float:
    """The paper's Proposition 2 bound ``1 - 2 exp(-2 S (delta - p_hat)^2)``, clipped at 0."""
    if p_hat >= delta:
        return 0.0
    return max(0.0, 1.0 - 2.0 * math.exp(-2.0 * n_samples * (delta - p_hat) ** 2))


@dataclass(frozen=True)
class _Draws:
    """Common random numbers: pairs and uniforms shared by every noise scale tried."""

    i: np.ndarray
    j: np.ndarray
    seed: int

    def uniforms(self, start: int, rows: int, dim: int) -> np.ndarray:
        """The U(0,1) block of samples ``start .. start + rows`` (regenerated, not stored)."""
        return np.random.default_rng([self.seed, start]).random((rows, dim))


def _draw(n_records: int, n_samples: int, rng: np.random.Generator) -> _Draws:
    i = rng.integers(0, n_records, size=n_samples)
    j = rng.integers(0, n_records - 1, size=n_samples)
    j = j + (j >= i)  # uniform over j != i
    return _Draws(i, j, int(rng.integers(0, 2**63 - 1)))


def _privacy_losses(release: Release, thetas, dist, draws: _Draws) -> np.ndarray:
    """PL per sample in 1/km; +inf where the output is impossible under x_j (NaN counts too)."""
    out = np.empty(len(draws.i))
    records = release.for_records(thetas)
    chunk = max(1, _CHUNK_ELEMENTS // thetas.shape[1])
    for s in range(0, len(draws.i), chunk):
        i, j = draws.i[s : s + chunk], draws.j[s : s + chunk]
        log_ratio = records.log_ratios(i, j, draws.uniforms(s, len(i), thetas.shape[1]))
        with np.errstate(invalid="ignore", divide="ignore"):
            pl = log_ratio / dist[i, j]
        pl[(log_ratio <= 0) & (dist[i, j] == 0)] = 0.0
        out[s : s + chunk] = np.where(np.isnan(pl), np.inf, pl)
    return out


def _check_population(thetas, dist) -> tuple[np.ndarray, np.ndarray]:
    thetas = np.asarray(thetas, dtype=float)
    dist = np.asarray(dist, dtype=float)
    if thetas.ndim != 2 or len(thetas) < 2:
        raise InputError("thetas must be an (R, d) array with R >= 2 audited records")
    if dist.shape != (len(thetas), len(thetas)):
        raise InputError(f"dist must be ({len(thetas)}, {len(thetas)}) km, got {dist.shape}")
    if not np.all(np.isfinite(thetas)):
        raise InputError("thetas contain NaN or inf")
    return thetas, dist


def _result(pl, epsilon, delta, confidence) -> AuditResult:
    s = len(pl)
    k = int(np.count_nonzero(pl > epsilon * (1.0 + RTOL)))
    finite = pl[np.isfinite(pl)]
    return AuditResult(
        epsilon=epsilon,
        delta=delta,
        n_samples=s,
        n_violations=k,
        p_hat=k / s,
        confidence=clopper_pearson_confidence(k, s, delta),
        hoeffding_confidence=hoeffding_confidence(k / s, s, delta),
        requested_confidence=confidence,
        p_upper=clopper_pearson_upper(k, s, confidence),
        samples_needed=samples_needed(delta, confidence),
        n_infinite=int(np.count_nonzero(np.isinf(pl))),
        pl_median=float(np.median(pl)),
        pl_q99=float(np.quantile(finite, 0.99)) if len(finite) else math.inf,
    )


def audit_pmdp(
    release: Release,
    thetas,
    dist,
    epsilon: float,
    delta: float,
    *,
    confidence: float = 0.99,
    n_samples: int | None = None,
    rng: np.random.Generator,
) -> AuditResult:
    """Audit ``(epsilon, delta)``-PmDP of ``release`` over a population of records.

    Parameters
    ----------
    release
        The randomised release (see :class:`Release`).
    thetas
        ``(R, d)``: the parameter vector each audited record would release.
    dist
        ``(R, R)`` true distances between the audited records, km.
    epsilon, delta
        The claim to audit (``epsilon`` in 1/km).
    confidence
        The confidence wanted for ``p <= delta``; sets the default sample count.
    n_samples
        Monte Carlo samples; default :func:`samples_needed` ``(delta, confidence)``.
    """
    thetas, dist = _check_population(thetas, dist)
    check_epsilon(epsilon)
    delta, confidence = (
        check_probability(delta, "delta"),
        check_probability(confidence, "confidence"),
    )
    s = samples_needed(delta, confidence) if n_samples is None else int(n_samples)
    if s < 1:
        raise InputError(f"n_samples={n_samples!r} must be >= 1")
    draws = _draw(len(thetas), s, rng)
    return _result(_privacy_losses(release, thetas, dist, draws), float(epsilon), delta, confidence)


def calibrate_scale(
    make_release: Callable[[float], Release],
    thetas,
    dist,
    epsilon: float,
    delta: float,
    *,
    confidence: float = 0.99,
    n_samples: int | None = None,
    rng: np.random.Generator,
    start: float = 1.0,
    max_scale: float = 1e6,
    rel_tol: float = 0.02,
) -> tuple[float, AuditResult]:
    """Smallest noise scale whose release passes the audit, by bracketing and bisection.

    ``make_release(scale)`` builds the release at a given noise scale (larger = noisier). A
    coarse search on at most 3000 samples finds the region; the answer is then searched with
    the full sample count. Within each phase all scales are audited on the same pairs and
    uniforms (common random numbers), so the search sees a deterministic, nearly monotone
    criterion. The returned audit is the full one at the returned scale. Raises
    :class:`PrivacyBudgetError` when even ``max_scale`` fails.
    """
    thetas, dist = _check_population(thetas, dist)
    delta, confidence = (
        check_probability(delta, "delta"),
        check_probability(confidence, "confidence"),
    )
    s = samples_needed(delta, confidence) if n_samples is None else int(n_samples)
    # Coarse search on a prefix of the samples, then the full audit near its answer.
    coarse = _search(
        make_release,
        thetas,
        dist,
        epsilon,
        delta,
        confidence,
        _draw(len(thetas), min(s, _COARSE_SAMPLES), rng),
        0.0,
        start,
        max_scale,
        0.1,
        coarse=True,
    )
    return _search(
        make_release,
        thetas,
        dist,
        epsilon,
        delta,
        confidence,
        _draw(len(thetas), s, rng),
        0.5 * coarse[0],
        coarse[0],
        max_scale,
        rel_tol,
    )


def _search(make_release, thetas, dist, epsilon, delta, confidence, draws, lo, hi, max_scale,
            rel_tol, *, coarse=False) -> tuple[float, AuditResult]:  # fmt: skip
    """Bracket then narrow ``[lo, hi]`` (``hi`` passes) on one fixed set of draws.

    The coarse phase (too few samples to reach the confidence) asks for zero violations. The
    pass/fail decision is always the audit's own. To choose where to probe, the search uses
    that the decisive privacy loss (the ``(k+1)``-th largest, ``k`` the violations allowed)
    falls roughly like ``1 / scale``: it probes just above the scale where that proportional
    model crosses ``epsilon``, inside the bracket, and falls back to bisection whenever a probe
    did not halve the bracket. Every probe keeps ``hi`` passing and ``lo`` failing, as plain
    bisection does, so the answer is the same kind of bound, found in fewer audits.
    """
    n = len(draws.i)
    allowed = 0 if coarse else _allowed_violations(n, delta, confidence)

    def run(scale: float) -> tuple[AuditResult, bool, float]:
        pl = _privacy_losses(make_release(scale), thetas, dist, draws)
        res = _result(pl, float(epsilon), delta, confidence)
        passed = res.n_violations == 0 if coarse else res.passed
        decisive = np.partition(pl, n - 1 - allowed)[n - 1 - allowed] if 0 <= allowed < n else 0.0
        return res, passed, scale * decisive / epsilon  # the proportional model's crossing

    best, passed, guess = run(hi)
    while not passed:
        lo, hi = hi, min(max(2.0 * hi, guess * (1 + rel_tol)), 64.0 * hi)
        if lo >= max_scale:
            raise PrivacyBudgetError(
                f"no noise scale up to {max_scale:g} passes ({epsilon:g}/km, {delta:g})-PmDP at "
                f"confidence {confidence:g} (p_hat={best.p_hat:.3g}); raise the block's epsilon"
            )
        hi = min(hi, max_scale)
        best, passed, guess = run(hi)
    halved = True
    while hi - lo > rel_tol * hi:
        width = hi - lo
        mid = 0.5 * (lo + hi)
        if halved and math.isfinite(guess):  # just above the model's crossing, inside
            mid = min(max(guess * (1 + 0.25 * rel_tol), lo + 0.02 * width), hi - 0.02 * width)
        res, passed, new_guess = run(mid)
        if passed:
            hi, best = mid, res
        else:
            lo = mid
        guess = new_guess
        halved = hi - lo <= 0.5 * width
    return hi, best


def _allowed_violations(n_samples: int, delta: float, confidence: float) -> int:
    """Most violations among ``n_samples`` that still certify ``p <= delta`` (-1: none do)."""
    k = int(stats.binom.ppf(1.0 - confidence, n_samples, delta))
    while k >= 0 and clopper_pearson_confidence(k, n_samples, delta) < confidence:
        k -= 1
    while clopper_pearson_confidence(k + 1, n_samples, delta) >= confidence:
        k += 1
    return k
