"""Tracking attacks: a user's reports over time, through the adversary's mobility model.

:class:`Tracking` (``make("tracking", ...)``) is the attack of the contract: forward filtering,
fixed-lag forward-backward smoothing or Viterbi, over a mobility model the adversary has
(``reach``, ``public``, ``true`` when the scenario grants it) or learns by EM (``learned``).

:class:`TrackingAttack` below is the older forward filter with the reach kernel (the server
now tracks through :mod:`sim.attacks.suite`).

The server knows the mobility model's reach: between consecutive ticks a user at secret x'
moves at most ``reach_km[x']`` along the roads. Its transition kernel is uniform over the
secrets within that reach (staying put included), and its belief about each user is updated
per report:

``b_t(x) ∝ Z[x, y_t] * sum_x' b_{t-1}(x') T[x', x]``.

Users that do not report at a tick only get the prediction step. Beliefs of all users are one
(N, U) array, so a tick is one sparse product and one elementwise product.
"""

from __future__ import annotations

from collections import deque

import numpy as np
from scipy import sparse

from sim.attacks import hmm
from sim.attacks.base import Attack, Context, LocationEstimate, Observation, Release, register
from sim.attacks.mobility_models import MODELS, counted_kernel, learn_kernel, reach_kernel
from sim.errors import InputError

METHODS = ("filter", "smooth", "viterbi")


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
        The adversary's mobility model (see :mod:`sim.attacks.mobility_models`); ``true``
        needs the scenario to hand the true transitions over (``Context.true_transitions``).
    lag_ticks
        Look-ahead of ``smooth``.
    pseudo_count
        Weight of every road-allowed move in counted and learned kernels.
    learn_every_ticks, em_iterations, learn_users
        ``learned``: re-estimate the kernel every this many ticks from the reports so far, by
        this many EM iterations, on this many slots (drawn once with the context's seed).
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
    ) -> None:
        if method not in METHODS:
            raise InputError(f"tracking: method={method!r} must be one of {', '.join(METHODS)}")
        if mobility not in MODELS:
            raise InputError(f"tracking: mobility={mobility!r} must be one of {', '.join(MODELS)}")
        for name, value in (
            ("lag_ticks", lag_ticks),
            ("learn_every_ticks", learn_every_ticks),
            ("em_iterations", em_iterations),
            ("learn_users", learn_users),
        ):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise InputError(f"tracking: {name}={value!r} must be an integer >= 1")
        if not (isinstance(pseudo_count, (int, float)) and pseudo_count > 0):
            raise InputError(f"tracking: pseudo_count={pseudo_count!r} must be a number > 0")
        self.method = method
        self.mobility = mobility
        self.lag_ticks = lag_ticks
        self.pseudo_count = float(pseudo_count)
        self.learn_every_ticks = learn_every_ticks
        self.em_iterations = em_iterations
        self.learn_users = learn_users

    # ------------------------------------------------------------------ setup
    def start(self, context: Context) -> None:
        """Build the adversary's kernel from what it is allowed to know."""
        super().start(context)
        domain = context.domain
        if context.reach_km is None:
            raise InputError("tracking needs the road reach of one tick (Context.reach_km)")
        self.support_ = reach_kernel(domain.dist_xx, context.reach_km)
        if self.mobility == "public":
            if context.public_traces is None:
                raise InputError("tracking mobility='public' needs public traces (none given)")
            self.kernel_ = counted_kernel(self.support_, context.public_traces, self.pseudo_count)
        elif self.mobility == "true":
            if context.true_transitions is None:
                raise InputError(
                    "tracking mobility='true': the scenario does not hand the true mobility "
                    "to the adversary"
                )
            self.kernel_ = hmm.Kernel.of(context.true_transitions)
        else:  # reach, and the starting point of learned
            self.kernel_ = self.support_
        self.prior_ = np.asarray(domain.prior, dtype=float)
        u = context.n_users
        self.belief_ = np.tile(self.prior_[:, None], (1, u))
        self.emissions_ = hmm.Emissions()
        self.ticks_: list[int] = []
        self.pseudonyms_: np.ndarray | None = None
        self.alphas_: deque = deque(maxlen=self.lag_ticks + 1)
        self.guesses_: list[np.ndarray] = []  # the filter's MAP of every slot, per tick
        rng = np.random.default_rng(context.seed)
        self.learners_ = np.sort(rng.choice(u, size=min(u, self.learn_users), replace=False))
        self._lik_t: np.ndarray | None = None

    def release(self, release: Release) -> None:
        """Keep the new likelihood over all secrets, transposed for gathering reports."""
        self._lik_t = np.ascontiguousarray(release.likelihood(self.context.domain.n_x).T)

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
        lik = self.emissions_.at(t)
        fresh = self.prior_[:, None]
        if first:
            belief = np.tile(fresh, (1, len(obs.outputs)))
        else:
            belief = self.kernel_.transposed @ self.belief_
            belief[:, resets] = fresh
        if lik is not None:
            belief *= lik
        self.belief_ = hmm.normalise(belief, belief if lik is None else lik * fresh)
        self.alphas_.append(self.belief_)
        self.guesses_.append(self.belief_.argmax(axis=0))
        if self.mobility == "learned" and (t + 1) % self.learn_every_ticks == 0:
            self._learn()
        if self.method == "filter":
            return [self._estimate(t, self.belief_)]
        if self.method == "smooth" and t >= self.lag_ticks:
            return [self._smoothed(t - self.lag_ticks, t)]
        return []

    def finish(self) -> list[LocationEstimate]:
        """Smoothing: the last ``lag_ticks`` ticks; Viterbi: the whole trace."""
        last = len(self.ticks_) - 1
        if self.method == "smooth":
            first = max(0, last - self.lag_ticks + 1)
            return [self._smoothed(s, last) for s in range(first, last + 1)]
        if self.method == "viterbi":
            if self.mobility == "learned":
                self._learn()
            trace = hmm.viterbi(self.kernel_, self.prior_, self.emissions_)
            self.trace_ = trace
            return [self._estimate(s, None, guess=trace[s]) for s in range(last + 1)]
        return []

    # ------------------------------------------------------------------ helpers
    def _learn(self) -> None:
        self.kernel_ = learn_kernel(
            self.support_,
            self.prior_,
            self.emissions_,
            self.learners_,
            iterations=self.em_iterations,
            pseudo_count=self.pseudo_count,
            start=self.kernel_,
        )

    def _smoothed(self, s: int, t: int) -> LocationEstimate:
        """Belief about tick s given reports up to tick t (s >= t - lag_ticks)."""
        alpha = self.alphas_[len(self.alphas_) - 1 - (t - s)]
        beta = np.ones_like(alpha)
        for r in range(t, s, -1):
            beta = hmm.backward_step(self.kernel_, beta, self.emissions_.at(r))
            beta[:, self.emissions_.resets[r]] = 1.0
        post = alpha * beta
        return self._estimate(s, hmm.normalise(post, alpha.copy()))

    def _estimate(self, s: int, belief, guess=None) -> LocationEstimate:
        users = np.nonzero(self.emissions_.outputs[s] >= 0)[0]
        if belief is None:
            return LocationEstimate(tick=self.ticks_[s], users=users, guess=guess[users])
        post = belief[:, users]
        return LocationEstimate(
            tick=self.ticks_[s], users=users, guess=post.argmax(axis=0), posterior=post
        )

    def guesses(self) -> np.ndarray:
        """``(T, U)`` the forward filter's most likely secret of every slot, per tick."""
        return np.stack(self.guesses_)


