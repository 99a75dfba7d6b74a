"""Black-box statistical auditor of mDP claims (``mdpsim audit``): selection, then confirmation.

The auditor sees only a sampler ``sample(i, n, rng) -> n outputs`` (integer output indices;
an exception raised by the mechanism is itself an output, ``ERROR``), the true distances between
inputs, and the claimed eps. It looks for an input pair (x, x') and an output set S with
``Pr[M(x) ∈ S] > exp(eps d(x, x')) Pr[M(x') ∈ S]``. What it uses besides the samples is public:

* **Chaining pairs only.** If every pair of a chain ``x = x_0, x_1, ..., x_m = x'`` with
  ``d(x, x') = sum d(x_k, x_k+1)`` satisfies the bound on S, so does (x, x') (multiply the
  ratios). So a violation on any pair implies one, on the same S and at least the same eps per
  km, on a pair with no third input on a shortest path between them (``Domain.constraint_pairs``;
  computed from the distances when not given). On a road domain that is a few pairs per input
  instead of N - 1, which cuts the candidates and concentrates the draws.
* **Events from the outputs' places** when ``output_dist_km`` (inputs x outputs) is given:
  the half-spaces "outputs at least t closer to x than to x'" (prefixes of the outputs sorted by
  ``d(x', y) - d(x, y)``), which are the likelihood-ratio sets of distance-based mechanisms.

The budget is spent in three parts:

1. *Broad screen* (``screen_share * (1 - focus_share)`` of the draws, even over all inputs).
2. *Focused screen* (``screen_share * focus_share``, even over ``focus_inputs`` inputs: those
   of the ``n_closest`` closest chaining pairs, where a leak's margin ``(eps' - eps) d`` is
   smallest, then those of the best-ranked pairs). The screens' draws are pooled. For every
   ordered chaining pair the candidate events are the single outputs, the DP-Sniper-style sets
   "outputs whose empirical likelihood ratio is at least t" (ordered on one random half of the
   screen's draws, scored on the other), and the half-spaces above. Pairs are ranked by two
   criteria taken in turn: *evidence*, the screen's z-score that the confirmation will see a
   violation, less the largest z-score chance gives among that many events (finds leaks); and
   *bound*, the epsilon lower bound the confirmation is expected to reach (resolves tight
   mechanisms). The ``n_candidates`` best, each with its best event, are confirmed.
3. *Confirmation* (the rest, even over the inputs the candidates use): on fresh draws, a
   one-sided Clopper-Pearson lower bound ``L`` of ``Pr[M(x) ∈ S]`` and an upper bound ``U`` of
   ``Pr[M(x') ∈ S]``. A violation is reported when ``L > exp(eps d) U``; ``ln(L / U) / d`` is a
   lower bound on the true epsilon.

Every bound is taken at ``alpha / (2 * candidates)`` (Bonferroni over the confirmed candidates
and their two bounds). The candidates are a function of the screens' draws only, which the
confirmation's draws are independent of, so the chance of any false alarm on an eps-mDP
mechanism whose draws are independent is at most ``alpha`` (default 1e-6), whatever the
screens chose. The screens spend no error probability: they only decide where to look.

A sampler may also offer ``sample.counts(i, n, rng)``: the counts of ``n`` draws over the
outputs ``0..K-1`` in one vector (:func:`matrix_sampler` draws them from a multinomial, exactly
the distribution of ``n`` draws); the auditor then asks for counts instead of draws.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field

import numpy as np
from scipy.stats import norm

from mdpsim.errors import InputError
from mdpsim.geo.domain import implied_free_pairs
from mdpsim.privacy.black_box import (
    ERROR,
    MatrixSampler,
    Sampler,
    draw_counts,
    matrix_sampler,
    mechanism_sampler,
)
from mdpsim.privacy.pmdp import clopper_pearson_lower, clopper_pearson_upper

MIN_EVENT_COUNT = 20  # screen draws an event needs under x before it is considered
BOUND_NOISE_Z = 2.0  # standard errors of the screen taken off the expected bound
MIN_DRAWS = 1000  # draws per input each part of the audit needs at least
_PAIR_BLOCK_ENTRIES = 1 << 21  # (pairs x outputs) entries scored at once


@dataclass(frozen=True)
class PairResult:
    """The confirmation of one ordered pair (x -> x') on one event."""

    i: int
    j: int
    distance_km: float
    event: tuple
    lower_x: float
    upper_x_prime: float
    epsilon_lower_bound: float
    violated: bool
    chosen_as: str  # the kind of event: "output", "ratio set" or "half-space"


@dataclass
class AuditResult:
    """Verdict of an audit."""

    claimed_epsilon: float
    alpha: float
    screen_samples_per_input: dict[int, int]  # input -> its broad-screen draws
    focus_samples_per_input: dict[int, int]  # input -> its focused-screen draws
    test_samples_per_input: dict[int, int]  # input -> its confirmation draws
    total_samples: int
    n_pairs: int  # ordered chaining pairs screened
    pairs: list[PairResult] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        """No confirmed candidate showed a violation."""
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
            f"{_span(self.screen_samples_per_input)} per input, focus "
            f"{_span(self.focus_samples_per_input)} on {len(self.focus_samples_per_input)} "
            f"inputs, test {_span(self.test_samples_per_input)} on "
            f"{len(self.test_samples_per_input)} inputs",
            f"candidates       {len(self.pairs)} (ordered pair, event) tested, of "
            f"{self.n_pairs:,} ordered chaining pairs screened",
        ]
        if w is not None:
            out.append(
                f"worst pair       x={w.i} -> x'={w.j} at {w.distance_km * 1000:.1f} m, "
                f"{w.chosen_as} of {len(w.event)} outputs: Pr >= {w.lower_x:.4g} "
                f"vs <= {w.upper_x_prime:.4g}"
            )
        return out


