"""The scenario's tables: one pydantic model per TOML table, each field declared once with
type, default, range and a one-line help (``[queries]``: ``queries_table.py``; what they
share: ``table_base.py``)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import ConfigDict, Field, field_validator, model_validator

from mdpsim.errors import InputError
from mdpsim.geo.network import NetworkType
from mdpsim.simulation.people import HOME_BY_HOUR
from mdpsim.simulation.scenario.table_base import Positive, Table
from mdpsim.simulation.scenario.table_base import refuse as _refuse
from mdpsim.simulation.traces import TRACE_COLUMNS

MAX_TICKS = 1_000_000  # ~12 days of 1 s ticks; the per-tick log of a run is kept in memory
MAX_SEED = 2**63 - 1  # seeds are stored as int64 (batch task tables)


class RunTable(Table):
    """``[scenario]``: the run as a whole."""

    name: str = Field(default="unnamed", description="a short name used in outputs")
    seed: int = Field(
        default=0, ge=0, le=MAX_SEED, description="the one seed every random choice flows from"
    )
    ticks: int = Field(default=20, ge=1, le=MAX_TICKS, description="number of ticks to simulate")
    tick_seconds: Positive = Field(default=60.0, description="simulated seconds per tick")
    start_hour: float = Field(
        default=0.0,
        ge=0.0,
        lt=24.0,
        description="local clock time (hours after midnight) at tick 0; the clock of the "
        "people model's diary and the home / work attacks (mdpsim._core.clock)",
    )


class NetworkTable(Table):
    """``[network]``: the road network the users move on."""

    source: str = Field(
        default="helsinki",
        description="helsinki, helsinki-test, a .osm/.osm.bz2/.osm.pbf/.graphml path "
        "(relative: from the scenario file's folder)",
    )
    network_type: NetworkType = Field(
        default="walk", description="footpaths (walk) or roads open to cars (drive)"
    )


class DomainTable(Table):
    """``[domain]``: the secrets X, the outputs Y and the metric."""

    n_points: int = Field(default=500, ge=2, description="secrets |X| spread along the roads")
    n_outputs: int = Field(default=0, ge=0, description="outputs |Y| (0: Y = X; else >= 2)")
    metric: Literal["road"] = Field(
        default="road", description="distance between locations: along the roads"
    )

    @field_validator("n_outputs")
    @classmethod
    def _zero_or_at_least_two(cls, v: int) -> int:
        if v == 1:
            raise _refuse("= 1 must be 0 (Y = X) or >= 2")
        return v

    @field_validator("metric", mode="before")
    @classmethod
    def _users_walk_on_roads(cls, v: Any) -> Any:
        if v != "road":  # found by tests/sim/test_scenario_runs.py: it failed inside the run
            raise _refuse(
                f"= {v!r}: the simulated users walk on the roads, so a scenario needs "
                "metric = 'road' (lp metrics are for Domain.from_points / Domain.grid)"
            )
        return v


class UsersTable(Table):
    """``[users]``: the mobile users and their budgets."""

    count: int = Field(
        default=50, ge=1, le=10_000_000, description="number of mobile users, at most 10 million"
    )
    speed_mps: Positive = Field(
        default=1.4, description="walking or driving speed, metres per second"
    )
    dwell_ticks: list[int] = Field(
        default=[1, 5], description="[min, max] ticks spent at each destination"
    )
    n_places: int = Field(default=40, ge=2, description="destinations users travel between")
    personal_places: int = Field(
        default=0,
        ge=0,
        description="each user's own destinations among n_places, home first and most visited "
        "(0: every user picks among all places)",
    )

    @field_validator("dwell_ticks")
    @classmethod
    def _min_max(cls, v: list[int]) -> list[int]:
        if len(v) != 2 or v[0] < 0 or v[0] > v[1]:
            raise _refuse(f"= {v!r} must be [min, max] ticks with 0 <= min <= max")
        return v


#: ``[mobility]`` fields of the people model (``model = "epr"``) alone.
EPR_FIELDS = (
    "rho", "gamma", "beta", "tau_h", "min_stay_min", "work_share", "work_hours", "work_prob",
    "gravity_min_km", "home_by_hour", "diary_churn", "relevance_path",
)  # fmt: skip


class MobilityTable(Table):
    """``[mobility]``: where the users' walks come from (``docs/traces.md``).

    ``synthetic`` walks trips between places (``[users]``); ``traces`` replays the fixes of
    ``path``, snapped to the secrets and resampled to ticks, and then ``users.count`` and
    ``scenario.ticks`` are the data's (the run's summary.json records them)."""

    source: Literal["synthetic", "traces"] = Field(
        default="synthetic", description="synthetic (trips between places) or traces (a file)"
    )
    path: str = Field(
        default="",
        description="traces only: a .csv, .parquet, .geoparquet, .geojson, .json (GeoJSON) or "
        ".gpx (track points) file with columns user, time and lat/lon or x/y (relative: to the "
        "scenario file's folder; docs/traces.md)",
    )
    crs: str = Field(
        default="",
        description="traces only: the CRS of x/y columns (e.g. EPSG:3067); lat/lon are WGS 84",
    )
    resample: Literal["road", "nearest"] = Field(
        default="road",
        description="traces only: between two fixes a user walks the shortest road path "
        "(road) or waits at the fix nearest in time (nearest)",
    )
    keep_trace: str = Field(
        default="true",
        description="traces only: of a file with a trace column (an mdpsim export), the rows "
        "of this trace are read",
    )
    strict: bool = Field(
        default=False,
        description="traces only: refuse a file with any bad row (default: drop and report "
        "them); mdpsim --strict sets it",
    )
    time_unit: Literal["s", "ms"] = Field(
        default="s",
        description="traces only: what a numeric time counts, seconds (s) or milliseconds "
        "(ms, e.g. epoch milliseconds); ISO 8601 times need none",
    )
    columns: dict[str, str] = Field(
        default={},
        description="traces only: the file's name of each column mdpsim reads, e.g. "
        '{user = "User", lat = "latitude"} (unnamed columns keep their names)',
    )

    model: Literal["waypoints", "epr"] = Field(
        default="epr",
        description="synthetic only: epr (people with a home, a work place, a daily diary and "
        "EPR stays; docs/mobility.md) or waypoints (the earlier trips between [users] places "
        "shared by everyone, which the paper scenarios keep)",
    )
    rho: float = Field(
        default=0.6, gt=0, le=1, description="epr: P(new place) = rho S^-gamma (Song et al. 2010)"
    )
    gamma: float = Field(
        default=0.21, ge=0, le=2, description="epr: exponent of P(new) (Song et al. 2010)"
    )
    beta: float = Field(
        default=0.8,
        gt=0,
        le=3,
        description="epr: stays P(dt) ~ dt^(-1-beta) exp(-dt/tau) (Song et al. 2010)",
    )
    tau_h: float = Field(
        default=17.0, gt=0, le=1000, description="epr: stays' cut-off tau, hours (Song et al. 2010)"
    )
    min_stay_min: float = Field(
        default=20.0,
        gt=0,
        le=1440,
        description="epr: shortest stay, minutes (Song et al. 2010: about 20 min)",
    )
    work_share: float = Field(
        default=0.5,
        ge=0,
        le=1,
        description="epr: share of users with a work place (about the employed share of a "
        "city's population, Statistics Finland 2023)",
    )
    work_hours: list[int] = Field(
        default=[9, 17], description="epr: [start, end) hours of the working day (stylised)"
    )
    work_prob: float = Field(
        default=0.8,
        ge=0,
        le=1,
        description="epr: P(a worker out in working hours goes to work) (stylised; "
        "docs/mobility.md)",
    )
    gravity_min_km: float = Field(
        default=0.1,
        gt=0,
        le=10,
        description="epr: distances below this count as this in the gravity 1/d^2 "
        "(density-EPR's tile size; docs/mobility.md)",
    )
    home_by_hour: list[float] = Field(
        default=list(HOME_BY_HOUR),
        description="epr: 24 shares of users at home by hour of day, the diary's routine "
        "(stylised from time-use surveys, Eurostat HETUS; docs/mobility.md)",
    )
    diary_churn: float = Field(
        default=0.0,
        ge=0,
        le=1,
        description="epr: besides the routine's flows, this share of the growing side also "
        "switches each hour (0: a day is leave, stay out, come back; stylised, docs/mobility.md)",
    )
    relevance_path: str = Field(
        default="",
        description="epr: a CSV of lat, lon, weight standing for population and activity "
        "(default: the OSM extract's buildings and amenities, else road-node density)",
    )

    @model_validator(mode="after")
    def _path_for_traces(self) -> MobilityTable:
        if self.source == "traces" and not self.path:
            raise _refuse("needs a file: source = 'traces' reads it", field="path")
        if self.source == "synthetic" and self.path:
            raise _refuse("is for source = 'traces'; set source or drop path", field="path")
        if self.source == "synthetic" and self.columns:
            raise _refuse("is for source = 'traces'; set source or drop columns", field="columns")
        if self.source == "synthetic" and self.time_unit != "s":
            raise _refuse("is for source = 'traces'; set source or drop it", field="time_unit")
        people = self.source == "synthetic" and self.model == "epr"
        for name in () if people else EPR_FIELDS:
            if getattr(self, name) != MobilityTable.model_fields[name].default:
                fix = "set model or drop it" if self.source == "synthetic" else "drop it"
                raise _refuse(f"is for the people model (synthetic, epr); {fix}", field=name)
        hours = self.work_hours
        if len(hours) != 2 or not 0 <= hours[0] < hours[1] <= 24:
            raise _refuse(
                f"= {hours!r} must be [start, end) hours with 0 <= start < end <= 24",
                field="work_hours",
            )
        shares = self.home_by_hour
        if len(shares) != 24 or not all(0 < v < 1 for v in shares):
            raise _refuse("must be 24 shares, each strictly between 0 and 1", field="home_by_hour")
        unknown = sorted(set(self.columns) - set(TRACE_COLUMNS))
        if unknown:
            raise _refuse(
                f"names {unknown[0]!r}, not a column mdpsim reads; one of "
                + ", ".join(TRACE_COLUMNS),
                field="columns",
            )
        named = [v for v in self.columns.values() if v]
        if len(named) != len(self.columns) or len(set(named)) != len(named):
            raise _refuse("must give each column a distinct, non-empty file name", field="columns")
        return self


class MechanismTable(Table):
    """``[mechanism]``: which mechanism the users report through, and its parameters."""

    name: str = Field(
        description="a name from mdpsim.mechanisms.available(), or package.module:Name"
    )
    epsilon_per_km: Positive = Field(description="total eps of the mechanism, per km")
    params: dict[str, Any] = Field(
        default={}, description="extra parameters passed to the mechanism's constructor"
    )
    params_by_name: dict[str, dict[str, Any]] = Field(
        default={},
        description="per-mechanism extra parameters, merged over params when mechanism.name "
        "matches (for sweeps over mechanism.name), e.g. {dista_lp = {delta = 0.01}}",
    )

    @field_validator("name")
    @classmethod
    def _registered(cls, v: str) -> str:
        from mdpsim.mechanisms import mechanism_class

        try:
            mechanism_class(v)  # a registered name, a plug-in's, or package.module:Name
        except InputError as exc:
            raise _refuse(f": {exc}") from None
        return v

    @field_validator("params_by_name", mode="before")
    @classmethod
    def _keys_are_mechanisms(cls, v: Any) -> Any:
        from mdpsim.mechanisms import mechanism_class

        for key in v if isinstance(v, dict) else []:
            try:
                mechanism_class(key)
            except InputError as exc:
                raise _refuse(f"has key {key!r}, not a mechanism: {exc}") from None
        return v

    @model_validator(mode="after")
    def _params_suit_the_mechanism(self) -> MechanismTable:
        """The mechanism's own constructor validates the parameters."""
        from mdpsim.mechanisms import make

        try:
            make(self.name, epsilon=self.epsilon_per_km, **self.constructor_params())
        except TypeError as exc:
            raise _refuse(f"does not suit mechanism {self.name!r}: {exc}", field="params") from None
        except InputError as exc:
            raise _refuse(f": {exc}", field="params") from None
        return self

    def constructor_params(self) -> dict[str, Any]:
        """A fresh dict of constructor parameters: ``params`` with the entry of
        ``params_by_name`` for ``name`` merged over it."""
        return self.params_for(self.name)

    def params_for(self, name: str) -> dict[str, Any]:
        """The constructor parameters of mechanism ``name`` (``[game] mechanisms``):
        ``params`` with ``params_by_name[name]`` merged over it."""
        return {**self.params, **self.params_by_name.get(name, {})}


