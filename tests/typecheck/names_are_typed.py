"""Checked by mypy in `make lint`, never run: every name below must have its real type.

``assert_type`` fails on a name mypy sees as ``Any`` (an import it cannot follow), and the
deliberately wrong calls' ``type: ignore`` comments are unused, so an error, unless mypy
checks those calls against the real signatures (``warn_unused_ignores``).
"""

from typing import assert_type

from mdpsim.agents import CuriousServer, UserAgent
from mdpsim.agents.policies.greedy import GreedyReporter
from mdpsim.agents.strategies import REGISTRIES
from mdpsim.dashboard.model_view import levels_from_text, strategy_choices
from mdpsim.simulation.scenario import Scenario

assert_type(GreedyReporter, type[GreedyReporter])
assert_type(CuriousServer, type[CuriousServer])
assert_type(UserAgent, type[UserAgent])
assert_type(strategy_choices("report"), list[str])
assert_type(levels_from_text("2, 4"), list[float])
assert_type(Scenario, type[Scenario])
assert_type(REGISTRIES["report"].available(), list[str])

strategy_choices(3)  # type: ignore[arg-type]
levels_from_text()  # type: ignore[call-arg]
