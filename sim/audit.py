"""Black-box statistical auditor of mDP claims (``mdpsim audit``).

The auditor sees only a sampler ``sample(i, n, rng) -> n outputs`` (integer output indices;
an exception raised by the mechanism is itself an output, ``ERROR``), the true distances between
inputs, and the claimed eps. For each chosen input pair (x, x') at ``eps * d`` roughly 1 to 3,
and each direction:

1. *Selection*: on one set of samples from both inputs, pick a likelihood-ratio event ``S``
   (outputs sorted by their smoothed empirical ratio; the prefix with the largest ratio among
   those with enough mass).
2. *Test*: on fresh samples, a one-sided Clopper-Pearson lower bound ``L`` of ``Pr[M(x) ∈ S]``
   and upper bound ``U`` of ``Pr[M(x') ∈ S]``. A violation is reported when
   ``L > exp(eps d) U``; ``ln(L / U) / d`` is a lower bound on the true epsilon that holds with
   the stated confidence.

Each bound is taken at ``alpha / (2 * tests)`` (Bonferroni over pairs, directions and the two
bounds), so the chance of any false alarm on an eps-mDP mechanism is at most ``alpha``
(default 1e-6): the event is chosen on independent samples, so it is fixed for the test.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np
from scipy.stats import beta as beta_dist

from sim.errors import InputError

ERROR = np.iinfo(np.int64).min  # the output "the mechanism raised"
MIN_EVENT_COUNT = 20


@dataclass(frozen=True)
class PairResult:
    """The test of one ordered pair (x -> x')."""

    i: int
    j: int
    distance_km: float
    event: tuple
    lower_x: float
    upper_x_prime: float
    epsilon_lower_bound: float
    violated: bool


@dataclass
class AuditResult:
    """Verdict of an audit."""

    claimed_epsilon: float
    alpha: float
    samples_per_side: int
    pairs: list[PairResult] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        """No pair showed a violation."""
        return not any(p.violated for p in self.pairs)

    @property
    def epsilon_lower_bound(self) -> float:
        """The best lower bound on the true epsilon found (per km), 0 if none."""
        return max((p.epsilon_lower_bound for p in self.pairs), default=0.0)

    @property
    def worst(self) -> PairResult | None:
        """The pair with the largest epsilon lower bound."""
        return max(self.pairs, key=lambda p: p.epsilon_lower_bound, default=None)

    def lines(self) -> list[str]:
        """Human-readable summary for the CLI."""
        w = self.worst
        verdict = "PASS" if self.passed else "FAIL"
        out = [
            f"verdict          {verdict} (overall false-alarm rate <= {self.alpha:g})",
            f"claimed eps      {self.claimed_epsilon:g} /km",
            f"eps lower bound  {self.epsilon_lower_bound:.4g} /km (holds with that confidence)",
            f"pairs tested     {len(self.pairs)} ordered pairs, "
            f"{self.samples_per_side:,} samples per side and stage",
        ]
        if w is not None:
            out.append(
                f"worst pair       x={w.i} -> x'={w.j} at {w.distance_km * 1000:.1f} m, "
                f"event of {len(w.event)} outputs: Pr >= {w.lower_x:.4g} vs <= "
                f"{w.upper_x_prime:.4g}"
            )
        return out


def audit(
    sample: Callable[[int, int, np.random.Generator], np.ndarray | Sequence[int]],
    dist_km: np.ndarray,
    epsilon: float,
    *,
    n_samples: int = 100_000,
    n_pairs: int = 6,
    alpha: float = 1e-6,
    eps_d_range: tuple[float, float] = (1.0, 3.0),
    rng: np.random.Generator | None = None,
) -> AuditResult:
    """Audit a sampler's eps-mDP claim; see the module docstring.

    Parameters
    ----------
    sample
        ``sample(i, n, rng)`` returns ``n`` outputs for input ``i``; it may raise (that counts
        as the output ``ERROR`` for all ``n`` draws).
    dist_km
        True distances between inputs (km).
    epsilon
        Claimed eps per km.
    n_samples
        Samples per input for the selection stage and again for the test stage.
    n_pairs
        Unordered input pairs tested (both directions each).
    """
    if not (math.isfinite(epsilon) and epsilon > 0):
        raise InputError(f"epsilon={epsilon!r} must be finite and > 0")
    if not (0 < alpha < 1):
        raise InputError(f"alpha={alpha!r} must lie in (0, 1)")
    if n_samples < 100 or n_pairs < 1:
        raise InputError("n_samples must be >= 100 and n_pairs >= 1")
    rng = np.random.default_rng(0) if rng is None else rng
    pairs = choose_pairs(dist_km, epsilon, n_pairs=n_pairs, eps_d_range=eps_d_range, rng=rng)
    level = alpha / (2 * 2 * len(pairs))
    result = AuditResult(claimed_epsilon=epsilon, alpha=alpha, samples_per_side=n_samples)
    for i, j in pairs:
        select = (_draw(sample, i, n_samples, rng), _draw(sample, j, n_samples, rng))
        test = (_draw(sample, i, n_samples, rng), _draw(sample, j, n_samples, rng))
        d = float(dist_km[i, j])
        for a, b, sel, tst in ((i, j, select, test), (j, i, select[::-1], test[::-1])):
            event = likelihood_ratio_event(sel[0], sel[1])
            lo = clopper_pearson_lower(_count(tst[0], event), n_samples, level)
            hi = clopper_pearson_upper(_count(tst[1], event), n_samples, level)
            bound = _log_ratio(lo, hi) / d
            result.pairs.append(
                PairResult(
                    i=a, j=b, distance_km=d, event=event, lower_x=lo, upper_x_prime=hi,
                    epsilon_lower_bound=max(bound, 0.0),
                    violated=lo > math.exp(epsilon * d) * hi,
                )
            )  # fmt: skip
    return result


def choose_pairs(
    dist_km: np.ndarray,
    epsilon: float,
    *,
    n_pairs: int,
    eps_d_range: tuple[float, float],
    rng: np.random.Generator,
) -> list[tuple[int, int]]:
    """Distinct input pairs with ``eps * d`` spread over ``eps_d_range`` (closest if none)."""
    n = len(dist_km)
    ii, jj = np.triu_indices(n, k=1)
    eps_d = epsilon * dist_km[ii, jj]
    targets = np.linspace(*eps_d_range, n_pairs)
    chosen: list[tuple[int, int]] = []
    used = np.zeros(len(ii), dtype=bool)
    for t in targets:
        # among pairs not used yet, one of the few closest to the target eps*d, at random
        gap = np.where(used, np.inf, np.abs(eps_d - t))
        near = np.argsort(gap)[: max(1, min(8, int(np.sum(~used))))]
        pick = int(rng.choice(near))
        used[pick] = True
        chosen.append((int(ii[pick]), int(jj[pick])))
    return chosen


def likelihood_ratio_event(from_x: np.ndarray, from_x_prime: np.ndarray) -> tuple:
    """Outputs more frequent under x than x', chosen to maximise the estimated ratio.

    Outputs are sorted by their smoothed count ratio; the event is the prefix with the largest
    ratio ``(c_x + 1) / (c_x' + 1)`` among prefixes holding at least MIN_EVENT_COUNT draws.
    """
    values, inverse = np.unique(np.concatenate([from_x, from_x_prime]), return_inverse=True)
    cx = np.bincount(inverse[: len(from_x)], minlength=len(values))
    cy = np.bincount(inverse[len(from_x) :], minlength=len(values))
    order = np.argsort(-(cx + 0.5) / (cy + 0.5), kind="stable")
    sx, sy = np.cumsum(cx[order]), np.cumsum(cy[order])
    score = np.where(sx >= MIN_EVENT_COUNT, np.log(sx + 1.0) - np.log(sy + 1.0), -np.inf)
    best = int(np.argmax(score)) if np.isfinite(score).any() else len(values) - 1
    return tuple(values[order[: best + 1]].tolist())


def clopper_pearson_lower(k: int, n: int, level: float) -> float:
    """One-sided lower confidence bound of a binomial proportion (exact)."""
    return 0.0 if k == 0 else float(beta_dist.ppf(level, k, n - k + 1))


def clopper_pearson_upper(k: int, n: int, level: float) -> float:
    """One-sided upper confidence bound of a binomial proportion (exact)."""
    return 1.0 if k == n else float(beta_dist.ppf(1 - level, k + 1, n - k))


def mechanism_sampler(mechanism) -> Callable[[int, int, np.random.Generator], np.ndarray]:
    """The sampler of a fitted registered mechanism, as the auditor sees it."""

    def sample(i: int, n: int, rng: np.random.Generator) -> np.ndarray:
        return mechanism.sample_many(np.full(n, i), rng)

    return sample


def _draw(sample, i: int, n: int, rng: np.random.Generator) -> np.ndarray:
    try:
        out = np.asarray(sample(i, n, rng))
    except Exception:  # a refusal is an output, and a distinguishable one
        return np.full(n, ERROR, dtype=np.int64)
    if out.shape != (n,) or not np.issubdtype(out.dtype, np.integer):
        raise InputError(f"sampler must return {n} integer outputs, got {out.dtype} {out.shape}")
    return out.astype(np.int64)


def _count(samples: np.ndarray, event: tuple) -> int:
    return int(np.isin(samples, np.array(event, dtype=np.int64)).sum())


def _log_ratio(lo: float, hi: float) -> float:
    if lo <= 0:
        return 0.0
    return math.inf if hi <= 0 else math.log(lo / hi)