class AttacksTable(Table):
    """``[attacks]``: what the server tries to learn (``docs/attacks.md``).

    ``run`` lists attack labels; a label is a registered attack (``mdpsim.attacks.available()``)
    or any name given ``attack = ...`` in ``params.<label>``, e.g.
    ``params.viterbi = {attack = "tracking", method = "viterbi"}``. ``run`` is the one way to
    say which attacks run (the old ``tracking`` / ``upload`` switches are refused)."""

    run: list[str] = Field(
        default=["bayes", "tracking", "upload"], description="labels of the attacks to run"
    )
    params: dict[str, dict[str, Any]] = Field(
        default={},
        description="per label: attack = a registered attack (default: the label) and its "
        "parameters",
    )
    grant_true_mobility: bool = Field(
        default=False,
        description="hand the users' true transitions to the adversary (tracking mobility = "
        '"true"); never otherwise',
    )
    report_probability: float = Field(
        default=1.0, gt=0, le=1, description="chance that a willing user reports at a tick"
    )
    people_prior: bool = Field(
        default=False,
        description="hand the tracking attack the people model's public structure as its "
        'prior (relevance map and the diary\'s share at home; [mobility] model = "epr" only; '
        "docs/attacks.md)",
    )

    @model_validator(mode="after")
    def _attacks_build(self) -> AttacksTable:
        """Every label names a registered attack whose constructor accepts its parameters."""
        from mdpsim.attacks import make

        if len(set(self.run)) != len(self.run):
            raise _refuse("lists a label twice; give each attack its own label", field="run")
        stray = [label for label in self.params if label not in self.run]
        if stray:
            raise _refuse(f"has {stray[0]!r}, which attacks.run does not list", field="params")
        for spec in self.specs():
            params = {k: v for k, v in spec.items() if k != "label"}
            try:
                make(params.pop("name"), **params)
            except InputError as exc:
                where = f"params.{spec['label']}" if spec["label"] in self.params else "run"
                raise _refuse(f": {exc}", field=where) from None
            if spec.get("mobility") == "true" and not self.grant_true_mobility:
                raise _refuse(
                    f"{spec['label']!r} asks for mobility = 'true'; set "
                    "attacks.grant_true_mobility = true to hand it the users' transitions",
                    field=f"params.{spec['label']}",
                )
        return self

    def specs(self) -> list[dict[str, Any]]:
        """``[{"name": attack, "label": label, **params}]``, one per label of ``run``, for
        :class:`mdpsim.attacks.AttackSuite`."""
        out = []
        for label in self.run:
            params = dict(self.params.get(label, {}))
            name = params.pop("attack", label)
            out.append({"name": name, "label": label, **params})
        return out


