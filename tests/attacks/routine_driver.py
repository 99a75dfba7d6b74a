"""Hand-made routines for the home / work and uniqueness tests: known answers by design.

Every user sleeps at its own home (hours 18:00 to 09:00) and works at its own work place
(09:00 to 18:00, Monday to Friday) on hourly ticks; homes and works are distinct secrets, so a
perfect mechanism finds every home and work, and one known (place, hour) point names the user.
"""

from __future__ import annotations

import numpy as np

from mdpsim._core.clock import day_of_tick, hour_of_tick
from mdpsim.attacks.base import Context, Observation, Release
from mdpsim.attacks.suite import AttackSuite
from mdpsim.privacy.sampling import sample_rows

TICK_SECONDS = 3600.0


def routine(n_secrets: int, n_users: int, ticks: int, seed: int):
    """``(trace (T, U), home (U,), work (U,))``: distinct homes and works, hourly ticks."""
    places = np.random.default_rng(seed).permutation(n_secrets)[: 2 * n_users]
    home, work = places[:n_users], places[n_users:]
    t = np.arange(1, ticks + 1)
    hour, day = hour_of_tick(t, TICK_SECONDS), day_of_tick(t, TICK_SECONDS)
    at_work = (hour >= 9) & (hour < 18) & (day % 7 < 5)
    trace = np.where(at_work[:, None], work[None, :], home[None, :])
    return trace.astype(np.int64), home, work


def feed(domain, mechanism, trace, specs, *, seed: int = 0, report_seed: int = 5, change_at=0):
    """Every user reports every tick (ticks 1..T) from ``mechanism`` (new pseudonyms from tick
    ``change_at`` on, when given); the finished suite and its whole-run scores."""
    suite = AttackSuite.from_specs(specs)
    n_users = trace.shape[1]
    ctx = Context(domain=domain, n_users=n_users, seed=seed, tick_seconds=TICK_SECONDS)
    suite.start(ctx)
    suite.release(Release(tick=1, mechanism=mechanism))
    rng = np.random.default_rng(report_seed)
    pseudonyms = np.arange(100, 100 + n_users, dtype=np.int64)
    for t, secrets in enumerate(trace, start=1):
        if change_at and t == change_at:
            pseudonyms = pseudonyms + n_users
        outputs = sample_rows(mechanism.matrix_, secrets, rng).astype(np.int64)
        suite.observe(Observation(tick=t, outputs=outputs, pseudonyms=pseudonyms), secrets)
    return suite, suite.finish()
