"""A bare attack driver for the attack tests: reports from one fixed, fitted matrix.

The product has one loop (:class:`mdpsim.simulation.model.PrivacyModel`; ``mdpsim attack`` runs it).
Attack unit tests also need matrices the model would never release (the identity: no
privacy), and walks fixed ahead of time, so this driver feeds an :class:`AttackSuite`
directly: the walks of the users and of a public population, every user reporting each tick
with probability ``report_probability``, pseudonyms changed at ``pseudonym_change_tick``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from mdpsim.attacks.base import Context, Observation, Release
from mdpsim.attacks.suite import AttackSuite
from mdpsim.geo.domain import Domain
from mdpsim.privacy.sampling import sample_rows
from mdpsim.simulation.mobility import MobilityModel
from mdpsim.simulation.world import true_transitions, walk


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
            true = true_transitions(self.domain, self.mobility.reach_km, self.traces)
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
    personal_places: int = 0,
    n_public: int | None = None,
) -> World:
    """Walk the users and a public population of ``n_public`` (default ``n_users``) people
    (their own places, drawn apart; see :class:`~mdpsim.simulation.mobility.Population`)."""
    users_ss, public_ss, reports_ss = np.random.SeedSequence(seed).spawn(3)
    people = dict(
        ticks=ticks, n_places=n_places, speed_mps=speed_mps, tick_seconds=tick_seconds,
        dwell_ticks=dwell_ticks, personal_places=personal_places,
    )  # fmt: skip
    mobility, traces = walk(domain, n_users, users_ss, **people)
    _, public = walk(domain, n_public or n_users, public_ss, **people)
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
    uploads: np.ndarray | None = None,
    report_probability: float = 1.0,
    pseudonym_change_tick: int = 0,
    grant_true_mobility: bool = False,
    progress: Callable[[], None] | None = None,
) -> AttackSuite:
    """Feed one fitted mechanism's reports to the attacks of ``specs``; the scored suite."""
    suite = AttackSuite.from_specs(specs)
    suite.start(world.context(grant_true_mobility=grant_true_mobility))
    release = Release(tick=1, mechanism=mechanism, uploads=uploads)
    suite.release(release)
    rng = np.random.default_rng(world.reports_seed)
    n_ticks, n_users = world.traces.shape
    pseudonyms = np.arange(n_users, dtype=np.int64)
    for t in range(n_ticks):
        tick = t + 1
        if pseudonym_change_tick and tick == pseudonym_change_tick:
            pseudonyms = n_users + rng.permutation(n_users)
        secrets = world.traces[t]
        reporting = np.less(rng.random(n_users), report_probability)
        outputs = np.full(n_users, -1, dtype=np.int64)
        idx = np.nonzero(reporting)[0]
        # the matrix as given (hand-fitted leaky fixtures too): sample_many refuses uncertified
        outputs[idx] = sample_rows(mechanism.matrix_, secrets[idx], rng)
        suite.observe(
            Observation(tick=tick, outputs=outputs, pseudonyms=pseudonyms), world.traces[t]
        )
        if progress is not None:
            progress()
    suite.finish()
    return suite
