"""``[queries]``: the server's adaptive queries, with each query kind's own fields."""

from __future__ import annotations

import functools
import json
import warnings
from typing import TYPE_CHECKING, Any

from pydantic import Field, ValidationError, field_validator, model_validator

from mdpsim.simulation.scenario.table_base import Positive, Table
from mdpsim.simulation.scenario.table_base import refuse as _refuse

if TYPE_CHECKING:
    from mdpsim.queries.kinds import QueryFields


class QueriesTable(Table):
    """``[queries]``: the server's adaptive queries."""

    kinds: list[str] = Field(
        default=["range", "kde", "knn"],
        description="queries the server asks each tick: registered kinds "
        "(mdpsim.queries.available_kinds(); bundled: range, kde, knn)",
    )
    every_ticks: int = Field(
        default=1, ge=0, description="ask queries every this many ticks (0: never)"
    )
    rho_per_km2: Positive = Field(default=0.5, description="zCDP-style budget rho of one query")
    beta: float = Field(
        default=0.05, gt=0, lt=1, description="failure probability of the elimination"
    )
    saving: bool = Field(default=True, description="use iterative elimination (PM) instead of BM")
    params: dict[str, dict[str, Any]] = Field(
        default={},
        description="per query kind, its own fields over their defaults "
        "([queries.params.<kind>], the tables below; declared by the kind's registration)",
    )

    @model_validator(mode="before")
    @classmethod
    def _flat_fields_deprecated(cls, data: Any) -> Any:
        """``range_radius_m`` / ``kde_bandwidth_m`` / ``knn_k`` (before each kind declared its
        own fields) move into ``params``, with a DeprecationWarning naming the nested form."""
        if not isinstance(data, dict) or not any(key in data for key in _FLAT_QUERY_FIELDS):
            return data
        data, params = dict(data), dict(data.get("params") or {})
        for key, (kind, name) in _FLAT_QUERY_FIELDS.items():
            if key not in data:
                continue
            mine = dict(params.get(kind) or {})
            if name in mine:
                raise _refuse(
                    f"is the old name of queries.params.{kind}.{name}, given too; keep "
                    "only the second",
                    field=key,
                )
            mine[name] = data.pop(key)
            params[kind] = mine
            warnings.warn(
                f"queries.{key} is deprecated: write [queries.params.{kind}] {name} = ...",
                DeprecationWarning,
                stacklevel=2,
            )
        data["params"] = params
        return data

    @field_validator("kinds")
    @classmethod
    def _registered_kinds(cls, v: list[str]) -> list[str]:
        from mdpsim.queries import available_kinds

        bad = [k for k in v if k not in available_kinds()]
        if bad:
            raise _refuse(
                f"has {bad[0]!r}, not a query kind; available: {', '.join(available_kinds())}"
            )
        return v

    @model_validator(mode="after")
    def _kinds_own_fields(self) -> QueriesTable:
        """Each ``params`` entry is a registered kind's, validated by its fields model."""
        from mdpsim.queries.kinds import QUERY_KINDS

        stray = [kind for kind in self.params if kind not in QUERY_KINDS]
        if stray:
            raise _refuse(
                f"has {stray[0]!r}, not a query kind; available: {', '.join(QUERY_KINDS)}",
                field="params",
            )
        for kind in self.params:
            try:
                self.params_of(kind)
            except ValidationError as exc:
                error = exc.errors()[0]
                where = ".".join(str(part) for part in (kind, *error["loc"]))
                raise _refuse(f": {error['msg']}", field=f"params.{where}") from None
        return self

    def params_of(self, kind: str) -> QueryFields:
        """Query ``kind``'s own fields: ``params.<kind>`` over the kind's defaults (validated
        once per process and value: the table holds only plain values, so it pickles to a
        process that has not registered a session's own kinds, as a Dask worker)."""
        from mdpsim.queries.kinds import QUERY_FIELDS

        mine = self.params.get(kind)
        given = json.dumps(mine, sort_keys=True, default=str) if mine else "{}"
        return _fields_of(QUERY_FIELDS.get(kind), given)


@functools.lru_cache(maxsize=256)
def _fields_of(model: type[QueryFields], given_json: str) -> QueryFields:
    """``model`` validated from its fields given as JSON (cached: read at every tick)."""
    return model.model_validate(json.loads(given_json))


#: The ``[queries]`` fields of the bundled kinds before each kind declared its own:
#: flat name -> (kind, field).
_FLAT_QUERY_FIELDS = {
    "range_radius_m": ("range", "radius_m"),
    "kde_bandwidth_m": ("kde", "bandwidth_m"),
    "knn_k": ("knn", "k"),
}
