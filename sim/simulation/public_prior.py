"""The people model's public structure as an adversary's prior over the secrets.

What the people model (``[mobility] model = "epr"``) makes public is its relevance map (where
homes and activity are, :mod:`mdpsim.simulation.relevance`) and its diary's routine (the share
of people at home by hour of day). A scenario that grants it (``[attacks] people_prior =
true``) hands the tracking attack, as its prior (the belief at the first tick and after a
reset), ``s h + (1 - s) a`` where ``h`` and ``a`` are the housing and activity maps and ``s``
the diary's share at home in the hour of tick 1, mixed with :data:`DOMAIN_WEIGHT` of the
domain's public prior so that no secret is ruled out. No user's home or walk enters it.
"""

from __future__ import annotations

import numpy as np

from mdpsim._core.clock import hour_of_tick

#: Weight of the domain's own prior in the mix (a floor: every secret stays possible).
DOMAIN_WEIGHT = 0.01


def people_prior(
    housing: np.ndarray,
    activity: np.ndarray,
    home_by_hour,
    domain_prior: np.ndarray,
    *,
    tick_seconds: float,
    start_hour: float,
) -> np.ndarray:
    """The prior over secrets at tick 1 (sums to 1)."""
    share = float(np.asarray(home_by_hour)[int(hour_of_tick(1, tick_seconds, start_hour))])
    people = share * np.asarray(housing, float) + (1 - share) * np.asarray(activity, float)
    prior = (1 - DOMAIN_WEIGHT) * people / people.sum() + DOMAIN_WEIGHT * np.asarray(domain_prior)
    return prior / prior.sum()
