"""From fixes to walks: a trace file's fixes resampled to ticks (along the shortest road path
between two fixes, or at the fix nearest in time), and the population that replays them."""

from __future__ import annotations

import math

import numpy as np

from mdpsim.errors import InputError

#: The most (tick, user) cells a replay may hold (8 bytes each): a file spanning a year at a
#: tick a minute would otherwise ask for gigabytes.
MAX_TICK_CELLS = 100_000_000


def resample(
    user: np.ndarray,
    seconds: np.ndarray,
    value: np.ndarray,
    n_users: int,
    tick_seconds: float,
    *,
    along: RoadPaths | None = None,
) -> np.ndarray:
    """``(ticks, n_users)`` secrets from fixes (``user`` / ``seconds`` sorted by user then time,
    ``value`` the secret of each fix). Before a user's first fix it is at its first, after its
    last at its last. In between: with ``along`` (``resample = "road"``), at the fraction of the
    shortest road path between the two fixes' secrets that the tick's time has covered (the
    last secret passed, as a synthetic walk is); without, at the fix nearest in time (the
    earlier on a tie)."""
    n_ticks = int(math.floor(float(seconds.max()) / tick_seconds + 1e-9)) + 1
    if n_ticks * n_users > MAX_TICK_CELLS:
        raise InputError(
            f"the traces span {n_ticks:,} ticks of {tick_seconds:g} s for {n_users:,} users, more "
            f"than {MAX_TICK_CELLS:,} (tick, user) cells; raise scenario.tick_seconds or cut "
            "the file to a shorter time window"
        )
    tick_s = np.arange(n_ticks) * tick_seconds
    out = np.empty((n_ticks, n_users), dtype=np.int64)
    bounds = np.searchsorted(user, np.arange(n_users + 1))
    between: list[tuple[np.ndarray, ...]] = []  # (ticks, user, from, to, fraction) to walk
    for u in range(n_users):
        lo, hi = bounds[u], bounds[u + 1]
        s, v = seconds[lo:hi], value[lo:hi]
        if along is None:
            right = np.clip(np.searchsorted(s, tick_s, side="left"), 0, len(s) - 1)
            left = np.clip(right - 1, 0, len(s) - 1)
            pick = np.where(np.abs(s[left] - tick_s) <= np.abs(s[right] - tick_s), left, right)
            out[:, u] = v[pick]
            continue
        last = np.searchsorted(s, tick_s, side="right") - 1  # the latest fix at or before
        out[:, u] = v[np.clip(last, 0, len(s) - 1)]
        inside = np.nonzero((last >= 0) & (last < len(s) - 1))[0]
        a, b = v[last[inside]], v[last[inside] + 1]
        moving = a != b
        t = inside[moving]
        i = last[t]
        fraction = (tick_s[t] - s[i]) / (s[i + 1] - s[i])
        between.append((t, np.full(len(t), u), a[moving], b[moving], fraction))
    if between and along is not None:
        t, u_, a, b, fraction = (np.concatenate(parts) for parts in zip(*between, strict=True))
        out[t, u_] = along.positions(a, b, fraction)
    return out


class RoadPaths:
    """Shortest road paths between the secrets of a road domain (the chaining pairs' graph,
    whose shortest paths are the road distances, as
    :class:`~mdpsim.simulation.mobility.MobilityModel`)."""

    SOURCES_PER_BATCH = 256  # Dijkstra's predecessor rows held at once

    def __init__(self, domain) -> None:
        from scipy import sparse

        pairs = domain.constraint_pairs
        w = domain.dist_xx[pairs[:, 0], pairs[:, 1]]
        n = domain.n_x
        self.graph = sparse.coo_matrix((w, (pairs[:, 0], pairs[:, 1])), shape=(n, n)).tocsr()
        self.dist_xx = domain.dist_xx

    def positions(self, a: np.ndarray, b: np.ndarray, fraction: np.ndarray) -> np.ndarray:
        """Per query, the last secret passed after ``fraction`` (in [0, 1)) of the shortest
        road path from secret ``a`` to secret ``b``."""
        from scipy.sparse import csgraph

        out = np.array(a, dtype=np.int64)
        n = self.dist_xx.shape[0]
        key = a.astype(np.int64) * n + b
        order = np.argsort(key, kind="stable")
        keys, starts = np.unique(key[order], return_index=True)
        ends = np.append(starts[1:], len(order))
        sources = np.unique(keys // n)
        for lo in range(0, len(sources), self.SOURCES_PER_BATCH):
            batch = sources[lo : lo + self.SOURCES_PER_BATCH]
            _, pred = csgraph.dijkstra(
                self.graph, directed=False, indices=batch, return_predecessors=True
            )
            row = {int(src): r for r, src in enumerate(batch)}
            in_batch = np.nonzero(np.isin(keys // n, batch))[0]
            for k in in_batch.tolist():
                src, dst = divmod(int(keys[k]), n)
                path = [dst]
                back = pred[row[src]]
                while path[-1] != src and back[path[-1]] >= 0:  # < 0: unreachable, stay
                    path.append(int(back[path[-1]]))
                if path[-1] != src:
                    continue
                path.reverse()
                cum = np.concatenate([[0.0], np.cumsum(self.dist_xx[path[:-1], path[1:]])])
                queries = order[starts[k] : ends[k]]
                hop = np.searchsorted(cum, fraction[queries] * cum[-1], side="right") - 1
                out[queries] = np.asarray(path)[hop]
        return out


class TracePopulation:
    """Users replaying ``walks`` (``(ticks, users)`` secrets), one row a tick; after the last
    row they stay where they were last seen. The population interface of
    :class:`~mdpsim.simulation.mobility.Population` (``position``, ``n_users``, ``step``)."""

    def __init__(self, walks: np.ndarray) -> None:
        self.walks = np.asarray(walks, dtype=np.int64)
        self.row = -1  # tick 0 stands at the first row; tick 1's move reaches it
        self.position = self.walks[0].copy()

    @property
    def n_users(self) -> int:
        """Number of users."""
        return self.walks.shape[1]

    def step(self, rng: np.random.Generator | None = None) -> None:
        """The next tick's row (``rng`` unused: the walks are data)."""
        self.row = min(self.row + 1, len(self.walks) - 1)
        self.position = self.walks[self.row].copy()


def moves_beyond_reach(walks: np.ndarray, dist_xx: np.ndarray, reach_km: np.ndarray) -> float:
    """The fraction of a walk's one-tick moves longer than the public reach of one tick (moves
    the adversary's reach prior calls impossible)."""
    a, b = walks[:-1].ravel(), walks[1:].ravel()
    if not len(a):
        return 0.0
    return float(np.mean(dist_xx[a, b] > reach_km[a]))
