"""The user side of DistA-LP: local blocks, surrogate upload, download and report.

Per user with true record ``x``:

1. :func:`local_blocks`: neighbourhood ``N`` (the ``n_neighbours`` nearest secrets to ``x``,
   ``x`` included) and the blocks ``dx`` (``N x N`` km), ``dy`` (``N x Y`` km),
   ``cy`` (``N x Y``, ``prior_i * c(x_i, y_k)``).
2. :func:`prepare_upload`: a private random row permutation, the alternating surrogate fit,
   and the private release of each block's parameters (noise calibrated beforehand against
   the PmDP auditor, :mod:`mdpsim.mechanisms.dista_lp.calibration`). Only the :class:`Upload`
   goes to the server; the :class:`UserState` stays on the device.
3. :func:`reconstruct` (server side, permuted order).
4. :func:`finalize_block`: un-permute the downloaded block, check it against the TRUE local
   distances with the exact verifier (repair if needed), then :func:`report` samples.

Budgets: ``eps_dx + eps_dy + eps_cy + eps_pt <= epsilon``
(:class:`~mdpsim.privacy.split.BudgetSplit`).
The upload is ``(eps_dx + eps_dy + eps_cy, delta)``-PmDP at the audited confidence; the report
is pure ``eps_pt``-mDP on the neighbourhood. See ``docs/dista_lp_upload.md``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from mdpsim._core.validation import check_positive_int, check_probability, check_scalar
from mdpsim.errors import InputError, PrivacyBudgetError
from mdpsim.mechanisms.dista_lp.noise_scales import UploadCalibration
from mdpsim.mechanisms.dista_lp.release import NOISE_LAWS, ParameterRelease
from mdpsim.mechanisms.dista_lp.surrogates import (
    FAMILIES,
    SURROGATES,
    FitResult,
    Surrogate,
    fit_blocks,
    make_surrogate,
)
from mdpsim.privacy.split import BLOCKS, BudgetSplit

BYTES_PER_PARAM = 8  # float64 on the wire


# ---------------------------------------------------------------------- local blocks
@dataclass(frozen=True)
class LocalBlocks:
    """A user's true blocks, rows in true neighbourhood order (private)."""

    neighbourhood: np.ndarray
    dx: np.ndarray
    dy: np.ndarray
    cy: np.ndarray

    def as_dict(self) -> dict[str, np.ndarray]:
        return {"dx": self.dx, "dy": self.dy, "cy": self.cy}


def local_blocks(domain, x_index: int, *, n_neighbours: int = 20, cost=None) -> LocalBlocks:
    """The neighbourhood of secret ``x_index`` and its three coefficient blocks.

    ``cost`` is the ``(N, K)`` loss ``c(x_i, y_k)`` in km (default ``domain.dist_xy``).
    Ties in distance are broken by secret index (stable).
    """
    n_x = domain.n_x
    check_scalar(x_index, "x_index", kind=int, min=0, max=n_x - 1, unit="a secret index")
    n = check_positive_int(n_neighbours, "n_neighbours", minimum=2)
    if n > n_x:
        raise InputError(f"n_neighbours={n} exceeds the {n_x} secrets of the domain")
    cost = domain.dist_xy if cost is None else np.asarray(cost, dtype=float)
    if cost.shape != (n_x, domain.n_y):
        raise InputError(f"cost must be ({n_x}, {domain.n_y}), got {cost.shape}")
    nb = np.argsort(domain.dist_xx[x_index], kind="stable")[:n]
    return LocalBlocks(
        neighbourhood=nb,
        dx=np.asarray(domain.dist_xx[np.ix_(nb, nb)]),
        dy=np.asarray(domain.dist_xy[nb]),
        cy=domain.prior[nb, None] * cost[nb],
    )


