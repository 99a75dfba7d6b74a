"""``upload="paper"``: the paper's rules to the letter (paper_upload.py); the claim only.

Its guarantee is the paper's claim and is NOT certified: ``U_k`` and ``V_k`` are released
exactly (docs/dista_lp.md, "Why paper is not certified").
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial

import numpy as np

from mdpsim.mechanisms.dista_lp.paper_upload import (
    PAPER_SAMPLES,
    PaperCalibration,
    calibrate_paper,
    check_paper_noise,
    check_tau_c,
    paper_upload,
)
from mdpsim.mechanisms.dista_lp.uploads.base import CalibrationCache
from mdpsim.mechanisms.dista_lp.uploads.surrogate import Sent, SurrogateUpload
from mdpsim.mechanisms.dista_lp.user import UploadConfig, local_blocks, repaired
from mdpsim.privacy.guarantees import PMDP, Audit
from mdpsim.privacy.verifier import verify


@dataclass(kw_only=True, repr=False, eq=False)
class PaperUpload(SurrogateUpload):
    """The paper's SVD upload: ``paper_tau_c`` (``tau = c * eps_t``, ``c`` in [0.3, 1]) and
    ``paper_noise`` (``"lipschitz"``, the paper's ``b = Delta_s / eps_t``, or the diagnostic
    ``"fidelity:f"``: ``b = f * median s1``); the rest :class:`SurrogateUpload`'s."""

    mode = "paper"
    paper_tau_c: float = 0.5
    paper_noise: str = "lipschitz"

    def __post_init__(self) -> None:
        self.paper_tau_c = check_tau_c(self.paper_tau_c)
        self.paper_noise = check_paper_noise(self.paper_noise)
        super().__post_init__()

    def guarantee(self, audit: Audit | None) -> PMDP:
        return PMDP(self.budgets()[0], self.delta, audit, note=_paper_note(audit))

    def calibration(
        self, domain, config: UploadConfig, calibrations: CalibrationCache
    ) -> PaperCalibration:
        """The paper's noise and its S = 100 audit (made once per domain and config)."""

        def make() -> PaperCalibration:
            rng = np.random.default_rng([self.calibration_seed, 0xCA11B])
            n_x = domain.n_x
            n_rec = n_x if self.audit_records is None else min(self.audit_records, n_x)
            records = np.sort(rng.choice(n_x, size=n_rec, replace=False))
            return calibrate_paper(
                domain, config.split.upload, rank=self.rank, n_neighbours=self.n_neighbours,
                tau_c=self.paper_tau_c, delta=self.delta, records=records, rng=rng,
                noise=self.paper_noise,
            )  # fmt: skip

        key = ("paper", config, self.paper_tau_c, self.paper_noise, self.calibration_seed)
        return calibrations.get(domain, key, make)

    def send(self, domain, users, config, rng, calibrations, info) -> tuple[Audit, list[Sent]]:
        cal = self.calibration(domain, config, calibrations)
        audit = Audit(
            cal.hoeffding_confidence, "the paper's Hoeffding bound on the noised singular "
            "values", n_samples=PAPER_SAMPLES, n_records=cal.n_records,
        )  # fmt: skip
        sent = []
        for x in users:
            perm, up = paper_upload(
                domain, int(x), cal, rank=self.rank, n_neighbours=self.n_neighbours, rng=rng
            )
            local = local_blocks(domain, int(x), n_neighbours=self.n_neighbours)
            sent.append(Sent(up, local, partial(_own_block, perm, local.dx)))
        info["paper_calibration"] = cal
        return audit, sent


def _paper_note(audit: Audit | None) -> str:
    conf = (
        "" if audit is None else f"; Prop. 2 confidence of the S = 100 audit {audit.confidence:.3g}"
    )
    return (
        "the paper's claim, NOT certified: U_k and V_k are released exactly, and an exact "
        "release of record-dependent vectors has infinite privacy loss (paper eq. 18); the "
        f"audit covers only the noised singular values{conf}"
    )


def _own_block(perm, local_dx, z_permuted, eps_pt) -> np.ndarray:
    """The paper's per-neighbourhood check: un-permute, verify on the true local distances
    at ``eps_pt`` (repair with the proven envelope if it fails)."""
    block = np.empty_like(z_permuted)
    block[perm] = z_permuted
    if verify(block, local_dx, eps_pt).passed:
        return block
    return repaired(block, local_dx, eps_pt)
