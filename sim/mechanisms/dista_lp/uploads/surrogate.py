"""What the surrogate modes (``strict``, ``paper``) share: their parameters, the budget split,
the paper's server (repair, WEM+LP by Benders, download) and the server's location of every
upload on the public map (docs/design.md §3, steps 2-7).

A subclass sends the users' uploads (:meth:`SurrogateUpload.send`); this module does the rest.
The noise calibrations are public (a function of X) and costly, so they are kept in the
:class:`~mdpsim.mechanisms.dista_lp.uploads.base.CalibrationCache` the mechanism hands over.
"""

from __future__ import annotations

import math
from abc import abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from mdpsim._core.validation import check_positive_int, check_scalar
from mdpsim.errors import InputError, PrivacyBudgetError
from mdpsim.mechanisms.dista_lp import block_repair
from mdpsim.mechanisms.dista_lp.benders import solve_benders
from mdpsim.mechanisms.dista_lp.locate import locate_surrogate_upload
from mdpsim.mechanisms.dista_lp.surrogates import make_surrogate
from mdpsim.mechanisms.dista_lp.uploads.base import (
    BYTES_PER_FLOAT,
    CalibrationCache,
    Uploaded,
    UploadScheme,
)
from mdpsim.mechanisms.dista_lp.user import LocalBlocks, Upload, UploadConfig, reconstruct
from mdpsim.mechanisms.lp.wem import build_block
from mdpsim.privacy.guarantees import Audit

SPLIT = ("eps_dx", "eps_dy", "eps_cy", "eps_pt")


@dataclass(frozen=True)
class Sent:
    """One user's upload, its true blocks (on the device) and how it checks its download."""

    upload: Upload
    local: LocalBlocks
    own_block: Callable[[np.ndarray, float], np.ndarray]  # (permuted download, eps_pt)


def exempt_columns(dy: np.ndarray, n_exempt: int) -> np.ndarray:
    """Block exempt mask: every column that is among some row's ``n_exempt`` nearest outputs.

    Whole columns are exempt inside a block, so no exempt entry is tied to ``w`` by a WEM
    row of its own block: the block LP is feasible for every ``w`` with WEM mass <= 1.
    """
    n, K = dy.shape
    r = min(n_exempt, K)
    nearest = np.argpartition(dy, r - 1, axis=1)[:, :r]
    cols = np.zeros(K, dtype=bool)
    cols[nearest.ravel()] = True
    return np.broadcast_to(cols, (n, K)).copy()


