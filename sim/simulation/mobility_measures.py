"""The measures of human mobility, computed from true positions (SPEC.md section 9).

The definitions follow scikit-mobility (``skmob/measures/individual.py``, Pappalardo et al.,
J. Stat. Softw. 2022), which does not install on Python 3.12; they are implemented here on a
walk: ``(ticks, users)`` secret indices, the secrets' coordinates in metres and the clock.

* A **record** is one tick of one user. A **stay** is a run of at least
  ``stay_ticks(tick_seconds)`` ticks at one secret (a walker passes a secret in one tick); a
  **visit** is a stay, and a **place** is a secret.
* **Radius of gyration** (Gonzalez et al. 2008): ``sqrt(mean_i |r_i - r_cm|^2)`` over a user's
  records; the k = 2 one over the records at the user's two most visited places.
* **S(t)** (Song et al. 2010): distinct places among a user's visits begun by tick t, averaged
  over users; its slope is fitted on log S over log t from day 1 to the end (at most day 7).
* **Visits by rank**: a user's visit shares of its places sorted, averaged over users by
  rank; ``zeta`` is the least-squares slope of log f_k over log k for k = 1 .. 10.
* **P(new)** against S: the share of visits to a new place among the daytime visits
  (08:00-20:00) begun when the user knew S places.
* **Jump lengths** (Gonzalez et al. 2008): the straight-line distance between a user's
  consecutive stays at different places.
* **Dwell times**: the durations of the stays that begin and end inside the run, with the
  truncated power law ``dt^(-1-beta) exp(-dt/tau)`` fitted by maximum likelihood above the
  shortest one.
* **Home** (scikit-mobility's ``home_location``): the user's most frequent place between 22:00
  and 07:00; the share of users at home by hour of the day.
* **Top-1 / top-2 shares**: the share of a user's records at its most (two most) frequent
  places; the 6-hour window: the share of users for whom some 6-hour window of the day
  (averaged over days) spends 70 % of its time at the top-1 place.
* **Uniqueness** (de Montjoye et al. 2013): a point is (the grid cell of side
  ``resolution_m`` a record falls in, the hour of the run); ``k`` points drawn at random from a
  user's points single the user out when no other user has all ``k``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import integrate, optimize, sparse

from mdpsim._core.clock import SECONDS_PER_HOUR, hour_of_tick, seconds_of_tick

#: A stay lasts at least this long (and two ticks): shorter runs at one secret are passages.
STAY_MIN_S = 600.0
#: Night hours of scikit-mobility's ``home_location`` (22:00 to 07:00).
NIGHT_HOURS = (22, 7)
#: Daytime hours whose visits P(new) is measured on.
DAY_HOURS = (8, 20)
#: Ranks the visitation law is fitted on.
ZETA_RANKS = 10
#: The S range P(new) is read at ("S near 10").
P_NEW_S = (8, 12)
#: The numbers of known points uniqueness is measured for.
UNIQUENESS_KS = (1, 2, 3, 4)

#: Each measure's law (value, allowed range or None, source), printed beside it.
LAWS: dict[str, tuple[str, tuple[float, float] | None, str]] = {
    "zeta": ("about 1.2", (1.0, 1.4), "Song et al. 2010"),
    "s_slope": ("about 0.6", (0.45, 0.75), "Song et al. 2010"),
    "p_new_s10": ("0.6 x 10^-0.21 = 0.37", (0.30, 0.44), "Song et al. 2010"),
    "top1_window70": ("a routine: nights at home", (0.8, 1.0), "issue 48 (DITRAS)"),
    "distinct_top1": ("one home each", (0.5, 1.0), "Golle & Partridge 2009"),
    "min_stay_min": ("at least about 20 min", (20.0, math.inf), "Song et al. 2010"),
    "top2_share": ("most of the time", (0.5, 1.0), "Song et al. 2010; Zang & Bolot 2011"),
    "dwell_beta": ("0.8", None, "Song et al. 2010"),
    "dwell_tau_h": ("17 h", None, "Song et al. 2010"),
    "night_home_share": ("nights at home", None, "Pappalardo & Simini 2018 (DITRAS)"),
    "unique_k2": ("> 0.5 (antenna, hour)", None, "de Montjoye et al. 2013"),
    "unique_k4": ("0.95 (antenna, hour)", None, "de Montjoye et al. 2013"),
    "rg_median_km": ("heavy-tailed across people (city scale)", None, "Gonzalez et al. 2008"),
    "jump_median_km": ("power law, exponent 1.75 (city scale)", None, "Gonzalez et al. 2008"),
}


@dataclass(frozen=True)
class Stays:
    """Every stay of a walk: ``user``, ``place``, ``start`` tick and length in ``ticks``."""

    user: np.ndarray
    place: np.ndarray
    start: np.ndarray
    ticks: np.ndarray


def stay_ticks(tick_seconds: float) -> int:
    """The fewest ticks a stay lasts: :data:`STAY_MIN_S`, and at least two."""
    return max(2, math.ceil(STAY_MIN_S / tick_seconds - 1e-9))


def stays(walk: np.ndarray, min_ticks: int) -> Stays:
    """The runs of at least ``min_ticks`` ticks at one secret, users in order, then time."""
    n_t, n_u = walk.shape
    cols = walk.T  # (users, ticks)
    change = np.ones((n_u, n_t), dtype=bool)
    change[:, 1:] = cols[:, 1:] != cols[:, :-1]
    user, start = np.nonzero(change)
    flat = user * n_t + start
    end = np.append(flat[1:], n_u * n_t)
    end = np.where(np.append(user[1:], n_u) != user, (user + 1) * n_t, end)
    length = end - flat
    keep = length >= min_ticks
    return Stays(user[keep], cols[user[keep], start[keep]], start[keep], length[keep])


def radius_of_gyration_km(walk: np.ndarray, xy_m: np.ndarray, k: int | None = None) -> np.ndarray:
    """Each user's radius of gyration in km over its records (``k``: over the records at its
    ``k`` most frequent places)."""
    out = np.empty(walk.shape[1])
    for u in range(walk.shape[1]):
        places = walk[:, u]
        if k is not None:
            vals, counts = np.unique(places, return_counts=True)
            top = vals[np.argsort(-counts, kind="stable")[:k]]
            places = places[np.isin(places, top)]
        pts = xy_m[places]
        out[u] = np.sqrt(((pts - pts.mean(axis=0)) ** 2).sum(axis=1).mean()) / 1000.0
    return out


def jump_lengths_km(st: Stays, xy_m: np.ndarray) -> np.ndarray:
    """The distances in km between each user's consecutive stays at different places."""
    same_user = st.user[1:] == st.user[:-1]
    moved = same_user & (st.place[1:] != st.place[:-1])
    a, b = xy_m[st.place[:-1][moved]], xy_m[st.place[1:][moved]]
    return np.hypot(*(b - a).T) / 1000.0


