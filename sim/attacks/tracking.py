"""Tracking attacks: a user's reports over time, through the adversary's mobility model.

:class:`Tracking` (``make("tracking", ...)``) is the attack of the contract: forward filtering,
fixed-lag forward-backward smoothing or Viterbi, over a mobility model the adversary has
(``reach``, ``public``, ``true`` when the scenario grants it) or learns by EM (``learned``).

The server knows the mobility model's reach: between consecutive ticks a user at secret x'
moves at most ``reach_km[x']`` along the roads. Its transition kernel is uniform over the
secrets within that reach (staying put included), and its belief about each user is updated
per report:

``b_t(x) ∝ Z[x, y_t] * sum_x' b_{t-1}(x') T[x', x]``.

Users that do not report at a tick only get the prediction step. The users are split into one
part per thread; a part's beliefs are one (N, U_part) array for the prediction (one sparse
product over its users) and one (U_part, N) copy, a contiguous row per user, for the
likelihood (one gathered row per report), the normalisation and the scores. Users are
independent, so the parts run without waiting for each other (docs/attacks.md, Speed).

Each method is a class (:class:`Method`, registered by name in :data:`TRACKING_METHODS`) that
says what it keeps of the filter's ticks and which estimates it gives, per tick and at the end.
"""

from __future__ import annotations

import functools
import itertools
from collections import deque
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, ClassVar
from weakref import WeakKeyDictionary

import numpy as np

from mdpsim._core.registry import Catalog
from mdpsim._core.threads import task_threads
from mdpsim._core.validation import check_choice, check_optional, check_scalar
from mdpsim.attacks import hmm
from mdpsim.attacks.base import (
    Attack,
    Context,
    LocationEstimate,
    Observation,
    Release,
    entropy_bits,
    register,
)
from mdpsim.attacks.mobility_models import (
    MODELS,
    counted_kernel,
    domain_reach_kernel,
    learn_kernel,
)
from mdpsim.attacks.release_tables import kept_per_release
from mdpsim.errors import InputError

_USER_BLOCK = 128  # users per block of the filter update: 1 MB of rows at N = 2,000
#: The most threads ``threads=None`` takes.
MAX_THREADS = 8
#: a thread gets at least this many users: below it, handing a part to the pool costs more
#: than the part's filter step (5 users, N = 80: 2 parts took a third of an env step)
MIN_USERS_PER_THREAD = 64
#: the most users of one part of the filter: its (N, users) float32 beliefs stay nearer the
#: core through the predict step's sparse product (N = 1,000, 52,022 transitions, one thread:
#: 10,000 users as two 5,000-user parts 84 ms a product, as ten 1,000-user parts 75 ms, the
#: same bits; docs/attacks.md, Speed)
PART_USERS = 1024


class Method:
    """What one tracking method does with the filter: keeps what it reads later, gives its
    estimates at a tick and at the end, and says which reports it still reads. One class
    per method (:data:`TRACKING_METHODS`, by name); the methods hold no state of their own
    (the attack does). The defaults keep nothing more, estimate nothing and read no past tick."""

    name: ClassVar[str] = "?"

    def record(self, attack: Tracking, outputs: np.ndarray) -> None:
        """Keep what this tick's filter step leaves that a later estimate reads."""

    def at_tick(
        self, attack: Tracking, t: int, rows: np.ndarray, top: np.ndarray, entropy: np.ndarray
    ) -> list[LocationEstimate]:
        """The estimates due at tick index ``t`` (``rows``: the filter's ``(U, N)`` beliefs,
        ``top``, ``entropy``: their most likely secrets and entropies)."""
        return []

    def first_kept(self, t: int, lag_ticks: int) -> int | None:
        """The first tick index whose reports a later step reads (``None``: all of them)."""
        return t

    def at_end(self, attack: Tracking) -> list[LocationEstimate]:
        """The estimates due at the end of the run."""
        return []


#: The tracking methods by name, in the order they are offered.
TRACKING_METHODS: Catalog[type[Method]] = Catalog("tracking method")


def tracking_method(name: str) -> Callable[[type[Method]], type[Method]]:
    """Class decorator: register a tracking method under ``name``."""

    def register_method(cls: type[Method]) -> type[Method]:
        cls.name = name
        return TRACKING_METHODS.register(name)(cls)

    return register_method


