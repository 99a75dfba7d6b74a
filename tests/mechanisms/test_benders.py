"""Benders decomposition of the integrated WEM+LP equals the direct solve."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from mdpsim.errors import InputError
from mdpsim.mechanisms.dista_lp.benders import solve_benders
from mdpsim.mechanisms.dista_lp.uploads.surrogate import exempt_columns
from mdpsim.mechanisms.dista_lp.user import local_blocks
from mdpsim.mechanisms.lp.wem import build_block, solve_direct


def _row_exempt(dy: np.ndarray, r: int) -> np.ndarray:
    """Per-row exemption (mixed columns: exempt entries tied to w, feasibility cuts happen)."""
    idx = np.argpartition(dy, r - 1, axis=1)[:, :r]
    mask = np.zeros(dy.shape, dtype=bool)
    mask[np.arange(len(dy))[:, None], idx] = True
    return mask


def _blocks(domain, users, *, n_neighbours, exempt, eps):
    out = []
    for x in users:
        lb = local_blocks(domain, int(x), n_neighbours=n_neighbours)
        out.append(build_block(lb.dx, lb.dy, lb.cy, exempt(lb.dy), eps))
    return out


@pytest.mark.parametrize("eps", [2.0, 6.0])
def test_benders_optimum_equals_direct_lp_with_mixed_columns(road_domain_small, eps):
    blocks = _blocks(
        road_domain_small, [3, 17, 30], n_neighbours=8, exempt=lambda dy: _row_exempt(dy, 6),
        eps=eps,
    )  # fmt: skip
    direct = solve_direct(blocks)
    result = solve_benders(blocks, gap=1e-9, max_iter=500)
    assert result.converged
    assert result.objective == pytest.approx(direct.objective, rel=1e-6, abs=1e-9)
    assert result.lower_bound <= result.objective * (1 + 1e-9)


def test_benders_with_whole_exempt_columns_matches_direct(road_domain_small):
    blocks = _blocks(
        road_domain_small, [0, 21], n_neighbours=10, exempt=lambda dy: exempt_columns(dy, 4),
        eps=4.0,
    )  # fmt: skip
    direct = solve_direct(blocks)
    result = solve_benders(blocks, gap=1e-9)
    assert result.objective == pytest.approx(direct.objective, rel=1e-6, abs=1e-9)


def test_benders_result_does_not_depend_on_worker_count(road_domain_small):
    blocks = _blocks(
        road_domain_small, [5, 12, 33], n_neighbours=8, exempt=lambda dy: _row_exempt(dy, 6),
        eps=3.0,
    )  # fmt: skip
    one = solve_benders(blocks, gap=1e-8, workers=1)
    two = solve_benders(blocks, gap=1e-8, workers=2)
    assert one.iterations == two.iterations
    np.testing.assert_array_equal(one.w, two.w)
    for a, b in zip(one.z, two.z, strict=True):
        np.testing.assert_array_equal(a, b)


def test_benders_solution_rows_are_stochastic(road_domain_small):
    blocks = _blocks(
        road_domain_small, [8, 25], n_neighbours=8, exempt=lambda dy: _row_exempt(dy, 6), eps=4.0
    )
    result = solve_benders(blocks, gap=1e-8)
    for block, z in zip(blocks, result.z, strict=True):
        Z = block.assemble(z, result.w)
        np.testing.assert_allclose(Z.sum(axis=1), 1.0, atol=1e-7)


@pytest.mark.parametrize("kwargs", [{"gap": 0.0}, {"gap": 1.5}, {"max_iter": 0}, {"workers": 0}])
def test_benders_rejects_bad_parameters(road_domain_small, kwargs):
    blocks = _blocks(
        road_domain_small, [1], n_neighbours=5, exempt=lambda dy: exempt_columns(dy, 3), eps=4.0
    )
    with pytest.raises(InputError):
        solve_benders(blocks, **kwargs)


def test_benders_rejects_no_blocks():
    with pytest.raises(InputError):
        solve_benders([])


def test_a_subproblem_with_status_unknown_is_solved_again_cold(road_domain_small, monkeypatch):
    """HiGHS once returned 'Unknown' after 0 s from a warm basis (|X| = 2,000, eps 4): the
    subproblem re-solves from scratch instead of failing the fit."""
    from mdpsim.mechanisms.dista_lp import benders
    from mdpsim.mechanisms.lp.highs import HighsLP

    blocks = _blocks(
        road_domain_small, [3, 17], n_neighbours=8, exempt=lambda dy: _row_exempt(dy, 6), eps=4.0
    )
    real_solve, calls = HighsLP.solve, {"unknown": 0, "cleared": 0}
    real_clear = HighsLP.clear_basis

    def flaky_solve(self, *, basis=None, accept=()):
        sol = real_solve(self, basis=basis, accept=accept)
        if "subproblem" in self.name and "Unknown" in accept and calls["unknown"] == 0:
            calls["unknown"] += 1
            return dataclasses.replace(sol, status="Unknown")
        return sol

    def counted_clear(self):
        calls["cleared"] += 1
        real_clear(self)

    monkeypatch.setattr(HighsLP, "solve", flaky_solve)
    monkeypatch.setattr(HighsLP, "clear_basis", counted_clear)
    result = benders.solve_benders(blocks, gap=1e-9, max_iter=500)
    assert calls == {"unknown": 1, "cleared": 1}
    assert result.converged
    assert result.objective == pytest.approx(solve_direct(blocks).objective, rel=1e-6, abs=1e-9)
