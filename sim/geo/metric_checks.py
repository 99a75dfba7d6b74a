"""What a distance matrix between secrets must satisfy before anything trusts it.

mDP constrains ``Z[i,k] <= exp(eps d(i,j)) Z[j,k]`` for ordered pairs, so an asymmetric ``d``
silently weakens one direction of every pair (d01 = 1, d10 = 0.1 checks 0 -> 1 at a tenth of the
budget the caller may believe), and a non-zero diagonal means the matrix is not distances at all.
Both are refused with one line naming the first bad entry. A directed metric (one-way roads) is
accepted only when the caller asks for it by name (``directed=True``); the diagonal must still be
zero. Symmetry is checked to a relative ``SYMMETRY_RTOL`` (float rounding of a computed metric),
tile by tile so that no second N x N array is made.
"""

from __future__ import annotations

import numpy as np

from mdpsim.errors import InputError

SYMMETRY_RTOL = 1e-9  # |d(i,j) - d(j,i)| <= SYMMETRY_RTOL * max(d(i,j), d(j,i))
_BLOCK = 256  # tiles of 256 x 256 compared with their mirror tiles


DIRECTED_FIX = "or directed=True where a directed metric, e.g. one-way roads, is meant"


def check_distances(
    dist: np.ndarray, name: str, *, directed: bool = False, fix: str = DIRECTED_FIX
) -> None:
    """Refuse a square distance matrix (km) with a non-zero diagonal or, unless ``directed``,
    an asymmetric pair, with one :class:`InputError` line naming the entry and ``fix``."""
    if not isinstance(directed, bool):
        raise InputError(f"directed={directed!r} must be True or False")
    diag = np.diagonal(dist)
    bad = np.nonzero(diag != 0)[0]
    if len(bad):
        i = int(bad[0])
        raise InputError(
            f"{name}[{i}, {i}] = {float(diag[i]):.12g} km: a distance matrix needs a zero "
            "diagonal (each secret is at distance 0 from itself)"
        )
    if directed:
        return
    n = len(dist)
    for i0 in range(0, n, _BLOCK):
        for j0 in range(i0, n, _BLOCK):
            a = dist[i0 : i0 + _BLOCK, j0 : j0 + _BLOCK]
            b = dist[j0 : j0 + _BLOCK, i0 : i0 + _BLOCK].T
            off = np.abs(a - b) > SYMMETRY_RTOL * np.maximum(a, b)
            if off.any():
                r, c = (int(v) for v in np.argwhere(off)[0])
                i, j = i0 + r, j0 + c
                raise InputError(
                    f"{name} is not symmetric: d({i}, {j}) = {float(dist[i, j]):.12g} km but "
                    f"d({j}, {i}) = {float(dist[j, i]):.12g} km; pass a symmetric metric ({fix})"
                )
