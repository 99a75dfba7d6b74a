"""DistA-LP's upload noise, calibrated against the PmDP auditor (public: a function of X).

:func:`calibrate_upload` finds, per coefficient block, the smallest noise scale whose release
passes ``(eps_t, delta/3)``-PmDP at the wanted confidence over the audited population of
secrets; users then release with it (:func:`~mdpsim.mechanisms.dista_lp.user.prepare_upload`).
See ``docs/dista_lp_upload.md``.
"""

from __future__ import annotations

import numpy as np

from mdpsim.errors import InputError
from mdpsim.mechanisms.dista_lp.noise_scales import BlockCalibration, UploadCalibration
from mdpsim.mechanisms.dista_lp.release import ParameterRelease
from mdpsim.mechanisms.dista_lp.surrogates import FitResult, fit_blocks
from mdpsim.mechanisms.dista_lp.user import (
    UploadConfig,
    _surrogates,
    block_release,
    local_blocks,
    public_scales,
)
from mdpsim.privacy.pmdp import calibrate_scale
from mdpsim.privacy.split import BLOCKS

_WEIGHT_PAIRS = 2000  # pairs used to measure each coordinate's typical spread


def _fit_record(domain, x: int, config: UploadConfig, scales, seed: int, cost=None) -> FitResult:
    lb = local_blocks(domain, x, n_neighbours=config.n_neighbours, cost=cost)
    sur = _surrogates(config, len(lb.neighbourhood), domain.n_y)
    return fit_blocks(
        lb.as_dict(), sur, scales, rng=np.random.default_rng(seed), n_swap_iter=config.n_swap_iter
    )


def calibrate_upload(
    domain, config: UploadConfig, *, rng: np.random.Generator, cost=None, n_samples=None
) -> UploadCalibration:
    """The noise scales for ``config``, found by binary search against the PmDP auditor
    (users then upload with ``prepare_upload(domain, x, config, calibration, rng)``).

    The audited population is every secret (or ``config.audit_records`` of them, uniform);
    each one's parameters come from the same seeded alternating fit a user runs. Each
    coordinate's noise is ``beta * w_c`` with ``w_c`` its mean absolute difference over random
    pairs of the population (so each coordinate adds about as much expected privacy loss);
    ``beta`` is the smallest scale that passes ``(eps_t, delta/3)``-PmDP at confidence
    ``1 - (1 - confidence)/3``. Raises :class:`PrivacyBudgetError` if none does.
    """
    n_x = domain.n_x
    if n_x < 2:
        raise InputError("calibration needs a domain with at least 2 secrets")
    if config.n_neighbours > n_x:
        raise InputError(f"n_neighbours={config.n_neighbours} exceeds the {n_x} secrets")
    records = (
        np.arange(n_x)
        if config.audit_records is None or config.audit_records >= n_x
        else np.sort(rng.choice(n_x, size=config.audit_records, replace=False))
    )
    scales = public_scales(domain, cost)
    seeds = rng.integers(0, 2**63 - 1, size=len(records))
    fits = [
        _fit_record(domain, int(x), config, scales, int(s), cost)
        for x, s in zip(records, seeds, strict=True)
    ]
    dist = np.asarray(domain.dist_xx[np.ix_(records, records)])
    sur = _surrogates(config, config.n_neighbours, domain.n_y)
    budgets = config.split.upload
    out = {}
    for t in BLOCKS:
        thetas = np.stack([f.thetas[t] for f in fits])
        lo, hi = sur[t].bounds(scales[t])
        a = rng.integers(0, len(records), size=_WEIGHT_PAIRS)
        b = rng.integers(0, len(records), size=_WEIGHT_PAIRS)
        w = np.maximum(np.mean(np.abs(thetas[a] - thetas[b]), axis=0), 1e-6 * (hi - lo))

        def release(beta: float, t: str = t, w: np.ndarray = w) -> ParameterRelease:
            return block_release(sur[t], t, scales[t], beta * w, config)

        beta, audit = calibrate_scale(
            release,
            thetas,
            dist,
            budgets[t],
            config.block_delta,
            confidence=config.block_confidence,
            n_samples=n_samples,
            rng=rng,
        )
        out[t] = BlockCalibration(beta, w, budgets[t], config.block_delta, audit)
    return UploadCalibration(config.n_neighbours, domain.n_y, scales, out, len(records))