def _span(draws: dict[int, int]) -> str:
    if not draws:
        return "0"
    lo, hi = min(draws.values()), max(draws.values())
    return f"{lo:,}" if lo == hi else f"{lo:,}-{hi:,}"


@dataclass(frozen=True)
class _Candidate:
    i: int
    j: int
    event: np.ndarray  # column indices into the output vocabulary
    score: float
    kind: str


@dataclass(frozen=True)
class Screens:
    """How an :func:`audit`'s two screens (broad, then focused) spend their draws.

    Attributes
    ----------
    screen_share
        Share of ``total_samples`` spent on the two screens.
    focus_share
        Share of the screens' draws spent on the focused screen.
    focus_inputs
        Inputs of the best-scoring pairs that the focused screen draws from.
    n_closest
        Closest chaining pairs whose inputs are always in the focus: a leak's margin
        ``(eps' - eps) d`` is smallest there, too small for the broad screen to see.
    """

    screen_share: float = 0.5
    focus_share: float = 0.5
    focus_inputs: int = 16
    n_closest: int = 1

    def check(self) -> None:
        """Refuse a share outside (0, 1) or a focus that cannot hold its closest pairs."""
        for name, share in (("screen_share", self.screen_share), ("focus_share", self.focus_share)):
            if not (0 < share < 1):
                raise InputError(f"{name}={share!r} must lie in (0, 1)")
        if self.focus_inputs < 2 or not 0 <= 2 * self.n_closest <= self.focus_inputs:
            raise InputError("focus_inputs must be >= 2 and n_closest in [0, focus_inputs / 2]")


