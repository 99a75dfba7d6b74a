"""Significant places: where each pseudonym dwells, home first, from its reports over time.

Each report adds its single-report posterior ``Pr[x | y]`` to its pseudonym's visit density;
time spent at a place piles mass there, trips spread it thinly along routes. Places are the
density's peaks, taken greedily: the heaviest secret, then the heaviest secret farther than
``separation_km`` from those taken, and so on (``k`` of them, home first).

Scored against the truth (:func:`true_places`): precision at k (the share of the k inferred
places within ``match_km`` of some true place), recall at k (the share of the user's k most
visited true places found), and, in the common family, the
home: hit (within ``match_km``), error (distance from the inferred to the true home), and the
entropy of the visit density.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from mdpsim._core.validation import check_positive_int, check_scalar
from mdpsim.attacks.base import (
    Attack,
    Observation,
    PlacesEstimate,
    Release,
    Scores,
    Truth,
    entropy_bits,
    register,
    register_scorer,
)
from mdpsim.attacks.bayes import posterior_table


class VisitDensity:
    """Per pseudonym, the sum of its reports' posteriors over the secrets."""

    def __init__(self, n_x: int) -> None:
        self.n_x = n_x
        self.index: dict[int, int] = {}
        self.rows: list[np.ndarray] = []
        self._post_t: np.ndarray | None = None  # (K, N) posterior of each output

    def release(self, release: Release) -> None:
        """Tabulate the single-report posterior of the new matrix over all secrets."""
        post = posterior_table(release.matrix, release.mechanism.domain_.prior)
        self._post_t = np.ascontiguousarray(post.T)

    def add(self, obs: Observation) -> None:
        """Add the posteriors of one tick's reports to their pseudonyms."""
        if self._post_t is None:
            raise RuntimeError("observe() before any release()")
        users = obs.reporting
        rows = np.empty(len(users), dtype=np.int64)
        for i, p in enumerate(obs.pseudonyms[users].tolist()):
            if p not in self.index:
                self.index[p] = len(self.rows)
                self.rows.append(np.zeros(self.n_x))
            rows[i] = self.index[p]
        gathered = self._post_t[obs.outputs[users]]
        for r, g in zip(rows.tolist(), gathered, strict=True):
            self.rows[r] += g

    def matrix(self) -> tuple[np.ndarray, np.ndarray]:
        """``(pseudonyms, (P, N) densities)``."""
        labels = np.array(list(self.index), dtype=np.int64)
        dens = np.stack(self.rows) if self.rows else np.zeros((0, self.n_x))
        return labels, dens


def peaks(density: np.ndarray, dist_xx: np.ndarray, *, k: int, separation_km: float):
    """Greedy peaks of every row: ``(P, k)`` secret indices (-1 pads) and the mass within
    ``separation_km`` of each."""
    p = len(density)
    places = np.full((p, k), -1, dtype=np.int64)
    mass = np.zeros((p, k))
    near = dist_xx <= separation_km  # (N, N)
    for r in range(p):
        left = density[r].copy()
        for j in range(k):
            best = int(left.argmax())
            if left[best] <= 0:
                break
            places[r, j] = best
            mass[r, j] = left[near[best]].sum()
            left[near[best]] = 0.0
    return places, mass


