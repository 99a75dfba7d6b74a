"""bench/env_floor.py's sketch tick compiled: one ``numba.njit`` call per tick.

:class:`env_floor.SketchTick` does the default env tick's array work (5 users, 80 secrets,
EM reports, exact filter charges, range and KDE by PIE, kNN's short path, bayes, the tracking
filter, the upload guess, their scores and means, a reward and an observation) as one pass of
numpy calls; :func:`step` does the same work as loops compiled by numba, to measure what a
compiled tick would buy. Like the sketch it has no validation, no edge cases and none of
mdpsim's bytes: numba's exp and log are not numpy's SIMD routines, its sums are sequential
where numpy's are pairwise, and the tracking filter's product is a loop, not OpenBLAS's sgemm.

numba is not a dependency of mdpsim: ``pip install numba`` to run ``python
bench/env_floor.py --compiled``.
"""

# numba's kernels draw from its own np.random state (seeded by seed() below)
# ruff: noqa: NPY002
from __future__ import annotations

import math

import numba
import numpy as np
from env_floor import C, N, U  # users, secrets, PIE rounds: the sketch's shapes


@numba.njit(cache=True)
def add_up(a: float, b: float) -> float:
    """The smallest float >= a + b (two-sum, as mdpsim's filters)."""
    s = a + b
    bp = s - a
    err = (a - (s - bp)) + (b - bp)
    return np.nextafter(s, np.inf) if err > 0 else s


@numba.njit(cache=True)
def sub_down(a: float, b: float) -> float:
    """The largest float <= a - b, clipped at 0 (as mdpsim's filters)."""
    s = a - b
    bp = s + b
    err = (a - (s - bp)) + (-b - bp)
    s = np.nextafter(s, -np.inf) if err < 0 else s
    return max(s, 0.0)


@numba.njit(cache=True)
def charge(spent, cap, halted, costs):
    for u in range(U):
        s = add_up(spent[u], costs[u])
        if s > cap[u]:
            halted[u] = True
        else:
            spent[u] = s


@numba.njit(cache=True)
def pie(phi, budgets, lo, hi, lam, est, s0, s1, spent):
    """PIE's rounds, settled on (lo, hi): the last estimates, who settled, the spend (each
    round drawn when it is reached, so no draw is set back as the numpy sketch's are)."""
    sums = np.zeros(U)
    totals = np.zeros(U)
    for _ in range(C):
        any_settled = False
        for u in range(U):
            part = budgets[u] / C
            std = 1 / math.sqrt(2 * part) if part > 0 else 0.0
            sums[u] += part * (phi[u] + np.random.standard_normal() * std)
            totals[u] += part
            est[u] = sums[u] / totals[u] if totals[u] > 0 else 0.0
            h = lam / math.sqrt(2 * totals[u]) if totals[u] > 0 else math.inf
            s0[u] = est[u] - h > hi
            s1[u] = est[u] + h < lo
            any_settled |= s0[u] or s1[u]
        if any_settled:
            break
    for u in range(U):
        spent[u] = totals[u] if budgets[u] > 0 else 0.0


