"""The honest-but-curious server: generates the mechanism, collects reports, queries, attacks.

Its behaviour is in the strategies it holds: a refresh schedule (when to regenerate, public),
a query planner (which queries, with which per-user budgets) and the report attacks. Every
charge it makes goes through the run's budget policy, from the guarantee the mechanism states:
``report_guarantee`` per report, ``upload_guarantee`` per fit for each user who uploads.

The game's choices (``[game]``, docs/env.md): the published mechanism is one of
``game.mechanisms`` (chosen at a refresh), fitted once per ``game.epsilon_levels`` level; a
user reports at the level it chose and pays that level's guarantee. The level of a report is
visible to the server (it is the level charged), so the attacks see ``(level, output)``
(:class:`~mdpsim.agents.levels.LevelStack`).

A user reports only from a secret the current matrix has a row for (every mechanism here
covers all of X); a user whose upload its filter refused has halted and reports nothing more.
"""

from __future__ import annotations

import time
from collections.abc import MutableMapping
from dataclasses import dataclass
from typing import Any
from weakref import WeakKeyDictionary

import mesa
import numpy as np

from mdpsim.agents.levels import LevelStack
from mdpsim.agents.strategies.query_planner import QueryRound
from mdpsim.agents.strategies.refresh import RefreshContext
from mdpsim.attacks import AttackSuite, Observation, Release
from mdpsim.attacks.suite import TickResult
from mdpsim.mechanisms import Mechanism, make
from mdpsim.mechanisms.base import fit_release
from mdpsim.privacy.filters import Charge
from mdpsim.privacy.release import CertifiedRelease
from mdpsim.queries.outcome import QueryOutcome


@dataclass
class Reports:
    """One tick's reports: who reported, from where, what."""

    users: np.ndarray
    secrets: np.ndarray
    outputs: np.ndarray
    loss_km: np.ndarray
    levels: np.ndarray | None = None  # index into the game's eps levels (None: one level)
    level_epsilons: tuple[float, ...] = ()

    def user_columns(self, n: int) -> dict[str, np.ndarray]:
        """Per-user columns; -1 / NaN for users who did not report (with several eps
        levels, also the eps each report was made at)."""
        output = np.full(n, -1, dtype=np.int64)
        loss = np.full(n, np.nan)
        output[self.users], loss[self.users] = self.outputs, self.loss_km
        cols = {"reported_output": output, "report_loss_km": loss}
        if self.levels is not None:
            eps = np.full(n, np.nan)
            eps[self.users] = np.asarray(self.level_epsilons)[self.levels]
            cols["report_epsilon_per_km"] = eps
        return cols


@dataclass(frozen=True)
class MechanismFacts:
    """Public facts about the mechanism in force (one per generation)."""

    mechanism: str
    epsilon_per_km: float
    report_epsilon_per_km: float
    report_cost: float
    mechanism_generations: int
    solver_status: str
    expected_loss_km: float
    em_expected_loss_km: float


