"""The players of the game: mobile users and the honest-but-curious server (Mesa agents).

Hot state stays in the model's arrays; each player's behaviour lives in the strategy objects
of :mod:`mdpsim.strategies` it holds. Researchers' own agents (random, greedy, learning) live in
the top-level ``agents/`` package and play through :mod:`mdpsim.env`.
"""

from mdpsim.players.curious_server import CuriousServer, Reports, attack_success
from mdpsim.players.user import UserAgent

__all__ = ["CuriousServer", "Reports", "UserAgent", "attack_success"]
