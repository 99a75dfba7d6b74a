"""The calibrated upload noise of DistA-LP's strict mode, as data (public: a function of X).

Made by :func:`~mdpsim.mechanisms.dista_lp.calibration.calibrate_upload` and passed beside the
:class:`~mdpsim.mechanisms.dista_lp.user.UploadConfig` to
:func:`~mdpsim.mechanisms.dista_lp.user.prepare_upload` (so neither of those modules imports
the other's caller).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from mdpsim.privacy.pmdp import AuditResult


@dataclass(frozen=True)
class BlockCalibration:
    """Noise of one block: ``scale_c = beta * weights_c``, and the audit that accepted it."""

    beta: float
    weights: np.ndarray
    epsilon: float
    delta: float
    audit: AuditResult | None


@dataclass(frozen=True)
class UploadCalibration:
    """Noise calibration for one domain and configuration (public: depends on X only)."""

    n_local: int
    n_outputs: int
    scales: dict[str, float]
    blocks: dict[str, BlockCalibration]
    n_records: int

    @property
    def confidence(self) -> float:
        """Union-bound confidence that all three block claims hold at once."""
        audits = [c.audit for c in self.blocks.values() if c.audit is not None]
        if len(audits) < len(self.blocks):
            return 0.0
        return max(0.0, 1.0 - math.fsum(1.0 - a.confidence for a in audits))
