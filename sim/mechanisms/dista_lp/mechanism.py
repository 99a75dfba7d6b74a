"""The registered ``dista_lp`` mechanism: users upload, the server solves, users download.

``fit(domain)`` runs the whole protocol for ``n_users`` users (SPEC §3):

1. each user fits and privately releases its three surrogate blocks (helper D's user side,
   noise calibrated once against the PmDP auditor);
2. the server reconstructs the blocks, repairs them conservatively (gamma, metric closure,
   triangle tightening), builds one WEM+LP block per user and solves the integrated LP by
   Benders decomposition at ``eps_pt * (1 - margin)``;
3. each user downloads its block, un-permutes it and checks it on its TRUE local distances;
4. the blocks are assembled over the union ``U`` of the neighbourhoods; the assembled matrix
   is lifted until it is exactly ``eps_pt``-mDP across ALL pairs of ``U`` under the true
   distances (verified; see docs/dista_lp.md).

``matrix_`` is ``|U| x K`` on ``domain_ = domain.restrict(U)``: rows outside ``U`` are not
defined by the protocol. ``guarantee`` is the end-to-end (eps, delta)-PmDP; the pure part is
``info_["epsilon_pt"]``-mDP, certified by the exact verifier (``info_["verified_epsilon_pt"]``).
"""

from __future__ import annotations

import time
from typing import ClassVar
from weakref import WeakKeyDictionary

import numpy as np

from sim.errors import InputError
from sim.mechanisms.base import Guarantee, Mechanism, check_positive_int, register
from sim.mechanisms.dista_lp import server
from sim.mechanisms.dista_lp.benders import solve_benders
from sim.mechanisms.dista_lp.user import (
    UploadConfig,
    calibrate_upload,
    finalize_block,
    prepare_upload,
    reconstruct,
)
from sim.mechanisms.wem_lp import build_block, check_budget_margin, released_matrix

BYTES_PER_FLOAT = 8
# Noise scales calibrated per domain and upload configuration. Calibration is a deterministic
# function of (domain, config, calibration_seed), the costliest step of a fit, and the same
# for every regeneration of a simulation's mechanism, so it is done once per process.
_CALIBRATED: WeakKeyDictionary = WeakKeyDictionary()


def calibrated_config(domain, config: UploadConfig, *, calibration_seed: int) -> UploadConfig:
    """``calibrate_upload`` with its own seeded stream, memoised per domain and config."""
    per_domain = _CALIBRATED.setdefault(domain, {})
    key = (config, calibration_seed)
    if key not in per_domain:
        rng = np.random.default_rng([calibration_seed, 0xCA11B])
        per_domain[key] = calibrate_upload(domain, config, rng=rng)
    return per_domain[key]


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


