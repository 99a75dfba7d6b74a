"""A greedy user: reports only when a report's expected reward beats staying silent.

From its observation (:data:`mdpsim.env.USER_OBS`) a report is expected to cost the mechanism's
expected loss plus ``attack_weight`` times the chance that the server's MAP guess is exact;
silence costs ``silent_loss_km``. The greedy user picks the cheaper, one tick at a time. With
``[game] epsilon_levels`` (the observation's :data:`mdpsim.env.LEVEL_OBS` fields) it compares
every level its budget can still pay and reports at the cheapest (action ``1 + l``).
"""

from __future__ import annotations

from mdpsim.env import LEVEL_OBS, USER_OBS

_LOSS, _HIT, _SILENT, _HALTED, _LEFT = (
    USER_OBS.index(name)
    for name in (
        "expected_loss_km",
        "hit_probability",
        "silent_loss_km",
        "halted",
        "remaining_fraction",
    )
)


class GreedyReporter:
    """Report (1) iff ``expected_loss + attack_weight * hit_probability < silent_loss``; with
    levels, at the affordable level of least ``expected_loss + attack_weight * hit``."""

    def __init__(self, attack_weight: float) -> None:
        self.attack_weight = float(attack_weight)

    def act(self, observation) -> int:
        if observation[_HALTED]:
            return 0
        n_levels = (len(observation) - len(USER_OBS)) // len(LEVEL_OBS)
        if n_levels == 0:
            report = observation[_LOSS] + self.attack_weight * observation[_HIT]
            return int(report < observation[_SILENT])
        best, best_cost = 0, float(observation[_SILENT])
        for level in range(n_levels):
            cost_fraction, loss, hit = observation[
                len(USER_OBS) + level * len(LEVEL_OBS) : len(USER_OBS)
                + (level + 1) * len(LEVEL_OBS)
            ]
            expected = float(loss + self.attack_weight * hit)
            affordable = cost_fraction <= observation[_LEFT] * (1 - 1e-6)  # float32 fields
            if affordable and expected < best_cost:
                best, best_cost = 1 + level, expected
        return best
