"""HiGHS in one process with several thread counts (sim/mechanisms/lp/highs.py, its scheduler)."""

from __future__ import annotations

import numpy as np
from scipy import sparse

from mdpsim.mechanisms.lp.highs import HighsLP, HighsOptions


def _solve(threads: int | None) -> float:
    A = sparse.csc_array(np.array([[1.0, 1.0], [1.0, -1.0]]))
    lp = HighsLP([1.0, 2.0], A, [1.0, -0.5], [np.inf, 0.5], options=HighsOptions(threads=threads))
    return lp.solve().objective


def test_solves_with_a_second_thread_count_in_the_same_process_succeed():
    assert [_solve(t) for t in (1, 2, 1, None, 2)] == [1.25] * 5
