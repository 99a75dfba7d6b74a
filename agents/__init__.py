"""What acts in the game.

- The Mesa agents of the model: mobile users (:mod:`~mdpsim.agents.user`) and the
  honest-but-curious server (:mod:`~mdpsim.agents.server`, with its mechanism menu in
  :mod:`~mdpsim.agents.levels`). Hot state stays in the model's arrays; each agent's behaviour
  lives in the strategy objects it holds.
- The strategies they follow (:mod:`mdpsim.agents.strategies`): report, budget, query planner,
  refresh and pseudonym policies, one registry per kind.
- Policies that play from outside through :mod:`mdpsim.env` (:mod:`mdpsim.agents.policies`):
  random, greedy, a tabular Q-learning user and the self-play of users and server.
"""

from mdpsim.agents.server import CuriousServer, Reports, attack_success
from mdpsim.agents.user import UserAgent

__all__ = ["CuriousServer", "Reports", "UserAgent", "attack_success"]
