"""TOML scenario files: schema, defaults and validation at the edge.

A scenario is a handful of tables (``[scenario]``, ``[network]``, ``[domain]``, ``[users]``,
``[mechanism]``, ``[queries]``, ``[attacks]``, and ``[sweep]`` for batch runs). Every field is
declared once in :data:`SCHEMA` with its type, default, allowed range and a one-line help; the
reference in ``docs/scenarios.md`` is generated from it (:func:`reference_markdown`).
Errors name the field (``users.count``) and say what would work.
"""

from __future__ import annotations

import copy
import math
import tomllib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sim.errors import InputError


@dataclass(frozen=True)
class Field:
    """One scenario field: its type, default, check and help text."""

    kind: type | tuple[type, ...]
    default: Any
    help: str
    check: Callable[[Any], str | None] | None = None
    required: bool = False


def _positive(v) -> str | None:
    return None if v > 0 and math.isfinite(v) else "must be > 0"


def _non_negative(v) -> str | None:
    return None if v >= 0 and math.isfinite(v) else "must be >= 0"


def _at_least(n: int) -> Callable[[Any], str | None]:
    return lambda v: None if v >= n else f"must be >= {n}"


def _one_of(*choices: str) -> Callable[[Any], str | None]:
    return lambda v: None if v in choices else f"must be one of {', '.join(choices)}"


def _fraction(v) -> str | None:
    return None if 0 < v < 1 else "must lie strictly between 0 and 1"


def _subset_of(*choices: str) -> Callable[[Any], str | None]:
    def check(v) -> str | None:
        bad = [x for x in v if x not in choices]
        return f"unknown entries {bad}; allowed: {', '.join(choices)}" if bad else None

    return check


def _dwell(v) -> str | None:
    if len(v) != 2 or not all(isinstance(x, int) and x >= 0 for x in v) or v[0] > v[1]:
        return "must be [min, max] ticks with 0 <= min <= max"
    return None


NUMBER = (int, float)
SCHEMA: dict[str, dict[str, Field]] = {
    "scenario": {
        "name": Field(str, "unnamed", "a short name used in outputs"),
        "seed": Field(int, 0, "the one seed every random choice flows from", _non_negative),
        "ticks": Field(int, 20, "number of ticks to simulate", _at_least(1)),
        "tick_seconds": Field(NUMBER, 60.0, "simulated seconds per tick", _positive),
    },
    "network": {
        "source": Field(
            str, "helsinki", "helsinki, helsinki-test, a .osm/.osm.bz2/.osm.pbf/.graphml path"
        ),
        "network_type": Field(str, "walk", "walk or drive", _one_of("walk", "drive")),
    },
    "domain": {
        "n_points": Field(int, 500, "secrets |X| spread along the roads", _at_least(2)),
        "n_outputs": Field(int, 0, "outputs |Y| (0: Y = X)", _non_negative),
        "metric": Field(str, "road", "road, l1, l2 or linf", _one_of("road", "l1", "l2", "linf")),
    },
    "users": {
        "count": Field(int, 50, "number of mobile users", _at_least(1)),
        "speed_mps": Field(NUMBER, 1.4, "walking or driving speed, metres per second", _positive),
        "dwell_ticks": Field(list, [1, 5], "[min, max] ticks spent at each destination", _dwell),
        "n_places": Field(int, 40, "destinations users travel between", _at_least(2)),
        "budget_rho_per_km2": Field(
            NUMBER,
            200.0,
            "each user's total budget B in CGP rho (1/km^2); an eps-mDP report costs eps^2/2",
            _positive,
        ),  # fmt: skip
    },
    "mechanism": {
        "name": Field(str, "dista_lp", "a name from sim.mechanisms.available()", required=True),
        "epsilon_per_km": Field(
            NUMBER, 4.0, "total eps of the mechanism, per km", _positive, required=True
        ),
        "refresh_every_ticks": Field(
            int,
            0,
            "regenerate the mechanism every this many ticks (0: only when needed)",
            _non_negative,
        ),  # fmt: skip
        "params": Field(dict, {}, "extra parameters passed to the mechanism's constructor"),
        "params_by_name": Field(
            dict,
            {},
            "per-mechanism extra parameters, merged over params when mechanism.name matches "
            "(for sweeps over mechanism.name), e.g. {dista_lp = {delta = 0.01}}",
        ),
    },
    "queries": {
        "kinds": Field(
            list,
            ["range", "kde", "knn"],
            "queries the server asks each tick",
            _subset_of("range", "kde", "knn"),
        ),  # fmt: skip
        "every_ticks": Field(int, 1, "ask queries every this many ticks (0: never)", _non_negative),
        "rho_per_km2": Field(NUMBER, 0.5, "zCDP-style budget rho of one query", _positive),
        "beta": Field(NUMBER, 0.05, "failure probability of the elimination", _fraction),
        "range_radius_m": Field(NUMBER, 250.0, "radius of range-count queries", _positive),
        "kde_bandwidth_m": Field(NUMBER, 100.0, "Gaussian KDE bandwidth b", _positive),
        "knn_k": Field(int, 5, "k of the kNN query", _at_least(1)),
        "saving": Field(bool, True, "use iterative elimination (PM) instead of BM"),
    },
    "attacks": {
        "tracking": Field(bool, True, "run the forward-filter tracking attack"),
        "upload": Field(bool, True, "run the upload-stage attack on surrogate uploads"),
    },
    "output": {
        "per_user": Field(bool, True, "write users.parquet (one row per user and tick)"),
    },
}
SWEEP_KEYS = ("repetitions",)