StrategySpec = str | dict[str, Any]


class StrategiesTable(Table):
    """``[strategies]``: the players' behaviour, each a name or ``{name = ..., parameters}``
    (registries in ``mdpsim.agents.strategies``; ``docs/env.md``). A kind registered there without a
    field here is accepted under its own name (unset: its first registered strategy)."""

    model_config = ConfigDict(extra="allow", strict=True, frozen=True)

    report: StrategySpec = Field(
        default="always", description="report policy: always, budget_aware, threshold"
    )
    budget: StrategySpec | None = Field(
        default=None,
        description="budget policy: cgp, pure_gp, renewing (unset: cgp, each user's total "
        "budget rho_per_km2 = 200 in CGP rho (1/km^2); an eps-mDP report costs eps^2/2)",
    )
    query_planner: StrategySpec = Field(
        default="per_query", description="query planner: per_query, budgeter (Algorithm 3)"
    )
    refresh: StrategySpec | None = Field(
        default=None,
        description="mechanism refresh schedule (public): every, on_release (unset: every, "
        "ticks = 0: no regeneration after tick 0)",
    )
    pseudonyms: StrategySpec | None = Field(
        default=None,
        description="pseudonym strategy: fixed, change_at (unset: fixed; change_at's tick: "
        "every user gets a new pseudonym then, and linkage splits the run there)",
    )

    @model_validator(mode="after")
    def _buildable(self) -> StrategiesTable:
        """Each spec names a registered strategy with parameters it accepts."""
        from mdpsim.agents.strategies import REGISTRIES

        stray = [k for k in self.model_extra or {} if k not in REGISTRIES]
        if stray:
            raise _refuse(f"has {stray[0]!r}, not a strategy kind; kinds: {', '.join(REGISTRIES)}")
        for kind, registry in REGISTRIES.items():
            spec = getattr(self, kind, None)
            if spec is None:
                continue
            try:
                registry.from_spec(dict(spec) if isinstance(spec, dict) else spec)
            except InputError as exc:
                raise _refuse(f": {exc}", field=kind) from None
        return self


