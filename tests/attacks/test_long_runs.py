"""Long runs stay flat: what an attack keeps, and what its learning step reads, stay bounded
as the run grows (issue 29, item 3). bench/long_run.py measures the time and memory."""

from __future__ import annotations

import pytest

from mdpsim.attacks import hmm, mobility_models
from mdpsim.simulation import scenario as sc
from mdpsim.simulation.model import PrivacyModel

LEARN_EVERY = 5
LAG = 3


def _model(ticks: int) -> PrivacyModel:
    return PrivacyModel(
        sc.from_dict(
            {
                "scenario": {"name": "long", "seed": 2, "ticks": ticks},
                "domain": {"n_points": 60},
                "users": {"count": 30},
                "strategies": {"budget": {"name": "cgp", "rho_per_km2": 1e12}},
                "mechanism": {"name": "em", "epsilon_per_km": 7.0},
                "queries": {"every_ticks": 0},
                "attacks": {
                    "run": ["tracking", "learned", "smooth"],
                    "params": {
                        "learned": {
                            "attack": "tracking",
                            "mobility": "learned",
                            "learn_every_ticks": LEARN_EVERY,
                            "em_iterations": 1,
                        },
                        "smooth": {"attack": "tracking", "method": "smooth", "lag_ticks": LAG},
                    },
                },
                "output": {"per_user": False},
            }
        )
    )


def _kept_ticks(attack) -> int:
    return sum(len(o) > 0 for o in attack.emissions_.outputs)


@pytest.mark.parametrize("ticks", [40, pytest.param(300, marks=pytest.mark.slow)])
def test_attack_state_and_learning_windows_stay_bounded(ticks, monkeypatch, helsinki_walk):
    read: list[int] = []
    original = mobility_models.expected_transitions

    def counting(kernel, prior, emissions: hmm.Emissions, users):
        read.append(len(emissions))
        return original(kernel, prior, emissions, users)

    monkeypatch.setattr(mobility_models, "expected_transitions", counting)
    model = _model(ticks)
    attacks = model.server.attacks.attacks
    kept: dict[str, list[int]] = {label: [] for label in attacks}
    for _ in range(ticks):
        model.step()
        for label, attack in attacks.items():
            kept[label].append(_kept_ticks(attack))
    assert max(kept["tracking"]) == 1  # the filter keeps only the tick it is on
    assert max(kept["smooth"]) == LAG + 1
    assert max(kept["learned"]) <= LEARN_EVERY + 1
    # incremental EM: each learning step reads its block and the tick before, never the run
    assert len(read) == ticks // LEARN_EVERY and max(read) == LEARN_EVERY + 1
    assert all(len(a.guesses_) == ticks for a in attacks.values())
