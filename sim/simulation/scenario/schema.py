"""The whole scenario (:class:`Scenario`): its tables, its sweep, and :func:`from_dict`, the
one validation every scenario goes through (a file, a dict, a CLI override)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    ValidationError,
    model_validator,
)

from mdpsim.errors import InputError
from mdpsim.simulation.scenario.messages import one_line
from mdpsim.simulation.scenario.queries_table import QueriesTable
from mdpsim.simulation.scenario.table_base import Table
from mdpsim.simulation.scenario.table_base import refuse as _refuse
from mdpsim.simulation.scenario.tables import (
    AttacksTable,
    DomainTable,
    GameTable,
    MechanismTable,
    MobilityTable,
    NetworkTable,
    OutputTable,
    RunTable,
    StrategiesTable,
    UsersTable,
)

#: Fields older files had for a strategy's parameter, "table.field" -> (strategy kind, the
#: strategy, its parameter): refused with the one line naming the ``[strategies]`` entry that
#: says it (docs/scenarios.md, "One way to say it").
RETIRED: dict[str, tuple[str, str, str]] = {
    "users.budget_rho_per_km2": ("budget", "cgp", "rho_per_km2"),
    "mechanism.refresh_every_ticks": ("refresh", "every", "ticks"),
    "attacks.pseudonym_change_tick": ("pseudonyms", "change_at", "tick"),
}
#: Old on/off switches of what ``attacks.run`` lists: refused with the one line saying so.
SWITCHES = {"attacks.tracking": "tracking", "attacks.upload": "upload"}


class Scenario(BaseModel):
    """A validated scenario: one attribute per table (``scenario.users.count``), every default
    filled in, plus the ``sweep`` of a batch run (``{"table.field": [values], "repetitions": n}``).

    Build it with :func:`load` or :func:`from_dict`; they also check the sweep."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    scenario: RunTable = Field(default_factory=RunTable)
    network: NetworkTable = Field(default_factory=NetworkTable)
    domain: DomainTable = Field(default_factory=DomainTable)
    users: UsersTable = Field(default_factory=UsersTable)
    mobility: MobilityTable = Field(default_factory=MobilityTable)
    mechanism: MechanismTable
    queries: QueriesTable = Field(default_factory=QueriesTable)
    attacks: AttacksTable = Field(default_factory=AttacksTable)
    output: OutputTable = Field(default_factory=OutputTable)
    strategies: StrategiesTable = Field(default_factory=StrategiesTable)
    game: GameTable = Field(default_factory=GameTable)
    sweep: dict[str, Any] = Field(
        default={},
        description='batch runs only: "table.field" = [values] (each validated like the field), '
        "and repetitions = n (>= 1)",
    )
    _path: str | None = PrivateAttr(None)

    @model_validator(mode="after")
    def _game_choices_build(self) -> Scenario:
        """The game's lists hold the ``[mechanism]`` defaults, and every (mechanism, level)
        builds; a mechanism that takes uploads plays at one level (one upload per fit)."""
        from mdpsim.mechanisms import make

        game, mech = self.game, self.mechanism
        if game.epsilon_levels and mech.epsilon_per_km not in game.epsilon_levels:
            raise _refuse(
                f"= {game.epsilon_levels!r} must hold mechanism.epsilon_per_km = "
                f"{mech.epsilon_per_km!r} (the level the report strategies use)",
                field="game.epsilon_levels",
            )
        if game.mechanisms and mech.name not in game.mechanisms:
            raise _refuse(
                f"= {game.mechanisms!r} must hold mechanism.name = {mech.name!r} (published first)",
                field="game.mechanisms",
            )
        for name in game.mechanisms or [mech.name]:
            for eps in game.epsilon_levels or [mech.epsilon_per_km]:
                try:
                    built = make(name, epsilon=eps, **mech.params_for(name))
                except (TypeError, InputError) as exc:
                    raise _refuse(
                        f"has {name!r} at eps {eps!r}, which does not build: {exc}",
                        field="game.mechanisms",
                    ) from None
                if len(game.epsilon_levels) > 1 and built.takes_uploads:
                    raise _refuse(
                        f"has {name!r}, which as configured takes uploads at every fit: it "
                        "plays at one level (drop it, keep one epsilon level or give it no "
                        "uploads)",
                        field="game.mechanisms",
                    )
        return self

    @model_validator(mode="after")
    def _people_prior_needs_people(self) -> Scenario:
        """``attacks.people_prior`` hands over the people model's structure: it needs one."""
        mob = self.mobility
        if self.attacks.people_prior and (mob.source != "synthetic" or mob.model != "epr"):
            raise _refuse(
                '= true needs the people model: set [mobility] model = "epr" (synthetic '
                "source), or drop people_prior",
                field="attacks.people_prior",
            )
        return self

    @model_validator(mode="after")
    def _mechanism_fits_the_domain(self) -> Scenario:
        """Every mechanism the run fits suits the domain's sizes (``check_domain_size``;
        panda's anchors, found by tests/sim/test_scenario_runs.py failing inside the run)."""
        from mdpsim.mechanisms import make

        mech, dom = self.mechanism, self.domain
        for name in self.game.mechanisms or [mech.name]:
            built = make(name, epsilon=mech.epsilon_per_km, **mech.params_for(name))
            try:
                built.check_domain_size(dom.n_points, dom.n_outputs or dom.n_points)
            except InputError as exc:
                where = "mechanism.params" if name == mech.name else "game.mechanisms"
                raise _refuse(
                    f"does not suit domain.n_points = {dom.n_points}: {exc}", field=where
                ) from None
        return self

    @property
    def path(self) -> str | None:
        """The file the scenario was read from, if any."""
        return self._path

    def trace_path(self) -> Path:
        """``[mobility] path`` as a path: a relative one is read from the scenario file's folder
        (from the current folder for a scenario not read from a file)."""
        path = Path(os.path.expanduser(self.mobility.path))
        if not path.is_absolute() and self.path is not None:
            path = Path(self.path).parent / path
        return path

    def network_source(self) -> str:
        """``[network] source`` as :func:`~mdpsim.geo.network.load_network` takes it: a
        relative path to a network file is read from the scenario file's folder, as
        ``[mobility] path`` (from the current folder for a scenario not read from a file);
        bundled names, named extracts and place queries as given."""
        from mdpsim.geo.network import names_a_file

        source = self.network.source
        if self.path is None or not names_a_file(source):
            return source
        path = Path(os.path.expanduser(source))
        return str(path if path.is_absolute() else Path(self.path).parent / path)

    def get(self, dotted: str) -> Any:
        """A value by dotted name: a field (``get("users.count")``) or a strategy's parameter
        (``get("strategies.budget.rho_per_km2")``, its default when the spec does not give it)."""
        path = _split(dotted)
        if path[:2] == ("queries", "params") and len(path) == 4:  # a query kind's own field
            fields = self.queries.params_of(path[2])
            if path[3] not in type(fields).model_fields:
                raise InputError(f"{dotted}: query kind {path[2]!r} has no field {path[3]!r}")
            return getattr(fields, path[3])
        if (path[0], path[1]) in NESTED_PARAMS:
            value: Any = getattr(getattr(self, path[0]), path[1])
            for depth, key in enumerate(path[2:], start=3):
                if not isinstance(value, dict) or key not in value:
                    raise InputError(f"{dotted}: {'.'.join(path[:depth])} is not given")
                value = value[key]
            return value
        if len(path) == 3:
            spec = self.strategy_spec(path[1])
            if isinstance(spec, dict) and path[2] in spec:
                return spec[path[2]]
            params = _strategy_params(path[1], spec)
            if path[2] not in params:
                name = spec["name"] if isinstance(spec, dict) else spec
                raise InputError(f"{dotted}: strategy {name!r} has no parameter {path[2]!r}")
            return params[path[2]]
        return getattr(getattr(self, path[0]), path[1])

    def strategy_spec(self, kind: str) -> str | dict[str, Any]:
        """The spec the run builds strategy ``kind`` from (an unset kind: its first registered
        strategy, ``mdpsim.agents.strategies.specs_of``)."""
        from mdpsim.agents.strategies import specs_of

        return specs_of(self)[kind]

    def replace(self, **dotted: Any) -> Scenario:
        """A new, re-validated scenario with some fields or strategy parameters changed
        (``{"users.count": 10}``, ``{"strategies.budget.rho_per_km2": 600.0}``;
        ``users__count=10`` also works)."""
        raw = self.model_dump(exclude={"sweep"})
        for key, value in dotted.items():
            path = _split(key.replace("__", "."))
            if (path[0], path[1]) in NESTED_PARAMS:
                _set_nested(raw[path[0]], path, value, key)
            elif len(path) == 3:
                spec = raw["strategies"].get(path[1]) or self.strategy_spec(path[1])
                spec = dict(spec) if isinstance(spec, dict) else {"name": spec}
                raw["strategies"][path[1]] = {**spec, path[2]: value}
            else:
                raw[path[0]][path[1]] = value
        changed = from_dict(raw, path=self.path).model_copy(update={"sweep": self.sweep})
        changed._path = self.path
        return changed

    def to_dict(self) -> dict[str, Any]:
        """Plain nested dict (for summary.json and batch manifests); no ``sweep`` if empty."""
        return self.model_dump(exclude={"sweep"} if not self.sweep else set())


