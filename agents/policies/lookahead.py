"""A game where thinking ahead pays: the exact best response against greedy, always, Q-learning.

:data:`GAME` is the level game with a tight budget and cheap privacy (``attack_weight = 1``):
EM at eps 2 / 6 / 12 per km, a CGP budget of 60 (a report costs 2 / 18 / 72), 20 ticks, the
``bayes`` attack. Greedy (one tick ahead) reports at the level of least loss now, eps 6, three
times, and is then left with eps 2 or silence; the best response
(:func:`mdpsim.env.best_response`) spreads the budget over the episode. ``python -m
mdpsim.agents.policies.lookahead [--seeds 20] [--episodes 600]`` prints the table of docs/env.md
("A game where thinking ahead pays"): mean reward per episode of ``user_0`` on held-out seeds,
with 95 % half-widths, and each policy's exact value (mean over the seeds).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Mapping, Sequence

import numpy as np

from mdpsim.agents.policies.greedy import GreedyReporter
from mdpsim.agents.policies.q_learning import level_user
from mdpsim.env import RewardWeights, best_response, single_agent_env
from mdpsim.simulation import scenario as sc

LEVELS = [2.0, 6.0, 12.0]  # eps per km; the last is the default level
GAME: dict[str, dict] = {
    "scenario": {"name": "lookahead", "seed": 3, "ticks": 20},
    "network": {"source": "helsinki-test"},
    "domain": {"n_points": 60},
    "users": {"count": 2},
    "strategies": {"budget": {"name": "cgp", "rho_per_km2": 60.0}},
    "mechanism": {"name": "em", "epsilon_per_km": 12.0},
    "queries": {"every_ticks": 0},
    "attacks": {"run": ["bayes"]},
    "game": {"epsilon_levels": LEVELS},
}
WEIGHTS = RewardWeights(attack_weight=1.0)


def env():
    """The single-agent env of ``user_0`` in :data:`GAME`."""
    return single_agent_env(sc.from_dict(GAME), agent="user_0", weights=WEIGHTS)


def episode(game_env, act, seed: int) -> float:
    obs, _ = game_env.reset(seed=seed)
    total, done = 0.0, False
    while not done:
        obs, reward, _, done, _ = game_env.step(act(obs))
        total += reward
    return total


def always(obs) -> int:
    """The scenario's strategy: report at the default level (eps 12) while the filter pays."""
    return len(LEVELS)


def compare(
    held_out: Sequence[int],
    *,
    episodes: int = 600,
    policies: Mapping[str, Callable[..., int]] | None = None,
) -> dict[str, dict[str, float]]:
    """Per policy: played mean and 95 % half-width on ``held_out``, and the mean exact value;
    ``policies`` adds named observation policies (``act(obs) -> action``) to the table."""
    game_env = env()
    learned = level_user(game_env, episodes=episodes, seeds=range(1000, 1020), seed=0)
    fixed = {
        "greedy": GreedyReporter(WEIGHTS.attack_weight).act,
        "always": always,
        "q_learning": learned.act,
        **(policies or {}),
    }
    played: dict[str, list[float]] = {name: [] for name in ("best_response", *fixed)}
    exact: dict[str, list[float]] = {name: [] for name in played}
    for seed in held_out:
        br = best_response(game_env, seed=seed)
        exact["best_response"].append(br.value)
        for name, act in fixed.items():
            exact[name].append(br.game.evaluate(act))
        played["best_response"].append(episode(game_env, br.act, seed))
        for name, act in fixed.items():
            played[name].append(episode(game_env, act, seed))
    out = {}
    for name, rewards in played.items():
        r = np.asarray(rewards)
        out[name] = {
            "mean": float(r.mean()),
            "half": float(1.96 * r.std(ddof=1) / np.sqrt(len(r))),
            "value": float(np.mean(exact[name])),
        }
    return out


def markdown(rows: dict[str, dict[str, float]]) -> str:
    lines = ["| user | played per episode | 95 % | exact value |", "|---|---:|---:|---:|"]
    for name, r in rows.items():
        lines.append(f"| {name} | {r['mean']:.2f} | {r['half']:.2f} | {r['value']:.2f} |")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seeds", type=int, default=20)
    parser.add_argument("--episodes", type=int, default=600)
    args = parser.parse_args(argv)
    print(markdown(compare(range(args.seeds), episodes=args.episodes)))


if __name__ == "__main__":
    main()
