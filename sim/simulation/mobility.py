"""Mobile users on the road network: trips along shortest paths at a speed, with dwell times.

Users live on the secrets X of a road :class:`~mdpsim.geo.domain.Domain`. The secrets and their
constraint pairs form a graph whose shortest paths are exactly the road distances, so a trip
is a walk along that graph. Destinations are a fixed set of places drawn from the prior.
State is held in arrays (one entry per user); a tick advances every user by
``speed * tick_seconds`` metres and snaps it to the last secret passed, carrying the rest.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from weakref import WeakKeyDictionary

import numpy as np

from mdpsim.errors import InputError
from mdpsim.geo.routing import shortest_path_trees


@dataclass(frozen=True)
class MobilityModel:
    """What moves users, and what a server may assume about it.

    Attributes
    ----------
    places
        Secret indices of the destinations.
    step_m
        Distance travelled per tick, metres.
    dwell_ticks
        ``(min, max)`` ticks spent at each destination.
    reach_km
        Per secret, the largest road distance a user there can be at one tick later: the
        step plus the longest gap to an adjacent secret (a user carries less than the gap
        it is crossing). The support of the tracking kernel.
    """

    places: np.ndarray
    step_m: float
    dwell_ticks: tuple[int, int]
    reach_km: np.ndarray
    _pred: np.ndarray  # (n_places, N): next hop towards each place (shortest-path tree)

    @classmethod
    def build(
        cls,
        domain,
        *,
        n_places: int,
        speed_mps: float,
        tick_seconds: float,
        dwell_ticks: Sequence[int],
        rng: np.random.Generator,
    ) -> MobilityModel:
        """Draw destinations from the prior and precompute routes towards each of them."""
        if domain.metric != "road":
            raise InputError("mobility needs a road domain (domain.metric = 'road')")
        n_places = min(n_places, domain.n_x)
        places = np.sort(rng.choice(domain.n_x, size=n_places, replace=False, p=domain.prior))
        pred, longest_gap_km = _routes(domain, places)
        step_m = speed_mps * tick_seconds
        reach_km = step_m / 1000.0 + longest_gap_km
        for arr in (places, reach_km):
            arr.setflags(write=False)  # a model is shared (build_world keeps one per seed)
        return cls(
            places=places,
            step_m=step_m,
            dwell_ticks=(int(dwell_ticks[0]), int(dwell_ticks[1])),
            reach_km=reach_km,
            _pred=pred,
        )

    def route(self, start: int, place_slot: int) -> np.ndarray:
        """Secrets from ``start`` to ``places[place_slot]`` along a shortest path."""
        pred = self._pred[place_slot]
        path = [start]
        node = start
        while pred[node] >= 0:
            node = int(pred[node])
            path.append(node)
        return np.asarray(path, dtype=np.int64)


#: Per domain, :func:`_routes` by places (an environment's resets of one seed draw the same).
_ROUTES: WeakKeyDictionary = WeakKeyDictionary()
#: Per domain, :func:`secret_trees` (the mobility and the people model of a domain share them).
_TREES: WeakKeyDictionary = WeakKeyDictionary()


def secret_trees(domain) -> np.ndarray:
    """``(N, N)`` int32, read-only: row ``s`` is the shortest-path tree from secret ``s`` on
    the secrets' graph (the constraint pairs weighted by their road distances), as
    :func:`~mdpsim.geo.routing.shortest_path_trees` gives it; built once per domain (a row
    does not depend on the other sources)."""
    if domain not in _TREES:
        pairs = domain.constraint_pairs
        w = domain.dist_xx[pairs[:, 0], pairs[:, 1]]
        n = domain.n_x
        pred = shortest_path_trees(n, pairs[:, 0], pairs[:, 1], w, np.arange(n))
        pred.setflags(write=False)
        _TREES[domain] = pred
    return _TREES[domain]


def _routes(domain, places: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The shortest-path trees towards ``places`` (next hops, ``(n_places, N)``) and each
    secret's longest gap (km) to an adjacent secret; read-only, kept per domain and places."""
    per_domain = _ROUTES.setdefault(domain, {})
    key = places.tobytes()
    if key not in per_domain:
        pairs = domain.constraint_pairs
        w = domain.dist_xx[pairs[:, 0], pairs[:, 1]]
        pred = secret_trees(domain)[places]
        longest_gap_km = np.zeros(domain.n_x)
        np.maximum.at(longest_gap_km, pairs[:, 0], w)
        np.maximum.at(longest_gap_km, pairs[:, 1], w)
        for arr in (pred, longest_gap_km):
            arr.setflags(write=False)
        per_domain[key] = (pred, longest_gap_km)
    return per_domain[key]


class Population:
    """Positions and trip state of all users, as arrays.

    With ``personal_places = k > 0`` every user has its own k of the model's places (drawn
    once, distinct), starts at the first (its home) and picks the r-th as a destination with
    weight ``1 / r``: home most often. With 0 every user picks among all places uniformly.
    """

    def __init__(
        self,
        model: MobilityModel,
        domain,
        n_users: int,
        rng: np.random.Generator,
        *,
        personal_places: int = 0,
    ):
        self.model = model
        self.dist_xx = domain.dist_xx
        self.position = rng.choice(domain.n_x, size=n_users, p=domain.prior).astype(np.int64)
        self.own_places: np.ndarray | None = None  # (U, k) slots into model.places
        if personal_places:
            k = min(int(personal_places), len(model.places))
            self.own_places = np.stack(
                [rng.choice(len(model.places), size=k, replace=False) for _ in range(n_users)]
            )
            weights = 1.0 / np.arange(1, k + 1)
            self._place_weights = weights / weights.sum()
            self.position = model.places[self.own_places[:, 0]].astype(np.int64)
        self.dwell_left = rng.integers(0, model.dwell_ticks[1] + 1, size=n_users)
        self.carry_m = np.zeros(n_users)
        self._route: list[np.ndarray | None] = [None] * n_users
        self._hop = np.zeros(n_users, dtype=np.int64)

    @property
    def n_users(self) -> int:
        """Number of users."""
        return len(self.position)

    def step(self, rng: np.random.Generator) -> None:
        """Advance every user by one tick (dwelling users stay put)."""
        dwelling = self.dwell_left > 0
        self.dwell_left[dwelling] -= 1
        for u in np.nonzero(~dwelling)[0].tolist():
            if self._route[u] is None:
                self._start_trip(u, rng)
            self._advance(u, rng)

    def _start_trip(self, u: int, rng: np.random.Generator) -> None:
        if self.own_places is None:
            slot = int(rng.integers(len(self.model.places)))
        else:
            slot = int(rng.choice(self.own_places[u], p=self._place_weights))
        route = self.model.route(int(self.position[u]), slot)
        self._route[u], self._hop[u], self.carry_m[u] = route, 0, 0.0

    def _advance(self, u: int, rng: np.random.Generator) -> None:
        route = self._route[u]
        assert route is not None, "a moving user has a route (_start_trip)"
        budget_m = self.carry_m[u] + self.model.step_m
        hop = self._hop[u]
        while hop + 1 < len(route):
            gap_m = self.dist_xx[route[hop], route[hop + 1]] * 1000.0
            if gap_m > budget_m:
                break
            budget_m -= gap_m
            hop += 1
        self._hop[u], self.position[u] = hop, route[hop]
        if hop + 1 == len(route):  # arrived: dwell, then a new trip
            lo, hi = self.model.dwell_ticks
            self.dwell_left[u] = rng.integers(lo, hi + 1)
            self._route[u], self.carry_m[u] = None, 0.0
        else:
            self.carry_m[u] = budget_m
