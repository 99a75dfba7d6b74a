"""The honest-but-curious server: builds the mechanism, collects reports, queries, attacks.

Mechanism policy: the mechanism is generated at the first tick and regenerated when
``mechanism.refresh_every_ticks`` have passed, or, for mechanisms defined only on the users'
neighbourhoods (DistA-LP), when an active user has left the part of the domain its downloaded
block covers. Users outside their block do not report until the next generation.
"""

from __future__ import annotations

import time
from collections.abc import MutableMapping
from dataclasses import dataclass

import mesa
import numpy as np

from sim.attacks import BayesAttack, TrackingAttack, upload_location_estimate
from sim.mechanisms import Mechanism, make


@dataclass
class Reports:
    """One tick's reports: who reported, from where, what."""

    users: np.ndarray
    secrets: np.ndarray
    outputs: np.ndarray
    loss_km: np.ndarray

    def user_columns(self, n: int) -> dict[str, np.ndarray]:
        """Per-user columns; -1 / NaN for users who did not report."""
        output = np.full(n, -1, dtype=np.int64)
        loss = np.full(n, np.nan)
        output[self.users], loss[self.users] = self.outputs, self.loss_km
        return {"reported_output": output, "report_loss_km": loss}


@dataclass
class Attacks:
    """One tick's attack results on the reporting users."""

    users: np.ndarray
    single_error_km: np.ndarray
    single_hit: np.ndarray
    expected_error_km: np.ndarray
    leakage_per_km: np.ndarray
    tracking_error_km: np.ndarray | None
    tracking_hit: np.ndarray | None
    single_map_error_km: np.ndarray

    def tick_row(self) -> dict[str, float]:
        """Tick-level means."""
        row = {
            "attack_error_km": _mean(self.single_error_km),
            "attack_expected_error_km": _mean(self.expected_error_km),
            "attack_hit_rate": _mean(self.single_hit),
            "attack_map_error_km": _mean(self.single_map_error_km),
            "posterior_leakage_max_per_km": float(self.leakage_per_km.max())
            if len(self.leakage_per_km)
            else float("nan"),
        }
        if self.tracking_error_km is not None:
            row["tracking_error_km"] = _mean(self.tracking_error_km)
            row["tracking_hit_rate"] = _mean(self.tracking_hit)
        return row

    def user_columns(self, n: int) -> dict[str, np.ndarray]:
        """Per-user columns; NaN for users who did not report."""
        cols = {}
        for name in ("single_error_km", "single_hit", "leakage_per_km", "tracking_error_km"):
            values = getattr(self, name)
            if values is None:
                continue
            col = np.full(n, np.nan)
            col[self.users] = values
            cols[f"attack_{name}"] = col
        return cols


