"""A mobile user: a view over one index of the model's arrays (position, budget, filter).

Users are honest: they follow the protocol, sample their report locally from their own row of
the downloaded mechanism, and stop answering once their privacy filter halts. Whether a user
reports at a tick is decided by the run's report policy (vectorised over all users, see
:mod:`mdpsim.agents.strategies.report_policy`) or, in :mod:`mdpsim.env`, by an outside agent; this
class is what a
reader, the dashboard or a test inspects.
"""

from __future__ import annotations

import mesa


class UserAgent(mesa.Agent):
    """User ``index`` of the model's population."""

    def __init__(self, model, index: int) -> None:
        super().__init__(model)
        self.index = index

    @property
    def secret(self) -> int:
        """Index of the secret (discretised location) the user is at now."""
        return int(self.model.population.position[self.index])

    @property
    def cell(self):
        """The Mesa network cell of the current secret."""
        return self.model.space[self.secret]

    @property
    def remaining_budget(self) -> float:
        """Budget left in the filter's currency."""
        return float(self.model.filters.remaining[self.index])

    @property
    def halted(self) -> bool:
        """Whether the user's filter has halted (the user no longer answers)."""
        return bool(self.model.filters.halted[self.index])