def distinct_places_curve(st: Stays, n_ticks: int, n_users: int) -> np.ndarray:
    """``S(t)``: the mean over users of the distinct places among the visits begun by tick t."""
    first = np.zeros(n_ticks)
    key = st.user.astype(np.int64) * (int(st.place.max(initial=0)) + 1) + st.place
    _, idx = np.unique(key, return_index=True)  # each (user, place)'s first visit
    np.add.at(first, st.start[idx], 1.0)
    return np.cumsum(first) / n_users


def visits_by_rank(st: Stays, n_users: int, ranks: int = 50) -> np.ndarray:
    """The mean over users of the visit share of the rank-k place, k = 1 .. ``ranks``."""
    out = np.zeros(ranks)
    for u in range(n_users):
        _, counts = np.unique(st.place[st.user == u], return_counts=True)
        if counts.size:
            f = np.sort(counts)[::-1][:ranks] / counts.sum()
            out[: f.size] += f
    return out / n_users


def p_new_by_s(st: Stays, hours: np.ndarray, s_max: int = 40) -> tuple[np.ndarray, np.ndarray]:
    """``(new, tried)`` per S = 0 .. ``s_max - 1``: daytime visits begun knowing S places, and
    how many of them went to a new place."""
    new, tried = np.zeros(s_max), np.zeros(s_max)
    lo, hi = DAY_HOURS
    for u in np.unique(st.user):
        rows = st.user == u
        places, starts = st.place[rows], st.start[rows]
        _, first = np.unique(places, return_index=True)
        is_new = np.zeros(places.size, dtype=bool)
        is_new[first] = True
        known = np.cumsum(is_new) - is_new  # places known before each visit
        h = hours[starts]
        day = (h >= lo) & (h < hi) & (known < s_max)
        np.add.at(tried, known[day], 1.0)
        np.add.at(new, known[day], is_new[day].astype(float))
    return new, tried


