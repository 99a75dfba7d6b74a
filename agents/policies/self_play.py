"""Self-play: the users' level policy and the server's refresh / query policy best-respond in turn.

``python -m mdpsim.agents.policies.self_play [--rounds 5] [--episodes 150]`` plays :data:`GAME`
(users
choose silent or eps 1 / 4 / 12; the server publishes EM or the optimal LP at a refresh and
asks its range query or not) in the PettingZoo env. Round 0 is the scenario's strategies
(users ``always`` at eps 12, the server keeps EM and asks every tick). In each round the users
best-respond to the server's current policy (a fresh shared :class:`TabularQ` trained on every
user's transitions, the server fixed), then the server best-responds to those users (a fresh
:class:`TabularQ` over its 8 actions, the users fixed); after each move both policies play
greedily on held-out seeds. The table (docs/env.md) holds the mean reward per episode of a user
and of the server, and what they chose.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Iterator, Sequence

import numpy as np

from mdpsim.agents.policies.q_learning import TabularQ, UserState
from mdpsim.env import LEVEL_OBS, USER_OBS, RewardWeights, parallel_env
from mdpsim.simulation import scenario as sc

GAME: dict[str, dict] = {
    "scenario": {"name": "self_play", "seed": 3, "ticks": 20},
    "network": {"source": "helsinki-test"},
    "domain": {"n_points": 60},
    "users": {"count": 4},
    "strategies": {"budget": {"name": "cgp", "rho_per_km2": 120.0}},
    "mechanism": {"name": "em", "epsilon_per_km": 12.0},
    "queries": {"kinds": ["range"], "every_ticks": 1, "rho_per_km2": 0.5},
    "attacks": {"run": ["bayes"]},
    "game": {"epsilon_levels": [1.0, 4.0, 12.0], "mechanisms": ["em", "lp"]},
}
#: :data:`GAME` with the queries' charge fixed (``queries.saving = false``): with saving the
#: charge follows the users' places, so no player's exact best response exists in
#: :data:`GAME`; this is the closest game where every one does (docs/env.md, "An equilibrium")
EXACT_GAME = {**GAME, "queries": {**GAME["queries"], "saving": False}}
WEIGHTS = RewardWeights(attack_weight=3.0, query_weight=0.1)
Policy = Callable[[np.ndarray], object] | None  # None: the scenario's strategy


def best_level(obs: np.ndarray, attack_weight: float = WEIGHTS.attack_weight) -> int:
    """The level of least ``expected_loss + attack_weight * hit`` (public fields): what the
    published mechanism offers, as one number a tabular user can condition on."""
    start, width = len(USER_OBS), len(LEVEL_OBS)
    fields = obs[start:].reshape(-1, width)
    return int(np.argmin(fields[:, 1] + attack_weight * fields[:, 2]))


class SelfPlay:
    """The two learners of :data:`GAME` and the episodes they play."""

    def __init__(self, game: dict | None = None, *, seed: int = 0) -> None:
        self.env = parallel_env(sc.from_dict(game or GAME), weights=WEIGHTS)
        self.users = [a for a in self.env.possible_agents if a != "server"]
        g = self.env.game
        self.n_levels = len(g.levels)
        self.user_state = UserState(
            g.user_fields(),
            budget_bins=13,
            tick_bins=g.horizon,
            extra=best_level,
            n_extra=self.n_levels,
        )
        self.server_nvec = np.asarray(self.env.action_space("server").nvec)
        fields = g.server_fields()
        self._tick, self._mech = fields.index("tick_fraction"), fields.index("mechanism_index")
        self.horizon, self.seed = g.horizon, seed

    def server_state(self, obs: np.ndarray) -> int:
        """The server's state: the published mechanism x the tick in 4 bins."""
        tick = min(int(obs[self._tick] * 4), 3)
        return int(obs[self._mech]) * 4 + tick

    def new_user_learner(self, round_: int) -> TabularQ:
        return TabularQ(
            self.user_state.n_states,
            1 + self.n_levels,
            self.user_state,
            explore=0.2,
            seed=self.seed + 2 * round_,
        )

    def new_server_learner(self, round_: int) -> TabularQ:
        n = int(np.prod(self.server_nvec))
        n_states = int(self.server_nvec[1]) * 4
        return TabularQ(
            n_states, n, self.server_state, explore=0.3, seed=self.seed + 2 * round_ + 1
        )

    def server_action(self, index: int) -> np.ndarray:
        return np.array(np.unravel_index(index, tuple(self.server_nvec)), dtype=np.int64)

    def profile(self, users: TabularQ | None, server: TabularQ | None) -> dict[str, Callable]:
        """The learners as observation policies (agent -> policy; a missing learner leaves
        its agents to their strategies), e.g. for :func:`mdpsim.env.exploitability`."""
        out: dict[str, Callable] = {}
        if users is not None:
            out.update(dict.fromkeys(self.users, users.act))
        if server is not None:
            learner = server
            out["server"] = lambda obs: self.server_action(learner.act(obs))
        return out

    def episode(
        self,
        seed: int,
        users: TabularQ | None,
        server: TabularQ | None,
        *,
        learn: str | None = None,
    ) -> dict[str, float]:
        """One episode; ``learn`` ("users" / "server") explores and updates that learner."""
        obs, _ = self.env.reset(seed=seed)
        totals = {"user": 0.0, "server": 0.0}
        counts = {"reports": 0, "eps": 0.0, "lp": 0, "query": 0, "ticks": 0}
        levels = self.env.game.levels
        while self.env.agents:
            actions = self.env.strategy_actions()
            chosen: dict[str, int] = {}
            if users is not None:
                for u in self.users:
                    pick = users.explore_act if learn == "users" else users.act
                    chosen[u] = actions[u] = pick(obs[u])
            if server is not None:
                pick = server.explore_act if learn == "server" else server.act
                chosen["server"] = pick(obs["server"])
                actions["server"] = self.server_action(chosen["server"])
            next_obs, rewards, _, truncations, _ = self.env.step(actions)
            done = all(truncations.values())
            if learn == "users" and users is not None:
                for u in self.users:
                    users.update(obs[u], chosen[u], rewards[u], next_obs[u], done)
            if learn == "server" and server is not None:
                server.update(
                    obs["server"], chosen["server"], rewards["server"], next_obs["server"], done
                )
            for u in self.users:
                totals["user"] += rewards[u] / len(self.users)
                if int(actions[u]) > 0:
                    counts["reports"] += 1
                    counts["eps"] += levels[int(actions[u]) - 1]
            totals["server"] += rewards["server"]
            row = self.env.model.log.ticks[-1]
            counts["lp"] += row["mechanism"] == "lp"
            counts["query"] += "range_error" in row
            counts["ticks"] += 1
            obs = next_obs
        ticks = counts["ticks"]
        return {
            **totals,
            "report_share": counts["reports"] / (ticks * len(self.users)),
            "mean_eps": counts["eps"] / counts["reports"] if counts["reports"] else float("nan"),
            "lp_share": counts["lp"] / ticks,
            "query_share": counts["query"] / ticks,
        }

    def train(
        self, learner: TabularQ, who: str, users, server, seeds: Sequence[int], episodes: int
    ) -> None:
        start = learner.explore
        for k in range(episodes):
            learner.explore = start * (1 - k / episodes)
            self.episode(int(seeds[k % len(seeds)]), users, server, learn=who)
        learner.explore = start

    def evaluate(self, users, server, seeds: Sequence[int]) -> dict[str, float]:
        runs = [self.episode(int(s), users, server) for s in seeds]
        return {k: float(np.nanmean([r[k] for r in runs])) for k in runs[0]}


