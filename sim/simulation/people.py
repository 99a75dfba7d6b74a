"""People who live somewhere: homes, work places, a daily diary and EPR stays on the roads.

``[mobility] model = "epr"`` (docs/mobility.md, "The model"). Each user has a home drawn from
the housing relevance map (distinct homes while the map has room) and, for a share of users, a
work place drawn by gravity from home. A per-hour two-state Markov chain (DITRAS: at home /
elsewhere) says where a user should be; a change of state ends the current stay (once it has
lasted the shortest stay). When a stay ends elsewhere-bound, a worker in working hours goes to
work with ``work_prob`` and stays until the working hours end; otherwise exploration and
preferential return (Song et al. 2010): a new place with probability ``rho S^-gamma``, drawn
by gravity ``activity_j / d_ij^2`` from where the user is (density-EPR, Pappalardo et al.
2015), else a known place other than home in proportion to its visits. Stays last a draw of
the truncated power law ``dt^(-1-beta) exp(-dt/tau)`` of at least ``min_stay_min``. Trips walk
shortest road paths at ``speed_mps`` by a next-hop matrix.

All state is arrays, one entry per user; the known places are a ``(users, capacity)`` table.
The position after ``k`` steps is the user's secret at tick ``k`` of the shared clock
(:mod:`mdpsim._core.clock`).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field

import numpy as np

from mdpsim._core.clock import SECONDS_PER_DAY, SECONDS_PER_HOUR, hour_of_tick
from mdpsim.simulation.mobility import secret_trees
from mdpsim.simulation.relevance import Relevance

#: Stylised share of people at home by hour of the day (0 .. 23), weekday, read off the shape
#: of time-use surveys' "at home" curves (Eurostat HETUS; DITRAS' fitted diaries have the same
#: night plateau and midday trough). docs/mobility.md says it is a stylised default.
HOME_BY_HOUR = (
    0.97, 0.97, 0.97, 0.97, 0.97, 0.97, 0.93, 0.80, 0.60, 0.45, 0.40, 0.40,
    0.40, 0.40, 0.40, 0.40, 0.45, 0.55, 0.65, 0.70, 0.78, 0.85, 0.92, 0.96,
)  # fmt: skip
#: Longest stay the dwell sampler draws (the law's tail beyond it is < 1e-5 at tau 17 h).
MAX_STAY_H = 24.0 * 14
_GRID = 4096


@dataclass(frozen=True)
class PeopleParams:
    """The model's parameters (each a ``[mobility]`` field; its description cites the
    source of its default)."""

    rho: float = 0.6
    gamma: float = 0.21
    beta: float = 0.8
    tau_h: float = 17.0
    min_stay_min: float = 20.0
    work_share: float = 0.5
    work_hours: tuple[int, int] = (9, 17)
    work_prob: float = 0.8
    gravity_min_km: float = 0.1
    home_by_hour: tuple[float, ...] = HOME_BY_HOUR
    diary_churn: float = 0.0
    speed_mps: float = 1.4
    tick_seconds: float = 300.0
    start_hour: float = 0.0


@dataclass(frozen=True, eq=False)
class PeopleModel:
    """What is shared by all users of a domain: routes, gravity, dwell sampler, diary."""

    params: PeopleParams
    relevance: Relevance
    next_hop: np.ndarray  # (N, N): the next secret from i towards j (j itself at j)
    gap_m: np.ndarray  # (N, N) float32: road distance in metres, i to j (adjacent hops read it)
    gravity: np.ndarray  # (N, N) float32: activity_j / max(d_ij, d0)^2, zero diagonal
    leave: np.ndarray  # (24,): P(home -> elsewhere) entering hour h
    back: np.ndarray  # (24,): P(elsewhere -> home) entering hour h
    stay_cdf: np.ndarray = field(repr=False)
    stay_s: np.ndarray = field(repr=False)

    def __deepcopy__(self, memo) -> PeopleModel:
        return self  # immutable and shared: a population's copy walks on the same model

    @classmethod
    def build(cls, domain, relevance: Relevance, params: PeopleParams) -> PeopleModel:
        """Routes (all-pairs shortest paths on the secrets' graph), gravity and samplers."""
        n = domain.n_x
        next_hop = secret_trees(domain).T.astype(np.int32)  # [i, j]: the hop before i on j -> i
        next_hop[np.arange(n), np.arange(n)] = np.arange(n)
        dist = np.maximum(domain.dist_xx, params.gravity_min_km)
        gravity = (relevance.activity[None, :] / dist**2).astype(np.float32)
        np.fill_diagonal(gravity, 0.0)
        leave, back, stay_s, stay_cdf = _samplers(params)
        arrays = (next_hop, gravity, leave, back, stay_s, stay_cdf)
        gap_m = (domain.dist_xx * 1000.0).astype(np.float32)
        for arr in (*arrays, gap_m):
            arr.setflags(write=False)
        return cls(params, relevance, next_hop, gap_m, gravity, leave, back, stay_cdf, stay_s)

    def stay_ticks(self, rng: np.random.Generator, size: int) -> np.ndarray:
        """Stay lengths in ticks: inverse CDF of the truncated power law, rounded to the
        nearest tick and at least the shortest stay's ticks (rounded up)."""
        p = self.params
        seconds = np.interp(rng.random(size), self.stay_cdf, self.stay_s)
        shortest = np.ceil(p.min_stay_min * 60.0 / p.tick_seconds - 1e-9)
        return np.maximum(np.rint(seconds / p.tick_seconds), shortest).astype(np.int64)


def diary_chain(home_by_hour: np.ndarray, churn: float) -> tuple[np.ndarray, np.ndarray]:
    """Per hour h, ``P(home -> elsewhere)`` and ``P(elsewhere -> home)`` entering h whose
    daily cycle keeps the share at home at ``home_by_hour``; ``churn`` of the growing side
    also switches (people swap places, not only flows)."""
    pi = np.asarray(home_by_hour, dtype=float)
    prev = np.roll(pi, 1)
    leave, back = np.empty(24), np.empty(24)
    for h in range(24):
        if pi[h] <= prev[h]:  # people leave: some come back too
            back[h] = churn * pi[h]
            leave[h] = (prev[h] - pi[h] + (1 - prev[h]) * back[h]) / prev[h]
        else:
            leave[h] = churn * (1 - pi[h])
            back[h] = (pi[h] - prev[h] * (1 - leave[h])) / (1 - prev[h])
    return np.clip(leave, 0.0, 1.0), np.clip(back, 0.0, 1.0)


@functools.lru_cache(maxsize=8)
def _samplers(p: PeopleParams) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``(leave, back, stay_s, stay_cdf)``: the diary chain and the dwell sampler, read-only.
    They depend on the parameters alone (kept: a game's every new seed has the same)."""
    leave, back = diary_chain(np.asarray(p.home_by_hour), p.diary_churn)
    arrays = (leave, back, *_stay_grid(p))
    for arr in arrays:
        arr.setflags(write=False)
    return arrays


def _stay_grid(p: PeopleParams) -> tuple[np.ndarray, np.ndarray]:
    lo, hi = p.min_stay_min * 60.0, MAX_STAY_H * 3600.0
    t = np.geomspace(lo, hi, _GRID)
    pdf = t ** (-1.0 - p.beta) * np.exp(-t / (p.tau_h * 3600.0))
    cdf = np.concatenate([[0.0], np.cumsum(0.5 * (pdf[1:] + pdf[:-1]) * np.diff(t))])
    return t, cdf / cdf[-1]


def _pick(weights: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """One column per row of ``weights`` (rows with positive sum), in proportion."""
    cum = np.cumsum(weights, axis=1)
    target = rng.random(len(weights)) * cum[:, -1]
    return np.minimum((cum <= target[:, None]).sum(axis=1), weights.shape[1] - 1)


def draw_homes(housing: np.ndarray, n_users: int, rng: np.random.Generator) -> np.ndarray:
    """Homes from the housing map, distinct while it has room: rounds of weighted draws
    without replacement (Gumbel top-k) over the secrets."""
    logw = np.log(housing)
    out: list[np.ndarray] = []
    left = n_users
    while left:
        keys = logw - np.log(-np.log(rng.random(len(housing))))
        take = min(left, len(housing))
        out.append(np.argsort(-keys, kind="stable")[:take])
        left -= take
    homes = np.concatenate(out)
    return homes[rng.permutation(n_users)].astype(np.int64)


class People:
    """Positions, homes, work places, diaries, stays and known places of all users."""

    def __init__(self, model: PeopleModel, n_users: int, rng: np.random.Generator):
        p = model.params
        self.model = model
        self.tick = 0
        self.home = draw_homes(model.relevance.housing, n_users, rng)
        workers = rng.random(n_users) < p.work_share
        self.work = np.full(n_users, -1, dtype=np.int64)
        if workers.any():
            self.work[workers] = _pick(model.gravity[self.home[workers]].astype(float), rng)
        self.position = self.home.copy()
        self.dest = self.home.copy()
        self.moving = np.zeros(n_users, dtype=bool)
        self.carry_m = np.zeros(n_users)
        hour = int(hour_of_tick(0, p.tick_seconds, p.start_hour))
        self.hour = hour
        self.diary_home = rng.random(n_users) < p.home_by_hour[hour]
        self.dwell_left = np.where(self.diary_home, model.stay_ticks(rng, n_users), 0)
        self.stay_ticks = np.full(n_users, 10**6, dtype=np.int64)  # at home since before t0
        cap = 16
        self.known = np.full((n_users, cap), -1, dtype=np.int64)
        self.visits = np.zeros((n_users, cap), dtype=np.int64)
        self.known[:, 0], self.visits[:, 0] = self.home, 1
        self.n_known = np.ones(n_users, dtype=np.int64)
        self.min_ticks = int(np.ceil(p.min_stay_min * 60.0 / p.tick_seconds - 1e-9))

    @property
    def n_users(self) -> int:
        """Number of users."""
        return len(self.position)

    def step(self, rng: np.random.Generator) -> None:
        """Advance every user by one tick: diary, stays, decisions, then moves."""
        p = self.model.params
        self.tick += 1
        hour = _hour(self.tick, p)
        if hour != self.hour:
            self.hour = hour
            self._diary(rng, hour)
        kernels = _compiled()
        deciding = kernels.tick_stays(self.moving, self.dwell_left, self.stay_ticks)
        if len(deciding):
            self._decide(deciding, rng, hour)
        m = self.model
        stride_m = p.speed_mps * p.tick_seconds
        arrived = kernels.walk(self.moving, self.position, self.dest, self.carry_m,
                               self.stay_ticks, m.next_hop, m.gap_m, stride_m)  # fmt: skip
        if len(arrived):  # none: no stay to draw (as drawing zero stays, which draws nothing)
            self._arrive(arrived, rng, hour)

    def _diary(self, rng: np.random.Generator, hour: int) -> None:
        u = rng.random(self.n_users)
        flip = np.where(self.diary_home, u < self.model.leave[hour], u < self.model.back[hour])
        self.diary_home ^= flip
        at_home = self.position == self.home
        wrong = flip & ~self.moving & (at_home != self.diary_home)
        self.dwell_left[wrong] = np.maximum(self.min_ticks - self.stay_ticks[wrong], 0)

    def _decide(self, users: np.ndarray, rng: np.random.Generator, hour: int) -> None:
        p, m = self.model.params, self.model
        dest = self.home[users].copy()
        out = ~self.diary_home[users]
        lo, hi = p.work_hours
        in_work = lo <= hour < hi
        to_work = out & (self.work[users] >= 0) & in_work & (rng.random(len(users)) < p.work_prob)
        to_work &= self.position[users] != self.work[users]
        dest[to_work] = self.work[users[to_work]]
        epr = out & ~to_work
        if epr.any():
            dest[epr] = self._epr(users[epr], rng)
        # stay on where a user already is (home at home): a fresh stay length, same stay
        here = dest == self.position[users]
        self.dwell_left[users[here]] = m.stay_ticks(rng, int(here.sum()))
        go = users[~here]
        self.dest[go] = dest[~here]
        self.moving[go] = True
        self.carry_m[go] = 0.0
        self._count(go, dest[~here])

    def _epr(self, users: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        p, m = self.model.params, self.model
        n_known = self.n_known[users]
        known = self.known[users, : n_known.max()]
        visits = self.visits[users, : n_known.max()].astype(float)
        visits[(known == self.home[users, None]) | (known == self.position[users, None])] = 0.0
        can_return = visits.sum(axis=1) > 0
        explore = (rng.random(len(users)) < p.rho * n_known ** (-p.gamma)) | ~can_return
        out = np.empty(len(users), dtype=np.int64)
        if explore.any():
            rows = users[explore]
            weights = m.gravity[self.position[rows]].astype(float)
            kn = self.known[rows, : n_known[explore].max()]
            r, c = np.nonzero(kn >= 0)
            weights[r, kn[r, c]] = 0.0
            out[explore] = _pick(weights, rng)
        if (~explore).any():
            slot = _pick(visits[~explore], rng)
            out[~explore] = known[~explore][np.arange(len(slot)), slot]
        return out

    def _count(self, users: np.ndarray, places: np.ndarray) -> None:
        """One more visit of each user's ``places`` (a new place joins the table)."""
        hit = self.known[users] == places[:, None]
        seen = hit.any(axis=1)
        r, c = np.nonzero(hit)
        self.visits[users[r], c] += 1
        new_u, new_p = users[~seen], places[~seen]
        if len(new_u):
            if self.n_known[new_u].max() >= self.known.shape[1]:
                pad = self.known.shape[1]
                self.known = np.pad(self.known, ((0, 0), (0, pad)), constant_values=-1)
                self.visits = np.pad(self.visits, ((0, 0), (0, pad)))
            slot = self.n_known[new_u]
            self.known[new_u, slot], self.visits[new_u, slot] = new_p, 1
            self.n_known[new_u] += 1

    def _arrive(self, arrived: np.ndarray, rng: np.random.Generator, hour: int) -> None:
        """The stays of the users who ``arrived`` this tick (``_people_kernels.walk``): a
        worker at work stays till the working hours end, one whose diary changed on the way
        the shortest stay, everyone else a drawn length."""
        m, p = self.model, self.model.params
        dwell = m.stay_ticks(rng, len(arrived))
        lo, hi = p.work_hours
        at_work = (self.position[arrived] == self.work[arrived]) & ~self.diary_home[arrived]
        if lo <= hour < hi and at_work.any():
            ticks_left = ((hi - hour) * 3600.0) // p.tick_seconds
            dwell[at_work] = np.maximum(int(ticks_left), self.min_ticks)
        wrong = (self.position[arrived] == self.home[arrived]) != self.diary_home[arrived]
        dwell[wrong & ~at_work] = self.min_ticks  # the diary changed on the way
        self.dwell_left[arrived] = dwell


def _hour(tick: int, p: PeopleParams) -> int:
    """:func:`~mdpsim._core.clock.hour_of_tick` of one tick in Python floats (the same
    float64 operations; tests/sim/test_people.py checks them against each other)."""
    seconds = (p.start_hour * SECONDS_PER_HOUR + float(tick) * p.tick_seconds) % SECONDS_PER_DAY
    return int(seconds // SECONDS_PER_HOUR)


@functools.cache
def _compiled():
    """The compiled kernels' module (``_people_kernels``), imported on the first tick
    (numba's import is not paid by ``import mdpsim``)."""
    from mdpsim.simulation import _people_kernels

    return _people_kernels