def fit_dwell(durations_h: np.ndarray, min_h: float) -> tuple[float, float]:
    """``(beta, tau_h)``: the maximum-likelihood truncated power law
    ``dt^(-1-beta) exp(-dt/tau)`` on ``dt >= min_h`` (NaN with fewer than 20 stays)."""
    dt = durations_h[durations_h >= min_h]
    if dt.size < 20:
        return math.nan, math.nan
    mean_log, mean = np.log(dt).mean(), dt.mean()

    def nll(theta: np.ndarray) -> float:
        beta, tau = theta[0], math.exp(theta[1])
        # Z = int_min^inf x^(-1-beta) e^(-x/tau) dx, over u = log x
        z, _ = integrate.quad(lambda u: math.exp(-beta * u - math.exp(u) / tau), math.log(min_h),
                              math.log(min_h) + 60.0, limit=200)  # fmt: skip
        return (1 + beta) * mean_log + mean / tau + math.log(z)

    res = optimize.minimize(nll, x0=np.array([0.8, math.log(17.0)]), method="Nelder-Mead",
                            bounds=[(-0.99, 5.0), (math.log(0.05), math.log(1e4))])  # fmt: skip
    return float(res.x[0]), float(math.exp(res.x[1]))


def homes(walk: np.ndarray, hours: np.ndarray) -> np.ndarray:
    """Each user's home: its most frequent place in the night hours (all hours if none)."""
    lo, hi = NIGHT_HOURS
    night = (hours >= lo) | (hours < hi)
    rows = walk[night] if night.any() else walk
    return np.array([np.bincount(rows[:, u]).argmax() for u in range(walk.shape[1])])


def home_share_by_hour(walk: np.ndarray, hours: np.ndarray, home: np.ndarray) -> np.ndarray:
    """The share of users at home in each hour of the day (NaN: an hour the run never saw)."""
    at_home = (walk == home[None, :]).mean(axis=1)
    hour = np.floor(hours).astype(int) % 24
    total = np.bincount(hour, weights=at_home, minlength=24)
    count = np.bincount(hour, minlength=24)
    return np.where(count > 0, total / np.maximum(count, 1), np.nan)