TABLES: dict[str, type[Table]] = {
    name: info.annotation
    for name, info in Scenario.model_fields.items()
    if isinstance(info.annotation, type) and issubclass(info.annotation, Table)
}


def from_dict(raw: dict[str, Any], *, path: str | None = None) -> Scenario:
    """Validate a nested dict (as parsed from TOML), fill in defaults and check the sweep."""
    if not isinstance(raw, dict):
        raise InputError(f"a scenario must be a table of tables, not {type(raw).__name__}")
    unknown = [t for t in raw if t not in Scenario.model_fields]
    if unknown:
        raise InputError(
            f"unknown table [{unknown[0]}]; allowed tables: "
            + ", ".join(f"[{t}]" for t in Scenario.model_fields)
        )
    for dotted in [*RETIRED, *SWITCHES]:
        table, _, name = dotted.partition(".")
        given = raw.get(table)
        if isinstance(given, dict) and name in given:
            raise InputError(retired_line(dotted, given[name]))
    try:
        scenario = Scenario.model_validate({"mechanism": {}, **raw})
    except ValidationError as exc:
        raise InputError(one_line(exc.errors()[0], TABLES)) from None
    scenario._path = path
    where = f" (read from {Path(path).parent}/)" if path is not None else ""
    if scenario.mobility.source == "traces" and not scenario.trace_path().is_file():
        raise InputError(f"field mobility.path = {scenario.mobility.path!r}: no such file{where}")
    network = scenario.network_source()
    if network != scenario.network.source and not Path(network).is_file():
        raise InputError(
            f"field network.source = {scenario.network.source!r}: no such file{where}; a "
            "relative path is read from the scenario file's folder"
        )
    _check_sweep(scenario)
    return scenario


