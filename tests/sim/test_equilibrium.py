"""Best-response dynamics to an exact equilibrium (agents/policies/equilibrium.py)."""

from __future__ import annotations

import re

import pytest
from test_exploitability import SMALL
from test_server_response import GAME as CYCLING
from test_server_response import WEIGHTS as CYCLING_WEIGHTS

from mdpsim.agents.policies.equilibrium import TOLERANCE, markdown, solve
from mdpsim.agents.policies.self_play import EXACT_GAME, WEIGHTS
from mdpsim.env import exploitability, single_agent_env
from mdpsim.errors import InputError
from mdpsim.simulation import scenario as sc


def _no_player_gains(env, seed: int) -> None:
    eq = solve(env, seed=seed)
    bound = TOLERANCE * eq.scale
    assert eq.nash_conv < bound
    again = exploitability(env, eq.profile, seeds=[seed])  # recomputed from the profile
    assert again.nash_conv < bound
    assert all(-1e-9 <= g <= bound for g in again.gains.values()), again.gains
    last = markdown(eq).splitlines()[-1]  # runs of alike ticks: the last ends the episode
    assert re.match(rf"\| (\d+-)?{eq.game.horizon} \|", last), last


def test_the_dynamics_reach_an_equilibrium_no_player_can_exploit():
    _no_player_gains(single_agent_env(sc.from_dict(SMALL), agent="server", weights=WEIGHTS), 0)


def test_dynamics_that_cycle_say_so():
    """EM or Laplace against eps 1 or 4: the server's choice and the users' alternate."""
    env = single_agent_env(sc.from_dict(CYCLING), agent="server", weights=CYCLING_WEIGHTS)
    with pytest.raises(InputError, match="cycle"):
        solve(env, seed=0)


@pytest.mark.slow
def test_the_shipped_games_equilibrium():
    _no_player_gains(single_agent_env(sc.from_dict(EXACT_GAME), agent="server", weights=WEIGHTS), 0)