class ServerAgent(mesa.Agent):
    """Generates the mechanism, collects reports, asks queries and attacks."""

    def __init__(self, model, *, mechanism_cache: MutableMapping | None = None) -> None:
        super().__init__(model)
        self.mechanism_cache = mechanism_cache
        scenario = model.config
        self.settings = scenario.mechanism
        self.mechanism: Mechanism | None = None
        self.generated_at = -1
        self.generation_seconds = float("nan")
        self.n_generations = 0
        self.row_of = np.full(model.domain.n_x, -1, dtype=np.int64)
        self.allowed: np.ndarray | None = None  # (n_users, N) bool for per-user blocks
        self.bayes: BayesAttack | None = None
        self.rows_global = np.arange(model.domain.n_x)
        self.upload_errors_km = np.array([])
        self.likelihood: np.ndarray | None = None
        self.tracking = (
            TrackingAttack(
                model.domain.dist_xx,
                model.domain.prior,
                reach_km=model.mobility.reach_km,
                n_users=model.population.n_users,
            )
            if scenario.attacks.tracking
            else None
        )

    # ------------------------------------------------------------------ 2. mechanism
    def refresh_mechanism_if_due(self) -> bool:
        """Generate the mechanism if the policy says so; returns whether it did."""
        every = self.settings.refresh_every_ticks
        due = self.mechanism is None or (every > 0 and self.model.tick - self.generated_at >= every)
        if not due and self.allowed is not None:
            active = ~self.model.filters.halted
            pos = self.model.population.position
            inside = self.allowed[np.arange(len(pos)), pos]
            due = bool(np.any(active & ~inside))
        if due:
            self._generate()
        return due

    def _generate(self) -> None:
        model = self.model
        params = self.settings.constructor_params()
        per_user = self.settings.name == "dista_lp"
        if per_user:
            active = np.nonzero(~model.filters.halted)[0]
            # users at the same secret upload the same blocks: one DistA-LP user per secret
            params.setdefault("user_indices", np.unique(model.population.position[active]).tolist())
            params.setdefault("seed", int(model.streams["mechanism"].integers(2**31)))
        start = time.perf_counter()
        key = (
            self.settings.name,
            self.settings.epsilon_per_km,
            repr(sorted(params.items())),
            id(model.domain),
        )
        cached = None if per_user or self.mechanism_cache is None else self.mechanism_cache.get(key)
        if cached is not None:
            mech = cached
        else:
            mech = make(self.settings.name, epsilon=self.settings.epsilon_per_km, **params)
            mech.fit(model.domain)
            if not per_user and self.mechanism_cache is not None:
                self.mechanism_cache[key] = mech
        self.generation_seconds = time.perf_counter() - start
        self.mechanism, self.generated_at = mech, model.tick
        self.n_generations += 1
        sub = mech.domain_
        rows = sub.rows_in_parent if sub.rows_in_parent is not None else np.arange(sub.n_x)
        self.rows_global = rows
        self.row_of = np.full(model.domain.n_x, -1, dtype=np.int64)
        self.row_of[rows] = np.arange(len(rows))
        self.bayes = BayesAttack.fit(
            mech.matrix_, sub.prior, sub.dist_xx, pairs=sub.constraint_pairs
        )
        self.likelihood = None
        if self.tracking is not None:  # the server's view of Z over all secrets (0 off-block)
            self.likelihood = np.zeros((model.domain.n_x, mech.matrix_.shape[1]))
            self.likelihood[rows] = mech.matrix_
        self.allowed = None
        if per_user:
            self._per_user_blocks(mech, active)

    def _per_user_blocks(self, mech, active: np.ndarray) -> None:
        """Which secrets each user's downloaded block covers; upload-stage costs and attack."""
        from sim.mechanisms.dista_lp.user import local_blocks

        model = self.model
        n = model.population.n_users
        info = mech.info_
        slot_of = {int(x): m for m, x in enumerate(info["users"])}
        self.allowed = np.zeros((n, model.domain.n_x), dtype=bool)
        guesses = np.empty(len(active), dtype=np.int64)
        for a, user in enumerate(active):
            x = int(model.population.position[user])
            hood = local_blocks(model.domain, x, n_neighbours=mech.n_neighbours).neighbourhood
            self.allowed[user, hood] = True
            guesses[a] = upload_location_estimate(info["server_blocks"][slot_of[x]]["dy"])
        upload_cost = np.zeros(n)
        upload_cost[active] = model.report_cost(info["epsilon_upload"])
        paid = model.filters.request(upload_cost, component="upload")
        self.allowed[~paid] = False
        if model.config.attacks.upload:
            truth = model.population.position[active]
            self.upload_errors_km = model.domain.dist_xy[truth, guesses]

    @property
    def report_epsilon(self) -> float:
        """The pure eps of one report (DistA-LP: its output budget eps_pt)."""
        info = self.mechanism.info_ if self.mechanism is not None else {}
        return float(info.get("epsilon_pt", self.settings.epsilon_per_km))

    def mechanism_row(self) -> dict:
        """Tick-level facts about the current mechanism."""
        info = self.mechanism.info_ if self.mechanism is not None else {}
        return {
            "mechanism": self.settings.name,
            "epsilon_per_km": self.settings.epsilon_per_km,
            "report_epsilon_per_km": self.report_epsilon,
            "mechanism_generations": self.n_generations,
            "solver_status": str(info.get("solver_status", info.get("status", "n/a"))),
            "upload_attack_error_km": _mean(self.upload_errors_km),
        }

    # ------------------------------------------------------------------ 3. reports
    def collect_reports(self) -> Reports:
        """Users whose block covers their secret and who can pay report one sampled output."""
        model = self.model
        pos = model.population.position
        rows = self.row_of[pos]
        eligible = rows >= 0
        if self.allowed is not None:
            eligible &= self.allowed[np.arange(len(pos)), pos]
        costs = np.where(eligible, model.report_cost(self.report_epsilon), 0.0)
        paid = model.filters.request(costs, component="reports")
        users = np.nonzero(paid)[0]
        assert self.mechanism is not None, "refresh_mechanism_if_due runs before the reports"
        outputs = self.mechanism.sample_many(rows[users], model.streams["reports"])
        secrets = pos[users]
        return Reports(
            users=users,
            secrets=secrets,
            outputs=outputs,
            loss_km=model.domain.dist_xy[secrets, outputs],
        )

    # ------------------------------------------------------------------ 4. queries
    def ask_queries(self) -> dict[str, float]:
        """Adaptive queries over the users' true locations (see sim.queries)."""
        from sim.server_queries import ask_queries

        return ask_queries(self.model)

    # ------------------------------------------------------------------ 5. attacks
    def attack(self, reports: Reports) -> Attacks:
        """Single-report Bayesian attack on every report, and the tracking filter."""
        dist = self.model.domain.dist_xx
        out = reports.outputs
        to_global = self.rows_global
        assert self.bayes is not None, "the Bayesian attack is fitted with the mechanism"
        optimal = to_global[self.bayes.optimal_estimate[out]]
        map_guess = to_global[self.bayes.map_estimate[out]]
        tracking_error = tracking_hit = None
        if self.tracking is not None:
            assert self.likelihood is not None  # set with the mechanism when tracking is on
            guesses = self.tracking.step(self.likelihood, reports.users, out)[reports.users]
            tracking_error = dist[reports.secrets, guesses]
            tracking_hit = (guesses == reports.secrets).astype(float)
        return Attacks(
            users=reports.users,
            single_error_km=dist[reports.secrets, optimal],
            single_hit=(map_guess == reports.secrets).astype(float),
            expected_error_km=self.bayes.expected_error_km[out],
            leakage_per_km=self.bayes.leakage_per_km[out],
            tracking_error_km=tracking_error,
            tracking_hit=tracking_hit,
            single_map_error_km=dist[reports.secrets, map_guess],
        )


def _mean(values) -> float:
    return float(np.mean(values)) if values is not None and len(values) else float("nan")
