"""The server's attacks on the reports of a tick: single-report Bayes and tracking.

Built once per mechanism (:meth:`ReportAttacks.on_mechanism`) and run on each tick's reports
(:meth:`ReportAttacks.run`), all from the server's view.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from sim.attacks import BayesAttack, TrackingAttack


@dataclass
class AttackResults:
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

    def success(self, n: int) -> np.ndarray:
        """Per user, whether the server's best guess of its secret this tick is exact.

        The tracking guess when tracking runs (every user has one), else the single-report
        MAP guess of reporting users (0 for silent users: no guess).
        """
        hit = np.zeros(n)
        values = self.tracking_hit if self.tracking_hit is not None else self.single_hit
        hit[self.users] = values
        return hit


class ReportAttacks:
    """Single-report Bayesian attack on every report, and (optionally) the tracking filter."""

    def __init__(self, domain, *, reach_km, n_users: int, tracking: bool) -> None:
        self.domain = domain
        self.tracking = (
            TrackingAttack(domain.dist_xx, domain.prior, reach_km=reach_km, n_users=n_users)
            if tracking
            else None
        )
        self.bayes: BayesAttack | None = None
        self.rows_global = np.arange(domain.n_x)
        self.likelihood: np.ndarray | None = None
        self.hit_probability = float("nan")

    def on_mechanism(self, mech, rows_global: np.ndarray) -> None:
        """Tabulate the posterior of every output of a new mechanism."""
        sub = mech.domain_
        self.rows_global = rows_global
        self.bayes = BayesAttack.fit(
            mech.matrix_, sub.prior, sub.dist_xx, pairs=sub.constraint_pairs
        )
        # prior-averaged chance that the MAP guess of one report is exact (public)
        self.hit_probability = float((sub.prior[:, None] * mech.matrix_).max(axis=0).sum())
        self.likelihood = None
        if self.tracking is not None:  # the server's view of Z over all secrets (0 off-block)
            self.likelihood = np.zeros((self.domain.n_x, mech.matrix_.shape[1]))
            self.likelihood[rows_global] = mech.matrix_

    def run(self, users: np.ndarray, secrets: np.ndarray, outputs: np.ndarray) -> AttackResults:
        """Attack the reports ``outputs`` of ``users`` (truths ``secrets`` to score them)."""
        assert self.bayes is not None, "on_mechanism runs before the first attack"
        dist = self.domain.dist_xx
        optimal = self.rows_global[self.bayes.optimal_estimate[outputs]]
        map_guess = self.rows_global[self.bayes.map_estimate[outputs]]
        tracking_error = tracking_hit = None
        if self.tracking is not None:
            assert self.likelihood is not None  # set with the mechanism when tracking is on
            guesses = self.tracking.step(self.likelihood, users, outputs)[users]
            tracking_error = dist[secrets, guesses]
            tracking_hit = (guesses == secrets).astype(float)
        return AttackResults(
            users=users,
            single_error_km=dist[secrets, optimal],
            single_hit=(map_guess == secrets).astype(float),
            expected_error_km=self.bayes.expected_error_km[outputs],
            leakage_per_km=self.bayes.leakage_per_km[outputs],
            tracking_error_km=tracking_error,
            tracking_hit=tracking_hit,
            single_map_error_km=dist[secrets, map_guess],
        )


def _mean(values) -> float:
    return float(np.mean(values)) if values is not None and len(values) else float("nan")
