"""Mechanism refresh schedules: when the server generates a new mechanism.

Schedules are PUBLIC: they read only the tick and what the server has received, never where
users truly are, so the timing of a regeneration tells the server (and anyone watching)
nothing new. A mechanism always exists from tick 0 (generated when the run starts).

* ``every``: every ``ticks`` ticks (0: never again);
* ``on_release``: when, at the previous tick, at least ``silent_fraction`` of the users whose
  filters are still active sent no report (e.g. DistA-LP users who left their block).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import ClassVar

from mdpsim._core.component import Component, ReturnCheck, bool_problem
from mdpsim._core.registry import Registry
from mdpsim._core.validation import check_scalar

REFRESH_SCHEDULES: Registry[RefreshSchedule] = Registry("refresh schedule")


@dataclass(frozen=True)
class RefreshContext:
    """The public facts a schedule may use, at the start of tick ``tick``."""

    tick: int
    generated_at: int
    active_users: int
    silent_active_users: int


class RefreshSchedule(Component, ABC):
    """Decides at the start of a tick whether to regenerate the mechanism."""

    component_kind: ClassVar[str] = "refresh schedule"
    return_checks: ClassVar[dict[str, ReturnCheck]] = {
        "due": lambda result, ctx: bool_problem(result, "regenerate now or not")
    }

    @abstractmethod
    def due(self, ctx: RefreshContext) -> bool:
        """Whether the mechanism is regenerated at this tick."""


@REFRESH_SCHEDULES.register("every")
class Every(RefreshSchedule):
    """Every ``ticks`` ticks after the last generation (0: keep the first mechanism)."""

    def __init__(self, *, ticks: int = 0) -> None:
        self.ticks = check_scalar(ticks, "ticks", kind=int, min=0, owner="refresh every")

    def due(self, ctx: RefreshContext) -> bool:
        return self.ticks > 0 and ctx.tick - ctx.generated_at >= self.ticks


@REFRESH_SCHEDULES.register("on_release")
class OnRelease(RefreshSchedule):
    """When at least ``silent_fraction`` of the active users were silent at the last tick."""

    def __init__(self, *, silent_fraction: float = 0.5) -> None:
        self.silent_fraction = check_scalar(
            silent_fraction, "silent_fraction", min=0, max=1, include_boundaries="right",
            owner="on_release",
        )  # fmt: skip

    def due(self, ctx: RefreshContext) -> bool:
        if ctx.tick - ctx.generated_at < 2 or ctx.active_users == 0:  # no release seen yet
            return False
        return ctx.silent_active_users >= self.silent_fraction * ctx.active_users
