"""The simulation's clock: which hour of the day (and day of the week) a tick falls in.

Tick ``t`` covers simulated time ``start_hour * 3600 + t * tick_seconds`` seconds after the
midnight that starts day 0 (a Monday). The people model's diary and the home / work attacks
read the same clock, so "night" means the same hours to both.
"""

from __future__ import annotations

import numpy as np

SECONDS_PER_HOUR = 3600.0
HOURS_PER_DAY = 24
SECONDS_PER_DAY = SECONDS_PER_HOUR * HOURS_PER_DAY


def seconds_of_tick(tick, tick_seconds: float, start_hour: float = 0.0) -> np.ndarray:
    """Simulated seconds since midnight of day 0 at ``tick`` (an int or an array of ticks)."""
    return start_hour * SECONDS_PER_HOUR + np.asarray(tick, dtype=np.float64) * tick_seconds


def hour_of_tick(tick, tick_seconds: float, start_hour: float = 0.0) -> np.ndarray:
    """The whole hour of the day (0 .. 23) at ``tick``; an array of ticks gives an array."""
    seconds = seconds_of_tick(tick, tick_seconds, start_hour) % SECONDS_PER_DAY
    return (seconds // SECONDS_PER_HOUR).astype(np.int64)


def day_of_tick(tick, tick_seconds: float, start_hour: float = 0.0) -> np.ndarray:
    """The day (0, 1, ...) that ``tick`` falls in; day 0 starts at the midnight before tick 0."""
    return (seconds_of_tick(tick, tick_seconds, start_hour) // SECONDS_PER_DAY).astype(np.int64)