def moves(
    rounds: int = 5, episodes: int = 150, *, game: dict | None = None
) -> Iterator[tuple[int, str, SelfPlay, TabularQ | None, TabularQ | None]]:
    """Round 0 (the strategies: no learners), then per round the users' move and the server's
    move: ``(round, moved, self_play, users, server)``, each learner trained against the
    other's current policy."""
    sp = SelfPlay(game)
    train_seeds = range(1000, 1020)
    users: TabularQ | None = None
    server: TabularQ | None = None
    yield 0, "strategies", sp, users, server
    for r in range(1, rounds + 1):
        users = sp.new_user_learner(r)
        sp.train(users, "users", users, server, train_seeds, episodes)
        yield r, "users", sp, users, server
        server = sp.new_server_learner(r)
        sp.train(server, "server", users, server, train_seeds, episodes)
        yield r, "server", sp, users, server


def play(rounds: int = 5, episodes: int = 150, *, held_out: Sequence[int] = range(10)) -> list:
    """The table's rows: round 0 (the strategies), then per round the users' move and the
    server's move, each evaluated on ``held_out`` seeds."""
    return [
        {"round": r, "moved": moved, **game.evaluate(users, server, held_out)}
        for r, moved, game, users, server in moves(rounds, episodes)
    ]


def markdown(rows: list[dict]) -> str:
    head = (
        "| round | moved | user reward | server reward | reports | mean eps | LP "
        "published | queried |"
    )
    lines = [head, "|---:|---|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        lines.append(
            f"| {r['round']} | {r['moved']} | {r['user']:.2f} | {r['server']:.3f} | "
            f"{r['report_share']:.2f} | {r['mean_eps']:.2f} | {r['lp_share']:.2f} | "
            f"{r['query_share']:.2f} |"
        )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--episodes", type=int, default=150)
    args = parser.parse_args(argv)
    print(markdown(play(args.rounds, args.episodes)))


if __name__ == "__main__":
    main()