@dataclass(kw_only=True, repr=False, eq=False)
class SurrogateUpload(UploadScheme):
    """Surrogate coefficient uploads and the paper's server.

    Parameters (after ``epsilon``)
    ------------------------------
    eps_dx, eps_dy, eps_cy, eps_pt
        The budget split (all four or none: 10 % per upload block, 70 % for the report).
    n_neighbours, rank
        Neighbourhood size per user; SVD rank.
    delta, confidence, audit_records, calibration_seed
        Upload PmDP failure probability, auditor confidence, audited secrets, the seed of
        the memoised noise calibration.
    n_exempt, gamma_km, gap, max_iter, workers
        The paper's server: exempt columns per row, gamma repair (km), Benders gap,
        iteration cap and threads.
    release_neighbours
        The rows planned around each located user (the blocks the planner improves).
    """

    family: ClassVar[str] = "svd"

    eps_dx: float | None = None
    eps_dy: float | None = None
    eps_cy: float | None = None
    eps_pt: float | None = None
    n_neighbours: int = 20
    rank: int = 5
    delta: float = 1e-4
    confidence: float = 0.99
    audit_records: int | None = 200
    calibration_seed: int = 0
    n_exempt: int = 10
    gamma_km: float = 0.0
    gap: float = 1e-6
    max_iter: int = 200
    workers: int = 2
    release_neighbours: int = 40

    def __post_init__(self) -> None:
        super().__post_init__()
        self.n_neighbours = check_positive_int(self.n_neighbours, "n_neighbours", minimum=2)
        self.calibration_seed = check_positive_int(
            self.calibration_seed, "calibration_seed", minimum=0
        )
        self.n_exempt = check_positive_int(self.n_exempt, "n_exempt")
        block_repair.gamma_repair(np.zeros(1), self.gamma_km)  # validates gamma_km
        self.gamma_km = float(self.gamma_km)
        self.gap = check_scalar(self.gap, "gap", min=0, max=1, include_boundaries="neither")
        self.max_iter = check_positive_int(self.max_iter, "max_iter")
        self.workers = check_positive_int(self.workers, "workers")
        self.release_neighbours = check_positive_int(self.release_neighbours, "release_neighbours")
        if self.epsilon is not None:  # bound by the mechanism (UploadScheme.bind)
            self.config()  # validates the split, family, rank, delta and confidence now

    def config(self) -> UploadConfig:
        """The users' upload configuration (validates the split, family, rank, delta and
        confidence; an overspent split is an InputError naming it)."""
        try:
            return UploadConfig(
                epsilon=self.eps, eps_dx=self.eps_dx, eps_dy=self.eps_dy,
                eps_cy=self.eps_cy, eps_pt=self.eps_pt, family=self.family, rank=self.rank,
                n_neighbours=self.n_neighbours, delta=self.delta, confidence=self.confidence,
                audit_records=self.audit_records,
            )  # fmt: skip
        except PrivacyBudgetError as err:
            raise InputError(str(err)) from None

    def budgets(self) -> tuple[float, float]:
        split = self.config().split
        return math.fsum(split.upload.values()), split.pt

    def check_domain_size(self, n_x: int, n_y: int) -> None:
        """A neighbourhood is ``n_neighbours`` secrets: it may not exceed ``n_x`` (not clipped:
        the noise is calibrated for blocks of exactly ``n_neighbours`` rows)."""
        if self.n_neighbours > n_x:
            raise InputError(
                f"n_neighbours={self.n_neighbours} exceeds the {n_x} secrets; use "
                f"n_neighbours <= {n_x} or more secrets"
            )

    @abstractmethod
    def send(
        self,
        domain,
        users: np.ndarray,
        config: UploadConfig,
        rng: np.random.Generator,
        calibrations: CalibrationCache,
        info: dict,
    ) -> tuple[Audit, list[Sent]]:
        """The users' uploads and the audit of their noise (recorded in ``info``)."""

    def upload(self, domain, users, rng, *, calibrations, margin) -> Uploaded:
        """Surrogate uploads, the paper's server (own blocks) and the server's location of
        every upload; the plan is weighted by the prior on the located neighbourhoods."""
        self.check_domain_size(domain.n_x, domain.n_y)
        info: dict = {}
        audit, sent = self.send(domain, users, self.config(), rng, calibrations, info)
        eps_pt = self.budgets()[1]
        info["upload_confidence"] = audit.confidence
        info["bytes_up"] = [s.upload.bytes_up for s in sent]
        recon = [
            block_repair.repair_blocks(reconstruct(s.upload), gamma_km=self.gamma_km) for s in sent
        ]
        # The paper's server: WEM+LP on the reconstructed blocks, solved by Benders.
        eps_lp = eps_pt * (1.0 - margin)
        lps = [
            build_block(b["dx"], b["dy"], b["cy"], exempt_columns(b["dy"], self.n_exempt), eps_lp)
            for b in recon
        ]
        result = solve_benders(lps, gap=self.gap, max_iter=self.max_iter, workers=self.workers)
        downloads = [lp.assemble(z, result.w) for lp, z in zip(lps, result.z, strict=True)]
        info.update(
            server_blocks=recon,
            own_blocks=[s.own_block(z, eps_pt) for s, z in zip(sent, downloads, strict=True)],
            own_rows=[_row_of(s.local.neighbourhood, x) for s, x in zip(sent, users, strict=True)],
            neighbourhoods=[s.local.neighbourhood for s in sent],
            bytes_down=[BYTES_PER_FLOAT * d.size for d in downloads],
            **result.info,
        )  # fmt: skip
        located = [
            locate_surrogate_upload(
                b["dy"], domain, self.n_neighbours, v_factor=_v_factor(s.upload, domain.n_y)
            )
            for b, s in zip(recon, sent, strict=True)
        ]
        # the server's guess as an output (the output nearest the located secret)
        guesses = np.argmin(domain.dist_xy[np.asarray(located, dtype=np.int64)], axis=1)
        weights = np.zeros(domain.n_x)
        blocks = []
        for g in located:
            near = np.argsort(domain.dist_xx[g], kind="stable")
            hood = near[: self.n_neighbours]
            weights[hood] += domain.prior[hood]
            blocks.append(np.sort(near[: max(self.release_neighbours, self.n_neighbours)]))
        return Uploaded(weights, guesses, blocks, audit, info)


def _row_of(neighbourhood: np.ndarray, x) -> int:
    return int(np.flatnonzero(neighbourhood == x)[0])


def _v_factor(upload: Upload, n_outputs: int) -> np.ndarray | None:
    """The right factor ``V`` (``K x r``) of a factored (SVD) ``dy`` upload, else ``None``."""
    rank = min(upload.rank, upload.n_local, n_outputs)
    sur = make_surrogate(upload.family, upload.n_local, n_outputs, rank=rank)
    return sur.right_factor(np.asarray(upload.params["dy"], dtype=float))
