"""Home and work inference: each pseudonym's densest place at night and in working hours.

Each report's single-report posterior ``Pr[x | y]`` is added to its pseudonym's visit density
of the window the tick falls in (:func:`window_of_ticks`): the night (22:00 to 07:00, the hours
of scikit-mobility's home) and working hours (09:00 to 17:00, Monday to Friday; day 0 of the
clock is a Monday, :mod:`mdpsim._core.clock`). The inferred home is the densest secret of the
night density, the inferred work the densest of the working-hours one (Golle & Partridge 2009;
Zang & Bolot 2011).

Scored against the truth by the same rule on the true positions (:func:`true_home_work`: the
most frequent secret of the user's night ticks and of its working-hour ticks, while it carried
that pseudonym), so the truth exists for any mobility model and for imported traces: ``hit`` and
``error_km`` are the home's (within ``match_km``, km), ``work_hit`` and ``work_error_km`` the
work's, ``pair_hit`` both, and ``anonymity_set`` the number of users whose true (home, work) pair
lies within ``match_km`` of the inferred pair on both ends (``unique``: that set is the user
alone, the Golle & Partridge re-identification).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from mdpsim._core.clock import day_of_tick, hour_of_tick
from mdpsim._core.validation import check_scalar
from mdpsim.attacks.base import (
    Attack,
    Observation,
    Release,
    Scores,
    Truth,
    entropy_bits,
    register,
    register_scorer,
)
from mdpsim.attacks.bayes import posterior_table

NAME = "home_work"
#: Night: hours >= 22 or < 7 (scikit-mobility's ``home_location`` window).
NIGHT_HOURS = (22, 7)
#: Working hours: 09:00 to 17:00 on weekdays (days 0-4 of each week; day 0 is a Monday).
WORK_HOURS = (9, 17)
WORK_DAYS = 5
NIGHT, WORK, OTHER = 0, 1, -1


def window_of_ticks(ticks, tick_seconds: float, start_hour: float) -> np.ndarray:
    """Per tick: :data:`NIGHT`, :data:`WORK` or :data:`OTHER` (an int array)."""
    hour = hour_of_tick(ticks, tick_seconds, start_hour)
    weekday = day_of_tick(ticks, tick_seconds, start_hour) % 7 < WORK_DAYS
    night = (hour >= NIGHT_HOURS[0]) | (hour < NIGHT_HOURS[1])
    work = weekday & (hour >= WORK_HOURS[0]) & (hour < WORK_HOURS[1])
    return np.where(night, NIGHT, np.where(work, WORK, OTHER)).astype(np.int64)


class WindowCounts:
    """Per pseudonym and window, report counts per output of the release in force; flushed
    into visit densities over the secrets (counts times the posterior table) at each release."""

    def __init__(self, n_x: int, n_windows: int) -> None:
        self.n_x, self.n_windows = n_x, n_windows
        self.index: dict[int, int] = {}
        self.density = np.zeros((n_windows, 0, n_x))
        self.counts: np.ndarray | None = None  # (W, P, K)
        self._post: np.ndarray | None = None  # (K, N)
        self._last: tuple[bytes, np.ndarray] | None = None  # pseudonyms -> rows, reused

    def release(self, release: Release) -> None:
        """Flush the counts of the old release; tabulate the new one's posteriors."""
        self.flush()
        self._post = np.ascontiguousarray(
            posterior_table(release.matrix, release.mechanism.domain_.prior).T
        )
        self.counts = np.zeros((self.n_windows, len(self.index), len(self._post)))

    def _rows(self, pseudonyms: np.ndarray) -> np.ndarray:
        key = pseudonyms.tobytes()
        if self._last is not None and self._last[0] == key:
            return self._last[1]
        rows = np.array(
            [self.index.setdefault(p, len(self.index)) for p in pseudonyms.tolist()],
            dtype=np.int64,
        )
        self._last = (key, rows)
        return rows

    def add(self, obs: Observation, window: int) -> None:
        """Count one tick's reports into ``window`` (rows for new pseudonyms on the way)."""
        if self.counts is None:
            raise RuntimeError(f"{NAME}: observe() before any release()")
        rows = self._rows(obs.pseudonyms)
        if len(self.index) > self.counts.shape[1]:
            grow = len(self.index) - self.counts.shape[1]
            self.counts = np.pad(self.counts, ((0, 0), (0, grow), (0, 0)))
        if window < 0:
            return
        users = obs.reporting
        self.counts[window, rows[users], obs.outputs[users]] += 1.0  # rows unique in a tick

    def flush(self) -> None:
        """Add the counts' posteriors to the densities (at a release)."""
        self.density = self.densities()
        if self.counts is not None:
            self.counts[:] = 0.0

    def densities(self) -> np.ndarray:
        """``(W, P, N)``: the densities with the counts of the release in force added (a new
        array: reading them mid-run changes nothing)."""
        n = len(self.index)
        density = np.pad(self.density, ((0, 0), (0, n - self.density.shape[1]), (0, 0)))
        if self.counts is None or self._post is None:
            return density
        for w in range(self.n_windows):
            c = self.counts[w]
            used = np.flatnonzero(c.any(axis=0))  # outputs reported: a smaller product
            density[w, : len(c)] += c[:, used] @ self._post[used]
        return density

    def labels(self) -> np.ndarray:
        """The pseudonyms, in row order."""
        return np.array(list(self.index), dtype=np.int64)