def top_shares(walk: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(top1 place, top1 share, top2 share)`` per user, shares of its records."""
    n_t, n_u = walk.shape
    top, s1, s2 = np.empty(n_u, dtype=np.int64), np.empty(n_u), np.empty(n_u)
    for u in range(n_u):
        vals, counts = np.unique(walk[:, u], return_counts=True)
        order = np.argsort(-counts, kind="stable")
        top[u] = vals[order[0]]
        s1[u] = counts[order[0]] / n_t
        s2[u] = counts[order[:2]].sum() / n_t
    return top, s1, s2


def window_share(walk: np.ndarray, top: np.ndarray, tick_seconds: float, hours_w: float = 6.0):
    """Per user, the largest share of time at ``top`` over ``hours_w``-hour windows of the
    day (the day's slots averaged over the run's days; windows wrap around midnight)."""
    n_t = walk.shape[0]
    day = max(1, round(86400 / tick_seconds))
    win = max(1, round(hours_w * 3600 / tick_seconds))
    slot = np.arange(n_t) % day
    count = np.bincount(slot, minlength=day)
    at = (walk == top[None, :]).astype(float)
    per_slot = np.stack([np.bincount(slot, weights=at[:, u], minlength=day) for u in
                         range(walk.shape[1])]) / np.maximum(count, 1)  # fmt: skip
    wrapped = np.concatenate([per_slot, per_slot[:, : win - 1]], axis=1)
    sums = np.cumsum(np.pad(wrapped, ((0, 0), (1, 0))), axis=1)
    return (sums[:, win:] - sums[:, :-win]).max(axis=1) / win


def uniqueness(
    walk: np.ndarray,
    xy_m: np.ndarray,
    run_hours: np.ndarray,
    *,
    resolution_m: float,
    rng: np.random.Generator,
    draws: int = 5,
) -> dict[int, float]:
    """The share of users singled out by ``k`` of their (cell, hour of the run) points, for
    k in :data:`UNIQUENESS_KS`; ``draws`` random draws per user (fewer points: not counted)."""
    n_t, n_u = walk.shape
    cell_xy = np.floor(xy_m / resolution_m).astype(np.int64)
    cell_xy -= cell_xy.min(axis=0)
    cells = cell_xy[:, 0] * (int(cell_xy[:, 1].max()) + 1) + cell_xy[:, 1]
    hour = np.floor(run_hours - run_hours[0]).astype(np.int64)
    keys = hour[:, None] * (int(cells.max()) + 1) + cells[walk]  # (ticks, users)
    users = np.broadcast_to(np.arange(n_u), keys.shape)
    pairs = np.unique(np.stack([users.ravel(), keys.ravel()], axis=1), axis=0)
    key_ids, col = np.unique(pairs[:, 1], return_inverse=True)
    has = sparse.csc_matrix((np.ones(len(pairs)), (pairs[:, 0], col)), shape=(n_u, len(key_ids)))
    own = np.split(col, np.flatnonzero(np.diff(pairs[:, 0])) + 1)  # each user's points
    out = {}
    for k in UNIQUENESS_KS:
        unique, total = 0, 0
        for u in range(n_u):
            if len(own[u]) < k:
                continue
            for _ in range(draws):
                pts = rng.choice(own[u], size=k, replace=False)
                matched = np.asarray(has[:, pts].sum(axis=1)).ravel() == k
                unique += int(matched.sum() == 1)
                total += 1
        out[k] = unique / total if total else math.nan
    return out


def measure(
    walk: np.ndarray,
    xy_m: np.ndarray,
    *,
    tick_seconds: float,
    start_hour: float = 0.0,
    resolution_m: float = 200.0,
    seed: int = 0,
) -> dict:
    """Every measure of the module docstring on ``walk`` (``(ticks, users)`` secrets, tick 1
    first), as plain numbers and lists: ``values`` (one number each, the keys of
    :data:`LAWS`) and ``curves`` (what the plots draw)."""
    n_t, n_u = walk.shape
    ticks = np.arange(1, n_t + 1)  # row 0 is tick 1 (the users have moved once)
    hours = hour_of_tick(ticks, tick_seconds, start_hour)
    run_hours = seconds_of_tick(ticks, tick_seconds, start_hour) / SECONDS_PER_HOUR
    st = stays(walk, stay_ticks(tick_seconds))
    inner = (st.start > 0) & (st.start + st.ticks < n_t)  # begun and ended inside the run
    dwell_h = st.ticks[inner] * tick_seconds / 3600.0
    min_h = float(dwell_h.min()) if dwell_h.size else math.nan
    beta, tau_h = fit_dwell(dwell_h, min_h) if dwell_h.size else (math.nan, math.nan)
    s_curve = distinct_places_curve(st, n_t, n_u)
    freq = visits_by_rank(st, n_u)
    ranks = np.arange(1, ZETA_RANKS + 1)
    used = freq[:ZETA_RANKS] > 0
    zeta = (
        -np.polyfit(np.log(ranks[used]), np.log(freq[:ZETA_RANKS][used]), 1)[0]
        if used.sum() >= 2
        else math.nan  # fewer than two places visited: no slope
    )
    new, tried = p_new_by_s(st, hours)
    lo, hi = P_NEW_S
    home = homes(walk, hours)
    by_hour = home_share_by_hour(walk, hours, home)
    top, s1, s2 = top_shares(walk)
    rg, rg2 = radius_of_gyration_km(walk, xy_m), radius_of_gyration_km(walk, xy_m, k=2)
    jumps = jump_lengths_km(st, xy_m)
    uniq = uniqueness(walk, xy_m, run_hours, resolution_m=resolution_m,
                      rng=np.random.default_rng(seed))  # fmt: skip
    values = {
        "zeta": float(zeta),
        "s_slope": _s_slope(s_curve, tick_seconds),
        "p_new_s10": _share(new[lo : hi + 1].sum(), tried[lo : hi + 1].sum()),
        "top1_window70": float((window_share(walk, top, tick_seconds) >= 0.7).mean()),
        "distinct_top1": len(np.unique(top)) / n_u,
        "min_stay_min": min_h * 60.0,
        "top2_share": float(s2.mean()),
        "dwell_beta": beta,
        "dwell_tau_h": tau_h,
        "night_home_share": _mean_seen(by_hour[:6]),  # 00:00-06:00
        "unique_k2": uniq[2],
        "unique_k4": uniq[4],
        "rg_median_km": float(np.median(rg)),
        "jump_median_km": float(np.median(jumps)) if jumps.size else math.nan,
    }
    curves = {
        "hours": (np.arange(n_t) * tick_seconds / 3600.0).tolist(),
        "s_mean": s_curve.tolist(),
        "visits_by_rank": freq.tolist(),
        "p_new": (new / np.maximum(tried, 1)).tolist(),
        "p_new_tried": tried.astype(int).tolist(),
        "dwell_h": np.sort(dwell_h).tolist(),
        "home_share_by_hour": by_hour.tolist(),
        "top1_share": s1.tolist(),
        "top2_share": s2.tolist(),
        "rg_km": rg.tolist(),
        "rg2_km": rg2.tolist(),
        "jump_km": np.sort(jumps).tolist(),
        "uniqueness": {str(k): v for k, v in uniq.items()},
    }
    return {"values": values, "curves": curves}


def _share(part: float, whole: float) -> float:
    return float(part / whole) if whole > 0 else math.nan


def _mean_seen(values: np.ndarray) -> float:
    """The mean of the finite values (NaN: none)."""
    seen = values[np.isfinite(values)]
    return float(seen.mean()) if seen.size else math.nan


def _s_slope(s_curve: np.ndarray, tick_seconds: float) -> float:
    """The slope of log S over log t from day 1 to day 7 (from a tenth of the run when it is
    shorter than two days)."""
    n_t = len(s_curve)
    day = round(86400 / tick_seconds)
    first = day if n_t >= 2 * day else max(1, n_t // 10)
    last = min(n_t, 7 * day)
    t = np.arange(first, last)
    ok = s_curve[t] > 0
    if ok.sum() < 2:
        return math.nan
    return float(np.polyfit(np.log(t[ok] + 1.0), np.log(s_curve[t][ok]), 1)[0])


def holds(name: str, value: float) -> bool | None:
    """Whether ``value`` lies in the law's range (None: the law gives no range)."""
    bounds = LAWS[name][1]
    if bounds is None or not math.isfinite(value):
        return None
    return bounds[0] <= value <= bounds[1]