@register("places")
class Places(Attack):
    """Infer each pseudonym's ``k`` significant places (home first) from all its reports."""

    def __init__(
        self,
        *,
        k: int = 3,
        separation_km: float = 0.2,
        match_km: float = 0.2,
        min_stay_ticks: int = 2,
    ) -> None:
        km: dict[str, Any] = {
            "min": 0,
            "include_boundaries": "neither",
            "finite": False,
            "owner": "places",
            "unit": "km",
        }
        self.k = check_positive_int(k, "k", owner="places")
        self.separation_km = check_scalar(separation_km, "separation_km", **km)
        self.match_km = check_scalar(match_km, "match_km", **km)
        self.min_stay_ticks = check_positive_int(min_stay_ticks, "min_stay_ticks", owner="places")

    def start(self, context) -> None:
        """Empty visit densities."""
        super().start(context)
        self.density_ = VisitDensity(context.domain.n_x)

    def release(self, release: Release) -> None:
        """Posteriors of the new mechanism."""
        self.density_.release(release)

    def observe(self, obs: Observation) -> list:
        """Accumulate; places come at the end."""
        self.density_.add(obs)
        return []

    def finish(self) -> list[PlacesEstimate]:
        """The peaks of every pseudonym's visit density."""
        labels, dens = self.density_.matrix()
        places, mass = peaks(
            dens, self.context.domain.dist_xx, k=self.k, separation_km=self.separation_km
        )
        total = dens.sum(axis=1, keepdims=True)
        ent = entropy_bits(dens / np.where(total > 0, total, 1.0))
        return [
            PlacesEstimate(
                pseudonyms=labels,
                places=places,
                mass=mass,
                entropy_bits=ent,
                match_km=self.match_km,
                min_stay_ticks=self.min_stay_ticks,
            )
        ]


def true_places(trace: np.ndarray, *, min_stay_ticks: int) -> list[np.ndarray]:
    """Per user (column of a ``(T, U)`` trace), the secrets it stayed at for
    ``min_stay_ticks`` ticks in a row, ranked by total ticks spent in such stays (home first)."""
    out = []
    for u in range(trace.shape[1]):
        path = trace[:, u]
        change = np.flatnonzero(np.diff(path)) + 1
        starts = np.concatenate([[0], change])
        lengths = np.diff(np.concatenate([starts, [len(path)]]))
        keep = lengths >= min_stay_ticks
        where, time = path[starts[keep]], lengths[keep]
        totals: dict[int, int] = {}
        for x, n in zip(where.tolist(), time.tolist(), strict=True):
            totals[x] = totals.get(x, 0) + n
        ranked = sorted(totals, key=lambda x: (-totals[x], x))
        out.append(np.array(ranked, dtype=np.int64))
    return out


def score_places(est: PlacesEstimate, truth: Truth, domain) -> Scores:
    """Precision and recall at k, and the home's hit and error, per pseudonym."""
    ticks = sorted(truth.positions)
    users = truth.users_of(est.pseudonyms, (ticks[0], ticks[-1]))
    # a pseudonym's truth is its user's stays while it carried that pseudonym
    trace = truth.trace()
    pseud = np.stack([truth.pseudonyms[t] for t in ticks])
    n = len(users)
    values = {
        name: np.full(n, np.nan)
        for name in ("precision_at_k", "recall_at_k", "hit", "error_km", "guess_error_km")
    }
    for r, (label, u) in enumerate(zip(est.pseudonyms.tolist(), users.tolist(), strict=True)):
        own = pseud[:, u] == label
        actual = true_places(trace[own, u : u + 1], min_stay_ticks=est.min_stay_ticks)[0]
        guessed = est.places[r][est.places[r] >= 0]
        if len(actual) == 0 or len(guessed) == 0:
            continue
        close = domain.dist_xx[np.ix_(guessed, actual)] <= est.match_km  # (k', n_true)
        values["precision_at_k"][r] = close.any(axis=1).sum() / est.places.shape[1]
        values["recall_at_k"][r] = close[:, : est.places.shape[1]].any(axis=0).mean()
        home_km = domain.dist_xx[guessed[0], actual[0]]
        values["hit"][r] = float(home_km <= est.match_km)
        values["error_km"][r] = values["guess_error_km"][r] = home_km
    values["entropy_bits"] = np.asarray(est.entropy_bits, dtype=float)
    values["leakage_per_km"] = np.full(n, np.nan)
    return Scores(tick=None, users=users, values=values)


register_scorer(PlacesEstimate)(score_places)
