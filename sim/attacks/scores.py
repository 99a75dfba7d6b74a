"""The scores of one estimate: per-user metric values, their means, totals and columns.

Every location estimate's metrics are float64 vectors of one length: they are kept as one
``(M, R)`` table, so that the means, the finite totals and the per-user columns of all metrics
take a few array operations together (the same bits as metric by metric,
tests/attacks/test_score_tables.py).
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property, lru_cache

import numpy as np


@dataclass(frozen=True)
class Scores:
    """Per-user metric values of one estimate (every array has one entry per row of ``users``).

    ``extras`` holds attack-specific per-user values (precision/recall at k, chance rate).
    ``tick`` is the tick the estimate is about (``None`` for whole-run estimates).
    ``guess`` is a location estimate's point estimate per user, a secret (``space="x"``) or an
    output index (``space="y"``): what ``mdpsim run --export`` writes as the estimated trace.
    ``values`` maps each metric to its array (a dict, or for a scored location estimate the
    rows of its table, :class:`TableRows`).
    """

    tick: int | None
    users: np.ndarray
    values: Mapping[str, np.ndarray]
    guess: np.ndarray | None = None
    space: str = "x"

    @classmethod
    def of_rows(
        cls,
        tick: int | None,
        users: np.ndarray,
        names: Sequence[str],
        rows: list[np.ndarray],
        *,
        guess: np.ndarray | None = None,
        space: str = "x",
    ) -> Scores:
        """Scores of metrics ``names`` whose values are ``rows``, all float64 but for the first
        two (a location estimate's): their :attr:`_table` is known without a look at each."""
        scores = cls(tick, users, dict(zip(names, rows, strict=True)), guess, space)
        n = len(users)
        if rows[0].dtype == rows[1].dtype == _FLOAT64 and all(len(row) == n for row in rows):
            scores.__dict__["_table"] = np.array(rows)  # the cached property's value, known
        return scores

    @classmethod
    def of_table(
        cls,
        tick: int | None,
        users: np.ndarray,
        names: Sequence[str],
        table: np.ndarray,
        totals: np.ndarray,
        counts: np.ndarray,
        *,
        guess: np.ndarray | None = None,
        space: str = "x",
    ) -> Scores:
        """Scores of metrics ``names`` whose values are the rows of the float64 ``table``,
        with each row's finite total and count (what :meth:`finite_totals` gives) known."""
        scores = cls(tick, users, TableRows(tuple(names), table), guess, space)
        scores.__dict__["_table"] = table  # the cached properties' values, known
        scores.__dict__["_totals"] = dict(
            zip(names, zip(totals.tolist(), counts.tolist(), strict=True), strict=True)
        )
        return scores

    def means(self) -> dict[str, float]:
        """Mean of every metric over the users (NaN-aware; NaN if none applies)."""
        return dict(self._means)

    def finite_totals(self) -> dict[str, tuple[float, int]]:
        """Per metric, the sum and the count of its non-NaN values (as float64)."""
        return dict(self._totals)

    def columns(self, n_users: int) -> dict[str, np.ndarray]:
        """Per metric, a float64 column over all ``n_users`` slots: the values at ``users``,
        NaN elsewhere."""
        return dict(zip(self.values, self.column_list(n_users), strict=True))

    def column_list(self, n_users: int) -> list[np.ndarray]:
        """The :meth:`columns`, in the order of ``values`` (new arrays at every call)."""
        table = self._table
        if table is not None and table.dtype == _FLOAT64 and _every_slot(self.users, n_users):
            return list(table.copy())  # the scatter below, to every slot in order
        if table is not None:  # one fill and one scatter for all metrics
            block = _nans((len(table), n_users))
            if len(self.users):
                block[:, self.users] = table
            return list(block)
        out = []
        for v in self.values.values():
            col = _nans(n_users)
            col[self.users] = v
            out.append(col)
        return out

    @cached_property
    def _table(self) -> np.ndarray | None:
        """The metrics' values as the rows of one ``(M, R)`` float64 array, when they are all
        float64 vectors of one length (every location estimate's), else ``None``: the means,
        totals and columns then take a few array operations for all metrics together."""
        rows = list(self.values.values())
        shape = (len(self.users),)
        if rows and all(
            isinstance(v, np.ndarray) and v.dtype == _FLOAT64 and v.shape == shape for v in rows
        ):
            return np.array(rows)
        return None

    @cached_property
    def _totals(self) -> dict[str, tuple[float, int]]:
        """:meth:`finite_totals`, computed once. A row's sum over the table's last axis is the
        same float64 sum as the row's own (pairwise along the contiguous axis); a NaN makes
        its row's sum NaN, so NaNs are counted only when some sum is."""
        table = self._table
        if table is None:
            return {
                name: _finite_total(np.asarray(v, dtype=float)) for name, v in self.values.items()
            }
        sums = np.add.reduce(table, axis=1).tolist()
        n = table.shape[1]
        if not math.isnan(sum(sums)):  # no NaN in any row
            return {name: (total, n) for name, total in zip(self.values, sums, strict=True)}
        nans = np.add.reduce(np.isnan(table), axis=1).tolist()
        return {
            name: (total, n) if nan == 0 else (0.0, 0) if nan == n else _finite_total(row)
            for name, row, total, nan in zip(self.values, table, sums, nans, strict=True)
        }

    @cached_property
    def _means(self) -> dict[str, float]:
        """:meth:`means`, computed once (the suite's table and the tick's row both read it):
        float64 values' mean is their finite total over its count (``np.mean``'s bits)."""
        if self._table is not None:
            return {
                name: total / count if count else math.nan
                for name, (total, count) in self._totals.items()
            }
        out = {}
        for name, v in self.values.items():
            if v.dtype == np.float64:
                total, count = self._totals[name]
                out[name] = total / count if count else float("nan")
            else:  # in its own dtype, as float32 values always were
                finite = v[~np.isnan(v)] if v.dtype.kind == "f" else v
                out[name] = float(finite.mean()) if len(finite) else float("nan")
        return out


class TableRows(Mapping[str, np.ndarray]):
    """The rows of a score table by metric name, read-only; a row is viewed when read (a tick
    reads a few of its estimates' metrics one by one, its means and columns from the table)."""

    __slots__ = ("_names", "_table")

    def __init__(self, names: tuple[str, ...], table: np.ndarray) -> None:
        self._names, self._table = names, table

    def __getitem__(self, name: str) -> np.ndarray:
        if name not in self._names:
            raise KeyError(name)
        return self._table[self._names.index(name)]

    def __contains__(self, name: object) -> bool:
        return name in self._names

    def __iter__(self) -> Iterator[str]:
        return iter(self._names)

    def __len__(self) -> int:
        return len(self._names)

    def __repr__(self) -> str:
        return repr(dict(self))


_FLOAT64 = np.dtype(np.float64)
_INT64 = np.dtype(np.int64)


def _finite_total(values: np.ndarray) -> tuple[float, int]:
    """The sum and the count of the non-NaN entries of a float64 vector."""
    finite = values[~np.isnan(values)]
    return float(finite.sum()), len(finite)


def _every_slot(users: np.ndarray, n_users: int) -> bool:
    """Whether ``users`` is ``0, 1, ..., n_users - 1`` as int64 (every slot, in order)."""
    return (
        isinstance(users, np.ndarray)
        and users.dtype == _INT64
        and len(users) == n_users
        and users.tobytes() == _slots_bytes(n_users)
    )


@lru_cache(maxsize=64)
def _slots_bytes(n_users: int) -> bytes:
    """The bytes of ``np.arange(n_users)`` as int64."""
    return np.arange(n_users, dtype=np.int64).tobytes()


def _nans(shape: int | tuple[int, int]) -> np.ndarray:
    """``np.full(shape, np.nan)`` without its per-call checks."""
    out = np.empty(shape)
    out.fill(np.nan)
    return out