@numba.njit(cache=True)
def step(
    st, pos, spent, cap, halted, belief, xy, dist, K, cdf, prior, prior_cdf, T32, lik32, hop, action
):
    """One tick of the sketch; ``st``: [tick]; returns (reward, obs, row values)."""
    st[0] += 1
    remaining = np.empty(U)
    report = np.empty(U, np.bool_)
    costs = np.empty(U)
    for u in range(U):
        remaining[u] = 0.0 if halted[u] else sub_down(cap[u], spent[u])
        report[u] = (not halted[u]) and remaining[u] >= 0.3
    report[0] = action > 0
    for u in range(U):
        costs[u] = 0.3 if report[u] else 0.0
    charge(spent, cap, halted, costs)
    out = np.full(U, -1)
    loss_sum, n_rep = 0.0, 0
    for u in range(U):  # reports from the mechanism's rows
        x = np.random.random()
        if report[u]:
            out[u] = min(np.searchsorted(cdf[pos[u]], x), N - 1)
            loss_sum += dist[pos[u], out[u]]
            n_rep += 1
    row = np.empty(20)
    phi = np.empty(U)
    dd = np.empty(U)
    budgets = np.empty(U)
    est, spent_q = np.empty(U), np.empty(U)
    s0, s1 = np.empty(U, np.bool_), np.empty(U, np.bool_)
    for q in range(2):  # range and KDE by PIE
        p = min(np.searchsorted(prior_cdf, np.random.random()), N - 1)
        for u in range(U):
            dx = (xy[pos[u], 0] - xy[p, 0]) / 1000
            dy = (xy[pos[u], 1] - xy[p, 1]) / 1000
            dd[u] = math.sqrt(dx * dx + dy * dy)
            phi[u] = dd[u] - 0.25 if q == 0 else dd[u]
            budgets[u] = 0.0 if halted[u] else 0.5
        lo, hi = (0.0, 0.0) if q == 0 else (-math.inf, 0.3)
        pie(phi, budgets, lo, hi, 2.0, est, s0, s1, spent_q)
        value = truth = 0.0
        for u in range(U):
            active = not (s0[u] or s1[u])
            if q == 0:
                value += 1.0 if (active and est[u] < 0) or s1[u] else 0.0
                truth += 1.0 if phi[u] < 0 else 0.0
            else:
                value += math.exp(-(est[u] ** 2) / 0.02) / U if active else 0.0
                truth += math.exp(-(dd[u] ** 2) / 0.02) / U
        row[2 * q] = abs(value - truth)
        row[2 * q + 1] = 1 - spent_q.sum() / max(budgets.sum(), 1e-300)
        for u in range(U):
            costs[u] = spent_q[u] * 2
        charge(spent, cap, halted, costs)
    for u in range(U):  # kNN's short path (k = users)
        dx = (xy[pos[u], 0] - xy[0, 0]) / 1000
        dy = (xy[pos[u], 1] - xy[0, 1]) / 1000
        dd[u] = math.sqrt(dx * dx + dy * dy)
    total = dd.sum()
    row[4] = (total - np.sort(dd)[:U].sum()) / total if total > 0 else 0.0
    # attacks: bayes, the tracking filter, the upload guess, scored
    hit0 = 0.0
    sums = np.zeros(12)
    n_seen = 0
    post = np.empty(N)
    pred = np.empty(N, np.float32)
    for u in range(U):
        o = out[u] if out[u] >= 0 else N
        for j in range(N):  # tracking: predict, update, normalise
            acc = np.float32(0.0)
            for i in range(N):
                acc += T32[i, j] * belief[u, i]
            pred[j] = acc * lik32[o, j]
        z = pred.sum()
        for j in range(N):
            v = pred[j] / z
            belief[u, j] = 0.0 if v < 1e-30 else v
        if out[u] < 0:
            continue
        n_seen += 1
        s = pos[u]
        zb = 0.0
        for j in range(N):
            post[j] = prior[j] * K[j, out[u]]
            zb += post[j]
        for k, p in enumerate((post / zb, belief[u].astype(np.float64))):
            top = np.argmax(p)
            ent = err = 0.0
            for j in range(N):
                ent -= p[j] * math.log(max(p[j], 1e-38)) / math.log(2)
                err += p[j] * dist[s, j]
            sums[4 * k] += dist[s, top]
            sums[4 * k + 1] += err
            sums[4 * k + 2] += 1.0 if top == s else 0.0
            sums[4 * k + 3] += ent
            if k == 0 and u == 0:
                hit0 = 1.0 if top == s else 0.0
        sums[8] += dist[s, out[u]]
        sums[9] += dist[s, out[u]]
        sums[10] += 1.0 if out[u] == s else 0.0
    for m in range(12):
        row[5 + m] = sums[m] / n_seen if n_seen else math.nan
    row[17] = loss_sum / n_rep if n_rep else math.nan  # the utility loss
    row[18] = n_rep
    row[19] = halted.sum()
    reward = -(dist[pos[0], out[0]] if report[0] else 1.0) - hit0
    obs = np.empty(8, np.float32)
    obs[0] = st[0] / 20
    obs[1] = (0.0 if halted[0] else sub_down(cap[0], spent[0])) / 10
    obs[2:6] = (0.03, 0.4, 0.2, 1.0)
    obs[6], obs[7] = halted[0], report[0]
    for u in range(U):  # users move
        if np.random.random() < 0.5:
            pos[u] = hop[pos[u]]
    return reward, obs, row


@numba.njit(cache=True)
def seed(value: int) -> None:
    """Seed numba's own generator (the draws of :func:`step`)."""
    np.random.seed(value)


class CompiledTick:
    """One 20-tick episode of the compiled sketch over an :class:`env_floor.World`."""

    def __init__(self, world, seed_value: int) -> None:
        self.w = world
        self.rng = np.random.default_rng(seed_value)
        seed(seed_value)
        self.reset()

    def reset(self) -> None:
        self.log: list[np.ndarray] = []
        self.state = (
            np.zeros(1, np.int64),  # the tick
            self.rng.integers(0, N, U),
            np.zeros(U),
            np.full(U, 10.0),
            np.zeros(U, np.bool_),
            np.tile(self.w.prior.astype(np.float32), (U, 1)),
        )

    def step(self, action: int) -> bool:
        """One tick, its row logged (as the sketch's); True when the episode is over."""
        w = self.w
        arrays = (w.xy, w.dist, w.K, w.cdf, w.prior, w.prior_cdf, w.T32, w.lik32, w.next_hop)
        _, _, row = step(*self.state, *arrays, action)
        self.log.append(row)
        return bool(self.state[0][0] >= 20)
