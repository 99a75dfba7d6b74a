"""Tables an attack computes from a released matrix, kept while the matrix stays the same.

An environment's resets hand the attacks the same fitted mechanism again (the seed's fits are
cached), each time through a fresh read-only view of the certified matrix; the tables are
only read, so they are computed once per mechanism and matrix, not once per episode.
"""

from __future__ import annotations

from collections.abc import Callable
from weakref import WeakKeyDictionary

import numpy as np

from mdpsim.attacks.base import Release


def _identity(matrix: np.ndarray) -> tuple:
    """What makes two views the same matrix: the array that owns the memory, the address
    and the layout (a release hands out a new view of its own copy each time)."""
    owner = matrix if matrix.base is None else matrix.base
    return owner, matrix.ctypes.data, matrix.shape, matrix.strides, matrix.dtype


def kept_per_release[T](
    cache: WeakKeyDictionary, release: Release, build: Callable[[np.ndarray], T]
) -> T:
    """``build(release.matrix)``, or what it returned for the same mechanism and matrix (the
    cache drops an entry with its mechanism)."""
    mechanism, matrix = release.mechanism, release.matrix
    identity = _identity(matrix)
    kept = cache.get(mechanism)
    if kept is not None and kept[0][0] is identity[0] and kept[0][1:] == identity[1:]:
        return kept[1]
    out = build(matrix)
    cache[mechanism] = (identity, out)
    return out