def _check_sweep(scenario: Scenario) -> None:
    """Every sweep key names a field and every value passes that field's validation."""
    for key, values in scenario.sweep.items():
        if key == "repetitions":
            if isinstance(values, bool) or not isinstance(values, int) or values < 1:
                raise InputError("sweep.repetitions must be an integer >= 1")
            continue
        if "." not in key:
            raise InputError(
                f'sweep key {key!r} must name a field as "table.field", '
                'e.g. "mechanism.epsilon_per_km" = [4, 7, 10]'
            )
        _split(key, what=f"sweep key {key!r}")
        if not isinstance(values, list) or not values:
            raise InputError(f"sweep.{key} must be a non-empty list of values")
        for v in values:  # each value, with the other fields as given
            try:
                scenario.replace(**{key: v})
            except InputError as exc:
                raise InputError(f"sweep.{key}: {exc}") from None


def _split(dotted: str, *, what: str | None = None) -> tuple[str, ...]:
    """``(table, field)`` of a field, ``("strategies", kind, parameter)`` of a strategy's
    parameter, or ``("mechanism", "params", name, ...)`` of a (nested) mechanism parameter;
    one line naming the name otherwise (a retired field: what to write)."""
    if dotted in RETIRED or dotted in SWITCHES:
        raise InputError(retired_line(dotted))
    table, _, name = dotted.partition(".")
    parts = tuple(name.split("."))
    nested = (table, parts[0]) in NESTED_PARAMS and len(parts) > 1
    if nested and all(p.isidentifier() for p in parts[1:]):  # a (nested) parameter
        return (table, *parts)
    if table == "strategies" and "." in name:
        from mdpsim.agents.strategies import REGISTRIES

        kind, _, param = name.partition(".")
        if kind in REGISTRIES and param.isidentifier():
            return table, kind, param
    if table not in TABLES or name not in TABLES[table].model_fields:
        choices = (
            f"fields of [{table}]: {', '.join(TABLES[table].model_fields)}"
            if table in TABLES
            else f"tables: {', '.join(TABLES)}"
        )  # what to write instead, as for a wrong field in a scenario file
        raise InputError(f"{what or repr(dotted)} is not a scenario field; {choices}")
    return table, name


