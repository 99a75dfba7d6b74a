"""CLI flags that override scenario fields, validated as those fields (one rule, one message)."""

from __future__ import annotations

from typing import Any

from mdpsim.errors import InputError
from mdpsim.simulation.scenario import Scenario

#: flag -> the scenario field it overrides
OVERRIDES = {
    "--seed": "scenario.seed",
    "--ticks": "scenario.ticks",
}


def apply(scenario: Scenario, flags: dict[str, Any]) -> Scenario:
    """``scenario`` with the given flags' values, validated as the fields they override: the
    same rule and the same one line as in a scenario file, after the flag's name."""
    for flag, value in flags.items():
        if value is None:
            continue
        try:
            scenario = scenario.replace(**{OVERRIDES[flag]: value})
        except InputError as exc:
            raise InputError(f"{flag} {value}: {exc}") from None
    return scenario