@tracking_method("filter")
class Filtering(Method):
    """The belief at t from the reports up to t, at every tick."""

    def at_tick(self, attack, t, rows, top, entropy) -> list[LocationEstimate]:
        return [attack._estimate(t, rows, top=top, entropy=entropy)]


@tracking_method("smooth")
class Smoothing(Method):
    """Fixed-lag forward-backward: the belief at ``t - lag_ticks`` from the reports up to t;
    the last ``lag_ticks`` ticks at the end, from what there is."""

    def record(self, attack: Tracking, outputs: np.ndarray) -> None:
        attack.alphas_.append(attack._columns)
        attack.liks_.append(hmm.transpose(attack._emission_rows32(outputs)))

    def at_tick(self, attack, t, rows, top, entropy) -> list[LocationEstimate]:
        if t < attack.lag_ticks:
            return []
        return [attack._smoothed(t - attack.lag_ticks, t)]

    def first_kept(self, t: int, lag_ticks: int) -> int | None:
        return t - lag_ticks

    def at_end(self, attack: Tracking) -> list[LocationEstimate]:
        last = len(attack.ticks_) - 1
        first = max(0, last - attack.lag_ticks + 1)
        return [attack._smoothed(s, last) for s in range(first, last + 1)]


@tracking_method("viterbi")
class Viterbi(Method):
    """The most likely trace of the whole run, decoded at the end (every report kept)."""

    def first_kept(self, t: int, lag_ticks: int) -> int | None:
        return None

    def at_end(self, attack: Tracking) -> list[LocationEstimate]:
        if attack.mobility == "learned":
            attack._learn()
        trace = hmm.viterbi(attack.kernel_, attack.prior_, attack.emissions_)
        attack.trace_ = trace
        return [attack._estimate(s, None, guess=trace[s]) for s in range(len(attack.ticks_))]


@functools.cache
def _pool(threads: int) -> ThreadPoolExecutor:
    """One process-wide pool per thread count, shared by all tracking attacks."""
    return ThreadPoolExecutor(max_workers=threads, thread_name_prefix="tracking")


def _joined(parts: list[np.ndarray]) -> np.ndarray:
    """The parts end to end (the one part itself when there is one)."""
    return parts[0] if len(parts) == 1 else np.concatenate(parts)


#: Per released mechanism, its matrix's identity and :func:`_likelihood_tables` of it.
_LIKELIHOODS: WeakKeyDictionary = WeakKeyDictionary()


def _likelihood_tables(release: Release) -> tuple[np.ndarray, np.ndarray]:
    """The release's ``(K, N)`` float64 likelihood and the filter's ``(K + 1, N)`` float32
    rows (:func:`hmm.scaled32`, then ones: the row output -1 gathers); kept per mechanism
    while its matrix stays the same (an environment's resets reuse their mechanisms; the
    tables are only read)."""
    return kept_per_release(_LIKELIHOODS, release, _likelihoods_of)