@register("dista_lp")
class DistALP(Mechanism):
    """DistA-LP (distributed WEM+LP with private surrogate uploads).

    Parameters
    ----------
    epsilon
        Total budget per km (uploads + report), split by ``eps_dx, eps_dy, eps_cy, eps_pt``
        (all four or none: default 10 % per upload block, 70 % for the report).
    n_users, user_indices
        The users' true secrets: ``user_indices`` or ``n_users`` drawn from ``seed``.
    n_neighbours
        Neighbourhood size per user.
    family, rank
        Surrogate family (``"svd"``, ``"gaussian"``, ``"polynomial"``, ``"rbf"``) and SVD rank.
    n_exempt
        Per row, how many nearest outputs (reconstructed distances) make their column exempt.
    gamma_km
        Gamma-repair of the reconstructed distance blocks (km).
    delta, confidence
        Upload PmDP failure probability and the auditor's confidence.
    audit_records
        Secrets audited when calibrating the upload noise (``None``: all).
    gap, max_iter, workers
        Benders stopping gap, iteration cap and subproblem threads.
    margin
        The LP runs at ``eps_pt * (1 - margin)``; the lift absorbs solver round-off in it.
    seed
        Seed of the users' random choices (users, permutations, noise).
    calibration_seed
        Seed of the noise-scale calibration, which is memoised per domain and configuration
        (:func:`calibrated_config`), so regenerations reuse it.
    """

    conformance_params: ClassVar[dict] = {
        "n_users": 3,
        "n_neighbours": 8,
        "audit_records": 20,
        "delta": 0.05,
        "confidence": 0.9,
    }

    def __init__(
        self,
        epsilon: float,
        n_users: int = 10,
        user_indices=None,
        n_neighbours: int = 20,
        family: str = "svd",
        *,
        rank: int = 5,
        eps_dx: float | None = None,
        eps_dy: float | None = None,
        eps_cy: float | None = None,
        eps_pt: float | None = None,
        n_exempt: int = 10,
        gamma_km: float = 0.0,
        delta: float = 1e-4,
        confidence: float = 0.99,
        audit_records: int | None = 200,
        gap: float = 1e-6,
        max_iter: int = 200,
        workers: int = 2,
        margin: float = 1e-3,
        seed: int = 0,
        calibration_seed: int = 0,
    ) -> None:
        super().__init__(epsilon)
        self.n_users = check_positive_int(n_users, "n_users")
        self.user_indices = None if user_indices is None else _indices(user_indices)
        self.n_neighbours = check_positive_int(n_neighbours, "n_neighbours", minimum=2)
        self.family = family
        self.rank = rank
        self.eps_dx, self.eps_dy, self.eps_cy, self.eps_pt = eps_dx, eps_dy, eps_cy, eps_pt
        self.n_exempt = check_positive_int(n_exempt, "n_exempt")
        server.gamma_repair(np.zeros(1), gamma_km)  # validates gamma_km
        self.gamma_km = float(gamma_km)
        self.delta = delta
        self.confidence = confidence
        self.audit_records = audit_records
        if not (isinstance(gap, (int, float)) and 0 < gap < 1):
            raise InputError(f"gap={gap!r} must be in (0, 1)")
        self.gap = float(gap)
        self.max_iter = check_positive_int(max_iter, "max_iter")
        self.workers = check_positive_int(workers, "workers")
        self.margin = check_budget_margin(margin)
        self.seed = check_positive_int(seed, "seed", minimum=0)
        self.calibration_seed = check_positive_int(calibration_seed, "calibration_seed", minimum=0)
        # Validates family, rank, the budget split, delta and confidence now (InputError).
        self._config()

    def _config(self) -> UploadConfig:
        return UploadConfig(
            epsilon=self.epsilon,
            eps_dx=self.eps_dx,
            eps_dy=self.eps_dy,
            eps_cy=self.eps_cy,
            eps_pt=self.eps_pt,
            family=self.family,
            rank=self.rank,
            n_neighbours=self.n_neighbours,
            delta=self.delta,
            confidence=self.confidence,
            audit_records=self.audit_records,
        )

    @property
    def guarantee(self) -> Guarantee:
        config = self._config()
        conf = getattr(self, "upload_confidence_", None)
        return Guarantee(
            kind="pmdp",
            epsilon_per_km=config.epsilon,
            delta=config.delta,
            confidence=conf,
            note=(
                f"uploads ({config.eps_dx + config.eps_dy + config.eps_cy:g}/km, "
                f"{config.delta:g})-PmDP; released matrix pure {config.eps_pt:g}/km-mDP "
                "on the users' neighbourhoods (exact verifier, true distances)"
            ),
        )

    @property
    def report_guarantee(self) -> Guarantee:
        """One report: pure ``eps_pt``-mDP on the users' neighbourhoods (exact verifier)."""
        return Guarantee(kind="pure", epsilon_per_km=self._config().eps_pt)

    @property
    def upload_guarantee(self) -> Guarantee:
        """Each user's upload: ``(eps_dx + eps_dy + eps_cy, delta)``-PmDP (audited)."""
        config = self._config()
        return Guarantee(
            kind="pmdp",
            epsilon_per_km=config.eps_dx + config.eps_dy + config.eps_cy,
            delta=config.delta,
            confidence=getattr(self, "upload_confidence_", None),
        )

    def _fit(self, domain) -> tuple[np.ndarray, dict]:
        rng = np.random.default_rng(self.seed)
        users = self._users(domain, rng)
        t0 = time.perf_counter()
        config = self._upload_config(domain)
        t_cal = time.perf_counter() - t0

        t0 = time.perf_counter()
        states, blocks, bytes_up = [], [], []
        for x in users:
            state, upload = prepare_upload(domain, int(x), config, rng)
            states.append(state)
            bytes_up.append(upload.bytes_up)
            blocks.append(server.repair_blocks(reconstruct(upload), gamma_km=self.gamma_km))
        t_users = time.perf_counter() - t0

        t0 = time.perf_counter()
        eps_lp = config.eps_pt * (1.0 - self.margin)
        lps = [
            build_block(b["dx"], b["dy"], b["cy"], exempt_columns(b["dy"], self.n_exempt), eps_lp)
            for b in blocks
        ]
        result = solve_benders(lps, gap=self.gap, max_iter=self.max_iter, workers=self.workers)
        t_server = time.perf_counter() - t0

        downloads = [lp.assemble(z, result.w) for lp, z in zip(lps, result.z, strict=True)]
        finals = [
            finalize_block(s, z, epsilon_pt=config.eps_pt)
            for s, z in zip(states, downloads, strict=True)
        ]
        rows_u, Z_u = _assemble(states, finals, users)
        sub = domain.restrict(rows_u)
        Z_u, lift = released_matrix(
            Z_u,
            sub.dist_xx,
            config.eps_pt,
            pairs=sub.constraint_pairs,
            margin=self.margin,
            who="DistA-LP",
        )
        self.upload_confidence_ = config.calibration.confidence
        info = {
            "domain": sub,
            "users": users,
            "union_rows": rows_u,
            "epsilon_pt": config.eps_pt,
            "epsilon_upload": config.eps_dx + config.eps_dy + config.eps_cy,
            "upload_confidence": config.calibration.confidence,
            "bytes_up": bytes_up,
            "bytes_down": [BYTES_PER_FLOAT * d.size for d in downloads],
            "calibration_seconds": t_cal,
            "user_seconds": t_users,
            "server_seconds": t_server,
            "server_blocks": blocks,
            "user_blocks": [s.blocks for s in states],
            "user_rows": [s.row_of_x for s in states],
            "final_blocks": finals,
            "n_lp_variables": sum(lp.n_z for lp in lps) + len(result.w),
            **result.info,
            **lift,
        }
        return Z_u, info

    def _upload_config(self, domain) -> UploadConfig:
        """The users' upload configuration with its calibrated noise scales."""
        return calibrated_config(domain, self._config(), calibration_seed=self.calibration_seed)

    def _users(self, domain, rng: np.random.Generator) -> np.ndarray:
        if self.n_neighbours > domain.n_x:
            raise InputError(f"n_neighbours={self.n_neighbours} exceeds the {domain.n_x} secrets")
        if self.user_indices is not None:
            if self.user_indices.max() >= domain.n_x:
                raise InputError(f"user_indices must lie in [0, {domain.n_x})")
            return self.user_indices
        if self.n_users > domain.n_x:
            raise InputError(f"n_users={self.n_users} exceeds the {domain.n_x} secrets")
        return np.sort(rng.choice(domain.n_x, size=self.n_users, replace=False))


def _assemble(states, finals, users) -> tuple[np.ndarray, np.ndarray]:
    """Rows over the union U: a secret's row comes from the user located there, else from
    the first user whose neighbourhood holds it."""
    rows_u = np.unique(np.concatenate([s.neighbourhood for s in states]))
    where = {int(u): p for p, u in enumerate(rows_u)}
    Z = np.full((len(rows_u), finals[0].shape[1]), np.nan)
    for m in range(len(states) - 1, -1, -1):  # the first user wins
        for r, u in enumerate(states[m].neighbourhood):
            Z[where[int(u)]] = finals[m][r]
    for m, x in enumerate(users):
        p = where[int(x)]
        Z[p] = finals[m][states[m].row_of_x]
    return rows_u, Z


def _indices(values) -> np.ndarray:
    arr = np.asarray(values)
    if arr.ndim != 1 or len(arr) == 0 or not np.issubdtype(arr.dtype, np.integer):
        raise InputError("user_indices must be a non-empty list of secret indices")
    if arr.min() < 0 or len(np.unique(arr)) != len(arr):
        raise InputError("user_indices must be distinct and >= 0")
    return arr.astype(np.int64)
