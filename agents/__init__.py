"""Agents that play the mdpsim game from outside, through :mod:`mdpsim.env` (uses ``sim``, never
the reverse): a random agent and greedy baselines that the docs' example runs."""
