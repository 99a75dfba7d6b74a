"""A greedy user: reports only when a report's expected reward beats staying silent.

From its observation (:data:`mdpsim.env.USER_OBS`) a report is expected to cost the mechanism's
expected loss plus ``attack_weight`` times the chance that the server's MAP guess is exact;
silence costs ``silent_loss_km``. The greedy user picks the cheaper, one tick at a time.
"""

from __future__ import annotations

from mdpsim.env import USER_OBS

_LOSS, _HIT, _SILENT, _HALTED = (
    USER_OBS.index(name)
    for name in ("expected_loss_km", "hit_probability", "silent_loss_km", "halted")
)


class GreedyReporter:
    """Report (1) iff ``expected_loss + attack_weight * hit_probability < silent_loss``."""

    def __init__(self, attack_weight: float) -> None:
        self.attack_weight = float(attack_weight)

    def act(self, observation) -> int:
        if observation[_HALTED]:
            return 0
        report = observation[_LOSS] + self.attack_weight * observation[_HIT]
        return int(report < observation[_SILENT])