def audit(
    sample: Sampler,
    dist_km: np.ndarray,
    epsilon: float,
    *,
    total_samples: int = 30_000_000,
    screens: Screens | None = None,
    n_candidates: int = 6,
    alpha: float = 1e-6,
    pairs: np.ndarray | None = None,
    output_dist_km: np.ndarray | None = None,
    rng: np.random.Generator | None = None,
) -> AuditResult:
    """Audit a sampler's eps-mDP claim; see the module docstring.

    Parameters
    ----------
    sample
        ``sample(i, n, rng)`` returns ``n`` outputs for input ``i``; it may raise (that counts
        as the output ``ERROR`` for all ``n`` draws). With a ``counts(i, n, rng)`` attribute,
        that is used instead (counts of ``n`` draws over the outputs ``0..K-1``).
    dist_km
        True distances between inputs (km).
    epsilon
        Claimed eps per km.
    total_samples
        Draws from the sampler over the whole audit (screens and confirmation together).
    screens
        How the screens spend their draws (:class:`Screens`; default ``Screens()``).
    n_candidates
        (ordered pair, event) candidates with the best screen scores that are confirmed.
    alpha
        Family-wise false-alarm rate.
    pairs
        Unordered pairs ``(i, j)`` whose constraints imply all others by chaining
        (``Domain.constraint_pairs``); by default computed from ``dist_km``.
    output_dist_km
        Distances from the inputs to the outputs ``0..K-1`` (km), when outputs are places:
        adds the half-space events. Outputs outside ``0..K-1`` (``ERROR``) are in none.
    """
    dist_km = np.asarray(dist_km, dtype=float)
    n = len(dist_km)
    if dist_km.ndim != 2 or dist_km.shape != (n, n) or n < 2:
        raise InputError(f"dist_km must be an (N, N) matrix with N >= 2, got {dist_km.shape}")
    if not (math.isfinite(epsilon) and epsilon > 0):
        raise InputError(f"epsilon={epsilon!r} must be finite and > 0")
    if not (0 < alpha < 1):
        raise InputError(f"alpha={alpha!r} must lie in (0, 1)")
    screens = Screens() if screens is None else screens
    screens.check()
    if n_candidates < 1:
        raise InputError(f"n_candidates={n_candidates!r} must be >= 1")
    if not (dist_km > 0).any():
        raise InputError("dist_km has no pair of inputs at a positive distance")
    ordered = _ordered_pairs(dist_km, pairs)
    out_dist = _output_distances(output_dist_km, n)
    plan = _Plan.make(n, total_samples, screens, n_candidates)
    rng = np.random.default_rng(0) if rng is None else rng

    known = 0 if out_dist is None else out_dist.shape[1]
    if hasattr(sample, "counts") and out_dist is None:
        known = -1  # the vocabulary is what the counts' length says
    screen = [draw_counts(sample, i, plan.broad, rng) for i in range(n)]
    vocab = _vocabulary(screen, known)
    counts = np.stack([_on_vocab(c, vocab) for c in screen])
    n_sel = np.full(n, plan.broad, dtype=np.int64)
    cols = None if out_dist is None else _columns(vocab, out_dist.shape[1])
    scorer = _Scorer(dist_km, epsilon, ordered, out_dist, cols, plan.test_guess, alpha, len(vocab))

    focus = scorer.focus(counts, n_sel, screens.focus_inputs, screens.n_closest, rng)
    for i in focus:
        counts[i] += _on_vocab(draw_counts(sample, i, plan.focus, rng), vocab)
        n_sel[i] += plan.focus
    cands = scorer.candidates(counts, n_sel, n_candidates, focus, rng)

    used = sorted({k for c in cands for k in (c.i, c.j)})
    per_input = plan.confirm_total // max(1, len(used))
    test = {i: _on_vocab(draw_counts(sample, i, per_input, rng), vocab) for i in used}
    level = alpha / (2 * max(1, len(cands)))
    result = AuditResult(
        claimed_epsilon=epsilon,
        alpha=alpha,
        screen_samples_per_input=dict.fromkeys(range(n), plan.broad),
        focus_samples_per_input=dict.fromkeys(focus, plan.focus),
        test_samples_per_input=dict.fromkeys(used, per_input),
        total_samples=plan.broad * n + plan.focus * len(focus) + per_input * len(used),
        n_pairs=len(ordered),
    )
    for c in cands:
        d = float(dist_km[c.i, c.j])
        lo = clopper_pearson_lower(int(test[c.i][c.event].sum()), per_input, 1.0 - level)
        hi = clopper_pearson_upper(int(test[c.j][c.event].sum()), per_input, 1.0 - level)
        log_ratio = math.log(lo) - math.log(hi) if lo > 0 else -math.inf
        result.pairs.append(
            PairResult(
                i=c.i, j=c.j, distance_km=d, event=tuple(vocab[c.event].tolist()),
                lower_x=lo, upper_x_prime=hi, epsilon_lower_bound=max(log_ratio / d, 0.0),
                violated=log_ratio > epsilon * d, chosen_as=c.kind,
            )
        )  # fmt: skip
    return result


def _ordered_pairs(dist_km: np.ndarray, pairs: np.ndarray | None) -> np.ndarray:
    """Both directions of the chaining pairs at a positive distance, shape (P, 2)."""
    if pairs is None:
        pairs = implied_free_pairs(dist_km)
    pairs = np.asarray(pairs, dtype=np.int64).reshape(-1, 2)
    n = len(dist_km)
    if len(pairs) and (pairs.min() < 0 or pairs.max() >= n):
        raise InputError(f"pairs must index the {n} inputs of dist_km")
    both = np.unique(np.concatenate([pairs, pairs[:, ::-1]]), axis=0)
    both = both[dist_km[both[:, 0], both[:, 1]] > 0]
    if not len(both):
        raise InputError("pairs has no pair of inputs at a positive distance")
    return both