#: The tables of parameters a dotted name reaches into (``mechanism.params.upload.delta``,
#: ``mechanism.params_by_name.dista_lp.upload.delta``, ``queries.params.range.radius_m``).
NESTED_PARAMS = (("mechanism", "params"), ("mechanism", "params_by_name"), ("queries", "params"))


def _set_nested(table: dict[str, Any], path: tuple[str, ...], value: Any, key: str) -> None:
    """Set ``table[path[1]]...[path[-1]] = value`` in the table ``path[0]``, making the tables
    on the way; a value on the way that is not a table is one line naming it."""
    for depth, name in enumerate(path[1:-1], start=2):
        inner = table.get(name)
        if inner is None:
            inner = table[name] = {}
        elif isinstance(inner, dict):
            inner = table[name] = dict(inner)
        else:
            where = ".".join(path[:depth])
            raise InputError(
                f"{key}: {where} = {inner!r} is not a table; write it as a table to set a "
                "parameter inside it"
            )
        table = inner
    table[path[-1]] = value


def retired_line(dotted: str, value: Any = None) -> str:
    """The one line refusing a retired field (:data:`RETIRED`, :data:`SWITCHES`), with the TOML
    to write."""
    if dotted in SWITCHES:
        return (
            f"{dotted} is gone: attacks.run lists the attacks that run; leave "
            f"{SWITCHES[dotted]!r} (and labels of attack = {SWITCHES[dotted]!r}) out of it, "
            'e.g. run = ["bayes"]'
        )
    kind, name, param = RETIRED[dotted]
    given = "..." if value is None else _toml(value)
    return (
        f'{dotted} is gone: write [strategies] {kind} = {{name = "{name}", {param} = '
        f'{given}}} (to sweep it: "strategies.{kind}.{param}")'
    )


def _strategy_params(kind: str, spec: str | dict[str, Any]) -> dict[str, Any]:
    """Every parameter of the strategy ``spec`` builds, defaults included."""
    from mdpsim.agents.strategies import REGISTRIES

    return REGISTRIES[kind].from_spec(dict(spec) if isinstance(spec, dict) else spec).get_params()


def _toml(value: Any) -> str:
    """A scalar as TOML writes it."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    return repr(value)


def json_schema() -> dict[str, Any]:
    """The JSON Schema of a scenario file (``docs/scenario.schema.json``)."""
    schema = Scenario.model_json_schema()
    schema["title"] = "mdpsim scenario"
    return schema