# ---------------------------------------------------------------------- configuration
@dataclass(frozen=True)
class UploadConfig:
    """Parameters of a user's upload (validated).

    ``epsilon`` is the total budget (1/km). Give all four of ``eps_dx``, ``eps_dy``,
    ``eps_cy``, ``eps_pt`` or none (default split: 10 % per upload block, 70 % for the report).
    ``delta`` is the total upload failure probability, split evenly over the three blocks, and
    ``confidence`` the joint confidence wanted (each block audited at ``1 - (1 - c)/3``).
    ``noise`` is ``"shifted"`` (default, full support) or ``"onesided"`` (the paper's
    ``theta - |Lap(b)|``); ``svd_tau_c`` sets the SVD soft threshold ``tau = c * b``.
    ``audit_records``: how many secrets (uniform, seeded) the calibration audits; ``None`` =
    all. The noise calibration is made apart
    (:func:`~mdpsim.mechanisms.dista_lp.calibration.calibrate_upload`) and passed beside it.
    """

    epsilon: float
    eps_dx: float | None = None
    eps_dy: float | None = None
    eps_cy: float | None = None
    eps_pt: float | None = None
    family: str = "svd"
    rank: int = 5
    n_neighbours: int = 20
    delta: float = 1e-4
    confidence: float = 0.99
    n_swap_iter: int = 15
    noise: str = "shifted"
    wrong_side_prob: float = 0.05
    svd_tau_c: float = 0.5
    audit_records: int | None = None
    _split: BudgetSplit = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        given = [p for p in (self.eps_dx, self.eps_dy, self.eps_cy, self.eps_pt) if p is not None]
        if not given:
            split = BudgetSplit.default(self.epsilon)
        elif len(given) < 4:
            raise InputError("give all of eps_dx, eps_dy, eps_cy, eps_pt or none of them")
        else:
            split = BudgetSplit(self.epsilon, *given)
        object.__setattr__(self, "_split", split)
        object.__setattr__(self, "epsilon", split.total)
        for b in ("dx", "dy", "cy", "pt"):
            object.__setattr__(self, f"eps_{b}", getattr(split, b))
        if self.family not in FAMILIES:
            raise InputError(f"family={self.family!r} must be one of {FAMILIES}")
        check_positive_int(self.rank, "rank")
        n = check_positive_int(self.n_neighbours, "n_neighbours", minimum=2)
        SURROGATES.get(self.family).check_rank(self.rank, n)
        check_probability(self.delta, "delta")
        check_probability(self.confidence, "confidence")
        check_positive_int(self.n_swap_iter, "n_swap_iter", minimum=0)
        if self.noise not in NOISE_LAWS:
            raise InputError(f"noise={self.noise!r} must be one of {NOISE_LAWS}")
        if not 0 < float(self.wrong_side_prob) < 0.5:
            raise InputError(f"wrong_side_prob={self.wrong_side_prob!r} must be in (0, 0.5)")
        if not (math.isfinite(float(self.svd_tau_c)) and self.svd_tau_c >= 0):
            raise InputError(f"svd_tau_c={self.svd_tau_c!r} must be finite and >= 0")
        if self.audit_records is not None:
            check_positive_int(self.audit_records, "audit_records", minimum=2)

    @property
    def split(self) -> BudgetSplit:
        return self._split

    @property
    def block_delta(self) -> float:
        return self.delta / len(BLOCKS)

    @property
    def block_confidence(self) -> float:
        return 1.0 - (1.0 - self.confidence) / len(BLOCKS)


def _surrogates(config: UploadConfig, n: int, k: int) -> dict[str, Surrogate]:
    rank = min(config.rank, n, k)
    return {
        "dx": make_surrogate(config.family, n, n, rank=min(config.rank, n)),
        "dy": make_surrogate(config.family, n, k, rank=rank),
        "cy": make_surrogate(config.family, n, k, rank=rank),
    }


def public_scales(domain, cost=None) -> dict[str, float]:
    """Largest possible entry of each block type (public: from X, Y, prior and cost)."""
    cost = domain.dist_xy if cost is None else cost
    d_max = float(max(np.max(domain.dist_xx), np.max(domain.dist_xy)))
    return {"dx": d_max, "dy": d_max, "cy": float(np.max(domain.prior) * np.max(cost))}


def block_release(
    surrogate: Surrogate, block: str, scale: float, noise_scale: np.ndarray, config: UploadConfig
) -> ParameterRelease:
    """The release of one block's parameters: biased coordinates down (dx, dy) or up (cy)."""
    lo, hi = surrogate.bounds(scale)
    sign = 1.0 if block == "cy" else -1.0
    direction = np.where(surrogate.level_mask, sign, 0.0)
    shift = np.zeros(surrogate.n_params)
    if surrogate.soft_threshold:  # SVD: tau = c * b on the singular values
        shift = direction * config.svd_tau_c * noise_scale
    return ParameterRelease(
        lo, hi, noise_scale, shift, direction,
        noise=config.noise, wrong_side_prob=config.wrong_side_prob,
    )  # fmt: skip


# ---------------------------------------------------------------------- upload
@dataclass(frozen=True)
class Upload:
    """What the server receives: released parameters per block, rows in permuted order.

    ``rank`` is the configured SVD rank; each block's own is ``min(rank, rows, columns)``
    (``dx`` is ``n_local`` square, ``dy`` and ``cy`` have ``n_outputs`` columns).
    """

    family: str
    params: dict[str, np.ndarray]
    n_local: int
    n_outputs: int
    rank: int

    @property
    def bytes_up(self) -> int:
        """Bytes on the wire: every released parameter as a float64."""
        return BYTES_PER_PARAM * sum(p.size for p in self.params.values())


