"""``python -m mdpsim.simulation.scenario``: regenerate the scenario reference (in a clone)."""

from mdpsim.simulation.scenario.reference import main

main()
