"""A corpus of broken plug-ins (tests/sim/test_broken_plugins.py runs each through the commands
that take it). Each class is a plug-in's mistake a user could make; it is imported by path,
``broken_plugins:Name``, as a scenario names a plug-in of its own."""

from __future__ import annotations

import numpy as np

from mdpsim.agents.strategies import PseudonymStrategy, RefreshSchedule, ReportPolicy
from mdpsim.attacks import Attack, LocationEstimate
from mdpsim.attacks.base import TabulatedPosterior
from mdpsim.mechanisms import Mechanism
from mdpsim.mechanisms.em import exponential_matrix


# ---------------------------------------------------------------------- mechanisms
class FitRaises(Mechanism):
    def _fit(self, domain):
        raise ValueError(f"no solution at {np.float64(0.25)!r}\n(second line)")


class WrongShape(Mechanism):
    def _fit(self, domain):
        return np.full((domain.n_x, domain.n_y + 1), 1.0 / (domain.n_y + 1)), {}


class NaNMatrix(Mechanism):
    def _fit(self, domain):
        Z = exponential_matrix(domain.dist_xy, self.epsilon)
        Z[0, 0] = np.nan
        return Z, {}


class RowsSumTo09(Mechanism):
    def _fit(self, domain):
        return 0.9 * exponential_matrix(domain.dist_xy, self.epsilon), {}


class NotPrivate(Mechanism):
    def _fit(self, domain):
        return np.eye(domain.n_x, domain.n_y), {}


class MatrixOnly(Mechanism):
    def _fit(self, domain):
        return exponential_matrix(domain.dist_xy, self.epsilon)  # no info dict


class InfoNotADict(Mechanism):
    def _fit(self, domain):
        return exponential_matrix(domain.dist_xy, self.epsilon), ["status", "ok"]


class GuaranteeRaises(Mechanism):
    def _fit(self, domain):
        return exponential_matrix(domain.dist_xy, self.epsilon), {}

    @property
    def report_guarantee(self):
        raise AttributeError("epsilon_pt")


class GuaranteeIsAString(Mechanism):
    def _fit(self, domain):
        return exponential_matrix(domain.dist_xy, self.epsilon), {}

    @property
    def report_guarantee(self):
        return "pure 5"


class SizeCheckRaises(Mechanism):
    def check_domain_size(self, n_x, n_y):
        raise KeyError(n_x)

    def _fit(self, domain):
        return exponential_matrix(domain.dist_xy, self.epsilon), {}


class InitRaises(Mechanism):
    def __init__(self, epsilon: float) -> None:
        raise RuntimeError("licence file not found")

    def _fit(self, domain):
        return exponential_matrix(domain.dist_xy, self.epsilon), {}


# ---------------------------------------------------------------------- attacks
def _guesses(obs, shrink: int = 0, dtype=np.int64, offset: int = 0):
    users = obs.reporting
    return users, np.asarray(obs.outputs[users][shrink:] + offset, dtype=dtype)


class NoObserve(Attack):
    """Forgot observe (an abstract method)."""


class ObserveRaises(Attack):
    def observe(self, obs):
        raise IndexError("index 7 is out of bounds for axis 0 with size 7")


class StartRaises(Attack):
    def start(self, context):
        raise TypeError("unexpected context")

    def observe(self, obs):
        return []


class ReleaseRaises(Attack):
    def release(self, release):
        raise ZeroDivisionError("division by zero")

    def observe(self, obs):
        return []


class FinishRaises(Attack):
    def observe(self, obs):
        return []

    def finish(self):
        raise MemoryError("out of memory")


class OneGuessTooFew(Attack):
    def observe(self, obs):
        users, guess = _guesses(obs, shrink=1)
        return [LocationEstimate(tick=obs.tick, users=users, guess=guess, space="y")]


class GuessOutOfRange(Attack):
    def observe(self, obs):
        users, guess = _guesses(obs, offset=10_000)
        return [LocationEstimate(tick=obs.tick, users=users, guess=guess, space="y")]


class FloatGuesses(Attack):
    def observe(self, obs):
        users, guess = _guesses(obs, dtype=float)
        return [LocationEstimate(tick=obs.tick, users=users, guess=guess, space="y")]


class _WrongPosterior(Attack):
    """Guesses of the right shape with a posterior made by :meth:`posterior` (each subclass
    wrong in its own way)."""

    def start(self, context):
        super().start(context)
        self.n_x = context.domain.n_x

    def observe(self, obs):
        users, guess = _guesses(obs)
        post = self.posterior(len(users))
        return [LocationEstimate(tick=obs.tick, users=users, guess=guess, posterior=post,
                                 space="y")]  # fmt: skip


class NaNPosterior(_WrongPosterior):
    def posterior(self, n_users):
        return np.full((n_users, self.n_x), np.nan)


class PosteriorSumsTo2(_WrongPosterior):
    """Finite, non-negative posterior rows that each sum to 2 (not a distribution)."""

    def posterior(self, n_users):
        return np.full((n_users, self.n_x), 2.0 / self.n_x)


class TabulatedIndexOutOfRange(_WrongPosterior):
    """A tabulated posterior whose rows point past its table."""

    def posterior(self, n_users):
        table = np.full((2, self.n_x), 1.0 / self.n_x)
        return TabulatedPosterior(table, np.full(n_users, 7), np.zeros((self.n_x, 2)))


class ObserveReturnsNone(Attack):
    def observe(self, obs):
        return None


# ---------------------------------------------------------------------- strategies
class DecideRaises(ReportPolicy):
    def decide(self, ctx):
        raise ValueError("budget table missing")


class DecideWrongShape(ReportPolicy):
    def decide(self, ctx):
        return np.ones(len(ctx.halted) + 1, dtype=bool)


class DecideInts(ReportPolicy):
    def decide(self, ctx):
        return np.ones(len(ctx.halted), dtype=np.int64)


class FloatPseudonyms(PseudonymStrategy):
    def names(self, tick, current, rng):
        return current.astype(float)


class DueIsAString(RefreshSchedule):
    def due(self, ctx):
        return "yes"


# ---------------------------------------------------------------------- a network plug-in
def no_network():
    raise FileNotFoundError("extract.osm.pbf")
