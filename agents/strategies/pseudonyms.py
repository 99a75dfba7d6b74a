"""Pseudonym strategies: under which name the server sees each user's reports at a tick.

The users choose their pseudonyms; the server sees only the names. A change is drawn from the
run's ``pseudonyms`` stream (never from a location), so it tells the server nothing but the
fact of the change, which it sees anyway.

* ``fixed``: one name per user for the whole run;
* ``change_at``: every user takes a fresh name at tick ``tick`` (0: never), a random
  permutation of ``n .. 2n - 1``; the linkage attack splits the run there.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import ClassVar

import numpy as np

from mdpsim._core.component import Component, ReturnCheck, array_problem
from mdpsim._core.registry import Registry
from mdpsim._core.validation import check_scalar

PSEUDONYM_STRATEGIES: Registry[PseudonymStrategy] = Registry("pseudonym strategy")


class PseudonymStrategy(Component, ABC):
    """Decides, for all users at once, the names their reports carry at each tick."""

    component_kind: ClassVar[str] = "pseudonym strategy"
    return_checks: ClassVar[dict[str, ReturnCheck]] = {
        "names": lambda result, tick, current, rng: array_problem(
            result, np.shape(current), "iu", "one integer pseudonym per user"
        )
    }

    @abstractmethod
    def names(self, tick: int, current: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """The pseudonyms of tick ``tick`` (``current``: those of the tick before)."""


@PSEUDONYM_STRATEGIES.register("fixed")
class Fixed(PseudonymStrategy):
    """The same name for the whole run."""

    def names(self, tick: int, current: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        return current


@PSEUDONYM_STRATEGIES.register("change_at")
class ChangeAt(PseudonymStrategy):
    """A fresh name for every user at tick ``tick`` (0: never)."""

    def __init__(self, *, tick: int = 0) -> None:
        self.tick = check_scalar(tick, "tick", kind=int, min=0, owner="change_at")

    def names(self, tick: int, current: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        if self.tick and tick == self.tick:
            n = len(current)
            return n + rng.permutation(n).astype(np.int64)
        return current