@dataclass(frozen=True, eq=False)
class HomeWorkEstimate:
    """Each pseudonym's inferred home and work (secret indices; -1: no report in the window),
    and the entropy (bits) of its night density."""

    pseudonyms: np.ndarray
    home: np.ndarray
    work: np.ndarray
    entropy_bits: np.ndarray
    match_km: float
    tick_seconds: float
    start_hour: float


@register(NAME)
class HomeWork(Attack):
    """Infer each pseudonym's home (night) and work (weekday working hours) place."""

    def __init__(self, *, match_km: float = 0.2) -> None:
        km: dict[str, Any] = {"min": 0, "include_boundaries": "neither", "finite": False}
        self.match_km = check_scalar(match_km, "match_km", owner=NAME, unit="km", **km)

    def start(self, context) -> None:
        """Empty densities."""
        super().start(context)
        self.counts_ = WindowCounts(context.domain.n_x, 2)

    def release(self, release: Release) -> None:
        """Posteriors of the new mechanism."""
        self.counts_.release(release)

    def observe(self, obs: Observation) -> list:
        """Count the tick's reports into its window; places come at the end."""
        ctx = self.context
        window = int(window_of_ticks(obs.tick, ctx.tick_seconds, ctx.start_hour))
        self.counts_.add(obs, window)
        return []

    def finish(self) -> list[Any]:
        """The densest secret of every pseudonym's night and working-hours densities (a
        :class:`HomeWorkEstimate`, scored by :func:`score_home_work`)."""
        night, work = self.counts_.densities()
        labels = self.counts_.labels()
        if len(labels) == 0:
            return []
        home = np.where(night.max(axis=1) > 0, night.argmax(axis=1), -1)
        place = np.where(work.max(axis=1) > 0, work.argmax(axis=1), -1)
        total = night.sum(axis=1, keepdims=True)
        ent = entropy_bits(night / np.where(total > 0, total, 1.0))
        ent[total[:, 0] == 0] = np.nan
        ctx = self.context
        return [
            HomeWorkEstimate(
                pseudonyms=labels,
                home=home.astype(np.int64),
                work=place.astype(np.int64),
                entropy_bits=ent,
                match_km=self.match_km,
                tick_seconds=ctx.tick_seconds,
                start_hour=ctx.start_hour,
            )
        ]


def _mode(values: np.ndarray) -> int:
    """The most frequent value (the smallest on a tie); -1 for none."""
    if len(values) == 0:
        return -1
    found, counts = np.unique(values, return_counts=True)
    return int(found[counts.argmax()])


