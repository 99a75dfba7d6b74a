"""TOML scenario files: typed tables, defaults and validation at the edge.

A scenario is a handful of tables (``[scenario]``, ``[network]``, ``[domain]``, ``[users]``,
``[mobility]``, ``[mechanism]``, ``[queries]``, ``[attacks]``, ``[output]``, and ``[sweep]``
for batch runs).
Each table is a pydantic model declaring its fields once, with type, default, range and a
one-line help; the JSON Schema (:func:`json_schema`) and the reference in ``docs/scenarios.md``
(:func:`reference_markdown`) are generated from them (``python -m mdpsim.simulation.scenario``
rewrites both).
Errors are one line that names the field (``users.count``) and says what would work.
"""

from mdpsim.simulation.scenario.reference import (
    DOCS_PATH,
    SCHEMA_PATH,
    docs_text,
    reference_markdown,
    schema_text,
)
from mdpsim.simulation.scenario.schema import (
    RETIRED,
    TABLES,
    Scenario,
    from_dict,
    json_schema,
)
from mdpsim.simulation.scenario.sources import PACKAGED, ScenarioSource, load, packaged, resolve
from mdpsim.simulation.scenario.tables import Table

__all__ = [
    "DOCS_PATH",
    "PACKAGED",
    "SCHEMA_PATH",
    "RETIRED",
    "TABLES",
    "Scenario",
    "ScenarioSource",
    "Table",
    "docs_text",
    "from_dict",
    "json_schema",
    "load",
    "packaged",
    "reference_markdown",
    "resolve",
    "schema_text",
]
