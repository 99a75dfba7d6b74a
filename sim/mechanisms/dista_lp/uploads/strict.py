"""``upload="strict"``: the audited surrogate release (docs/dista_lp_upload.md).

Each user fits surrogates of its coefficient blocks and releases their parameters with
shifted noise on every coordinate, the noise calibrated against the Clopper-Pearson PmDP
auditor (calibration.py). The upload is ``(eps_dx + eps_dy + eps_cy, delta)``-PmDP at the
audited confidence.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial

import numpy as np

from mdpsim.mechanisms.dista_lp.calibration import calibrate_upload
from mdpsim.mechanisms.dista_lp.noise_scales import UploadCalibration
from mdpsim.mechanisms.dista_lp.uploads.base import CalibrationCache
from mdpsim.mechanisms.dista_lp.uploads.surrogate import Sent, SurrogateUpload
from mdpsim.mechanisms.dista_lp.user import UploadConfig, finalize_block, prepare_upload
from mdpsim.privacy.guarantees import PMDP, Audit


@dataclass(kw_only=True, repr=False, eq=False)
class StrictUpload(SurrogateUpload):
    """The audited surrogate upload; ``family`` is the surrogate family (one of
    ``surrogates.FAMILIES``), the other parameters are :class:`SurrogateUpload`'s."""

    mode = "strict"
    family: str = "svd"  # type: ignore[misc]  # a parameter here, fixed for the paper

    def guarantee(self, audit: Audit | None) -> PMDP:
        return PMDP(
            self.budgets()[0], self.delta, audit,
            note="audited surrogate release (Clopper-Pearson PmDP auditor)",
        )  # fmt: skip

    def calibration(
        self, domain, config: UploadConfig, calibrations: CalibrationCache
    ) -> UploadCalibration:
        """The calibrated noise scales for ``config`` (made once per domain and config)."""

        def make() -> UploadCalibration:
            rng = np.random.default_rng([self.calibration_seed, 0xCA11B])
            return calibrate_upload(domain, config, rng=rng)

        return calibrations.get(domain, ("strict", config, self.calibration_seed), make)

    def send(self, domain, users, config, rng, calibrations, info) -> tuple[Audit, list[Sent]]:
        cal = self.calibration(domain, config, calibrations)
        samples = [b.audit.n_samples for b in cal.blocks.values() if b.audit is not None]
        audit = Audit(
            cal.confidence, "Clopper-Pearson PmDP auditor, union bound over the blocks",
            n_samples=min(samples) if samples else None, n_records=cal.n_records,
        )  # fmt: skip
        sent = []
        for x in users:
            state, up = prepare_upload(domain, int(x), config, cal, rng)
            own = partial(_finalized, state)
            sent.append(Sent(up, state.blocks, own))
        return audit, sent


def _finalized(state, z_permuted: np.ndarray, eps_pt: float) -> np.ndarray:
    return finalize_block(state, z_permuted, epsilon_pt=eps_pt)
