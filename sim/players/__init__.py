"""The players of the game: mobile users and the honest-but-curious server (Mesa agents).

Hot state stays in the model's arrays; each player's behaviour lives in the strategy objects
of :mod:`sim.strategies` it holds. Researchers' own agents (random, greedy, learning) live in
the top-level ``agents/`` package and play through :mod:`sim.env`.
"""

from sim.players.curious_server import CuriousServer, Reports, attack_success
from sim.players.user import UserAgent

__all__ = ["CuriousServer", "Reports", "UserAgent", "attack_success"]
