"""What one query kind gave at a tick, as the query planner hands it to the tick's row."""

from __future__ import annotations

from dataclasses import dataclass


def query_column(kind: str, metric: str) -> str:
    """The tick column of query ``kind``'s ``metric`` (``error`` or ``privacy_saving``)."""
    return f"{kind}_{metric}"


@dataclass(frozen=True)
class QueryOutcome:
    """One query kind at a tick: its error (NaN: nobody answered) and the budget the users
    were asked for and spent (its saving is ``1 - spent / asked``; none when nothing was asked)."""

    error: float
    asked: float = 0.0
    spent: float = 0.0

    @property
    def saving(self) -> float | None:
        """The share of the asked budget the elimination saved (``None``: nothing asked)."""
        return 1.0 - self.spent / self.asked if self.asked > 0 else None


#: A kind the schedule asked for that nobody answered (everyone halted, no budget left).
UNANSWERED = QueryOutcome(float("nan"))
