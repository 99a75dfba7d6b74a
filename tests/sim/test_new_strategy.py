"""Adding strategies (docs/design.md, "What to edit to add ..."): a strategy of an existing
kind is its own module (here: registered in this one); a new kind is its module, one entry
in ``mdpsim.agents.strategies.REGISTRIES`` (here: monkeypatched) and the call site that uses it."""

from __future__ import annotations

from abc import ABC, abstractmethod

import numpy as np
import pytest

from mdpsim._core.component import Component
from mdpsim._core.registry import Registry
from mdpsim._core.validation import check_positive_int
from mdpsim.agents import strategies
from mdpsim.agents.strategies import REPORT_POLICIES, ReportContext, ReportPolicy, from_scenario
from mdpsim.errors import InputError
from mdpsim.experiments.run import simulate
from mdpsim.simulation import scenario as sc


@pytest.fixture(scope="module")
def world(make_scenario):
    """This module's scenario: 12 users, no queries."""
    return make_scenario.but(
        scenario={"name": "s", "seed": 2, "ticks": 6},
        domain={"n_points": 60},
        users={"count": 12},
        queries={"every_ticks": 0},
    )


class EveryOtherTick(ReportPolicy):
    """Report on even ticks only (a public schedule)."""

    def decide(self, ctx: ReportContext) -> np.ndarray:
        return ~ctx.halted & (ctx.tick % 2 == 0)


@pytest.fixture
def every_other_tick(monkeypatch):
    """``@REPORT_POLICIES.register("every_other_tick")`` for this module's tests only: a copy
    of the registry with it, so the other tests see the bundled policies alone."""
    own: Registry[ReportPolicy] = Registry("report policy")
    for name in REPORT_POLICIES.available():
        own.register(name)(REPORT_POLICIES.get(name))
    own.register("every_other_tick")(EveryOtherTick)
    monkeypatch.setitem(strategies.REGISTRIES, "report", own)


def test_a_strategy_of_an_existing_kind_is_its_own_module(every_other_tick, world):
    raw = world.raw(strategies={"report": {"name": "every_other_tick"}})
    ticks, _, _ = simulate(sc.from_dict(raw))
    reports = dict(zip(ticks["tick"], ticks["n_reports"], strict=True))
    assert all(n == 0 for t, n in reports.items() if t % 2)
    assert all(n > 0 for t, n in reports.items() if t % 2 == 0)
    assert repr(from_scenario(sc.from_dict(raw)).report) == "EveryOtherTick()"


class AuditSchedule(Component, ABC):
    """A new kind: when the server audits its own releases (public)."""

    @abstractmethod
    def due(self, tick: int) -> bool:
        """Whether to audit at ``tick``."""


AUDIT_SCHEDULES: Registry[AuditSchedule] = Registry("audit schedule")


@AUDIT_SCHEDULES.register("never")
class Never(AuditSchedule):
    def due(self, tick: int) -> bool:
        return False


@AUDIT_SCHEDULES.register("every")
class EveryTicks(AuditSchedule):
    def __init__(self, *, ticks: int = 5) -> None:
        self.ticks = check_positive_int(ticks, "ticks", owner="audit every")

    def due(self, tick: int) -> bool:
        return tick % self.ticks == 0


@pytest.fixture
def audit_kind(monkeypatch):
    monkeypatch.setitem(strategies.REGISTRIES, "audit_schedule", AUDIT_SCHEDULES)


def test_a_new_strategy_kind_is_read_from_the_scenario_once_registered(audit_kind, world):
    raw = world.raw(strategies={"audit_schedule": {"name": "every", "ticks": 3}})
    built = from_scenario(sc.from_dict(raw))
    assert built.audit_schedule.get_params() == {"ticks": 3}
    assert [t for t in range(1, 7) if built.audit_schedule.due(t)] == [3, 6]
    assert isinstance(from_scenario(world()).audit_schedule, Never)  # unset: first
    bad = world.raw(strategies={"audit_schedule": {"name": "every", "ticks": 0}})
    with pytest.raises(InputError, match="strategies.audit_schedule.*ticks=0"):
        sc.from_dict(bad)


def test_an_unregistered_strategy_kind_is_refused_naming_the_kinds(world):
    raw = world.raw(strategies={"audit_schedule": "every"})
    with pytest.raises(InputError, match="'audit_schedule', not a strategy kind; kinds: report"):
        sc.from_dict(raw)