class GameTable(Table):
    """``[game]``: the players' choices in ``mdpsim.env`` (docs/env.md); empty lists keep one
    mechanism at one eps."""

    epsilon_levels: list[Positive] = Field(
        default=[],
        description="eps levels (1/km) a user chooses among when it reports, one mechanism "
        "per level, all fitted at each generation; must hold mechanism.epsilon_per_km (the "
        "level the report strategies use); empty: that eps alone",
    )
    mechanisms: list[str] = Field(
        default=[],
        description="mechanisms the server chooses among at a refresh; must hold "
        "mechanism.name (published first); empty: mechanism.name alone",
    )
    choose_query_kinds: bool = Field(
        default=False,
        description="true: the server chooses which of queries.kinds to ask each tick (one "
        "action bit per kind) instead of all or none",
    )

    @field_validator("epsilon_levels", "mechanisms")
    @classmethod
    def _distinct(cls, v: list) -> list:
        if len(set(v)) != len(v):
            raise _refuse(f"= {v!r} lists a value twice")
        return v

    @field_validator("mechanisms")
    @classmethod
    def _registered(cls, v: list[str]) -> list[str]:
        from mdpsim.mechanisms import mechanism_class

        for name in v:
            try:
                mechanism_class(name)
            except InputError as exc:
                raise _refuse(f"has {name!r}: {exc}") from None
        return v


class OutputTable(Table):
    """``[output]``: which tables a run writes."""

    per_user: bool = Field(
        default=True, description="write users.parquet (one row per user and tick)"
    )