@dataclass(frozen=True)
class UserState:
    """What stays on the user's device."""

    x_index: int
    blocks: LocalBlocks
    perm: np.ndarray
    fit: FitResult
    config: UploadConfig

    @property
    def neighbourhood(self) -> np.ndarray:
        return self.blocks.neighbourhood

    @property
    def row_of_x(self) -> int:
        """Row of the true record inside the true-order neighbourhood block."""
        return int(np.flatnonzero(self.blocks.neighbourhood == self.x_index)[0])

    def permuted_blocks(self) -> dict[str, np.ndarray]:
        """The true blocks in the uploaded (permuted) row order."""
        p = self.perm
        return {
            "dx": self.blocks.dx[np.ix_(p, p)],
            "dy": self.blocks.dy[p],
            "cy": self.blocks.cy[p],
        }


def _checked_calibration(domain, config: UploadConfig, cal) -> UploadCalibration:
    if cal is None:
        raise InputError("no noise calibration: pass calibrate_upload(domain, config)")
    if (cal.n_local, cal.n_outputs) != (config.n_neighbours, domain.n_y):
        raise InputError("the calibration was made for another domain or neighbourhood size")
    return cal


def prepare_upload(
    domain,
    x_index: int,
    config: UploadConfig,
    calibration: UploadCalibration | None,
    rng: np.random.Generator,
    *,
    cost=None,
) -> tuple[UserState, Upload]:
    """Fit and privatise the user's blocks with ``calibration``'s noise (made for this
    domain and config); returns the private state and the upload."""
    cal = _checked_calibration(domain, config, calibration)
    lb = local_blocks(domain, x_index, n_neighbours=config.n_neighbours, cost=cost)
    sur = _surrogates(config, len(lb.neighbourhood), domain.n_y)
    fit = fit_blocks(lb.as_dict(), sur, cal.scales, rng=rng, n_swap_iter=config.n_swap_iter)
    params = {}
    for t in BLOCKS:
        c = cal.blocks[t]
        rel = block_release(sur[t], t, cal.scales[t], c.beta * c.weights, config)
        params[t] = rel.sample(fit.thetas[t], rng)
    state = UserState(int(x_index), lb, fit.perm, fit, config)
    upload = Upload(config.family, params, len(lb.neighbourhood), domain.n_y, config.rank)
    return state, upload


def reconstruct(upload: Upload) -> dict[str, np.ndarray]:
    """Server side: the blocks ``"dx"`` (n, n), ``"dy"``, ``"cy"`` (n, K), permuted order."""
    n, k = upload.n_local, upload.n_outputs
    out = {}
    for t in BLOCKS:
        cols = n if t == "dx" else k
        sur = make_surrogate(upload.family, n, cols, rank=min(upload.rank, n, cols))
        theta = np.asarray(upload.params[t], dtype=float)
        if theta.shape != (sur.n_params,):
            raise InputError(f"upload block {t!r} has {theta.shape} parameters, not {sur.n_params}")
        out[t] = sur.evaluate(theta)
    return out


# ---------------------------------------------------------------------- download and report
def finalize_block(state: UserState, z_block_permuted: np.ndarray, *, epsilon_pt: float):
    """Un-permute the downloaded block and make sure it is ``epsilon_pt``-mDP on the TRUE
    local distances (exact verifier, log space); repair it if not.

    Returns the ``n x K`` block in true neighbourhood order.
    """
    from mdpsim.privacy.verifier import verify

    z = np.asarray(z_block_permuted, dtype=float)
    n = len(state.perm)
    if z.ndim != 2 or z.shape[0] != n:
        raise InputError(f"downloaded block must have {n} rows, got shape {z.shape}")
    if epsilon_pt > state.config.split.pt * (1 + 1e-12):
        raise PrivacyBudgetError(
            f"epsilon_pt={epsilon_pt:g} exceeds this user's report budget {state.config.eps_pt:g}"
        )
    block = np.empty_like(z)
    block[state.perm] = z  # permuted row r holds true local row perm[r]
    if verify(block, state.blocks.dx, epsilon_pt).passed:
        return block
    return repaired(block, state.blocks.dx, epsilon_pt)


def repaired(block: np.ndarray, dx: np.ndarray, epsilon_pt: float) -> np.ndarray:
    """The smallest-margin envelope repair that passes the exact verifier on ``dx``
    (:func:`~mdpsim.mechanisms.lp.repair.release_verified`, margin growing from
    ``FIRST_MARGIN``)."""
    from mdpsim.mechanisms.lp.repair import FIRST_MARGIN, release_verified
    from mdpsim.privacy.verifier import PrivacyViolation

    try:
        released = release_verified(
            block, dx, epsilon_pt, margin=FIRST_MARGIN, who="DistA-LP block"
        )
        return released.matrix
    except PrivacyViolation as exc:
        raise PrivacyBudgetError(f"repaired block still fails the verifier: {exc}") from None


def report(state: UserState, block: np.ndarray, rng: np.random.Generator) -> int:
    """Sample the user's report (an output index) from the true record's row of ``block``."""
    from mdpsim.privacy.sampling import sample_rows

    row = np.asarray(block, dtype=float)[state.row_of_x][None, :]
    return int(sample_rows(row, np.array([0]), rng)[0])