def _output_distances(output_dist_km, n: int) -> np.ndarray | None:
    if output_dist_km is None:
        return None
    out = np.asarray(output_dist_km, dtype=float)
    if out.ndim != 2 or out.shape[0] != n or not np.isfinite(out).all():
        raise InputError(
            f"output_dist_km must be a finite ({n}, K) matrix (inputs x outputs), got {out.shape}"
        )
    return out


@dataclass(frozen=True)
class _Plan:
    """Draws per input of each part, fixed before any draw by the sizes alone."""

    broad: int  # broad-screen draws per input
    focus: int  # focused-screen draws per focus input
    confirm_total: int  # confirmation draws, shared by the candidates' inputs
    test_guess: float  # confirmation draws one candidate input can expect

    @staticmethod
    def make(n, total, screens: Screens, n_candidates) -> _Plan:
        plan = _Plan._split(n, total, screens, n_candidates)
        if min(plan.broad, plan.focus, plan.test_guess) < MIN_DRAWS:
            raise TooFewSamples(total, n, _Plan._enough(n, screens, n_candidates))
        return plan

    @staticmethod
    def _split(n, total, screens: Screens, n_candidates) -> _Plan:
        screen = int(total * screens.screen_share)
        broad = int(screen * (1 - screens.focus_share)) // n
        n_focus = min(n, screens.focus_inputs)
        focus = (screen - broad * n) // n_focus
        confirm = total - broad * n - focus * n_focus
        return _Plan(broad, focus, confirm, confirm / min(n, 2 * n_candidates))

    @staticmethod
    def _enough(n, screens: Screens, n_candidates) -> int:
        """A total of draws that gives every part :data:`MIN_DRAWS` per input: the least the
        bisection finds, rounded up to a thousand."""

        def ok(total: int) -> bool:
            plan = _Plan._split(n, total, screens, n_candidates)
            return min(plan.broad, plan.focus, plan.test_guess) >= MIN_DRAWS

        high = MIN_DRAWS * n
        while not ok(high):
            high *= 2
        low = high // 2
        while high - low > 1:
            mid = (low + high) // 2
            low, high = (low, mid) if ok(mid) else (mid, high)
        enough = -(-high // 1000) * 1000
        while not ok(enough):  # the split's floors: a rounded total may fall just short
            enough += 1000
        return enough


class TooFewSamples(InputError):
    """``total_samples`` leaves some part of the audit fewer than :data:`MIN_DRAWS` draws per
    input; ``enough`` is a total that does not."""

    def __init__(self, total: int, n_inputs: int, enough: int) -> None:
        self.total, self.n_inputs, self.enough = total, n_inputs, enough
        super().__init__(
            f"total_samples={total:,} is too few for {n_inputs} inputs: the screens and the "
            f"confirmation need >= {MIN_DRAWS:,} draws per input each; use "
            f"total_samples={enough:,} or more"
        )


class _Scorer:
    """Scores every (ordered chaining pair, event) on the screens' counts, by two criteria:
    ``evidence``, how strongly the screen says the confirmation will find a violation (finds
    leaks), and ``bound``, the epsilon lower bound the confirmation is expected to reach
    (resolves tight mechanisms). The focus and the candidates take from both in turn."""

    CRITERIA = ("evidence", "bound")

    def __init__(self, dist_km, epsilon, ordered, out_dist, cols, test_guess, alpha, n_outputs):
        self.dist, self.eps, self.ordered = dist_km, epsilon, ordered
        self.out_dist, self.cols = out_dist, cols
        self.test_n = float(test_guess)
        self.alpha = alpha
        # the normal quantile that one of an option's events exceeds by chance about once per
        # audit: (pair, output) for single outputs; (pair, prefix length) for the sorted sets,
        # whose prefixes are nested (about log2 K independent lengths)
        per_pair = {False: n_outputs, True: 1 + math.ceil(math.log2(max(2, n_outputs)))}
        self.penalty = {k: float(norm.isf(1.0 / (len(ordered) * v))) for k, v in per_pair.items()}

    def _z(self, n_candidates: int) -> float:
        return float(norm.isf(self.alpha / (2 * n_candidates)))

    def focus(self, counts, n_sel, focus_inputs: int, n_closest: int, rng) -> list[int]:
        """The inputs of the ``n_closest`` closest pairs, then of the best pairs by both
        criteria in turn, ``focus_inputs`` at most (topped up with the next closest pairs')."""
        best = self._best(counts, n_sel, self._z(2 * focus_inputs), rng)
        closest = np.argsort(self.dist[self.ordered[:, 0], self.ordered[:, 1]], kind="stable")
        size = min(focus_inputs, len(self.dist))
        chosen: list[int] = []
        first = [(int(k), "") for k in closest[: 2 * n_closest]]  # both directions
        for k, _ in (*first, *_interleave(best), *((k, "") for k in closest)):
            for v in self.ordered[k]:
                if int(v) not in chosen and len(chosen) < size:
                    chosen.append(int(v))
            if len(chosen) >= size:
                break
        return sorted(chosen)

    def candidates(self, counts, n_sel, n_candidates: int, focus, rng) -> list[_Candidate]:
        """``n_candidates`` ordered pairs, the best by both criteria in turn, with the best
        event by the criterion that chose them: first the pairs within the focus (their
        estimates rest on the focused draws), then any others."""
        best = self._best(counts, n_sel, self._z(n_candidates), rng)
        inside = np.isin(self.ordered, list(focus)).all(axis=1)
        ranked = _interleave(best)
        out: list[_Candidate] = []
        for k, crit in sorted(ranked, key=lambda item: not inside[item[0]]):  # stable
            if len(out) == n_candidates:
                break
            score, events, kinds = best[crit]
            out.append(_Candidate(int(self.ordered[k, 0]), int(self.ordered[k, 1]), events[k],
                                  float(score[k]), kinds[k]))  # fmt: skip
        return out

    def _best(self, counts, n_sel, z, rng) -> dict[str, tuple[np.ndarray, list, list[str]]]:
        """Per criterion, the best event of each ordered pair: scores (P,), events, kinds.

        The ratio sets are ordered on a random half of each input's screen draws (an exact
        split: a multivariate hypergeometric draw of the counts) and scored on the other half,
        so that sorting by noisy ratios does not also inflate their scores.
        """
        half_n = n_sel // 2
        half = np.stack([rng.multivariate_hypergeometric(c, int(h)) for c, h in
                         zip(counts, half_n, strict=True)])  # fmt: skip
        data = {"all": (counts, n_sel), "order": (half, half_n), "rest": (counts - half,
                n_sel - half_n)}  # fmt: skip
        n_pairs, width = len(self.ordered), counts.shape[1]
        block = max(1, _PAIR_BLOCK_ENTRIES // max(1, width))
        out: dict[str, tuple[np.ndarray, list, list[str]]] = {
            c: (np.empty(n_pairs), [], []) for c in self.CRITERIA
        }
        for start in range(0, n_pairs, block):
            part = self.ordered[start : start + block]
            for crit, (s, e, k) in self._block(data, part, z).items():
                out[crit][0][start : start + len(part)] = s
                out[crit][1].extend(e)
                out[crit][2].extend(k)
        return out

    def _block(self, data, part, z):
        i, j = part[:, 0], part[:, 1]

        def pair_counts(name):
            c, n_draws = data[name]
            n_x, n_y = n_draws[i].astype(float), n_draws[j].astype(float)
            return c[i].astype(float), c[j].astype(float), n_x[:, None], n_y[:, None]

        everything = pair_counts("all")
        cx = everything[0]
        options = [("output", np.broadcast_to(np.arange(cx.shape[1]), cx.shape), False, everything)]
        ax, ay, hx, hy = pair_counts("order")
        ratio = np.log(ax + 0.5) - np.log(hx) - np.log(ay + 0.5) + np.log(hy)
        order = np.argsort(-ratio, axis=1, kind="stable")
        options.append(("ratio set", order, True, pair_counts("rest")))
        if self.out_dist is not None:
            key = np.full(cx.shape, -np.inf)
            ok = self.cols >= 0
            key[:, ok] = self.out_dist[j][:, self.cols[ok]] - self.out_dist[i][:, self.cols[ok]]
            options.append(("half-space", np.argsort(-key, axis=1, kind="stable"), True,
                            everything))  # fmt: skip
        d = self.dist[i, j][:, None]
        rows = np.arange(len(part))
        best = {c: (np.full(len(part), -np.inf), np.zeros(len(part), dtype=np.int64),
                    np.zeros(len(part), dtype=np.int64)) for c in self.CRITERIA}  # fmt: skip
        for o, (_, order, prefix, (px, py, nx, ny)) in enumerate(options):
            sx = np.take_along_axis(px, order, axis=1)
            sy = np.take_along_axis(py, order, axis=1)
            if prefix:
                sx, sy = np.cumsum(sx, axis=1), np.cumsum(sy, axis=1)
                sx[:, -1] = 0  # the whole output set is no event
            scores = _scores(sx, sy, (nx, ny), self.eps * d, (self.test_n, z),
                             self.penalty[prefix])  # fmt: skip
            for crit, s in zip(self.CRITERIA, scores, strict=True):
                top, at, opt = best[crit]
                k = s.argmax(axis=1)
                better = s[rows, k] > top
                best[crit] = (np.where(better, s[rows, k], top), np.where(better, k, at),
                              np.where(better, o, opt))  # fmt: skip
        out = {}
        for crit, (top, at, opt) in best.items():
            events, kinds = [], []
            for r in range(len(part)):
                kind, order, prefix, _ = options[opt[r]]
                k = at[r]
                events.append(np.array(order[r, : k + 1]) if prefix else np.array([order[r, k]]))
                kinds.append(kind)
            out[crit] = (top, events, kinds)
        return out


def _interleave(best) -> list[tuple[int, str]]:
    """Pair indices with a finite score, taken from each criterion's ranking in turn, each
    pair once, with the criterion that took it."""
    rankings = []
    for crit, (score, _, _) in best.items():
        order = np.argsort(-score, kind="stable")
        rankings.append([(int(k), crit) for k in order[np.isfinite(score[order])]])
    seen: set[int] = set()
    out = []
    for row in itertools.zip_longest(*rankings):
        for item in row:
            if item is not None and item[0] not in seen:
                seen.add(item[0])
                out.append(item)
    return out


def _scores(sx, sy, n_screen, eps_d, test, penalty: float) -> tuple[np.ndarray, np.ndarray]:
    """The two criteria on events with ``sx`` and ``sy`` screen draws under x and x'.

    With ``m`` the estimated margin ``ln(p / q) - eps d`` less the confirmation's expected
    Clopper-Pearson width (at ``n_test`` draws a side and level ``z``, ``test``; normal
    approximation on the log scale) and ``se`` the standard error of the screen's estimate:
    evidence is ``m / se - penalty`` (``penalty``: the largest such value chance alone gives
    among the option's many events); bound is ``(m - 2 se) / (eps d)``, the expected lower
    bound's excess over the claim relative to it (ranks as the expected epsilon lower bound).
    """
    (nx, ny), (n_test, z) = n_screen, test
    p = sx / nx
    q = (sy + 0.5) / (ny + 1.0)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        a, b = (1.0 - p) / p, (1.0 - q) / q
        width = z * (np.sqrt(a / n_test) + np.sqrt(b / n_test))
        m = np.log(p) - np.log(q) - eps_d - width
        se = np.sqrt(a / nx + b / ny)
        evidence = m / se - penalty
        bound = (m - BOUND_NOISE_Z * se) / eps_d
    ok = sx >= MIN_EVENT_COUNT
    evidence = np.where(ok & (np.isfinite(evidence) | (evidence == np.inf)), evidence, -np.inf)
    return evidence, np.where(ok & np.isfinite(bound), bound, -np.inf)


def _vocabulary(screen, known: int) -> np.ndarray:
    """The sorted outputs the audit tracks: ``0..known-1`` (or each count vector's length when
    ``known`` is -1) and every output the broad screen drew. Later draws outside it are dropped
    (no event contains them)."""
    seen = [np.arange(len(c)) if isinstance(c, np.ndarray) else np.array(list(c)) for c in screen]
    if known > 0:
        seen.append(np.arange(known))
    return np.unique(np.concatenate(seen).astype(np.int64))


def _on_vocab(c, vocab: np.ndarray) -> np.ndarray:
    """Counts (dense vector or dict) as a row over ``vocab``."""
    row = np.zeros(len(vocab), dtype=np.int64)
    if isinstance(c, np.ndarray):
        values, c = np.flatnonzero(c), c[c > 0]
    else:
        values, c = np.array(list(c.keys()), dtype=np.int64), np.array(list(c.values()))
    if not len(values):
        return row
    pos = np.minimum(np.searchsorted(vocab, values), len(vocab) - 1)
    known = vocab[pos] == values
    row[pos[known]] = c[known]
    return row


def _columns(vocab: np.ndarray, k: int) -> np.ndarray:
    """Column of ``output_dist_km`` of each vocabulary entry, -1 for outputs outside 0..K-1."""
    return np.where((vocab >= 0) & (vocab < k), vocab, -1)


__all__ = [
    "ERROR",
    "AuditResult",
    "MatrixSampler",
    "PairResult",
    "Screens",
    "audit",
    "matrix_sampler",
    "mechanism_sampler",
]
