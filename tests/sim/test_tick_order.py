"""The tick's phases run in the order of SPEC.md section 6: move, mechanism, report, query,
attack, collect (issue 49 item 4)."""

from __future__ import annotations

import numpy as np
import pytest

from mdpsim.simulation.model import PrivacyModel
from mdpsim.simulation.world import build_world


@pytest.mark.parametrize("model", ["waypoints", "epr"])
def test_a_ticks_reports_are_about_the_positions_after_its_move(make_scenario, model):
    scenario = make_scenario(
        scenario={"ticks": 5, "tick_seconds": 300.0, "start_hour": 8.0},
        users={"count": 12},
        mobility={"model": model},
    )
    walks = build_world(scenario).walks_ahead(5)  # positions after each tick's move
    sim = PrivacyModel(scenario)
    sim.run(5)
    recorded = np.stack([cols["secret"] for cols in sim.log.users])
    assert np.array_equal(recorded, walks)


def test_the_phases_are_called_in_the_story_order(make_scenario, monkeypatch):
    sim = PrivacyModel(make_scenario(scenario={"ticks": 2}, users={"count": 4}))
    calls: list[str] = []
    for phase in ("_move", "_regenerate", "_report", "_query", "_collect"):
        original = getattr(sim, phase)

        def spy(*args, _phase=phase, _original=original, **kwargs):
            calls.append(_phase)
            return _original(*args, **kwargs)

        monkeypatch.setattr(sim, phase, spy)
    attack = sim.server.attack
    monkeypatch.setattr(
        sim.server, "attack", lambda reports: (calls.append("attack"), attack(reports))[1]
    )
    sim.step()
    assert calls == ["_move", "_regenerate", "_report", "_query", "attack", "_collect"]
