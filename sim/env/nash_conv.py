"""Exploitability of a profile of user policies: each user's gain from its exact best response.

For a profile (one observation -> action policy per user, or one shared by all; the server
follows the scenario's strategies), user ``i``'s gain at a seed is
``best_response.value - value of its policy``, both exact on the same information-state MDP
(:class:`~mdpsim.env.responses.UserGame`); the gains are averaged over ``seeds`` and
NashConv is their sum (OpenSpiel's ``nash_conv``: 0 exactly at a Nash equilibrium). Under a
memoryless attack a user's reward does not depend on the other users' choices, so each gain is
computed in that user's own game. The server's term is left out: its exact best response is not
implemented (sim/env/responses.py); docs/env.md says so beside the table.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import numpy as np

from mdpsim.env.responses import Policy, UserGame


@dataclass(frozen=True)
class Exploitability:
    """Per user the mean gain from its best response, their sum, and the profile's values."""

    gains: dict[str, float]
    values: dict[str, float]
    best_values: dict[str, float]

    @property
    def nash_conv(self) -> float:
        return float(sum(self.gains.values()))


def exploitability(
    env, policies: Policy | Mapping[str, Policy], *, seeds: Iterable[int]
) -> Exploitability:
    """The users' gains (means over ``seeds``) for ``policies`` in ``env`` (a parallel or a
    single-agent env, or its Game); a single callable is every user's policy."""
    game = getattr(env, "game", env)
    seeds = [int(s) for s in seeds]
    users = [a for a in game.agents if a != "server"]
    gains, values, best = {}, {}, {}
    for agent in users:
        policy: Policy = policies if callable(policies) else policies[agent]
        v, b = [], []
        for seed in seeds:
            user_game = UserGame(game, seed=seed, agent=agent)
            v.append(user_game.evaluate(policy))
            b.append(user_game.solve(user_game.rewards[None, :])[0][0][0, 0])
        values[agent], best[agent] = float(np.mean(v)), float(np.mean(b))
        gains[agent] = best[agent] - values[agent]
    return Exploitability(gains=gains, values=values, best_values=best)