def _likelihoods_of(matrix: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    lik_t = np.ascontiguousarray(matrix.T)
    scaled = hmm.scaled32(lik_t)
    return lik_t, np.vstack([scaled, np.ones((1, scaled.shape[1]), dtype=np.float32)])


@register("tracking")
class Tracking(Attack):
    """Track every user through its reports.

    Parameters
    ----------
    method
        ``filter``: the belief at t from reports up to t; ``smooth``: fixed-lag
        forward-backward, the belief at ``t - lag_ticks`` from reports up to t (estimates
        about the last ``lag_ticks`` ticks come at the end, from what there is); ``viterbi``:
        the most likely trace of the whole run, at the end.
    mobility
        The adversary's mobility model (see :mod:`mdpsim.attacks.mobility_models`); ``true``
        needs the scenario to hand the true transitions over (``Context.true_transitions``).
    lag_ticks
        Look-ahead of ``smooth``.
    pseudo_count
        Weight of every road-allowed move in counted and learned kernels.
    learn_every_ticks, em_iterations, learn_users
        ``learned``: re-estimate the kernel every this many ticks, incrementally: this many EM
        iterations over the reports of the ticks since the last estimate, added to the expected
        moves of the blocks before; on this many slots (drawn once with the context's seed).
    threads
        Threads of the filter's tick, each running the whole step on a part of the users at a
        time (numpy and scipy's sparse product release the GIL; parts of at most
        :data:`PART_USERS`, so that a part's beliefs stay in the cache); ``None``: the task's
        thread budget
        (:func:`mdpsim._core.threads.task_threads`: the cores this process may use, or the batch's
        share of them per worker), at most :data:`MAX_THREADS`. The beliefs are the same bits
        whatever the number (docs/attacks.md, Speed).
    """

    def __init__(
        self,
        *,
        method: str = "filter",
        mobility: str = "reach",
        lag_ticks: int = 3,
        pseudo_count: float = 0.1,
        learn_every_ticks: int = 10,
        em_iterations: int = 3,
        learn_users: int = 200,
        threads: int | None = None,
    ) -> None:
        count: dict[str, Any] = {"kind": int, "min": 1, "owner": "tracking"}
        self.method = check_choice(method, "method", TRACKING_METHODS, owner="tracking")
        self._method = TRACKING_METHODS.get(self.method)()
        self.mobility = check_choice(mobility, "mobility", MODELS, owner="tracking")
        self.lag_ticks = check_scalar(lag_ticks, "lag_ticks", **count)
        self.pseudo_count = check_scalar(
            pseudo_count,
            "pseudo_count",
            min=0,
            include_boundaries="neither",
            finite=False,
            owner="tracking",
        )
        self.learn_every_ticks = check_scalar(learn_every_ticks, "learn_every_ticks", **count)
        self.em_iterations = check_scalar(em_iterations, "em_iterations", **count)
        self.learn_users = check_scalar(learn_users, "learn_users", **count)
        self.threads = check_optional(threads, "threads", **count)

    # ------------------------------------------------------------------ setup
    def start(self, context: Context) -> None:
        """Build the adversary's kernel from what it is allowed to know."""
        super().start(context)
        domain = context.domain
        if context.reach_km is None:
            raise InputError("tracking needs the road reach of one tick (Context.reach_km)")
        self.support_ = domain_reach_kernel(domain, context.reach_km)
        if self.mobility == "public":
            if context.public_traces is None:
                raise InputError("tracking mobility='public' needs public traces (none given)")
            kernel = counted_kernel(self.support_, context.public_traces, self.pseudo_count)
        elif self.mobility == "true":
            if context.true_transitions is None:
                raise InputError(
                    "tracking mobility='true': the scenario does not hand the true mobility "
                    "to the adversary"
                )
            kernel = hmm.Kernel.of(context.true_transitions)
        else:  # reach, and the starting point of learned
            kernel = self.support_
        self._use(kernel)
        granted = context.public_prior  # the people model's public structure, if granted
        self.prior_ = np.asarray(domain.prior if granted is None else granted, dtype=float)
        self._prior_row32 = self.prior_.astype(np.float32)[None, :]
        u = context.n_users
        self._n_threads = min(self._threads(u), max(u, 1))
        n_parts = max(self._n_threads, -(-u // PART_USERS))
        bounds = [u * i // n_parts for i in range(n_parts + 1)]  # any split: the same bits
        self._parts = [slice(a, b) for a, b in itertools.pairwise(bounds)]
        # per part, (N, U_part) float32 beliefs; every column sums to 1
        prior_column = self._prior_row32.T
        self._columns = [np.repeat(prior_column, p.stop - p.start, axis=1) for p in self._parts]
        self.emissions_ = hmm.Emissions()  # every tick's reports, for EM and Viterbi
        self.ticks_: list[int] = []
        self.pseudonyms_: np.ndarray | None = None
        self.alphas_: deque = deque(maxlen=self.lag_ticks + 1)  # smooth: filtered beliefs
        self.liks_: deque = deque(maxlen=self.lag_ticks + 1)  # smooth: their (N, U) emissions
        self.guesses_: list[np.ndarray] = []  # the filter's MAP of every slot, per tick
        self.trace_: np.ndarray | None = None  # viterbi: the decoded trace, at the end
        self.learners_ = self._learners(u, context.seed)
        self.learned_counts_: np.ndarray | None = None  # expected moves of the blocks learnt
        self.block_start_ = 0  # first tick of the block the next learning step reads
        self._lik_t: np.ndarray | None = None

    def _threads(self, n_users: int) -> int:
        """The filter's threads: ``threads``, else the task's budget, at most
        :data:`MAX_THREADS` and one per :data:`MIN_USERS_PER_THREAD` users."""
        if self.threads is not None:
            return self.threads
        by_users = min(MAX_THREADS, max(1, n_users // MIN_USERS_PER_THREAD))
        return by_users if by_users == 1 else min(by_users, task_threads())

    def _learners(self, n_users: int, seed: int) -> np.ndarray:
        """The slots EM learns from: ``learn_users`` of them, drawn with ``seed`` (all of them,
        in order, when there are no more: what the draw would give, without drawing)."""
        if n_users <= self.learn_users:
            return np.arange(n_users)
        rng = np.random.default_rng(seed)
        return np.sort(rng.choice(n_users, size=self.learn_users, replace=False))

    def _use(self, kernel: hmm.Kernel) -> None:
        """Adopt a kernel; the per-tick filter runs on float32 copies (half the memory
        traffic; beliefs are renormalised every tick), EM and Viterbi on float64."""
        self.kernel_ = kernel
        self._predict32, self._back32 = kernel.float32

    def release(self, release: Release) -> None:
        """Keep the new likelihood over all secrets, ``(K, N)``: float64 for the history, and a
        float32 copy, scaled clear of underflow, whose rows (one per output, then a row of
        ones for no report) the filter gathers."""
        self._lik_t, self._lik_t32 = _likelihood_tables(release)

    # ------------------------------------------------------------------ per tick
    def observe(self, obs: Observation) -> list[LocationEstimate]:
        """Filter one tick; return the estimate ``method`` gives at this tick."""
        if self._lik_t is None:
            raise RuntimeError("tracking: observe() before any release()")
        first = self.pseudonyms_ is None
        resets = np.ones(len(obs.outputs), bool) if first else obs.pseudonyms != self.pseudonyms_
        self.pseudonyms_ = np.array(obs.pseudonyms)
        self.emissions_.add(obs.outputs, self._lik_t, resets)
        self.ticks_.append(obs.tick)
        t = len(self.ticks_) - 1
        rows, top, entropy = self._update(first, obs.outputs, resets)
        self._method.record(self, obs.outputs)
        self.guesses_.append(top.astype(np.int32))
        if self.mobility == "learned" and (t + 1) % self.learn_every_ticks == 0:
            self._learn()
        out = self._method.at_tick(self, t, rows, top, entropy)
        self._forget(t)
        return out

    def _forget(self, t: int) -> None:
        """Release the reports no later step reads, so that memory and the cost of a tick stay
        flat as the run grows: smoothing reads the last ``lag_ticks``, learning its block (and
        the tick before); Viterbi decodes the whole run at the end and keeps everything."""
        keep = self._method.first_kept(t, self.lag_ticks)
        if keep is None:
            return
        if self.mobility == "learned":
            keep = min(keep, self.block_start_ - 1)
        self.emissions_.forget_before(keep)

    def finish(self) -> list[LocationEstimate]:
        """Smoothing: the last ``lag_ticks`` ticks; Viterbi: the whole trace."""
        return self._method.at_end(self)

    # ------------------------------------------------------------------ helpers
    @property
    def belief_(self) -> np.ndarray:
        """``(N, U)`` float32: the filter's current belief about every slot (columns)."""
        return np.hstack(self._columns)

    def _update(
        self, first: bool, outputs: np.ndarray, resets: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """One filter step of every part from its beliefs (the prior at the first tick) and
        the reports. Returns the new ``(U, N)`` rows and each row's most likely secret and
        entropy (bits); the parts' columns become the new beliefs."""
        rows = np.empty((len(outputs), len(self.prior_)), dtype=np.float32)
        columns = list(self._columns)

        def step(i: int) -> tuple[np.ndarray, np.ndarray]:
            users = self._parts[i]
            mine = rows[users]
            if first:
                mine[:] = self._prior_row32
            else:
                predict = self._predict32
                _compiled().predict_rows32(
                    predict.indptr, predict.indices, predict.data, columns[i], mine
                )
            top, entropy = self._update_blocks(mine, outputs[users], resets[users])
            columns[i] = hmm.transpose(mine)
            return top, entropy

        if len(self._parts) == 1:  # no pool: at a few users it would cost more than the step
            top, entropy = step(0)
        else:
            parts = range(len(self._parts))
            pool = _pool(self._n_threads) if self._n_threads > 1 else None
            results = list(pool.map(step, parts) if pool else map(step, parts))
            top = _joined([t for t, _ in results])
            entropy = _joined([e for _, e in results])
        self._columns = columns  # a new list: smoothing keeps the last one in alphas_
        return rows, top, entropy

    def _update_blocks(
        self, rows: np.ndarray, outputs: np.ndarray, resets: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        """:meth:`_update_block` on a part's rows, :data:`_USER_BLOCK` rows at a time (a part
        of a few users is one block); each row's most likely secret and entropy."""
        if len(rows) <= _USER_BLOCK:
            return self._update_block(rows, outputs, resets)
        scores = [
            self._update_block(rows[b], outputs[b], resets[b])
            for b in (slice(a, a + _USER_BLOCK) for a in range(0, len(rows), _USER_BLOCK))
        ]
        return _joined([t for t, _ in scores]), _joined([e for _, e in scores])

    def _update_block(
        self, block: np.ndarray, outputs: np.ndarray, resets: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        """Bayes' rule on a block of predicted rows, in place (the block stays in cache from
        the likelihood to the entropy); returns each row's most likely secret and entropy.
        One compiled pass (``_kernels.bayes_rows32``; tests/sim/test_kernels.py holds the numpy
        formula it replaced)."""
        top = np.empty(len(block), dtype=np.intp)
        _compiled().bayes_rows32(
            block, outputs, resets, self._lik_t32, self._prior_row32[0], hmm.FLUSH_BELOW, top
        )
        return top, entropy_bits(block)

    def _emission_rows32(self, outputs: np.ndarray) -> np.ndarray:
        """``(U, N)`` float32 likelihood of each slot's report (a row per slot), ones for
        silent slots (output -1: the table's last row)."""
        return self._lik_t32[outputs]

    def _learn(self) -> None:
        """Incremental EM: the ticks since the last learning step (and the tick before, for
        the first move) get ``em_iterations`` E-steps from the current kernel; their expected
        moves are added to those of the blocks before, kept frozen. A step's cost is one
        block's, whatever the length of the run (docs/attacks.md)."""
        window = self.emissions_.since(max(0, self.block_start_ - 1))
        if len(window) < 2:
            return
        kernel, counts = learn_kernel(
            self.support_,
            self.prior_,
            window,
            self.learners_,
            iterations=self.em_iterations,
            pseudo_count=self.pseudo_count,
            start=self.kernel_,
            carried=self.learned_counts_,
        )
        self._use(kernel)
        self.learned_counts_ = counts
        self.block_start_ = len(self.ticks_)

    def _smoothed(self, s: int, t: int) -> LocationEstimate:
        """Belief about tick s given reports up to tick t (s >= t - lag_ticks)."""
        back = t - s
        alpha = np.hstack(self.alphas_[len(self.alphas_) - 1 - back])
        beta = np.ones_like(alpha)
        for r in range(t, s, -1):
            lik = self.liks_[len(self.liks_) - 1 - (t - r)]
            beta = self._back32 @ (lik * beta)
            top = beta.max(axis=0)
            beta[:, ~(top > 0) | self.emissions_.resets[r]] = 1.0  # no information from r on
            beta /= np.where(top > 0, top, 1.0)  # rescaled: only ratios within a column matter
        post = alpha * beta
        post = hmm.normalise(post, lambda dead: alpha[:, dead])
        return self._estimate(s, hmm.transpose(post))

    def _estimate(self, s: int, rows, *, guess=None, top=None, entropy=None) -> LocationEstimate:
        """The estimate about tick index s of the slots that reported then; ``rows`` is
        ``(U, N)`` beliefs (``None``: point guesses only), ``top`` and ``entropy`` their most
        likely secrets and entropies when known."""
        users = np.nonzero(self.emissions_.outputs[s] >= 0)[0]
        everyone = len(users) == len(self.emissions_.outputs[s])
        if rows is None:
            return LocationEstimate(tick=self.ticks_[s], users=users, guess=guess[users])
        post = rows if everyone else rows[users]
        best = post.argmax(axis=1) if top is None else (top if everyone else top[users])
        if entropy is not None and not everyone:
            entropy = entropy[users]
        return LocationEstimate(
            tick=self.ticks_[s],
            users=users,
            guess=best,
            posterior=post,
            top=best,
            entropy_bits=entropy,
        )

    def guesses(self) -> np.ndarray:
        """``(T, U)`` the forward filter's most likely secret of every slot, per tick."""
        return np.stack(self.guesses_)


@functools.cache
def _compiled():
    """The compiled kernels' module, imported on the first filter step (numba's import is
    not paid by ``import mdpsim``)."""
    from mdpsim.attacks import _kernels

    return _kernels
