"""Compiled kernels of the people model's tick (numba, ``cache=True``).

Plain loops over the users' state arrays, each the element-wise arithmetic of
:meth:`mdpsim.simulation.people.People.step` in the same order (so the same values; no
random draw is made here); nothing compiles at import, each signature compiles on its first
call and is cached on disk beside this module (or under ``NUMBA_CACHE_DIR``).
"""

from __future__ import annotations

import numba
import numpy as np


@numba.njit(cache=True, nogil=True)
def tick_stays(moving: np.ndarray, dwell_left: np.ndarray, stay_ticks: np.ndarray) -> np.ndarray:
    """Every user not moving: one tick less left of its dwell, one more of its stay (in
    place); returns, in order, the users whose dwell is over (``dwell_left <= 0``)."""
    over = np.empty(len(moving), dtype=np.int64)
    k = 0
    for u in range(len(moving)):
        if not moving[u]:
            dwell_left[u] -= 1
            stay_ticks[u] += 1
            if dwell_left[u] <= 0:
                over[k] = u
                k += 1
    return over[:k]


@numba.njit(cache=True, nogil=True)
def walk(
    moving: np.ndarray,
    position: np.ndarray,
    dest: np.ndarray,
    carry_m: np.ndarray,
    stay_ticks: np.ndarray,
    next_hop: np.ndarray,
    gap_m: np.ndarray,
    stride_m: float,
) -> np.ndarray:
    """Every moving user walks ``stride_m`` metres (plus what it carried) hop by hop towards
    its destination, stopping before a hop longer than what is left; one who arrives stops
    moving and starts a stay (in place). Returns, in order, the users who arrived."""
    arrived = np.empty(len(moving), dtype=np.int64)
    k = 0
    for u in range(len(moving)):
        if not moving[u]:
            continue
        pos, goal = position[u], dest[u]
        budget = carry_m[u] + stride_m
        while pos != goal:
            nxt = next_hop[pos, goal]
            gap = np.float64(gap_m[pos, nxt])
            if not gap <= budget:
                break
            pos = nxt
            budget = budget - gap
        position[u] = pos
        if pos == goal:
            carry_m[u] = 0.0
            moving[u] = False
            stay_ticks[u] = 0
            arrived[k] = u
            k += 1
        else:
            carry_m[u] = budget
    return arrived[:k]
