"""The tick table's row: a typed record whose columns are declared, not parsed back.

Each phase hands the data collector (:meth:`~mdpsim.simulation.model.PrivacyModel.advance`,
step 6) a typed part: the run's facts, the mechanism's (:class:`MechanismFacts`, from the
server), one :class:`QueryOutcome` per query kind asked (from the query planner) and each
attack's metric means (:class:`~mdpsim.attacks.suite.TickResult`). :class:`TickRow` joins
them, and names every column in one place (:func:`query_column`, :func:`attack_column`);
the run's :class:`TickColumns` records what each column is (its group, its query kind or
attack label, its metric) and travels with the table (``DataFrame.attrs``, kept in
``ticks.parquet``), so every reader finds the attack and query columns by what they were
declared to be (mdpsim.simulation.columns) instead of by how their names end.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, fields
from operator import attrgetter
from typing import Literal

import pandas as pd

from mdpsim.agents.server import MechanismFacts
from mdpsim.attacks.base import attack_column
from mdpsim.queries.outcome import QueryOutcome, query_column

Group = Literal["run", "mechanism", "query", "attack"]
#: The key of a table's declared columns in ``DataFrame.attrs`` (and so in its parquet file).
ATTRS_KEY = "mdpsim_tick_columns"
#: The file beside a table saved without its attrs (a report's ``tasks.csv``) declaring its
#: tick columns (:meth:`TickColumns.to_json`).
DECLARATIONS_FILE = "tick_columns.json"
#: The column of all query kinds' saving together.
QUERY_SAVING_COLUMN = "query_privacy_saving"


@dataclass(frozen=True)
class Column:
    """One declared column: its name, group, owner (query kind or attack label) and metric."""

    name: str
    group: Group
    owner: str = ""
    metric: str = ""


@dataclass(frozen=True)
class RunFacts:
    """What the data collector reads of the users' filters and reports at a tick."""

    tick: int
    n_users: int
    n_reports: int
    n_halted: int
    remaining_budget_mean: float
    remaining_budget_min: float
    delta_spent_max: float
    utility_loss_km: float
    mechanism_regenerated: bool


@dataclass(frozen=True)
class TickRow:
    """One tick's row: the run's and mechanism's facts, queries by kind, attacks by label."""

    run: RunFacts
    mechanism: MechanismFacts
    queries: Mapping[str, QueryOutcome]
    attacks: Mapping[str, Mapping[str, float]]

    def flat(self) -> dict[str, object]:
        """The row as ``{column: value}``, in the table's column order (:meth:`columns`)."""
        run, mechanism = self.run, self.mechanism
        out: dict[str, object] = {name: getattr(run, name) for name in _RUN_FIELDS}
        out.update((name, getattr(mechanism, name)) for name in _MECHANISM_FIELDS)
        asked = spent = 0.0
        for kind, outcome in self.queries.items():
            out[query_column(kind, "error")] = outcome.error
            saving = outcome.saving
            if saving is not None:
                out[query_column(kind, "privacy_saving")] = saving
                asked, spent = asked + outcome.asked, spent + outcome.spent
        if asked > 0:
            out[QUERY_SAVING_COLUMN] = 1.0 - spent / asked
        for label, means in self.attacks.items():
            for metric, value in means.items():
                out[attack_column(label, metric)] = value
        return out

    def columns(self) -> list[Column]:
        """What each column of :meth:`flat` is, in the same order."""
        out = [Column(name, "run") for name in _RUN_FIELDS]
        out += [Column(name, "mechanism") for name in _MECHANISM_FIELDS]
        for kind, outcome in self.queries.items():
            out.append(Column(query_column(kind, "error"), "query", kind, "error"))
            if outcome.saving is not None:
                name = query_column(kind, "privacy_saving")
                out.append(Column(name, "query", kind, "privacy_saving"))
        if any(outcome.saving is not None for outcome in self.queries.values()):
            out.append(Column(QUERY_SAVING_COLUMN, "query", "", "privacy_saving"))
        for label, means in self.attacks.items():
            out += [Column(attack_column(label, m), "attack", label, m) for m in means]
        return out

    def laid_out(self) -> tuple[tuple, list[object]]:
        """In one pass: what decides the row's columns (the kinds asked, with or without a
        saving; whether the total saving is; the attacks and their metrics) and the values of
        :meth:`flat`, in its order."""
        values: list[object] = [*_run_values(self.run), *_mechanism_values(self.mechanism)]
        queries = []
        asked = spent = 0.0
        for kind, outcome in self.queries.items():
            values.append(outcome.error)
            saving = outcome.saving
            queries.append((kind, saving is not None))
            if saving is not None:
                values.append(saving)
                asked, spent = asked + outcome.asked, spent + outcome.spent
        if asked > 0:
            values.append(1.0 - spent / asked)
        attacks = []
        for label, means in self.attacks.items():
            attacks.append((label, tuple(means)))
            values += means.values()
        return (tuple(queries), tuple(attacks), asked > 0), values


_RUN_FIELDS = tuple(f.name for f in fields(RunFacts))
_MECHANISM_FIELDS = tuple(f.name for f in fields(MechanismFacts))
_run_values = attrgetter(*_RUN_FIELDS)
_mechanism_values = attrgetter(*_MECHANISM_FIELDS)


