"""Policies that play the mdpsim game from outside, through :mod:`mdpsim.env`: a random agent,
greedy baselines that the docs' example runs, a tabular Q-learning user for the eps-level choice
(``q_learning``) and the self-play of users and server (``self_play``,
``python -m mdpsim.agents.policies.self_play``) and a game where thinking ahead pays
(``lookahead``)."""
