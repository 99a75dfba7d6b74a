"""An exact equilibrium of the self-play game by best-response dynamics over exact best responses.

``python -m mdpsim.agents.policies.equilibrium [--seed 0] [--plot PNG]`` plays
:data:`~mdpsim.agents.policies.self_play.EXACT_GAME` (the self-play game with the queries'
charge fixed, where every player's best response is exact). From the scenario's strategies it
alternates: every user moves to its exact best response against the current profile, then the
server to its exact best response against those users
(:meth:`~mdpsim.env.joint_game.JointGame.best_response`). At every iterate each player's gain
from its best response is computed exactly, and NashConv is their sum; it stops when NashConv
is below ``tolerance`` times the reward scale (the range of every player's exact episode reward
over the iterates). A pure profile where no player gains is a Nash equilibrium over all
policies, mixed ones included: each best response is exact against the others' deterministic
policies. Dynamics that cycle (a game with no pure equilibrium on their path) end in one line
(InputError) when a profile repeats, or after ``iterations``: mixing is not done, since a best
response to a mixture reads what the others' past moves reveal (docs/env.md, "An
equilibrium").
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from mdpsim.agents.policies.self_play import EXACT_GAME, WEIGHTS
from mdpsim.env import Exploitability, JointGame, single_agent_env
from mdpsim.env.joint_game import Policy, Tick, replace_policies
from mdpsim.errors import InputError
from mdpsim.simulation import scenario as sc

TOLERANCE = 0.01  # of the reward scale


@dataclass
class Equilibrium:
    """The profile the dynamics stopped at, the game it is played in, and every iterate."""

    game: JointGame
    profile: dict[str, Policy]
    history: list[Exploitability]  # one per profile of the dynamics, exact

    @property
    def nash_conv(self) -> float:
        return self.history[-1].nash_conv

    @property
    def scale(self) -> float:
        return reward_scale(self.history)

    def ticks(self) -> list[Tick]:
        """The equilibrium's episode, tick by tick."""
        return list(self.game.play(self.profile))


def reward_scale(history: Sequence[Exploitability]) -> float:
    """The range of every player's exact episode reward over ``history``."""
    values = [v for it in history for v in it.values.values()]
    return float(max(values) - min(values))


def solve(env, *, seed: int = 0, tolerance: float = TOLERANCE, iterations: int = 20) -> Equilibrium:
    """Best-response dynamics in ``env``'s game at run seed ``seed`` from its strategies."""
    base = JointGame(env, seed=seed)
    users = [f"user_{i}" for i in range(base.n)]
    profile: dict[str, Policy] = {}
    history: list[Exploitability] = []
    seen: dict[tuple, int] = {}  # the profiles' plans -> their iteration
    for k in range(iterations):
        game = replace_policies(base, profile)
        values = game.values()
        responses = {a: game.best_response(a) for a in ("server", *users)}
        best = {a: r.value for a, r in responses.items()}
        gains = {a: best[a] - values[a] for a in best}
        history.append(Exploitability(gains=gains, values=values, best_values=best))
        if history[-1].nash_conv < tolerance * reward_scale(history):
            return Equilibrium(base, profile, history)
        server = replace_policies(base, {a: responses[a].act for a in users}).best_response(
            "server"
        )
        plans = (*(responses[a] for a in users), server)
        key = tuple(tuple(np.asarray(x).tobytes() for x in r.plan) for r in plans)
        if key in seen:
            raise InputError(
                f"best-response dynamics cycle: iteration {k + 1} repeats iteration "
                f"{seen[key]} (last NashConv {history[-1].nash_conv:.3g}, scale "
                f"{reward_scale(history):.3g}); no pure equilibrium on their path"
            )
        seen[key] = k + 1
        profile = {r.agent: r.act for r in plans}
    raise InputError(
        f"no equilibrium within {iterations} iterations of best-response dynamics (NashConv "
        f"{history[-1].nash_conv:.3g}, scale {reward_scale(history):.3g})"
    )


def markdown(eq: Equilibrium) -> str:
    """The equilibrium's episode: per run of alike ticks the mechanism the reports meet, the
    server's refresh and query, and every user's report (its eps per km, or silent)."""
    names, levels = eq.game.game.mechanism_names, eq.game.game.levels
    users = [f"user_{i}" for i in range(eq.game.n)]
    rows: list[tuple[int, int, tuple[str, ...]]] = []  # first tick, last tick, cells
    for t, tick in enumerate(eq.ticks(), start=1):
        refresh, _, kinds = tick.decision
        cells = (
            names[tick.mechanism],
            "yes" if refresh else "",
            "yes" if kinds else "",
            *(f"eps {levels[a - 1]:g}" if a else "silent" for a in tick.user_actions),
        )
        if rows and rows[-1][2] == cells:
            rows[-1] = (rows[-1][0], t, cells)
        else:
            rows.append((t, t, cells))
    lines = [
        "| ticks | mechanism | refreshed | queried | " + " | ".join(users) + " |",
        "|---|---|---|---|" + "---:|" * len(users),
    ]
    for first, last, cells in rows:
        span = str(first) if first == last else f"{first}-{last}"
        lines.append(f"| {span} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def curve_markdown(eq: Equilibrium) -> str:
    lines = [
        "| iteration | NashConv | users' gain | server's gain | user value (mean) | server value |",
        "|---:|---:|---:|---:|---:|---:|",
    ]
    for k, it in enumerate(eq.history):
        users = [a for a in it.values if a != "server"]
        lines.append(
            f"| {k} | {it.nash_conv:.2f} | {it.users_gain:.2f} | "
            f"{it.gains['server']:.3f} | {sum(it.values[a] for a in users) / len(users):.2f} | "
            f"{it.values['server']:.3f} |"
        )
    return "\n".join(lines)


def plot(eq: Equilibrium, path: Path) -> None:
    """NashConv per iteration, with the stopping line (``TOLERANCE`` of the scale)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5.5, 3.2))
    xs = range(len(eq.history))
    ax.plot(xs, [it.nash_conv for it in eq.history], marker="o", label="NashConv")
    ax.axhline(TOLERANCE * eq.scale, color="grey", ls="--", label="1 % of the reward scale")
    ax.set_xticks(list(xs))
    ax.set_xlabel("iteration (0: the scenario's strategies)")
    ax.set_ylabel("NashConv (reward per episode)")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--iterations", type=int, default=20)
    parser.add_argument("--plot", type=Path, default=None, help="write the NashConv curve here")
    args = parser.parse_args(argv)
    env = single_agent_env(sc.from_dict(EXACT_GAME), agent="server", weights=WEIGHTS)
    try:
        eq = solve(env, seed=args.seed, iterations=args.iterations)
    except InputError as err:  # one line and status 2, as the CLI
        print(f"error: {err}", file=sys.stderr)
        raise SystemExit(2) from None
    print(f"reward scale {eq.scale:.2f}, NashConv {eq.nash_conv:.2e}")
    print(curve_markdown(eq))
    print()
    print(markdown(eq))
    if args.plot is not None:
        plot(eq, args.plot)


if __name__ == "__main__":
    main()
