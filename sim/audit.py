"""Black-box statistical auditor of mDP claims (``mdpsim audit``), in two stages.

The auditor sees only a sampler ``sample(i, n, rng) -> n outputs`` (integer output indices;
an exception raised by the mechanism is itself an output, ``ERROR``), the true distances between
inputs, and the claimed eps. It looks for an input pair (x, x') and an output set S with
``Pr[M(x) ∈ S] > exp(eps d(x, x')) Pr[M(x') ∈ S]``:

1. *Screen* (a share of the budget, spread over every input): for every ordered pair, the
   candidate events are the single outputs and the DP-Sniper-style sets "the outputs whose
   empirical likelihood ratio is at least t" (prefixes of the outputs sorted by that ratio).
   Each candidate is scored by the lower bound the test stage is expected to reach on it,
   minus a penalty for the screen's own noise; the best ones go to the test, and so do the
   closest pairs (where a leak's margin ``(eps' - eps) d`` is smallest) with their best events.
2. *Test* (the rest of the budget, spread over the few inputs the chosen candidates use):
   on fresh samples, a one-sided Clopper-Pearson lower bound ``L`` of ``Pr[M(x) ∈ S]`` and an
   upper bound ``U`` of ``Pr[M(x') ∈ S]``. A violation is reported when ``L > exp(eps d) U``;
   ``ln(L / U) / d`` is a lower bound on the true epsilon.

Every bound is taken at ``alpha / (2 * candidates)`` (Bonferroni over the tested candidates
and their two bounds). The candidates are fixed by the screen, which the test's samples are
independent of, so the chance of any false alarm on an eps-mDP mechanism whose draws are
independent is at most ``alpha`` (default 1e-6), whatever the screen chose. The screen spends
no error probability: it only decides where to look.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np
from scipy.stats import binomtest, norm

from mdpsim.errors import InputError

ERROR = np.iinfo(np.int64).min  # the output "the mechanism raised"
MIN_EVENT_COUNT = 20  # screen draws an event needs under x before it is considered
SCREEN_NOISE_Z = 2.0  # screen noise penalty, in standard errors of the screened estimate
_BINCOUNT_LIMIT = 1 << 22  # outputs in [0, limit) are counted with bincount, others sorted

Sampler = Callable[[int, int, np.random.Generator], np.ndarray | Sequence[int]]


@dataclass(frozen=True)
class PairResult:
    """The test of one ordered pair (x -> x') on one event."""

    i: int
    j: int
    distance_km: float
    event: tuple
    lower_x: float
    upper_x_prime: float
    epsilon_lower_bound: float
    violated: bool
    chosen_as: str  # "screen" (best score) or "closest" (a closest pair)


@dataclass
class AuditResult:
    """Verdict of an audit."""

    claimed_epsilon: float
    alpha: float
    screen_samples_per_input: dict[int, int]  # input -> its screen draws
    test_samples_per_input: dict[int, int]  # input -> its test draws
    total_samples: int
    pairs: list[PairResult] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        """No tested candidate showed a violation."""
        return not any(p.violated for p in self.pairs)

    @property
    def epsilon_lower_bound(self) -> float:
        """The best lower bound on the true epsilon found (per km), 0 if none."""
        return max((p.epsilon_lower_bound for p in self.pairs), default=0.0)

    @property
    def worst(self) -> PairResult | None:
        """The candidate with the largest epsilon lower bound."""
        return max(self.pairs, key=lambda p: p.epsilon_lower_bound, default=None)

    def lines(self) -> list[str]:
        """Human-readable summary for the CLI."""
        w = self.worst
        verdict = "PASS" if self.passed else "FAIL"
        out = [
            f"verdict          {verdict} (overall false-alarm rate <= {self.alpha:g})",
            f"claimed eps      {self.claimed_epsilon:g} /km",
            f"eps lower bound  {self.epsilon_lower_bound:.4g} /km (holds with that confidence)",
            f"samples          {self.total_samples:,}: screen "
            f"{_span(self.screen_samples_per_input)} per input, test "
            f"{_span(self.test_samples_per_input)} on {len(self.test_samples_per_input)} inputs",
            f"candidates       {len(self.pairs)} (ordered pair, event) tested",
        ]
        if w is not None:
            out.append(
                f"worst pair       x={w.i} -> x'={w.j} at {w.distance_km * 1000:.1f} m "
                f"({w.chosen_as}), event of {len(w.event)} outputs: Pr >= {w.lower_x:.4g} "
                f"vs <= {w.upper_x_prime:.4g}"
            )
        return out


def _span(draws: dict[int, int]) -> str:
    lo, hi = min(draws.values()), max(draws.values())
    return f"{lo:,}" if lo == hi else f"{lo:,}-{hi:,}"


@dataclass(frozen=True)
class _Candidate:
    i: int
    j: int
    event: np.ndarray  # column indices into the screen's output vocabulary
    score: float
    chosen_as: str


def audit(
    sample: Sampler,
    dist_km: np.ndarray,
    epsilon: float,
    *,
    total_samples: int = 30_000_000,
    screen_share: float = 0.3,
    n_candidates: int = 8,
    n_closest: int = 2,
    closest_share: float = 0.6,
    alpha: float = 1e-6,
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
    total_samples
        Draws from the sampler over the whole audit (screen and test together).
    screen_share
        Share of each input's draws spent on the screen.
    n_candidates
        (ordered pair, event) candidates with the best screen scores sent to the test.
    n_closest
        Closest unordered pairs also sent to the test (both directions, best event each).
    closest_share
        Share of ``total_samples`` given to the inputs of the closest pairs (screen and test),
        where a leak's margin ``(eps' - eps) d`` is smallest.
    alpha
        Family-wise false-alarm rate.
    """
    dist_km = np.asarray(dist_km, dtype=float)
    n = len(dist_km)
    if dist_km.ndim != 2 or dist_km.shape != (n, n) or n < 2:
        raise InputError(f"dist_km must be an (N, N) matrix with N >= 2, got {dist_km.shape}")
    if not (math.isfinite(epsilon) and epsilon > 0):
        raise InputError(f"epsilon={epsilon!r} must be finite and > 0")
    if not (0 < alpha < 1):
        raise InputError(f"alpha={alpha!r} must lie in (0, 1)")
    if not (0 < screen_share < 1):
        raise InputError(f"screen_share={screen_share!r} must lie in (0, 1)")
    if not (0 <= closest_share < 1):
        raise InputError(f"closest_share={closest_share!r} must lie in [0, 1)")
    if n_candidates < 1 or n_closest < 0:
        raise InputError("n_candidates must be >= 1 and n_closest >= 0")
    if not (dist_km > 0).any():
        raise InputError("dist_km has no pair of inputs at a positive distance")
    close = _closest_pairs(dist_km, n_closest)
    plan = _Plan.make(n, {k for pair in close for k in pair}, total_samples, screen_share,
                      closest_share, n_candidates)  # fmt: skip
    rng = np.random.default_rng(0) if rng is None else rng

    vocab, counts = _count_outputs(_draw(sample, i, int(plan.screen[i]), rng) for i in range(n))
    cands = _choose(counts, plan, dist_km, epsilon, alpha, close, n_candidates=n_candidates)
    n_test = plan.test_draws(cands)
    inputs = sorted(n_test)
    draws = (_draw(sample, i, n_test[i], rng) for i in inputs)
    test = dict(zip(inputs, _count_outputs(draws, vocab=vocab)[1], strict=True))
    level = alpha / (2 * len(cands))
    result = AuditResult(
        claimed_epsilon=epsilon,
        alpha=alpha,
        screen_samples_per_input=dict(enumerate(plan.screen.tolist())),
        test_samples_per_input=n_test,
        total_samples=int(plan.screen.sum()) + sum(n_test.values()),
    )
    for c in cands:
        d = float(dist_km[c.i, c.j])
        lo = clopper_pearson_lower(int(test[c.i][c.event].sum()), n_test[c.i], level)
        hi = clopper_pearson_upper(int(test[c.j][c.event].sum()), n_test[c.j], level)
        log_ratio = math.log(lo) - math.log(hi) if lo > 0 else -math.inf
        result.pairs.append(
            PairResult(
                i=c.i, j=c.j, distance_km=d, event=tuple(vocab[c.event].tolist()),
                lower_x=lo, upper_x_prime=hi, epsilon_lower_bound=max(log_ratio / d, 0.0),
                violated=log_ratio > epsilon * d, chosen_as=c.chosen_as,
            )
        )  # fmt: skip
    return result


def _closest_pairs(dist_km: np.ndarray, n_closest: int) -> list[tuple[int, int]]:
    """The ``n_closest`` unordered pairs at the smallest positive distances."""
    ii, jj = np.triu_indices(len(dist_km), k=1)
    d = dist_km[ii, jj]
    keep = np.flatnonzero(d > 0)
    best = keep[np.argsort(d[keep], kind="stable")[:n_closest]]
    return [(int(ii[k]), int(jj[k])) for k in best]


@dataclass(frozen=True)
class _Plan:
    """Where the draws go. The closest pairs' inputs get ``closest_share`` of the budget (split
    into screen and test by ``screen_share``): their leaks have the smallest margins, and the
    screen must already tell the leaking output from the others. The other inputs share the
    rest: a screen for every one, and a test for those the chosen candidates use."""

    screen: np.ndarray  # screen draws per input
    close: frozenset[int]
    test_close: int  # test draws per closest-pair input
    test_other_total: int  # test draws shared by the other candidates' inputs
    test_other_guess: int  # what one of them can expect (2 inputs per candidate)

    @staticmethod
    def make(n, close, total, screen_share, closest_share, n_candidates) -> _Plan:
        n_other = n - len(close)
        share = closest_share if close and n_other else (1.0 if close else 0.0)
        per_close = int(total * share) // max(1, len(close))
        rest = total - per_close * len(close)
        screen_other = int(rest * screen_share) // max(1, n_other)
        screen = np.full(n, screen_other, dtype=np.int64)
        screen[list(close)] = int(per_close * screen_share)
        test_other = rest - screen_other * n_other
        plan = _Plan(screen, frozenset(close), per_close - int(per_close * screen_share),
                     test_other, test_other // max(1, min(n_other, 2 * n_candidates)))  # fmt: skip
        sizes = [int(screen.min()), plan.test_close if close else 10**9,
                 plan.test_other_guess if n_other else 10**9]  # fmt: skip
        if min(sizes) < 1000:
            raise InputError(
                f"total_samples={total:,} is too few for {n} inputs: the screen and the test "
                "need >= 1,000 draws per input each"
            )
        return plan

    def test_guess(self) -> np.ndarray:
        """Test draws each input can expect if it is chosen (the screen's scores use it)."""
        guess = np.full(len(self.screen), self.test_other_guess, dtype=float)
        guess[list(self.close)] = self.test_close
        return guess

    def test_draws(self, cands: list[_Candidate]) -> dict[int, int]:
        """Test draws per input the candidates use."""
        other = {k for c in cands for k in (c.i, c.j)} - self.close
        n_other = self.test_other_total // len(other) if other else 0
        used = {k for c in cands for k in (c.i, c.j)}
        return {k: self.test_close if k in self.close else n_other for k in sorted(used)}


def _choose(
    counts: np.ndarray,
    plan: _Plan,
    dist_km: np.ndarray,
    epsilon: float,
    alpha: float,
    close: list[tuple[int, int]],
    *,
    n_candidates: int,
) -> list[_Candidate]:
    """The candidates to test: the closest pairs and the best-scoring ordered pairs."""
    n = len(dist_km)
    z = float(norm.isf(alpha / (2 * (n_candidates + 2 * len(close)))))
    n_screen, n_test = plan.screen.astype(float), plan.test_guess()
    best = [_best_events(counts, i, n_screen, dist_km[i] * epsilon, n_test, z) for i in range(n)]
    score = np.array([s for s, _ in best])  # (n, n): score of pair i -> j
    events = [e for _, e in best]
    np.fill_diagonal(score, -np.inf)
    score[dist_km <= 0] = -np.inf
    chosen: dict[tuple[int, int], str] = {}
    for i, j in close:
        chosen[(i, j)] = chosen[(j, i)] = "closest"
    picked = 0
    for flat in np.argsort(-score, axis=None, kind="stable"):
        i, j = divmod(int(flat), n)
        if picked == n_candidates or not np.isfinite(score[i, j]):
            break
        if (i, j) not in chosen:
            chosen[(i, j)] = "screen"
            picked += 1
    return [
        _Candidate(i, j, events[i][j], float(score[i, j]), why) for (i, j), why in chosen.items()
    ]


def _best_events(counts, i, n_screen, eps_d, n_test, z) -> tuple[np.ndarray, list[np.ndarray]]:
    """For x = input ``i`` and every x': the best event's score and the event itself.

    Candidates are single outputs and prefixes of the outputs sorted by smoothed ratio
    ``((c_x + 0.5) / n_x) / ((c_x' + 0.5) / n_x')``. The score (log units) is the estimated
    margin ``ln(p / q) - eps d`` minus the test's expected Clopper-Pearson width at ``n_test``
    draws (normal approximation on the log scale) and SCREEN_NOISE_Z standard errors of the
    screen's estimate, so that rare outputs whose ratio looks large by chance rank low.
    ``n_screen`` and ``n_test`` hold the draws per input.
    """
    cy = counts.astype(float)
    cx = np.broadcast_to(cy[i], cy.shape)
    nx, ny = n_screen[i], n_screen[:, None]
    ratio = np.log(cx + 0.5) - np.log(nx) - np.log(cy + 0.5) + np.log(ny)
    order = np.argsort(-ratio, axis=1, kind="stable")
    sx = np.cumsum(np.take_along_axis(cx, order, axis=1), axis=1)
    sy = np.cumsum(np.take_along_axis(cy, order, axis=1), axis=1)
    tests = (n_test[i], n_test[:, None])
    prefix = _score(sx, sy, (nx, ny), eps_d[:, None], tests, z)
    single = _score(cx, cy, (nx, ny), eps_d[:, None], tests, z)
    k_prefix, k_single = prefix.argmax(axis=1), single.argmax(axis=1)
    rows = np.arange(len(cy))
    s_prefix, s_single = prefix[rows, k_prefix], single[rows, k_single]
    use_prefix = s_prefix >= s_single
    events = [
        order[j, : k_prefix[j] + 1] if use_prefix[j] else np.array([k_single[j]])
        for j in range(len(cy))
    ]
    return np.where(use_prefix, s_prefix, s_single), events


def _score(sx, sy, n_screen, eps_d, n_test, z) -> np.ndarray:
    (nx, ny), (tx, ty) = n_screen, n_test
    p = sx / nx
    q = (sy + 0.5) / (ny + 1.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        a, b = (1.0 - p) / p, (1.0 - q) / q
        width = z * (np.sqrt(a / tx) + np.sqrt(b / ty))
        noise = SCREEN_NOISE_Z * np.sqrt(a / nx + b / ny)
        s = np.log(p) - np.log(q) - eps_d - width - noise
    return np.where(sx >= MIN_EVENT_COUNT, s, -np.inf)


def clopper_pearson_lower(k: int, n: int, level: float) -> float:
    """One-sided exact (Clopper-Pearson) lower bound at error ``level`` of a proportion."""
    ci = binomtest(k, n, alternative="greater").proportion_ci(1.0 - level, method="exact")
    return float(ci.low)


def clopper_pearson_upper(k: int, n: int, level: float) -> float:
    """One-sided exact (Clopper-Pearson) upper bound at error ``level`` of a proportion."""
    ci = binomtest(k, n, alternative="less").proportion_ci(1.0 - level, method="exact")
    return float(ci.high)


def mechanism_sampler(mechanism) -> Callable[[int, int, np.random.Generator], np.ndarray]:
    """The sampler of a fitted mechanism (anything with ``sample_many``), as the auditor sees
    it."""

    def sample(i: int, n: int, rng: np.random.Generator) -> np.ndarray:
        return mechanism.sample_many(np.full(n, i), rng)

    return sample


def _draw(sample: Sampler, i: int, n: int, rng: np.random.Generator) -> np.ndarray:
    try:
        out = np.asarray(sample(i, n, rng))
    except Exception:  # a refusal is an output, and a distinguishable one
        return np.full(n, ERROR, dtype=np.int64)
    if out.shape != (n,) or not np.issubdtype(out.dtype, np.integer):
        raise InputError(f"sampler must return {n} integer outputs, got {out.dtype} {out.shape}")
    return out.astype(np.int64)


def _count_outputs(draws: Iterable[np.ndarray], vocab: np.ndarray | None = None):
    """``(vocab, counts)``: the sorted distinct outputs and an (inputs, outputs) count table.

    With ``vocab`` given, outputs outside it are dropped (no event of the test contains them).
    """
    per_input = [_value_counts(d) for d in draws]
    if vocab is None:
        vocab = np.unique(np.concatenate([v for v, _ in per_input]))
    counts = np.zeros((len(per_input), len(vocab)), dtype=np.int64)
    for row, (values, c) in zip(counts, per_input, strict=True):
        pos = np.minimum(np.searchsorted(vocab, values), len(vocab) - 1)
        known = vocab[pos] == values
        row[pos[known]] = c[known]
    return vocab, counts


def _value_counts(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    if len(x) and x.min() >= 0 and x.max() < _BINCOUNT_LIMIT:
        c = np.bincount(x)
        values = np.flatnonzero(c)
        return values.astype(np.int64), c[values]
    return np.unique(x, return_counts=True)
