"""A scenario's attacks run together: fed each tick, scored against the truth, tabulated.

This is what the server (agents/server.py) or the harness (``mdpsim attack``) calls::

    suite = AttackSuite.from_specs([{"name": "bayes"}, {"name": "tracking", "method": "smooth"}])
    suite.start(context)
    suite.release(release)                        # whenever a mechanism is (re)generated
    result = suite.observe(obs, true_positions)   # every tick
    means, cols = result.means, result.user_columns(n_users)
    final = suite.finish()                        # whole-run scores (Viterbi, places, linkage)

Columns are named by :func:`~mdpsim.attacks.base.attack_column` (``tracking_error_km``,
``bayes_hit``); a tick row holds the means of the estimates produced at that tick (a
fixed-lag smoother's estimate is about an earlier tick, see
:attr:`~mdpsim.attacks.base.Scores.tick`); per-user columns hold the estimates about the
current tick only. Every score, with the tick it is about, stays in :attr:`scores`.

Inside :func:`keep_going` (``mdpsim attack``) a plug-in attack's mistake
(:class:`~mdpsim.errors.PluginError`) drops that attack from the suite and is kept in
:attr:`AttackSuite.failed`; the others go on. Elsewhere it stops the run (one line, exit 2).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from functools import cached_property, lru_cache
from typing import Any

import numpy as np
import pandas as pd

from mdpsim._core.component import contract_error, is_plugin
from mdpsim.attacks.base import (
    Attack,
    Context,
    Observation,
    Release,
    Scores,
    Truth,
    attack_column,
    estimates_problem,
    make,
    score,
)
from mdpsim.errors import InputError, PluginError

_KEEP_GOING: ContextVar[bool] = ContextVar("attack_suite_keep_going", default=False)


@contextmanager
def keep_going() -> Iterator[None]:
    """Suites built inside drop a plug-in attack that fails and keep the others."""
    token = _KEEP_GOING.set(True)
    try:
        yield
    finally:
        _KEEP_GOING.reset(token)


@dataclass
class TickResult:
    """The scores produced at one tick, by attack label."""

    tick: int
    scores: dict[str, list[Scores]]

    @cached_property
    def means(self) -> dict[str, dict[str, float]]:
        """Per attack label, each metric's mean over the users it estimated at this tick
        (rates for ``hit``/``bound_violation``; a later estimate of a label overrides an
        earlier one's metric); built once: the tick's row and the environment read it."""
        means: dict[str, dict[str, float]] = {}
        for label, scored in self.scores.items():
            for s in scored:
                means.setdefault(label, {}).update(s.means())
        return means

    def user_columns(self, n_users: int) -> dict[str, np.ndarray]:
        """Per-user columns of the estimates about this tick (NaN for users not estimated)."""
        cols: dict[str, np.ndarray] = {}
        for label, scored in self.scores.items():
            for s in scored:
                if s.tick != self.tick:
                    continue
                keys = _column_keys(label, tuple(s.values))
                if cols.keys().isdisjoint(keys):  # the first estimate of this label
                    cols.update(zip(keys, s.column_list(n_users), strict=True))
                    continue
                for key, metric, col in zip(keys, s.values, s.column_list(n_users), strict=True):
                    if key in cols:  # a second estimate of this label about this tick
                        cols[key][s.users] = s.values[metric]
                    else:
                        cols[key] = col
        return cols


@lru_cache(maxsize=1024)
def _column_keys(label: str, metrics: tuple[str, ...]) -> tuple[str, ...]:
    """The per-user columns of attack ``label``'s ``metrics`` (:func:`attack_column`)."""
    return tuple(attack_column(label, metric) for metric in metrics)


class AttackSuite:
    """Named attacks fed the same releases and observations, scored in one place."""

    def __init__(self, attacks: Mapping[str, Attack]) -> None:
        if not attacks:
            raise InputError("an attack suite needs at least one attack")
        self.attacks = dict(attacks)
        self.truth = Truth()
        # streamed, so that a long run keeps no per-user values: one row of means per scored
        # estimate, and per attack and metric the sum and count of its non-NaN values
        self._rows: list[dict] = []
        self._totals: dict[str, dict[str, list[float]]] = {label: {} for label in self.attacks}
        self._report_epsilon: float | None = None  # of the release in force
        self.keep_going = _KEEP_GOING.get()
        #: label -> the one line of an attack dropped for a plug-in mistake (keep_going only)
        self.failed: dict[str, str] = {}

    def _each(self, call: Callable[[str, Attack], Any]) -> dict[str, Any]:
        """``call(label, attack)`` for every attack still in; a failing one is dropped when
        keeping going."""
        out = {}
        for label, attack in list(self.attacks.items()):
            try:
                out[label] = call(label, attack)
            except PluginError as exc:
                if not self.keep_going:
                    raise
                self.failed[label] = str(exc)
                del self.attacks[label]
        return out

    @classmethod
    def from_specs(cls, specs: Sequence[Mapping]) -> AttackSuite:
        """Build from ``[{"name": ..., "label": ... (default: name), **params}, ...]``."""
        attacks: dict[str, Attack] = {}
        for spec in specs:
            params = dict(spec)
            name = params.pop("name", None)
            if name is None:
                raise InputError(f"attack spec {dict(spec)!r} needs a name")
            label = params.pop("label", name)
            if label in attacks:
                raise InputError(f"attack label {label!r} used twice; give each a distinct label")
            attacks[label] = make(name, **params)
        return cls(attacks)

    def _checked(self, label: str, method: str, estimates) -> list:
        """A plug-in attack's estimates, refused in one line unless the scorer can read them."""
        attack = self.attacks[label]
        if not is_plugin(type(attack)):
            return list(estimates)
        problem = estimates_problem(
            estimates, self.context.domain, self.context.n_users, self.truth.positions
        )
        if problem is not None:
            raise contract_error(type(attack), f"{method} returned {problem}")
        return list(estimates)

    def start(self, context: Context) -> None:
        """Hand every attack the public knowledge."""
        self.context = context
        self._each(lambda _label, attack: attack.start(context))

    def release(self, release: Release) -> None:
        """A new mechanism: every attack sees it before the tick's reports."""
        self._report_epsilon = release.report_epsilon_per_km
        self._each(lambda _label, attack: attack.release(release))

    def observe(self, obs: Observation, true_positions: np.ndarray, *, progress=None) -> TickResult:
        """Feed one tick's reports to every attack and score what comes back."""
        self.truth.record(obs.tick, true_positions, obs.pseudonyms, self._report_epsilon)
        out = self._each(
            lambda label, attack: self._scored(
                label, self._checked(label, "observe", attack.observe(obs))
            )
        )
        return TickResult(tick=obs.tick, scores=out)

    def finish(self) -> dict[str, list[Scores]]:
        """Whole-run estimates of every attack, scored."""
        return self._each(
            lambda label, attack: self._scored(
                label, self._checked(label, "finish", attack.finish())
            )
        )

    def _scored(self, label: str, estimates) -> list[Scores]:
        scored = [score(e, self.truth, self.context.domain) for e in estimates]
        totals = self._totals[label]
        for s in scored:
            self._rows.append({"attack": label, "tick": s.tick, "n_users": len(s.users),
                               **s.means()})  # fmt: skip
            for metric, (total, count) in s.finite_totals().items():
                acc = totals.setdefault(metric, [0.0, 0])
                acc[0] += total
                acc[1] += count
        return scored

    def peek(self) -> pd.DataFrame:
        """The whole-run scores so far of the attacks whose ``finish`` leaves them as they
        were (home_work, uniqueness, places, linkage): one row per attack, the mean of every
        metric over the users scored. The run goes on; nothing is added to :meth:`table` or
        :meth:`summary` (the live page shows it while stepping)."""
        from mdpsim.attacks.home_work import HomeWork
        from mdpsim.attacks.linkage import Linkage
        from mdpsim.attacks.places import Places
        from mdpsim.attacks.uniqueness import Uniqueness

        rows = []
        for label, attack in self.attacks.items():
            if (
                not isinstance(attack, HomeWork | Uniqueness | Places | Linkage)
                or not self.truth.positions
            ):
                continue
            for estimate in attack.finish():
                rows.append(
                    {"attack": label, **score(estimate, self.truth, self.context.domain).means()}
                )
        return pd.DataFrame(rows)

    def table(self) -> pd.DataFrame:
        """One row per (attack, tick about): the mean of every metric, and the users scored."""
        return pd.DataFrame([row for row in self._rows if row["attack"] in self.attacks])

    def summary(self) -> pd.DataFrame:
        """One row per attack: metric means over all its scored (user, tick) values."""
        rows = []
        for label in self.attacks:
            row: dict[str, object] = {"attack": label}
            for metric, (total, count) in self._totals[label].items():
                row[metric] = total / count if count else float("nan")
            rows.append(row)
        return pd.DataFrame(rows)
