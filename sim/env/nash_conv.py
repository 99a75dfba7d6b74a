"""Exploitability of a profile of policies: each player's gain from its exact best response.

A profile maps agents (users and the server) to deterministic observation -> action policies;
an agent left out follows the scenario's strategies, and a single callable is every user's
policy. Player ``p``'s gain at a seed is ``best_response.value - value of its policy``, both
exact on the same game (:class:`~mdpsim.env.joint_game.JointGame`), the others unchanged; the
gains are averaged over ``seeds`` and NashConv is their sum, the server's included (OpenSpiel's
``nash_conv``: 0 exactly at a Nash equilibrium, and no gain is negative).

When the server follows its strategies (a fixed refresh schedule, the default mechanism, the
planner's queries), a user's reward does not depend on the other users, and its best response
is the dynamic programme over its own information state (:class:`~mdpsim.env.responses.UserGame`,
the same value, faster); against a given server policy it is the public-state game's.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import numpy as np

from mdpsim.env.joint_game import JointGame
from mdpsim.env.responses import Policy, UserGame


@dataclass(frozen=True)
class Exploitability:
    """Per player (users and ``server``) the mean gain from its best response, their sum, and
    the profile's and the best responses' mean values."""

    gains: dict[str, float]
    values: dict[str, float]
    best_values: dict[str, float]

    @property
    def nash_conv(self) -> float:
        return float(sum(self.gains.values()))

    @property
    def users_gain(self) -> float:
        """The users' part of NashConv."""
        return float(sum(g for a, g in self.gains.items() if a != "server"))


def exploitability(
    env, policies: Policy | Mapping[str, Policy], *, seeds: Iterable[int]
) -> Exploitability:
    """Every player's gain (means over ``seeds``) for ``policies`` in ``env`` (a parallel or a
    single-agent env, or its Game); one line (InputError) when a best response is not exact."""
    game = getattr(env, "game", env)
    users = [a for a in game.agents if a != "server"]
    profile = dict(policies) if not callable(policies) else dict.fromkeys(users, policies)
    values: dict[str, list[float]] = {a: [] for a in ("server", *users)}
    best: dict[str, list[float]] = {a: [] for a in values}
    for seed in [int(s) for s in seeds]:
        joint = JointGame(game, seed=seed, policies=profile)
        for agent, value in joint.values().items():
            values[agent].append(value)
        best["server"].append(joint.best_response("server").value)
        for agent in users:
            if "server" in profile:
                best[agent].append(joint.best_response(agent).value)
            else:
                user_game = UserGame(game, seed=seed, agent=agent)
                best[agent].append(user_game.solve(user_game.rewards[None, :])[0][0][0, 0])
    mean_values = {a: float(np.mean(v)) for a, v in values.items()}
    mean_best = {a: float(np.mean(v)) for a, v in best.items()}
    gains = {a: mean_best[a] - mean_values[a] for a in values}
    return Exploitability(gains=gains, values=mean_values, best_values=mean_best)