class CuriousServer(mesa.Agent):
    """The server player: mechanism, reports, queries and attacks through its strategies."""

    def __init__(
        self, model, *, refresh, planner, mechanism_cache: MutableMapping | None = None
    ) -> None:
        super().__init__(model)
        self.refresh, self.planner = refresh, planner
        self.mechanism_cache = mechanism_cache
        self.settings = model.config.mechanism
        game = model.config.game
        #: the eps levels users choose among, and the one the report strategies use
        self.levels = tuple(game.epsilon_levels or [self.settings.epsilon_per_km])
        self.default_level = self.levels.index(self.settings.epsilon_per_km)
        #: the mechanisms the server chooses among at a refresh, and the one published
        self.mechanism_names = tuple(game.mechanisms or [self.settings.name])
        self.published = self.mechanism_names.index(self.settings.name)
        self.mechanism: Mechanism | None = None  # the default level's mechanism
        self.level_mechanisms: list[Mechanism] = []
        #: per level, the release every report is drawn from (its own copy of the certified
        #: matrix; the mechanism instance cannot reach it: docs/plugins.md)
        self.level_releases: list[CertifiedRelease] = []
        self._level_losses_km: list[float] = []
        self.level_charges: list[Charge] = []
        self.level_hit_probability: list[float] = []
        self.generated_at = -1
        self.generation_seconds = float("nan")
        self.n_generations = 0
        self.report_charge = Charge(float("nan"))
        self.silent_active_last = 0
        self.active_last = 0
        self.hit_probability = float("nan")
        self._asking_copies: dict[tuple[int, tuple[str, ...]], tuple[Any, Any]] = {}
        specs = model.config.attacks.specs()
        self.attacks = AttackSuite.from_specs(specs) if specs else None
        if self.attacks is not None:
            self.attacks.start(model.world.context())
        self._refuse_uncharged()

    def _refuse_uncharged(self) -> None:
        """Refuse at start what the budget policy cannot charge: the queries, then every
        (mechanism, level) the game may publish by the kind of its guarantees, before any
        fit (the fitted guarantees are checked again before any charge)."""
        budget = self.model.budget
        queries = self.model.config.queries
        budget.check(
            report=None, upload=None, queries=bool(queries.every_ticks) and bool(queries.kinds)
        )
        for name in self.mechanism_names:
            params = self.settings.params_for(name)
            for eps in self.levels:
                unfitted = make(name, epsilon=eps, **params)
                budget.check(
                    report=unfitted.report_guarantee,
                    upload=unfitted.upload_guarantee,
                    queries=False,
                    fitted=False,
                )

    @property
    def mechanism_name(self) -> str:
        """The name of the published mechanism."""
        return self.mechanism_names[self.published]

    # ------------------------------------------------------------------ 2. mechanism
    def wants_refresh(self, tick: int) -> bool:
        """The refresh schedule's decision for ``tick`` (public facts only)."""
        if self.mechanism is None:
            return True
        return self.refresh.due(
            RefreshContext(
                tick=tick,
                generated_at=self.generated_at,
                active_users=self.active_last,
                silent_active_users=self.silent_active_last,
            )
        )

    def generate(self, mechanism: int | None = None) -> bool:
        """Fit a new mechanism (``mechanism``: its index in the game's mechanisms; None: the
        one published) at every eps level, charge the uploads it needed, tabulate the attacks.

        Returns False, fitting nothing, when the mechanism needs its users' uploads and every
        user's filter has halted (nobody can upload): the published mechanism stays."""
        model = self.model
        active = np.nonzero(~model.filters.halted)[0]
        index = self.published if mechanism is None else mechanism
        name = self.mechanism_names[index]
        params = self.settings.params_for(name)
        built = [make(name, epsilon=eps, **params) for eps in self.levels]
        if self.mechanism is not None and built[0].takes_uploads and not len(active):
            return False
        self.published = index
        start = time.perf_counter()
        pairs = [self._fitted(name, mech, params, active) for mech in built]
        self.generation_seconds = time.perf_counter() - start
        fitted = [m for m, _ in pairs]
        releases = [r for _, r in pairs]
        mech = fitted[self.default_level]
        # the reference printed beside the mechanism's loss: EM at the same total eps
        eps = self.settings.epsilon_per_km
        em, _ = self._fitted("em", make("em", epsilon=eps), {}, active)
        self.em_expected_loss_km = public_facts(em)[0]
        self.mechanism, self.level_mechanisms, self.generated_at = mech, fitted, model.tick
        self.level_releases = releases
        # public facts of the fitted matrices, read every tick (observations, rows, strategies)
        facts = [public_facts(m) for m in fitted]
        self._level_losses_km = [loss_km for loss_km, _ in facts]
        self.n_generations += 1
        # the fitted (certified, audited) guarantees: refused whole before any charge; a
        # report is charged what its matrix was certified against (the release's record)
        certified = [r.report_guarantee for r in releases]
        for m, report in zip(fitted, certified, strict=True):
            model.budget.check(report=report, upload=m.upload_guarantee, queries=False)
        self.level_charges = [model.budget.charge(report) for report in certified]
        self.report_charge = self.level_charges[self.default_level]
        self.level_hit_probability = [hit for _, hit in facts]
        self.hit_probability = self.level_hit_probability[self.default_level]
        self.uploaded = np.ones(model.population.n_users, dtype=bool)
        if mech.upload_guarantee is not None:  # one level only (scenario validation)
            self._charge_uploads(mech, active)
        uploads = self._upload_slots(mech, active)
        self._mechanism_facts = self._read_mechanism_facts()
        if self.attacks is not None:  # the first mechanism serves from tick 1
            one = len(fitted) == 1
            released = mech if one else LevelStack.of(fitted, releases)
            self.attacks.release(
                Release(
                    tick=max(model.tick, 1),
                    mechanism=released,
                    uploads=uploads,
                    certified=releases[0] if one else None,
                )
            )
        return True

    def _fitted(
        self, name: str, mech: Mechanism, params: dict, active: np.ndarray
    ) -> tuple[Mechanism, CertifiedRelease]:
        """``mech`` (mechanism ``name`` built from ``params``) fitted on the domain and the
        release its reports are drawn from (:func:`~mdpsim.mechanisms.fit_release`), or the
        pair the cache holds for the same name, eps, parameters and domain (unless it takes
        uploads)."""
        model = self.model
        key = (name, mech.epsilon, repr(sorted(params.items())), id(model.domain))
        cache = None if mech.takes_uploads else self.mechanism_cache
        cached = None if cache is None else cache.get(key)
        if cached is not None:
            return cached
        users = model.population.position[active]
        release = fit_release(mech, model.domain, users=users, rng=model.streams["mechanism"])
        if cache is not None:
            cache[key] = (mech, release)
        return mech, release

    @property
    def level_expected_loss_km(self) -> list[float]:
        """Each level's prior-averaged utility loss (public)."""
        return list(self._level_losses_km)

    def _charge_uploads(self, mech, active: np.ndarray) -> None:
        """Every active user uploaded: each pays the mechanism's upload guarantee."""
        model = self.model
        charge = model.budget.charge(mech.upload_guarantee)
        cost = np.zeros(model.population.n_users)
        cost[active] = charge.cost
        paid = model.filters.request(cost, component="upload", delta=charge.delta)
        self.uploaded = paid

    def _upload_slots(self, mech, active: np.ndarray) -> np.ndarray | None:
        """Each user's upload slot in the mechanism's record (-1: none; ``None``: no uploads)."""
        if mech.uploads_ is None:
            return None
        uploads = np.full(self.model.population.n_users, -1, dtype=np.int64)
        uploads[active] = mech.uploads_.slot
        uploads[~self.uploaded] = -1
        return uploads

    def mechanism_facts(self) -> MechanismFacts:
        """Tick-level public facts about the current mechanism (one record per generation)."""
        return self._mechanism_facts

    def _read_mechanism_facts(self) -> MechanismFacts:
        """:meth:`mechanism_facts`, read from the mechanism just generated."""
        info: dict = self.mechanism.info_ if self.mechanism is not None else {}
        # what the published matrix was certified against (the release's record, not the
        # instance's property, which a plug-in may answer differently after the fit)
        held = self.level_releases[self.default_level] if self.level_releases else None
        report = None if held is None else held.report_guarantee
        return MechanismFacts(
            mechanism=self.mechanism_name,
            epsilon_per_km=self.settings.epsilon_per_km,
            report_epsilon_per_km=report.epsilon_per_km if report is not None else float("nan"),
            report_cost=self.report_charge.cost,
            mechanism_generations=self.n_generations,
            solver_status=str(info.get("solver_status", info.get("status", "n/a"))),
            expected_loss_km=self.expected_loss_km,
            em_expected_loss_km=getattr(self, "em_expected_loss_km", float("nan")),
        )

    @property
    def expected_loss_km(self) -> float:
        """The current mechanism's prior-averaged utility loss (public)."""
        if self.mechanism is None:
            return np.nan
        return self._level_losses_km[self.default_level]

    # ------------------------------------------------------------------ 3. reports
    def collect_reports(self, willing: np.ndarray, level: np.ndarray | None = None) -> Reports:
        """Willing users who can pay report one output each (matrix row ``i``: secret ``i``),
        each at its ``level`` (index into the eps levels; None: the default level), paying
        that level's charge."""
        model = self.model
        pos = model.population.position
        assert self.mechanism is not None, "the first mechanism is generated at tick 0"
        if len(self.levels) == 1:
            costs = np.where(willing, self.report_charge.cost, 0.0)
            paid = model.filters.request(costs, component="reports", delta=self.report_charge.delta)
            users = paid.nonzero()[0]
            secrets = pos[users]
            outputs = self._draw(self.default_level, secrets)
            levels = None
        else:
            chosen = np.full(len(willing), self.default_level) if level is None else level
            paid = np.zeros(len(willing), dtype=bool)
            outputs = np.zeros(len(willing), dtype=np.int64)
            for index, charge in enumerate(self.level_charges):
                mine = willing & (chosen == index)
                costs = np.where(mine, charge.cost, 0.0)
                ok = model.filters.request(costs, component="reports", delta=charge.delta)
                who = np.nonzero(ok)[0]
                outputs[who] = self._draw(index, pos[who])
                paid |= ok
            users = paid.nonzero()[0]
            outputs, levels = outputs[users], np.asarray(chosen)[users]
            secrets = pos[users]
        halted = model.filters.halted
        self.active_last = len(halted) - int(np.count_nonzero(halted))
        self.silent_active_last = self.active_last - len(users)
        return Reports(
            users=users,
            secrets=secrets,
            outputs=outputs,
            loss_km=model.domain.dist_xy[secrets, outputs],
            levels=levels,
            level_epsilons=self.levels if levels is not None else (),
        )

    def _draw(self, level: int, secrets: np.ndarray) -> np.ndarray:
        """Reports at eps level ``level`` from ``secrets``: drawn from the level's release,
        after refusing a mechanism whose ``matrix_`` was replaced since its fit."""
        Mechanism._certified_matrix(self.level_mechanisms[level])
        return self.level_releases[level].draw(secrets, self.model.streams["reports"])

    # ------------------------------------------------------------------ 4. queries
    def wants_queries(self, tick: int) -> bool:
        """The query planner's public schedule."""
        return self.planner.due(tick)

    def ask_queries(self, kinds: tuple[str, ...] | None = None) -> dict[str, QueryOutcome]:
        """This tick's queries over the users' true locations (see mdpsim.agents.strategies),
        each kind's outcome; ``kinds``: the kinds the server chose to ask (None: all of
        ``queries.kinds``)."""
        model = self.model
        settings = model.config.queries
        if kinds is not None:
            settings = self._asking(settings, kinds)
        return self.planner.ask(
            QueryRound(
                settings=settings,
                locations_m=model.domain.x_xy[model.population.position],
                domain=model.domain,
                filters=model.filters,
                budget=model.budget,
                rng=model.streams["queries"],
            )
        )

    def _asking(self, settings: Any, kinds: tuple[str, ...]) -> Any:
        """``settings`` asking only those of its kinds in ``kinds``: one copy per table and
        choice, kept (the table is frozen; a server may choose its kinds at every tick)."""
        key = (id(settings), tuple(kinds))
        kept = self._asking_copies.get(key)
        if kept is None or kept[0] is not settings:
            asked = [k for k in settings.kinds if k in kinds]
            kept = (settings, settings.model_copy(update={"kinds": asked}))
            self._asking_copies[key] = kept
        return kept[1]

    # ------------------------------------------------------------------ 5. attacks
    def attack(self, reports: Reports) -> TickResult:
        """The scenario's attacks on this tick's reports, scored against the truth."""
        model = self.model
        if self.attacks is None:
            return TickResult(tick=model.tick, scores={})
        outputs = np.full(model.population.n_users, -1, dtype=np.int64)
        outputs[reports.users] = reports.outputs
        if reports.levels is not None:  # the attacks see (level, output): LevelStack's columns
            outputs[reports.users] += reports.levels * model.domain.n_y
        obs = Observation(tick=model.tick, outputs=outputs, pseudonyms=model.pseudonyms)
        return self.attacks.observe(obs, model.population.position)


#: Per fitted mechanism, its :func:`public_facts` (with the matrix they were read from).
_FACTS: WeakKeyDictionary = WeakKeyDictionary()


def public_facts(mech: Mechanism) -> tuple[float, float]:
    """A fitted mechanism's prior-averaged utility loss (km) and the prior-averaged chance
    that the MAP guess of one report is exact: public facts of its matrix, read once per
    matrix (a cached fit is generated again at every reset of an environment)."""
    matrix = mech.matrix_
    cached = _FACTS.get(mech)
    if cached is None or cached[0] is not matrix:
        prior = mech.domain_.prior
        hit = float((prior[:, None] * matrix).max(axis=0).sum())
        cached = _FACTS[mech] = (matrix, (float(mech.expected_loss()), hit))
    return cached[1]


def attack_success(result: TickResult, n_users: int) -> np.ndarray:
    """Per user, 1 if any attack's top-1 guess of its secret at this tick is exact, else 0."""
    success = np.zeros(n_users)
    for scored in result.scores.values():
        for s in scored:
            if s.tick == result.tick and "hit" in s.values:
                # fmax: a NaN hit (no estimate) leaves the user's success as it is
                success[s.users] = np.fmax(success[s.users], s.values["hit"])
    return success
