"""The compiled kernels against the numpy formulas they replace, on random inputs."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
from scipy import sparse

from mdpsim.attacks import hmm
from mdpsim.attacks.base import entropy_bits
from mdpsim.attacks.tracking import _compiled


def update_rows32(block, outputs, resets, lik32, prior32):
    """The numpy formula of the tracking filter's Bayes step that ``bayes_rows32`` replaced
    (``Tracking._update_block`` before issue 49), in place; each row's top and entropy."""
    block[resets] = prior32
    lik = lik32[outputs]
    block *= lik
    hmm.normalise_rows(block, lambda dead: lik[dead] * prior32)
    hmm.flush_tiny(block)
    return block.argmax(axis=1), entropy_bits(block)


@pytest.fixture(scope="module")
def kernels():
    return _compiled()  # compiles once for the module (then from the disk cache)


def _inputs(rng, n_rows: int, n: int, k: int):
    block = rng.random((n_rows, n)).astype(np.float32) ** 8  # some entries flushed
    block /= block.sum(axis=1, keepdims=True)
    lik32 = rng.random((k + 1, n)).astype(np.float32)
    lik32[-1] = 1.0  # silent slots (output -1)
    lik32[0, :] = 0.0  # a report impossible everywhere: its rows die and restart
    lik32[1, : n // 2] = 0.0
    block[0, n // 2 :] = 0.0  # with report 1, row 0 has mass 0 and restarts
    outputs = rng.integers(-1, k, size=n_rows)
    outputs[0] = 1
    resets = rng.random(n_rows) < 0.2
    resets[0] = False
    prior32 = rng.random(n).astype(np.float32)
    prior32 /= prior32.sum()
    return block, outputs, resets, lik32, prior32


@pytest.mark.filterwarnings("ignore:invalid value encountered in divide")
@pytest.mark.parametrize("seed", range(5))
def test_bayes_rows32_is_the_numpy_formula(kernels, seed):
    rng = np.random.default_rng(seed)
    block, outputs, resets, lik32, prior32 = _inputs(rng, 64, 80, 12)
    expected = block.copy()
    top_np, ent_np = update_rows32(expected, outputs, resets, lik32, prior32)
    top = np.empty(len(block), dtype=np.intp)
    kernels.bayes_rows32(block, outputs, resets, lik32, prior32, hmm.FLUSH_BELOW, top)
    assert (outputs == 0).any()  # dead rows whose restart is dead too: NaN, as numpy's
    # float32 beliefs: the kernel sums the mass in float64, numpy pairwise in float32
    np.testing.assert_allclose(block, expected, rtol=2e-6, atol=1e-30)
    assert np.array_equal(top, top_np)  # integer outcomes equal
    np.testing.assert_allclose(entropy_bits(block), ent_np, rtol=1e-5)
    assert ((block == 0) == (expected == 0)).all()  # the same entries flushed


def test_importing_mdpsim_compiles_nothing_and_never_imports_torch():
    """numba (and so every kernel) loads on first use; torch and stable-baselines3 (the rl
    extra) only when a policy is trained (one interpreter checks both: it costs 3 s)."""
    code = (
        "import sys, mdpsim, mdpsim.env, mdpsim.cli, mdpsim.agents.policies.ppo_user; "
        "print(sorted(m for m in ('numba', 'torch', 'stable_baselines3') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


@pytest.mark.parametrize("seed", range(3))
def test_predict_rows32_is_the_sparse_product_bit_for_bit(kernels, seed):
    """The filter's prediction is scipy's ``A @ columns`` transposed, to the last bit."""
    rng = np.random.default_rng(seed)
    n, n_users = 90, 37
    a = sparse.random(n, n, density=0.2, random_state=seed, format="csr", dtype=np.float32)
    columns = (rng.random((n, n_users)) ** 4).astype(np.float32)
    rows = np.full((n_users, n), np.nan, dtype=np.float32)
    kernels.predict_rows32(a.indptr, a.indices, a.data, columns, rows)
    assert np.array_equal(rows.view(np.uint32), (a @ columns).T.view(np.uint32))


def leakage_numpy(matrix, dist_xx, ii, jj):
    """The numpy formula of ``posterior_leakage_per_output`` that ``pair_leakage`` replaced."""
    with np.errstate(divide="ignore"):
        logz = np.log(matrix)
    out = np.zeros(matrix.shape[1])
    for start in range(0, len(ii), 4096):
        a, b = ii[start : start + 4096], jj[start : start + 4096]
        la, lb = logz[a], logz[b]
        both_zero = np.isneginf(la) & np.isneginf(lb)
        with np.errstate(invalid="ignore"):
            diff = np.abs(la - lb)
        diff[both_zero] = 0.0
        d = dist_xx[a, b][:, None]
        with np.errstate(divide="ignore", invalid="ignore"):
            ratio = np.where(diff > 0, diff / d, 0.0)
        out = np.maximum(out, ratio.max(axis=0))
    return out


@pytest.mark.parametrize("seed", range(4))
def test_pair_leakage_is_the_numpy_formula_bit_for_bit(seed):
    from mdpsim.attacks.bayes import posterior_leakage_per_output

    rng = np.random.default_rng(seed)
    n, k = 40, 25
    z = rng.random((n, k)) ** 4
    z[rng.random((n, k)) < 0.15] = 0.0  # zeros: infinite leakage, or none against a zero
    z[:, 0] = 0.0  # an impossible output
    z[:, 1] = 0.5  # an output every secret gives alike
    xy = rng.random((n, 2))
    dist = np.sqrt(((xy[:, None] - xy[None]) ** 2).sum(-1))
    ii, jj = np.triu_indices(n, k=1)
    for pairs in (None, np.column_stack([ii, jj])[rng.random(len(ii)) < 0.3]):
        a, b = (ii, jj) if pairs is None else (pairs[:, 0], pairs[:, 1])
        got = posterior_leakage_per_output(z, dist, pairs=pairs)
        assert got.tobytes() == leakage_numpy(z, dist, a, b).tobytes()
    assert np.isinf(got).any() and got[0] == 0.0