class TickColumns:
    """The declared columns of a tick table, in the order first declared.

    A run's data collector declares each row's columns (:meth:`record`); the table carries
    them (:meth:`attach`) and readers get them back (:meth:`of`).
    """

    def __init__(self, columns: Iterable[Column] = ()) -> None:
        self._by_name: dict[str, Column] = {}
        self._names: dict[tuple, tuple[str, ...]] = {}  # per row layout declared, its names
        self.declare(columns)

    def declare(self, columns: Iterable[Column]) -> None:
        """Add columns; a name declared before with another meaning is a bug, refused."""
        for column in columns:
            known = self._by_name.setdefault(column.name, column)
            if known != column:
                raise ValueError(f"tick column {column.name!r} declared as {known} and {column}")

    def record(self, row: TickRow) -> dict[str, object]:
        """Declare ``row``'s columns (once per row layout); its flat ``{column: value}``
        (:meth:`TickRow.flat`), its values put under the layout's names."""
        layout, values = row.laid_out()
        names = self._names.get(layout)
        if names is None:
            columns = row.columns()
            self.declare(columns)
            names = self._names[layout] = tuple(c.name for c in columns)
        return dict(zip(names, values, strict=True))

    def __iter__(self):
        return iter(self._by_name.values())

    def __contains__(self, name: object) -> bool:
        return name in self._by_name

    def __getitem__(self, name: str) -> Column:
        return self._by_name[name]

    @property
    def names(self) -> list[str]:
        """Every declared column name."""
        return list(self._by_name)

    def of_group(self, group: Group) -> list[Column]:
        """The declared columns of ``group``, in order."""
        return [c for c in self._by_name.values() if c.group == group]

    def merged(self, other: TickColumns) -> TickColumns:
        """These columns, then those of ``other`` not declared here (a batch's tasks)."""
        out = TickColumns(self)
        out.declare(c for c in other if c.name not in out)
        return out

    # ------------------------------------------------------------------ with the table
    def to_json(self) -> str:
        """The declarations as JSON (a list of column records)."""
        return json.dumps([asdict(c) for c in self])

    @classmethod
    def from_json(cls, text: str) -> TickColumns:
        """Declarations written by :meth:`to_json`."""
        return cls(Column(**record) for record in json.loads(text))

    def attach(self, table: pd.DataFrame) -> pd.DataFrame:
        """``table`` carrying these declarations (``attrs``; parquet files keep them)."""
        table.attrs[ATTRS_KEY] = self.to_json()
        return table

    @classmethod
    def of(cls, table: pd.DataFrame) -> TickColumns:
        """The declarations a tick table carries; a table from an mdpsim older than them
        (no declarations) is read as :func:`legacy` names."""
        text = table.attrs.get(ATTRS_KEY)
        return cls.from_json(text) if text is not None else legacy(table.columns)


def stack(tables: list[pd.DataFrame]) -> pd.DataFrame:
    """Tables (a batch's tasks) one under the other; the declared columns of those that
    carry them, merged (tables without declarations stack as they are)."""
    if not tables:
        return pd.DataFrame()
    stacked = pd.concat(tables, ignore_index=True)
    stacked.attrs.clear()  # concat keeps attrs only when every table's are equal
    carrying = [TickColumns.of(t) for t in tables if ATTRS_KEY in t.attrs]
    if not carrying:
        return stacked
    declared = TickColumns()
    for one in carrying:
        declared = declared.merged(one)
    return declared.attach(stacked)


# ---------------------------------------------------------------------- tables of old runs
#: The attack metrics a column name of an undeclared (older) table may end with.
_LEGACY_METRICS = (
    "guess_error_km",
    "leakage_per_km",
    "bound_violation",
    "entropy_bits",
    "error_km",
    "hit",
)


def legacy(names: Iterable[str]) -> TickColumns:
    """Declarations of a table written before tick columns were declared (before this round):
    run and mechanism columns by name, the registered query kinds' columns, and an attack
    column by a metric its name ends with (the longest; ``{label}_hit`` present settles a
    label that itself ends like a metric)."""
    from mdpsim.queries.kinds import QUERY_KINDS

    names = [str(n) for n in names]
    present = set(names)
    run = {f.name for f in fields(RunFacts)}
    mechanism = {f.name for f in fields(MechanismFacts)}
    queries = {query_column(k, m): (k, m) for k in QUERY_KINDS for m in ("error", "privacy_saving")}
    queries[QUERY_SAVING_COLUMN] = ("", "privacy_saving")
    out = TickColumns()
    for name in names:
        if name in run or name in mechanism:
            out.declare([Column(name, "run" if name in run else "mechanism")])
        elif name in queries:
            out.declare([Column(name, "query", *queries[name])])
        elif readings := [
            (name[: -len(m) - 1], m)
            for m in _LEGACY_METRICS
            if name.endswith(f"_{m}") and len(name) > len(m) + 1
        ]:
            scored = [r for r in readings if attack_column(r[0], "hit") in present]
            label, metric = (scored or readings)[0]
            out.declare([Column(name, "attack", label, metric)])
    return out
