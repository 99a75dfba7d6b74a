"""Quick check of the people model against the laws of human mobility (issue 48 item 2's
targets), from true positions: ``python bench/people_laws.py [users] [days] [tick_s]``.

A stay is a run of at least two ticks at one secret (a walker passes a secret in one tick).
The full measures with plots are ``mdpsim mobility`` (mdpsim.simulation.mobility_measures).
"""

from __future__ import annotations

import sys
import time

import numpy as np

from mdpsim._core.clock import hour_of_tick
from mdpsim.geo.domain import Domain
from mdpsim.geo.network import load_network
from mdpsim.simulation.people import People, PeopleModel, PeopleParams
from mdpsim.simulation.relevance import relevance_map


def stays(walk: np.ndarray) -> list[tuple[int, int, int, int]]:
    """``(user, place, first tick, ticks)`` of every run of >= 2 ticks at one secret."""
    out = []
    for u in range(walk.shape[1]):
        w = walk[:, u]
        cut = np.flatnonzero(np.diff(w)) + 1
        starts = np.concatenate([[0], cut])
        lengths = np.diff(np.concatenate([starts, [len(w)]]))
        for s, n in zip(starts.tolist(), lengths.tolist(), strict=True):
            if n >= 2:
                out.append((u, int(w[s]), s, n))
    return out


def laws(walk: np.ndarray, tick_s: float, start_hour: float = 0.0) -> dict[str, float]:
    """The targets of issue 48 item 2 measured on ``walk`` (ticks, users)."""
    n_t, n_u = walk.shape
    st = stays(walk)
    hours = hour_of_tick(np.arange(n_t), tick_s, start_hour)
    res: dict[str, float] = {}
    inner = [n for _, _, s, n in st if s > 0 and s + n < n_t]  # begun and ended in the walk
    res["min_stay_min"] = min(inner) * tick_s / 60 if inner else float("nan")
    # visits by rank, S(t), P(new | S) for daytime stays
    freq = np.zeros(200)
    s_curve = np.zeros(n_t)
    new_at, tried_at = np.zeros(200), np.zeros(200)
    by_user: dict[int, list] = {}
    for u, place, s, n in st:
        by_user.setdefault(u, []).append((place, s, n))
    for rows in by_user.values():
        seen: set[int] = set()
        counts: dict[int, int] = {}
        first = np.full(n_t, 0)
        for place, s, _ in rows:
            k = len(seen)
            if 8 <= hours[s] < 20 and k < 200:
                tried_at[k] += 1
                new_at[k] += place not in seen
            if place not in seen:
                first[s] += 1
            seen.add(place)
            counts[place] = counts.get(place, 0) + 1
        s_curve += np.cumsum(first)
        f = np.sort(np.array(list(counts.values()), dtype=float))[::-1]
        f = f[:200] / f.sum()
        freq[: len(f)] += f
    freq /= len(by_user)
    k = np.arange(1, 11)
    res["zeta"] = -np.polyfit(np.log(k), np.log(freq[:10]), 1)[0]
    s_mean = s_curve / n_u
    day = int(86400 / tick_s)
    t = np.arange(day, n_t)
    res["S_slope_1_7d"] = np.polyfit(np.log(t), np.log(s_mean[t]), 1)[0]
    res["S_6h_24h_end"] = (s_mean[day // 4], s_mean[day - 1], s_mean[-1])  # type: ignore[assignment]
    sel = slice(8, 13)
    res["P_new_S8_12"] = new_at[sel].sum() / max(tried_at[sel].sum(), 1)
    # top-1: some 6-hour window of the day holds 70 % of its time there
    good, tops = 0, []
    win = int(6 * 3600 / tick_s)
    for u in range(n_u):
        vals, cnt = np.unique(walk[:, u], return_counts=True)
        top = vals[cnt.argmax()]
        tops.append(top)
        at = (walk[:, u] == top).astype(float)
        per_slot = np.bincount(np.arange(n_t) % day, weights=at, minlength=day)
        per_slot /= np.bincount(np.arange(n_t) % day, minlength=day)
        window = np.convolve(np.concatenate([per_slot, per_slot[: win - 1]]), np.ones(win), "valid")
        good += (window.max() / win) >= 0.7
    res["share_top1_window70"] = good / n_u
    res["share_distinct_top1"] = len(set(tops)) / n_u
    home_share = (walk == walk[0][None, :]).reshape(-1, n_u)
    by_hour = np.array([home_share[hours == h].mean() for h in range(24)])
    res["home_share_by_hour"] = np.round(by_hour, 2).tolist()  # type: ignore[assignment]
    return res


def main() -> None:
    users = int(sys.argv[1]) if len(sys.argv) > 1 else 300
    days = float(sys.argv[2]) if len(sys.argv) > 2 else 7.0
    tick_s = float(sys.argv[3]) if len(sys.argv) > 3 else 300.0
    graph = load_network("helsinki")
    domain = Domain.from_network(graph, n_points=1000, seed=2026)
    t0 = time.perf_counter()
    model = PeopleModel.build(domain, relevance_map(domain), PeopleParams(tick_seconds=tick_s))
    t1 = time.perf_counter()
    rng = np.random.default_rng(2026)
    people = People(model, users, rng)
    ticks = int(days * 86400 / tick_s)
    walk = np.empty((ticks, users), dtype=np.int64)
    for k in range(ticks):
        walk[k] = people.position
        people.step(rng)
    t2 = time.perf_counter()
    print(f"helsinki, 1000 secrets, {users} users, {days:g} days of {tick_s:g} s ticks")
    print(f"build {t1 - t0:.2f} s, walk {t2 - t1:.2f} s")
    print("| measure | value | target |\n|---|---|---|")
    target = {
        "zeta": "[1.0, 1.4]",
        "S_slope_1_7d": "[0.45, 0.75]",
        "P_new_S8_12": "0.37 +- 0.07",
        "share_top1_window70": ">= 0.8",
        "share_distinct_top1": ">= 0.5",
        "min_stay_min": ">= 20",
    }
    for key, value in laws(walk, tick_s).items():
        shown = f"{value:.3f}" if isinstance(value, float) else str(value)
        print(f"| {key} | {shown} | {target.get(key, '')} |")


if __name__ == "__main__":
    main()