class TrackingAttack:
    """Forward-filter beliefs of all users."""

    def __init__(self, dist_xx: np.ndarray, prior: np.ndarray, *, reach_km, n_users: int):
        reach = np.broadcast_to(np.asarray(reach_km, dtype=float), (len(dist_xx),))
        rows, cols = np.nonzero(dist_xx <= reach[:, None])
        kernel = sparse.csr_matrix(
            (np.ones(len(rows)), (rows, cols)), shape=dist_xx.shape, dtype=np.float64
        )
        out_degree = np.asarray(kernel.sum(axis=1)).ravel()
        self.kernel_t = (sparse.diags(1.0 / out_degree) @ kernel).T.tocsr()  # column-stochastic
        self._belief_t = np.tile(prior[:, None], (1, n_users))  # (N, U)

    @property
    def belief(self) -> np.ndarray:
        """Current posterior of every user, shape (U, N)."""
        return self._belief_t.T

    def step(self, matrix: np.ndarray, reporting: np.ndarray, outputs: np.ndarray) -> np.ndarray:
        """Advance one tick; ``outputs[u]`` is the report of user ``reporting[u]``.

        Returns the MAP guess of every user's secret.
        """
        self._belief_t = self.kernel_t @ self._belief_t
        if len(reporting):
            everyone = len(reporting) == self._belief_t.shape[1]
            cols = slice(None) if everyone else reporting  # avoid a gather when all report
            updated = self._belief_t[:, cols]
            updated *= matrix[:, outputs]
            mass = updated.sum(axis=0)
            # a report impossible under the belief (mass 0) restarts that user from the likelihood
            restart = mass <= 0
            updated[:, restart] = matrix[:, outputs[restart]]
            mass[restart] = updated[:, restart].sum(axis=0)
            updated /= mass
            if not everyone:
                self._belief_t[:, reporting] = updated
        return self._belief_t.argmax(axis=0)
