"""Mechanisms x attacks on one scenario: the evaluation behind ``mdpsim attack``.

The true world is drawn once per seed and shared by every mechanism (common random numbers):
the users' walks (sim/mobility.py), a public population's walks (other people, other places;
the adversary's public data) and, as the oracle the scenario may grant, the users' own
empirical transitions. Each mechanism is fitted once on the domain; every user reports every
tick with probability ``report_probability``; the attacks see what the server sees and are
scored against the walks. Pseudonyms change at ``pseudonym_change_tick`` (0: never), which is
where the linkage attack splits the run.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from sim.attacks.base import Context, Observation, Release
from sim.attacks.mobility_models import counted_kernel, reach_kernel
from sim.attacks.suite import AttackSuite
from sim.mobility import MobilityModel, Population

if TYPE_CHECKING:
    from sim.domain import Domain

#: Per attack, the metric that says how well it did (higher = the attack succeeds more).
SUCCESS = {"linkage": "hit", "places": "precision_at_k"}


@dataclass(frozen=True, eq=False)
class World:
    """The truth of one seed: walks of the users and of the public, and the mobility."""

    domain: Domain
    traces: np.ndarray  # (T, U) secret index of every user per tick
    public_traces: np.ndarray  # (T, M)
    mobility: MobilityModel
    reports_seed: np.random.SeedSequence
    seed: int

    def context(self, *, grant_true_mobility: bool) -> Context:
        """What the adversary gets: reach and public traces; the truth only if granted."""
        true = None
        if grant_true_mobility:
            support = reach_kernel(self.domain.dist_xx, self.mobility.reach_km)
            true = counted_kernel(support, self.traces, 1e-3).forward
        return Context(
            domain=self.domain,
            n_users=self.traces.shape[1],
            reach_km=self.mobility.reach_km,
            public_traces=self.public_traces,
            true_transitions=true,
            seed=self.seed,
        )


def draw_world(
    domain,
    *,
    n_users: int,
    ticks: int,
    seed: int,
    n_places: int,
    speed_mps: float,
    tick_seconds: float,
    dwell_ticks: tuple[int, int],
    n_public: int | None = None,
) -> World:
    """Walk the users and a public population of ``n_public`` (default ``n_users``) people."""
    places_ss, walk_ss, public_ss, reports_ss = np.random.SeedSequence(seed).spawn(4)

    def walks(count: int, ss: np.random.SeedSequence) -> tuple[MobilityModel, np.ndarray]:
        places_rng, walk_rng = (np.random.default_rng(s) for s in ss.spawn(2))
        model = MobilityModel.build(
            domain,
            n_places=n_places,
            speed_mps=speed_mps,
            tick_seconds=tick_seconds,
            dwell_ticks=dwell_ticks,
            rng=places_rng,
        )
        pop = Population(model, domain, count, walk_rng)
        out = np.empty((ticks, count), dtype=np.int64)
        for t in range(ticks):
            pop.step(walk_rng)
            out[t] = pop.position
        return model, out

    mobility, traces = walks(n_users, places_ss)
    _, public = walks(n_public or n_users, public_ss)
    del walk_ss
    return World(
        domain=domain,
        traces=traces,
        public_traces=public,
        mobility=mobility,
        reports_seed=reports_ss,
        seed=seed,
    )


def run(
    world: World,
    mechanism,
    specs: Sequence[dict],
    *,
    report_probability: float = 1.0,
    pseudonym_change_tick: int = 0,
    grant_true_mobility: bool = False,
    progress: Callable[[], None] | None = None,
) -> AttackSuite:
    """Feed one fitted mechanism's reports to the attacks of ``specs``; the scored suite."""
    suite = AttackSuite.from_specs(specs)
    suite.start(world.context(grant_true_mobility=grant_true_mobility))
    suite.release(Release(tick=1, mechanism=mechanism))
    rng = np.random.default_rng(world.reports_seed)
    n_ticks, n_users = world.traces.shape
    rows_of = np.full(world.domain.n_x, -1, dtype=np.int64)
    rows = Release(tick=1, mechanism=mechanism).rows
    rows_of[rows] = np.arange(len(rows))
    pseudonyms = np.arange(n_users, dtype=np.int64)
    for t in range(n_ticks):
        tick = t + 1
        if pseudonym_change_tick and tick == pseudonym_change_tick:
            pseudonyms = n_users + rng.permutation(n_users)
        secret_rows = rows_of[world.traces[t]]
        reporting = (rng.random(n_users) < report_probability) & (secret_rows >= 0)
        outputs = np.full(n_users, -1, dtype=np.int64)
        idx = np.nonzero(reporting)[0]
        outputs[idx] = mechanism.sample_many(secret_rows[idx], rng)
        suite.observe(
            Observation(tick=tick, outputs=outputs, pseudonyms=pseudonyms), world.traces[t]
        )
        if progress is not None:
            progress()
    suite.finish()
    return suite


def success_table(frames: Sequence[pd.DataFrame]) -> pd.DataFrame:
    """Stack per-run summaries (columns mechanism, epsilon_per_km, attack, metrics...)."""
    return pd.concat(frames, ignore_index=True)
