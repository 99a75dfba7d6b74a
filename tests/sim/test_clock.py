"""The simulation clock: ticks to hours of day and days."""

import numpy as np

from mdpsim._core.clock import day_of_tick, hour_of_tick


def test_hour_of_tick_wraps_at_midnight_and_starts_at_start_hour():
    ticks = np.arange(0, 300)
    hours = hour_of_tick(ticks, tick_seconds=300.0, start_hour=22.5)
    assert hours[0] == 22 and hours[6] == 23 and hours[18] == 0  # 22:30 + 90 min = 00:00
    assert set(hours.tolist()) == set(range(24))


def test_day_of_tick_counts_midnights():
    assert day_of_tick(287, 300.0).item() == 0 and day_of_tick(288, 300.0).item() == 1
    assert day_of_tick(0, 3600.0, start_hour=23.0).item() == 0
    assert day_of_tick(1, 3600.0, start_hour=23.0).item() == 1
