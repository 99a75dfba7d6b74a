"""The environment API: the simulation as a PettingZoo / Gymnasium game (docs/env.md).

* :func:`parallel_env` - a PettingZoo ``ParallelEnv`` with agents ``server`` and
  ``user_0 .. user_{n-1}``;
* :func:`single_agent_env` - a Gymnasium ``Env`` where one agent acts and the others follow
  the scenario's strategies;
* :func:`vector_env` - a Gymnasium ``VectorEnv`` of N independent single-agent games
  (:func:`to_sb3`: the Stable-Baselines3 ``VecEnv`` over it);
* :func:`best_response` - a user's or the server's exact best response (``value``,
  ``act(obs)``);
* :func:`exploitability` - each player's gain (the users' and the server's) from it for a
  profile of policies, and NashConv.

``overrides`` are dotted scenario fields with ``__`` for the dot (``users__count=10``), plus
``strategies={"report": ...}`` (specs or instances) and ``weights=RewardWeights(...)``.
"""

from __future__ import annotations

from typing import Any

from mdpsim.env.game import (
    LEVEL_OBS,
    SERVER_ACTIONS,
    SERVER_OBS,
    USER_ACTIONS,
    USER_OBS,
    Game,
    RewardWeights,
)
from mdpsim.env.joint_game import JointGame, Solved, best_response
from mdpsim.env.nash_conv import Exploitability, exploitability
from mdpsim.env.parallel import PrivacyParallelEnv
from mdpsim.env.responses import UserBestResponse
from mdpsim.env.single import SingleAgentEnv
from mdpsim.env.vector import PrivacyVectorEnv, to_sb3
from mdpsim.simulation.scenario import ScenarioSource


def parallel_env(scenario: ScenarioSource, **overrides: Any) -> PrivacyParallelEnv:
    """The PettingZoo ParallelEnv of ``scenario``: a TOML path, a packaged scenario name
    (``"helsinki_demo"``), a dict of tables or a :class:`~mdpsim.simulation.scenario.Scenario`.

    ``overrides`` are dotted scenario fields with ``__`` for the dot (``users__count=10``,
    ``mechanism__epsilon=2.0``), plus ``strategies={"report": ...}`` (specs or instances) and
    ``weights=RewardWeights(...)``.
    """
    return PrivacyParallelEnv(scenario, **overrides)


def single_agent_env(
    scenario: ScenarioSource, agent: str = "server", **overrides: Any
) -> SingleAgentEnv:
    """The Gymnasium Env in which ``agent`` acts and the others follow their strategies
    (``scenario`` as in :func:`parallel_env`)."""
    return SingleAgentEnv(scenario, agent=agent, **overrides)


def vector_env(
    scenario: ScenarioSource, num_envs: int, agent: str = "server", **overrides: Any
) -> PrivacyVectorEnv:
    """A Gymnasium ``VectorEnv`` of ``num_envs`` independent single-agent games of ``agent``
    (autoreset ``NEXT_STEP`` unless ``autoreset_mode="SameStep"``, which :func:`to_sb3`
    needs); env ``i`` of ``reset(seed=s)`` plays seed ``s + i``."""
    return PrivacyVectorEnv(scenario, num_envs=num_envs, agent=agent, **overrides)


__all__ = [
    "LEVEL_OBS",
    "SERVER_ACTIONS",
    "SERVER_OBS",
    "USER_ACTIONS",
    "USER_OBS",
    "Exploitability",
    "Game",
    "JointGame",
    "PrivacyParallelEnv",
    "PrivacyVectorEnv",
    "RewardWeights",
    "SingleAgentEnv",
    "Solved",
    "UserBestResponse",
    "best_response",
    "exploitability",
    "parallel_env",
    "single_agent_env",
    "to_sb3",
    "vector_env",
]
