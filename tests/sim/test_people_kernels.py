"""The people model's compiled tick against the numpy tick it replaced (the same state and
draws, tick for tick)."""

from __future__ import annotations

import copy

import numpy as np
import pytest

from mdpsim._core.clock import hour_of_tick
from mdpsim.simulation.people import People, PeopleModel, PeopleParams, _hour
from mdpsim.simulation.relevance import relevance_map


def _numpy_step(people: People, rng: np.random.Generator) -> None:
    """``People.step`` as it was before its kernels (numpy masks and a hop loop)."""
    p, m = people.model.params, people.model
    people.tick += 1
    hour = int(hour_of_tick(people.tick, p.tick_seconds, p.start_hour))
    if hour != people.hour:
        people.hour = hour
        people._diary(rng, hour)
    staying = ~people.moving
    people.dwell_left[staying] -= 1
    people.stay_ticks[staying] += 1
    deciding = np.nonzero(staying & (people.dwell_left <= 0))[0]
    if len(deciding):
        people._decide(deciding, rng, hour)
    if not people.moving.any():
        return
    users = np.nonzero(people.moving)[0]
    pos, dest = people.position[users], people.dest[users]
    budget = people.carry_m[users] + p.speed_mps * p.tick_seconds
    going = pos != dest
    while going.any():
        idx = np.nonzero(going)[0]
        nxt = m.next_hop[pos[idx], dest[idx]]
        gap = m.gap_m[pos[idx], nxt]
        ok = gap <= budget[idx]
        step = idx[ok]
        pos[step], budget[step] = nxt[ok], budget[step] - gap[ok]
        going[idx[~ok]] = False
        going[step] = pos[step] != dest[step]
    people.position[users] = pos
    arrived = users[pos == dest]
    people.carry_m[users] = np.where(pos == dest, 0.0, budget)
    people.moving[arrived] = False
    people.stay_ticks[arrived] = 0
    dwell = m.stay_ticks(rng, len(arrived))  # zero arrivals: zero draws
    lo, hi = p.work_hours
    at_work = (people.position[arrived] == people.work[arrived]) & ~people.diary_home[arrived]
    if lo <= hour < hi and at_work.any():
        ticks_left = ((hi - hour) * 3600.0) // p.tick_seconds
        dwell[at_work] = np.maximum(int(ticks_left), people.min_ticks)
    wrong = (people.position[arrived] == people.home[arrived]) != people.diary_home[arrived]
    dwell[wrong & ~at_work] = people.min_ticks
    people.dwell_left[arrived] = dwell


_STATE = ("position", "dest", "moving", "carry_m", "dwell_left", "stay_ticks", "diary_home",
          "known", "visits", "n_known", "hour", "tick")  # fmt: skip


@pytest.mark.parametrize(
    "params",
    [
        PeopleParams(),
        PeopleParams(tick_seconds=60.0, start_hour=7.5, speed_mps=0.3),
        PeopleParams(tick_seconds=900.0, start_hour=16.0, speed_mps=4.0, diary_churn=0.2),
    ],
)
def test_the_compiled_tick_is_the_numpy_tick(walk_domain, params):
    domain = walk_domain(120, 2)
    model = PeopleModel.build(domain, relevance_map(domain), params)
    for seed in range(3):
        rng_a = np.random.default_rng(seed)
        mine = People(model, 25, rng_a)
        theirs, rng_b = copy.deepcopy(mine), copy.deepcopy(rng_a)
        for _ in range(400):
            mine.step(rng_a)
            _numpy_step(theirs, rng_b)
            for name in _STATE:
                a, b = getattr(mine, name), getattr(theirs, name)
                assert np.asarray(a).tobytes() == np.asarray(b).tobytes(), name
            assert rng_a.bit_generator.state == rng_b.bit_generator.state


def test_the_hour_is_the_clocks():
    ticks = np.arange(0, 20000, 7)
    for tick_seconds, start_hour in ((300.0, 0.0), (60.0, 7.5), (900, 23.9), (37.3, 13.0)):
        params = PeopleParams(tick_seconds=tick_seconds, start_hour=start_hour)
        want = hour_of_tick(ticks, tick_seconds, start_hour).tolist()
        assert [_hour(t, params) for t in ticks.tolist()] == want


def test_drawing_no_stay_draws_nothing():
    rng = np.random.default_rng(4)
    before = rng.bit_generator.state
    assert len(rng.random(0)) == 0
    assert rng.bit_generator.state == before
