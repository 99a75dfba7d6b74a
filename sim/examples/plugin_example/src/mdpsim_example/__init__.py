"""An example mdpsim plug-in: one mechanism, one attack, one report strategy."""

from __future__ import annotations

import numpy as np

from mdpsim.agents.strategies.report_policy import ReportContext, ReportPolicy
from mdpsim.attacks import Attack, LocationEstimate, Observation, Release
from mdpsim.errors import InputError
from mdpsim.mechanisms import Mechanism
from mdpsim.mechanisms.em import exponential_matrix


class CoinEM(Mechanism):
    """With probability ``keep`` the exponential mechanism's row, else a uniform output.

    A mixture of an eps-mDP row and a constant row is eps-mDP (each likelihood ratio is at
    most the EM's)."""

    def __init__(self, epsilon: float, *, keep: float = 0.9) -> None:
        super().__init__(epsilon)
        if not 0.0 <= keep <= 1.0:
            raise InputError(f"keep={keep!r} must be in [0, 1]")
        self.keep = keep

    def _fit(self, domain):
        em = exponential_matrix(domain.dist_xy, self.epsilon)
        uniform = np.full_like(em, 1.0 / domain.n_y)
        return self.keep * em + (1.0 - self.keep) * uniform, {}


class ModeGuess(Attack):
    """Ignores every report and guesses the most likely secret of the public prior."""

    def __init__(self) -> None:
        self.guess_ = -1

    def release(self, release: Release) -> None:
        self.guess_ = int(np.argmax(release.mechanism.domain_.prior))

    def observe(self, obs: Observation):
        users = obs.reporting
        guess = np.full(len(users), self.guess_, dtype=np.int64)
        return [LocationEstimate(tick=obs.tick, users=users, guess=guess)]


class EveryOther(ReportPolicy):
    """Users report every other tick (even ticks), when not halted."""

    def decide(self, ctx: ReportContext) -> np.ndarray:
        return ~ctx.halted & (ctx.tick % 2 == 0)
