"""Compiled kernels of the privacy filters' exact accounting (numba, ``cache=True``).

Plain functions over 1-D arrays, each the element-wise two-sum arithmetic of
:mod:`mdpsim.privacy.filters` in the same order (so the same bits); nothing compiles at
import, each signature compiles on its first call and is cached on disk beside this module
(or under ``NUMBA_CACHE_DIR``).
"""

from __future__ import annotations

import numba
import numpy as np


@numba.njit(cache=True, nogil=True)
def add_up_1d(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``add_up`` of two equal-length 1-D float arrays, element by element (the same
    two-sum operations in the same order, so the same bits)."""
    out = np.empty(len(a))
    for i in range(len(a)):
        s = a[i] + b[i]
        bp = s - a[i]
        ap = s - bp
        err = (a[i] - ap) + (b[i] - bp)
        out[i] = np.nextafter(s, np.inf) if err > 0 else s
    return out


@numba.njit(cache=True, nogil=True)
def left_1d(capacity: np.ndarray, spent: np.ndarray, halted: np.ndarray) -> np.ndarray:
    """``PopulationFilter.remaining``: ``sub_down(capacity, spent)``, 0 where halted."""
    out = np.empty(len(capacity))
    for i in range(len(capacity)):
        out[i] = 0.0 if halted[i] else sub_down_one(capacity[i], spent[i])
    return out


@numba.njit(cache=True, nogil=True)
def short_of_1d(
    capacity: np.ndarray, spent: np.ndarray, halted: np.ndarray, cost: float
) -> np.ndarray:
    """``PopulationFilter.short_of``: not halted and ``sub_down(capacity, spent) < cost``."""
    out = np.zeros(len(capacity), dtype=np.bool_)
    for i in range(len(capacity)):
        out[i] = not halted[i] and sub_down_one(capacity[i], spent[i]) < cost
    return out


@numba.njit(cache=True, nogil=True)
def sub_down_one(a: float, spent: float) -> float:
    """``sub_down`` of two floats (``a - spent`` rounded down, clipped at 0)."""
    b = -spent
    s = a + b
    bp = s - a
    ap = s - bp
    err = (a - ap) + (b - bp)
    if err < 0:
        s = np.nextafter(s, -np.inf)
    return s if s >= 0.0 else 0.0


@numba.njit(cache=True, nogil=True)
def charge_1d(
    spent: np.ndarray, c: np.ndarray, capacity: np.ndarray, halted: np.ndarray
) -> tuple[np.ndarray, bool, bool]:
    """``PopulationFilter.spend``'s arithmetic: ``spent + c`` rounded up, whether anyone
    is charged (``c > 0``) and whether a charged user is halted or reaches its capacity
    (then ``filters._fit`` decides, as the unchecked path would)."""
    out = np.empty(len(spent))
    asked = check = False
    for i in range(len(spent)):
        s = spent[i] + c[i]
        bp = s - spent[i]
        ap = s - bp
        err = (spent[i] - ap) + (c[i] - bp)
        out[i] = np.nextafter(s, np.inf) if err > 0 else s
        if c[i] > 0:
            asked = True
            check = check or halted[i] or s >= capacity[i]
    return out, asked, check


@numba.njit(cache=True, nogil=True)
def request_1d(
    spent: np.ndarray, c: np.ndarray, capacity: np.ndarray, halted: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``PopulationFilter.request``'s arithmetic: who pays (asked, not halted, fits), who
    halts now (asked and does not pay), the new spends and what each pays."""
    n = len(spent)
    ok, refused = np.zeros(n, dtype=np.bool_), np.zeros(n, dtype=np.bool_)
    new_spent, paid = spent.copy(), np.zeros(n)
    for i in range(n):
        if not c[i] > 0:
            continue
        s = spent[i] + c[i]
        bp = s - spent[i]
        ap = s - bp
        err = (spent[i] - ap) + (c[i] - bp)
        if not halted[i] and (s < capacity[i] or (s == capacity[i] and err <= 0)):
            ok[i] = True
            new_spent[i] = np.nextafter(s, np.inf) if err > 0 else s
            paid[i] = c[i]
        else:
            refused[i] = True
    return ok, refused, new_spent, paid


@numba.njit(cache=True, nogil=True)
def request_paid_1d(
    spent: np.ndarray, c: np.ndarray, capacity: np.ndarray, halted: np.ndarray, by: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, bool, bool]:
    """:func:`request_1d` and what ``PopulationFilter.request`` makes of it in one pass:
    who pays, the halted flags after it (``halted | refused``), the new spends, the
    component's spends after it (``add_up_1d(by, paid)``), whether anyone halted now and
    whether anyone paid."""
    ok, refused, new_spent, paid = request_1d(spent, c, capacity, halted)
    n = len(spent)
    now_halted, new_by = np.empty(n, dtype=np.bool_), add_up_1d(by, paid)
    any_refused = any_ok = False
    for i in range(n):
        now_halted[i] = halted[i] or refused[i]
        any_refused = any_refused or refused[i]
        any_ok = any_ok or ok[i]
    return ok, now_halted, new_spent, new_by, any_refused, any_ok


@numba.njit(cache=True, nogil=True)
def valid_costs_1d(costs: np.ndarray) -> bool:
    """Whether every cost is ``>= 0`` and ``< inf`` (NaN fails both)."""
    valid = True
    for i in range(len(costs)):
        valid = valid and costs[i] >= 0.0 and costs[i] < np.inf
    return valid