def true_home_work(
    trace: np.ndarray, ticks: np.ndarray, tick_seconds: float, start_hour: float
) -> tuple[np.ndarray, np.ndarray]:
    """Per user (column of a ``(T, U)`` trace at ``ticks``): the most frequent secret of its
    night ticks (home) and of its working-hour ticks (work); -1 where a window has no tick."""
    window = window_of_ticks(ticks, tick_seconds, start_hour)
    home = np.array([_mode(trace[window == NIGHT, u]) for u in range(trace.shape[1])])
    work = np.array([_mode(trace[window == WORK, u]) for u in range(trace.shape[1])])
    return home.astype(np.int64), work.astype(np.int64)


def anonymity_sets(
    home: np.ndarray, work: np.ndarray, true_home: np.ndarray, true_work: np.ndarray,
    dist_xx: np.ndarray, match_km: float, *, chunk: int = 1024,
) -> np.ndarray:  # fmt: skip
    """Per inferred pair, how many true pairs lie within ``match_km`` of it on both ends."""
    ok = (true_home >= 0) & (true_work >= 0)
    th, tw = true_home[ok], true_work[ok]
    out = np.zeros(len(home), dtype=np.int64)
    for s in range(0, len(home), chunk):
        h, w = home[s : s + chunk], work[s : s + chunk]
        near = (dist_xx[np.ix_(h, th)] <= match_km) & (dist_xx[np.ix_(w, tw)] <= match_km)
        out[s : s + chunk] = near.sum(axis=1)
    return out


def score_home_work(est: HomeWorkEstimate, truth: Truth, domain) -> Scores:
    """Home and work hit and error, the pair's hit and anonymity set, per pseudonym."""
    ticks = np.array(sorted(truth.positions), dtype=np.int64)
    users = truth.users_of(est.pseudonyms, (int(ticks[0]), int(ticks[-1])))
    trace = truth.trace()
    pseud = np.stack([truth.pseudonyms[int(t)] for t in ticks])
    all_home, all_work = true_home_work(trace, ticks, est.tick_seconds, est.start_hour)
    n = len(users)
    t_home = np.full(n, -1, dtype=np.int64)
    t_work = np.full(n, -1, dtype=np.int64)
    for r, (label, u) in enumerate(zip(est.pseudonyms.tolist(), users.tolist(), strict=True)):
        if u < 0:
            continue
        own = pseud[:, u] == label
        if own.all():
            t_home[r], t_work[r] = all_home[u], all_work[u]
        else:  # its truth while it carried this pseudonym
            h, w = true_home_work(trace[own, u : u + 1], ticks[own], est.tick_seconds,
                                  est.start_hour)  # fmt: skip
            t_home[r], t_work[r] = h[0], w[0]
    dist = domain.dist_xx
    values: dict[str, np.ndarray] = {}
    for name, guess, actual in (("", est.home, t_home), ("work_", est.work, t_work)):
        known = (guess >= 0) & (actual >= 0)
        km = np.full(n, np.nan)
        km[known] = dist[guess[known], actual[known]]
        hit = np.where(known, km <= est.match_km, np.nan)
        values[f"{name}hit"], values[f"{name}error_km"] = hit, km
    values["guess_error_km"] = values["error_km"]
    both = ~np.isnan(values["hit"]) & ~np.isnan(values["work_hit"])
    values["pair_hit"] = np.where(both, values["hit"] * values["work_hit"], np.nan)
    paired = (est.home >= 0) & (est.work >= 0)
    size = np.full(n, np.nan)
    size[paired] = anonymity_sets(
        est.home[paired], est.work[paired], all_home, all_work, dist, est.match_km
    )
    values["anonymity_set"] = size
    values["unique"] = np.where(both & paired, (size == 1) & (values["pair_hit"] == 1), np.nan)
    values["entropy_bits"] = np.asarray(est.entropy_bits, dtype=float)
    values["leakage_per_km"] = np.full(n, np.nan)
    return Scores(tick=None, users=users, values=values)


register_scorer(HomeWorkEstimate)(score_home_work)