@dataclass(frozen=True)
class Scenario:
    """A validated scenario: ``values[table][field]`` with every default filled in."""

    values: dict[str, dict[str, Any]]
    sweep: dict[str, Any]
    path: str | None = None

    def __getitem__(self, table: str) -> dict[str, Any]:
        return self.values[table]

    def get(self, dotted: str) -> Any:
        """A value by dotted name, e.g. ``get("users.count")``."""
        table, name = _split(dotted)
        return self.values[table][name]

    def replace(self, **dotted: Any) -> Scenario:
        """A new, re-validated scenario with some fields changed (``{"users.count": 10}``)."""
        raw = copy.deepcopy(self.values)
        for key, value in dotted.items():
            table, name = _split(key.replace("__", "."))
            raw[table][name] = value
        raw["sweep"] = copy.deepcopy(self.sweep)
        return from_dict(raw, path=self.path)

    def to_dict(self) -> dict[str, Any]:
        """Plain nested dict (for summary.json and batch manifests)."""
        out = copy.deepcopy(self.values)
        if self.sweep:
            out["sweep"] = copy.deepcopy(self.sweep)
        return out


def load(path: str | Path) -> Scenario:
    """Read and validate a TOML scenario file."""
    p = Path(path)
    if not p.is_file():
        raise InputError(f"scenario file {str(p)!r} not found")
    try:
        raw = tomllib.loads(p.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise InputError(f"scenario file {str(p)!r} is not valid TOML: {exc}") from exc
    except UnicodeDecodeError as exc:
        raise InputError(f"scenario file {str(p)!r} is not UTF-8 text: {exc}") from exc
    try:
        return from_dict(raw, path=str(p))
    except InputError as exc:
        raise InputError(f"{p}: {exc}") from None


def from_dict(raw: dict[str, Any], *, path: str | None = None) -> Scenario:
    """Validate a nested dict (as parsed from TOML) and fill in defaults."""
    unknown = [t for t in raw if t not in SCHEMA and t != "sweep"]
    if unknown:
        raise InputError(
            f"unknown table [{unknown[0]}]; allowed tables: "
            + ", ".join(f"[{t}]" for t in [*SCHEMA, "sweep"])
        )
    values: dict[str, dict[str, Any]] = {}
    for table, fields in SCHEMA.items():
        given = raw.get(table, {})
        if not isinstance(given, dict):
            raise InputError(f"[{table}] must be a table, not {type(given).__name__}")
        extra = [k for k in given if k not in fields]
        if extra:
            raise InputError(
                f"unknown field {table}.{extra[0]}; fields of [{table}]: " + ", ".join(fields)
            )
        values[table] = {
            name: _field_value(f"{table}.{name}", f, given) for name, f in fields.items()
        }
    _check_mechanism(values)
    sweep = _check_sweep(raw.get("sweep", {}))
    return Scenario(values=values, sweep=sweep, path=path)


def _field_value(dotted: str, f: Field, given: dict) -> Any:
    name = dotted.split(".", 1)[1]
    if name not in given:
        if f.required:
            raise InputError(f"missing field {dotted}: {f.help}")
        return copy.deepcopy(f.default)
    value = given[name]
    kinds = f.kind if isinstance(f.kind, tuple) else (f.kind,)
    ok = isinstance(value, kinds) and not (isinstance(value, bool) and bool not in kinds)
    if not ok:
        expected = " or ".join(k.__name__ for k in kinds)
        raise InputError(
            f"field {dotted} must be {expected}, got {type(value).__name__} {value!r} ({f.help})"
        )
    if f.check is not None:
        problem = f.check(value)
        if problem:
            raise InputError(f"field {dotted} = {value!r} {problem} ({f.help})")
    return float(value) if f.kind is NUMBER else value


def _check_mechanism(values: dict) -> None:
    """The mechanism exists and accepts the parameters (its constructor validates them)."""
    from sim.mechanisms import available, make

    m = values["mechanism"]
    if m["name"] not in available():
        raise InputError(
            f"field mechanism.name = {m['name']!r} is not a mechanism; "
            f"available: {', '.join(available())}"
        )
    for name, extra in m["params_by_name"].items():
        if name not in available():
            raise InputError(
                f"field mechanism.params_by_name has key {name!r}, not a mechanism; "
                f"available: {', '.join(available())}"
            )
        if not isinstance(extra, dict):
            raise InputError(
                f"field mechanism.params_by_name.{name} must be a table of parameters, "
                f"got {type(extra).__name__} {extra!r}"
            )
    params = {k: v for k, v in mechanism_params(m).items() if k != "user_indices"}
    try:
        make(m["name"], epsilon=m["epsilon_per_km"], **params)
    except TypeError as exc:
        raise InputError(
            f"field mechanism.params does not suit mechanism {m['name']!r}: {exc}"
        ) from None
    except InputError as exc:
        raise InputError(f"field mechanism.params: {exc}") from None


def mechanism_params(mechanism: dict[str, Any]) -> dict[str, Any]:
    """The constructor parameters of the ``[mechanism]`` table: ``params`` with the entry of
    ``params_by_name`` for ``name`` merged over it."""
    return {**mechanism["params"], **mechanism["params_by_name"].get(mechanism["name"], {})}


def _check_sweep(sweep: Any) -> dict[str, Any]:
    if not isinstance(sweep, dict):
        raise InputError("[sweep] must be a table")
    out: dict[str, Any] = {}
    for key, values in sweep.items():
        if key == "repetitions":
            if isinstance(values, bool) or not isinstance(values, int) or values < 1:
                raise InputError("sweep.repetitions must be an integer >= 1")
            out[key] = values
            continue
        if "." not in key:
            raise InputError(
                f'sweep key {key!r} must name a field as "table.field", '
                'e.g. "mechanism.epsilon_per_km" = [4, 7, 10]'
            )
        table, name = key.split(".", 1)
        if table not in SCHEMA or name not in SCHEMA[table]:
            raise InputError(f"sweep key {key!r} is not a scenario field")
        if not isinstance(values, list) or not values:
            raise InputError(f"sweep.{key} must be a non-empty list of values")
        for v in values:  # each value must pass the field's own validation
            _field_value(key, SCHEMA[table][name], {name: v})
        out[key] = values
    return out


def _split(dotted: str) -> tuple[str, str]:
    table, _, name = dotted.partition(".")
    if table not in SCHEMA or name not in SCHEMA[table]:
        raise InputError(f"{dotted!r} is not a scenario field")
    return table, name


def reference_markdown() -> str:
    """The field reference of docs/scenarios.md, generated from :data:`SCHEMA`."""
    lines = []
    for table, fields in SCHEMA.items():
        lines += [
            f"### `[{table}]`",
            "",
            "| field | type | default | meaning |",
            "|---|---|---|---|",
        ]
        for name, f in fields.items():
            kinds = f.kind if isinstance(f.kind, tuple) else (f.kind,)
            kind = " or ".join(k.__name__ for k in kinds)
            default = "required" if f.required else f"`{f.default!r}`"
            lines.append(f"| `{name}` | {kind} | {default} | {f.help} |")
        lines.append("")
    return "\n".join(lines)
