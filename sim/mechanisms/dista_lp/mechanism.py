"""The registered ``dista_lp`` mechanism: uploads, the server's plan, one exact release over X.

``make("dista_lp", epsilon=..., upload=...)`` with four upload modes (docs/dista_lp.md):

* ``"none"``: no upload; the server plans for the public prior over all of X. Pure
  ``epsilon``-mDP, all of it for the report.
* ``"location"``: each user releases one location drawn from the EM over X at
  ``eps_up = upload_share * epsilon`` (exact ``eps_up``-mDP). The server weights every secret
  by its posterior given the releases and plans for that. Pure ``eps_up + eps_pt``-mDP.
* ``"strict"``: the audited surrogate release (user.py: shifted noise on every released
  coordinate, noise calibrated against the Clopper-Pearson PmDP auditor).
* ``"paper"``: the paper's rules to the letter (paper_upload.py); its guarantee is the
  paper's claim and is not certified (exactly released ``U_k``, ``V_k``).

In every mode the matrix the users report from is a function of the uploads and public data
only, exactly ``eps_pt``-mDP over ALL of X, checked by the exact verifier on the domain's
chaining pairs. ``none`` and ``location`` plan for the prior or the posterior with the
city-scale LP over medoid outputs (``planner="lp_medoids"``, the default there); the surrogate
modes locate each upload on the public map (locate.py), plan on the located rows
and :func:`~mdpsim.mechanisms.dista_lp.full_domain.release_full_domain` turns the EM over X into
an improved matrix (``planner="blocks"``, also available for ``none``/``location``, on tiles
covering X). ``matrix_`` has a row for every secret of the
domain given to ``fit`` and ``domain_`` is that domain.

For the surrogate modes the paper's own server also runs (repair, WEM+LP by Benders,
download) and each user's block checked on its own neighbourhood is kept in
``info_["own_blocks"]``: the paper's per-neighbourhood guarantee, reported beside the exact
release by the benchmark.

Regeneration: nothing here depends on when it is called; the simulation regenerates on a
public schedule and charges ``upload_guarantee`` once per fit and ``report_guarantee`` per
report (``guarantee`` is their sequential composition).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from typing import ClassVar, TypeVar
from weakref import WeakKeyDictionary

import numpy as np

from mdpsim.errors import InputError, PrivacyBudgetError
from mdpsim.mechanisms.base import Mechanism, Uploads, make, register
from mdpsim.mechanisms.dista_lp import block_repair
from mdpsim.mechanisms.dista_lp.benders import solve_benders
from mdpsim.mechanisms.dista_lp.calibration import calibrate_upload
from mdpsim.mechanisms.dista_lp.full_domain import em_matrix, release_full_domain, tiles
from mdpsim.mechanisms.dista_lp.locate import (
    bayes_guess,
    locate_surrogate_upload,
    location_posterior,
    prior_guess,
)
from mdpsim.mechanisms.dista_lp.noise_scales import UploadCalibration
from mdpsim.mechanisms.dista_lp.paper_upload import (
    PAPER_SAMPLES,
    calibrate_paper,
    check_paper_noise,
    check_tau_c,
    paper_upload,
)
from mdpsim.mechanisms.dista_lp.user import (
    UploadConfig,
    _repaired,
    finalize_block,
    local_blocks,
    prepare_upload,
    reconstruct,
)
from mdpsim.mechanisms.repair import FIRST_MARGIN, MAX_MARGIN
from mdpsim.mechanisms.wem_lp import build_block
from mdpsim.privacy.guarantees import PMDP, Audit, Guarantee, PureMDP, compose
from mdpsim.privacy.split import BudgetSplit
from mdpsim.privacy.verifier import verify
from mdpsim.sampling import sample_rows
from mdpsim.validation import check_margin, check_positive_int

UPLOADS = ("none", "location", "strict", "paper")
DEFAULT_UPLOAD = "none"
DEFAULT_UPLOAD_SHARE = 0.1
PLANNERS = ("blocks", "lp_medoids")
BYTES_PER_FLOAT = 8
T = TypeVar("T")


class CalibrationCache:
    """Noise calibrations by domain (held weakly) and key.

    A calibration depends on (domain, configuration, seed) only, public facts, and is the
    costliest step of a surrogate-mode fit; the simulation builds a new mechanism at every
    regeneration, so :class:`DistALP` keeps one cache for all its instances
    (``DistALP.calibrations``; ``clear()`` empties it).
    """

    def __init__(self) -> None:
        self._by_domain: WeakKeyDictionary = WeakKeyDictionary()

    def get(self, domain, key: tuple, make: Callable[[], T]) -> T:
        """The calibration stored under ``key`` for ``domain``, made by ``make()`` once."""
        per_domain = self._by_domain.setdefault(domain, {})
        if key not in per_domain:
            per_domain[key] = make()
        return per_domain[key]

    def clear(self) -> None:
        """Forget every calibration."""
        self._by_domain.clear()


def calibrated(domain, config: UploadConfig, *, calibration_seed: int) -> UploadCalibration:
    """``calibrate_upload`` with its own seeded stream (made once per domain and config)."""

    def make() -> UploadCalibration:
        rng = np.random.default_rng([calibration_seed, 0xCA11B])
        return calibrate_upload(domain, config, rng=rng)

    return DistALP.calibrations.get(domain, ("strict", config, calibration_seed), make)


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


def _paper_note(confidence: float | None) -> str:
    conf = (
        "" if confidence is None else f"; Prop. 2 confidence of the S = 100 audit {confidence:.3g}"
    )
    return (
        "the paper's claim, NOT certified: U_k and V_k are released exactly, and an exact "
        "release of record-dependent vectors has infinite privacy loss (paper eq. 18); the "
        f"audit covers only the noised singular values{conf}"
    )


@register("dista_lp")
class DistALP(Mechanism):
    """DistA-LP: users' uploads, the server's WEM+LP plan, one exact release over X.

    Parameters
    ----------
    epsilon
        Total budget per km (upload + report).
    upload
        ``"none"``, ``"location"``, ``"strict"`` or ``"paper"`` (module docstring).
    upload_share
        ``upload="location"`` only: ``eps_up / epsilon``, in (0, 1) (default 0.1).
    eps_dx, eps_dy, eps_cy, eps_pt
        Surrogate modes only: the budget split (all four or none: 10 % per upload block,
        70 % for the report).
    n_neighbours
        Neighbourhood size per user (surrogate blocks; the located rows the server plans on).
    family, rank
        ``"strict"``: surrogate family and SVD rank; ``"paper"`` always uses the SVD.
    paper_tau_c
        ``"paper"``: ``tau = c * eps_t``, ``c`` in [0.3, 1].
    paper_noise
        ``"paper"``: ``"lipschitz"`` (the paper's ``b = Delta_s / eps_t``) or ``"fidelity:f"``
        (a diagnostic: ``b = f * median s1``, the noise the paper's Table II fidelity needs;
        the audit still reports what it violates).
    n_exempt, gamma_km, gap, max_iter, workers
        The paper's server (surrogate modes): exempt columns per row, gamma repair (km),
        Benders gap, iteration cap and threads.
    delta, confidence, audit_records
        Surrogate upload PmDP failure probability, auditor confidence, audited secrets.
    tile_size, n_near, sweeps, release_neighbours
        The exact release: tiles of X (``none``, ``location``), outputs optimised freely per
        row, passes over the blocks, and the block size around each located user
        (surrogate modes).
    planner
        ``"lp_medoids"`` (``none``/``location`` only: the city-scale LP over medoid outputs,
        sim/mechanisms/lp_medoids.py, planned for the prior or the posterior) or ``"blocks"``
        (the release above). Default ``None``: ``"lp_medoids"`` for ``none`` and
        ``location`` (0.58-0.62x EM at |X| = 2,000 against 0.89-0.97x for the blocks,
        docs/results/dista_lp.md), ``"blocks"`` for the surrogate modes, which plan on the
        located neighbourhoods.
    margin
        LPs run at ``eps_pt (1 - margin)``; the lift absorbs solver round-off in it.
    seed, calibration_seed
        Users' random choices (permutations, noise, released locations; ``None``: drawn from
        the ``rng`` given to ``fit``, else 0); the memoised noise calibration.

    The users come with ``fit(domain, users=..., rng=...)``: their true secrets, one entry
    per user; users at the same secret upload the same blocks, so there is one DistA-LP user
    per distinct secret (``info_["users"]``, sorted) and ``uploads_.slot[u]`` is user u's.
    """

    needs_users: ClassVar[bool] = True
    #: The surrogate modes' noise calibrations, shared by every instance (regenerations).
    calibrations: ClassVar[CalibrationCache] = CalibrationCache()
    conformance_params: ClassVar[dict] = {"tile_size": 20, "sweeps": 1}

    def __init__(
        self,
        epsilon: float,
        *,
        upload: str = DEFAULT_UPLOAD,
        upload_share: float | None = None,
        eps_dx: float | None = None,
        eps_dy: float | None = None,
        eps_cy: float | None = None,
        eps_pt: float | None = None,
        n_neighbours: int = 20,
        family: str = "svd",
        rank: int = 5,
        paper_tau_c: float = 0.5,
        paper_noise: str = "lipschitz",
        n_exempt: int = 10,
        gamma_km: float = 0.0,
        delta: float = 1e-4,
        confidence: float = 0.99,
        audit_records: int | None = 200,
        gap: float = 1e-6,
        max_iter: int = 200,
        workers: int = 2,
        tile_size: int = 40,
        n_near: int = 15,
        sweeps: int = 2,
        release_neighbours: int = 40,
        planner: str | None = None,
        margin: float = FIRST_MARGIN,
        seed: int | None = None,
        calibration_seed: int = 0,
    ) -> None:
        super().__init__(epsilon)
        if upload not in UPLOADS:
            raise InputError(f"upload={upload!r} must be one of {', '.join(UPLOADS)}")
        self.upload = upload
        split_given = any(p is not None for p in (eps_dx, eps_dy, eps_cy, eps_pt))
        if upload in ("none", "location") and split_given:
            raise InputError(
                f"eps_dx, eps_dy, eps_cy, eps_pt split a surrogate upload; upload={upload!r} "
                "has none (use upload_share for 'location')"
            )
        if upload != "location" and upload_share is not None:
            raise InputError(f"upload_share applies to upload='location' only, not {upload!r}")
        self.upload_share = upload_share
        self.eps_dx, self.eps_dy, self.eps_cy, self.eps_pt = eps_dx, eps_dy, eps_cy, eps_pt
        self.n_neighbours = check_positive_int(n_neighbours, "n_neighbours", minimum=2)
        self.family = family
        self.rank = rank
        self.paper_tau_c = check_tau_c(paper_tau_c)
        self.paper_noise = check_paper_noise(paper_noise)
        self.n_exempt = check_positive_int(n_exempt, "n_exempt")
        block_repair.gamma_repair(np.zeros(1), gamma_km)  # validates gamma_km
        self.gamma_km = float(gamma_km)
        self.delta = delta
        self.confidence = confidence
        self.audit_records = audit_records
        if not (isinstance(gap, (int, float)) and 0 < gap < 1):
            raise InputError(f"gap={gap!r} must be in (0, 1)")
        self.gap = float(gap)
        self.max_iter = check_positive_int(max_iter, "max_iter")
        self.workers = check_positive_int(workers, "workers")
        self.tile_size = check_positive_int(tile_size, "tile_size", minimum=2)
        self.n_near = check_positive_int(n_near, "n_near")
        self.sweeps = check_positive_int(sweeps, "sweeps", minimum=0)
        self.release_neighbours = check_positive_int(release_neighbours, "release_neighbours")
        if planner is not None and planner not in PLANNERS:
            raise InputError(f"planner={planner!r} must be one of {', '.join(PLANNERS)} or None")
        if planner == "lp_medoids" and upload not in ("none", "location"):
            raise InputError("planner='lp_medoids' plans for X's prior or posterior: "
                             "upload must be 'none' or 'location'")  # fmt: skip
        self.planner = planner
        self.margin = check_margin(margin, MAX_MARGIN, include_boundaries="left")
        self.seed = None if seed is None else check_positive_int(seed, "seed", minimum=0)
        self.calibration_seed = check_positive_int(calibration_seed, "calibration_seed", minimum=0)
        self._budgets()  # validates the split (InputError / PrivacyBudgetError naming it)
        if upload in ("strict", "paper"):
            self._config()  # validates family, rank, delta and confidence now

    def _planner(self) -> str:
        """The planner in use: as given, else the best measured one for the mode."""
        if self.planner is not None:
            return self.planner
        return "lp_medoids" if self.upload in ("none", "location") else "blocks"

    def _tiles(self, domain) -> list[np.ndarray]:
        """The blocks planner's tiles of X (none for ``lp_medoids``, which plans on all of X)."""
        return tiles(domain.x_xy, self.tile_size) if self._planner() == "blocks" else []

    # ------------------------------------------------------------------ budgets
    def _budgets(self) -> tuple[float, float]:
        """``(eps_upload, eps_pt)`` per km for this mode."""
        if self.upload == "none":
            return 0.0, self.epsilon
        if self.upload == "location":
            share = DEFAULT_UPLOAD_SHARE if self.upload_share is None else self.upload_share
            if isinstance(share, bool) or not isinstance(share, (int, float)):
                raise InputError(f"upload_share={share!r} must be a number in (0, 1)")
            if not (math.isfinite(share) and 0 < share < 1):
                raise InputError(
                    f"upload_share={share!r} must be in (0, 1) (no upload: upload='none')"
                )
            return share * self.epsilon, (1.0 - share) * self.epsilon
        split = self._split()
        return math.fsum(split.upload.values()), split.pt

    def _split(self) -> BudgetSplit:
        given = [p for p in (self.eps_dx, self.eps_dy, self.eps_cy, self.eps_pt) if p is not None]
        if not given:
            return BudgetSplit.default(self.epsilon)
        if len(given) < 4:
            raise InputError("give all of eps_dx, eps_dy, eps_cy, eps_pt or none of them")
        try:
            return BudgetSplit(self.epsilon, *given)
        except PrivacyBudgetError as err:
            raise InputError(str(err)) from None

    def _config(self) -> UploadConfig:
        split = self._split()
        return UploadConfig(
            epsilon=self.epsilon,
            eps_dx=split.dx,
            eps_dy=split.dy,
            eps_cy=split.cy,
            eps_pt=split.pt,
            family="svd" if self.upload == "paper" else self.family,
            rank=self.rank,
            n_neighbours=self.n_neighbours,
            delta=self.delta,
            confidence=self.confidence,
            audit_records=self.audit_records,
        )

    # ------------------------------------------------------------------ guarantees
    @property
    def report_guarantee(self) -> PureMDP:
        """One report: pure ``eps_pt``-mDP over all of X (exact verifier)."""
        return PureMDP(self._budgets()[1])

    @property
    def upload_guarantee(self) -> PureMDP | PMDP | None:
        """What each upload costs; the surrogate modes' audit once fitted (``None`` before)."""
        eps_up = self._budgets()[0]
        if self.upload == "none":
            return None
        if self.upload == "location":
            return PureMDP(eps_up, note="EM over X at eps_up")
        audit = getattr(self, "upload_audit_", None)
        if self.upload == "paper":
            conf = None if audit is None else audit.confidence
            return PMDP(eps_up, self.delta, audit, note=_paper_note(conf))
        return PMDP(
            eps_up, self.delta, audit,
            note="audited surrogate release (Clopper-Pearson PmDP auditor)",
        )  # fmt: skip

    @property
    def guarantee(self) -> Guarantee:
        """Sequential composition of the upload and one report."""
        up = self.upload_guarantee
        if up is None:
            return PureMDP(self.epsilon)
        return compose(up, self.report_guarantee, labels=("upload", "report over X"))

    # ------------------------------------------------------------------ fit
    def _fit_users(
        self, domain, users: np.ndarray, rng: np.random.Generator | None
    ) -> tuple[np.ndarray, dict, Uploads]:
        users, slot = np.unique(users, return_inverse=True)  # one DistA-LP user per secret
        if len(users) == 0 and self.upload != "none":
            raise InputError(f"upload={self.upload!r} needs at least one user to upload")
        seed = self.seed
        if seed is None:
            seed = 0 if rng is None else int(rng.integers(2**31))
        Z, info = self._fit_unique(domain, users, np.random.default_rng(seed))
        return Z, info, Uploads(slot=slot.astype(np.int64))

    def _fit_unique(self, domain, users: np.ndarray, rng) -> tuple[np.ndarray, dict]:
        eps_up, eps_pt = self._budgets()
        info: dict = {
            "upload": self.upload, "planner": self._planner(),
            "epsilon_upload": eps_up, "epsilon_pt": eps_pt,
        }  # fmt: skip
        t0 = time.perf_counter()
        if self.upload == "none":
            weights, blocks = domain.prior, self._tiles(domain)
            guesses = np.full(len(users), prior_guess(domain))
            info["bytes_up"] = [0] * len(users)
        elif self.upload == "location":
            weights, guesses = self._location_uploads(domain, users, eps_up, rng, info)
            blocks = self._tiles(domain)
        else:
            located = self._surrogate_uploads(domain, users, eps_pt, rng, info)
            # the server's guess as an output (the output nearest the located secret)
            guesses = np.argmin(domain.dist_xy[np.asarray(located, dtype=np.int64)], axis=1)
            weights = np.zeros(domain.n_x)
            blocks = []
            for g in located:
                near = np.argsort(domain.dist_xx[g], kind="stable")
                hood = near[: self.n_neighbours]
                weights[hood] += domain.prior[hood]
                blocks.append(np.sort(near[: max(self.release_neighbours, self.n_neighbours)]))
        info["upload_seconds"] = time.perf_counter() - t0

        t0 = time.perf_counter()
        if self._planner() == "lp_medoids":  # the city-scale LP (sim/mechanisms/lp_medoids.py)
            planned = make("lp_medoids", epsilon=eps_pt, margin=self.margin, with_bound=False)
            planned.fit(domain.with_prior(weights / weights.sum()))
            Z, release = planned.matrix_, {"planner_info": planned.info_}
        else:
            Z, release = release_full_domain(
                domain, eps_pt, blocks, weights,
                n_near=self.n_near, sweeps=self.sweeps, margin=self.margin,
            )  # fmt: skip
        info["server_seconds"] = time.perf_counter() - t0
        pg = prior_guess(domain)
        info.update(
            users=users,
            upload_guess=guesses,
            upload_attack_error_km=np.asarray(domain.dist_xy[users, guesses]),
            prior_guess_error_km=np.asarray(domain.dist_xy[users, pg]) if len(users) else [],
            n_blocks=len(blocks),
            **release,
        )
        return Z, info

    def _location_uploads(self, domain, users, eps_up, rng, info) -> tuple[np.ndarray, np.ndarray]:
        """Each user releases ``x~ ~ EM_X(eps_up)``; the server's weights are the summed
        posteriors; returns them with the server's guess of each user (output index)."""
        em_up = em_matrix(domain.dist_xx, eps_up)
        released = sample_rows(em_up, users, rng)
        weights = np.zeros(domain.n_x)
        guesses = np.empty(len(users), dtype=np.int64)
        for m, r in enumerate(released):
            post = location_posterior(int(r), domain, eps_up)
            weights += post
            guesses[m] = bayes_guess(post, domain.dist_xy)
        info.update(released_locations=released, bytes_up=[BYTES_PER_FLOAT] * len(users))
        return weights, guesses

    def _surrogate_uploads(self, domain, users, eps_pt, rng, info) -> list[int]:
        """Surrogate uploads, the paper's server (own blocks) and the server's location of
        every upload on the public map; returns the located secret per user."""
        if self.n_neighbours > domain.n_x:
            raise InputError(f"n_neighbours={self.n_neighbours} exceeds the {domain.n_x} secrets")
        config = self._config()
        perms, uploads, local = [], [], []
        if self.upload == "paper":
            cal = self._paper_calibration(domain, config)
            self.upload_audit_ = Audit(
                cal.hoeffding_confidence, "the paper's Hoeffding bound on the noised singular "
                "values", n_samples=PAPER_SAMPLES, n_records=cal.n_records,
            )  # fmt: skip
            for x in users:
                perm, up = paper_upload(
                    domain, int(x), cal, rank=self.rank, n_neighbours=self.n_neighbours, rng=rng
                )
                perms.append(perm)
                uploads.append(up)
                local.append(local_blocks(domain, int(x), n_neighbours=self.n_neighbours))
            info["paper_calibration"] = cal
        else:
            cal = self._strict_calibration(domain, config)
            samples = [b.audit.n_samples for b in cal.blocks.values() if b.audit is not None]
            self.upload_audit_ = Audit(
                cal.confidence, "Clopper-Pearson PmDP auditor, union bound over the blocks",
                n_samples=min(samples) if samples else None, n_records=cal.n_records,
            )  # fmt: skip
            states = []
            for x in users:
                state, up = prepare_upload(domain, int(x), config, cal, rng)
                states.append(state)
                perms.append(state.perm)
                uploads.append(up)
                local.append(state.blocks)
        info["upload_confidence"] = self.upload_audit_.confidence
        info["bytes_up"] = [u.bytes_up for u in uploads]
        recon = [
            block_repair.repair_blocks(reconstruct(u), gamma_km=self.gamma_km) for u in uploads
        ]

        # The paper's server: WEM+LP on the reconstructed blocks, solved by Benders.
        eps_lp = eps_pt * (1.0 - self.margin)
        lps = [
            build_block(b["dx"], b["dy"], b["cy"], exempt_columns(b["dy"], self.n_exempt), eps_lp)
            for b in recon
        ]
        result = solve_benders(lps, gap=self.gap, max_iter=self.max_iter, workers=self.workers)
        downloads = [lp.assemble(z, result.w) for lp, z in zip(lps, result.z, strict=True)]
        if self.upload == "paper":
            own = [
                _own_block(p, z, lb.dx, eps_pt)
                for p, z, lb in zip(perms, downloads, local, strict=True)
            ]
        else:
            own = [
                finalize_block(s, z, epsilon_pt=eps_pt)
                for s, z in zip(states, downloads, strict=True)
            ]
        info.update(
            server_blocks=recon,
            own_blocks=own,
            own_rows=[_row_of(lb.neighbourhood, x) for lb, x in zip(local, users, strict=True)],
            neighbourhoods=[lb.neighbourhood for lb in local],
            bytes_down=[BYTES_PER_FLOAT * d.size for d in downloads],
            **result.info,
        )  # fmt: skip
        return [
            locate_surrogate_upload(
                b["dy"], domain, self.n_neighbours, v_factor=_v_factor(u, domain.n_y)
            )
            for b, u in zip(recon, uploads, strict=True)
        ]

    def _strict_calibration(self, domain, config: UploadConfig) -> UploadCalibration:
        """The strict upload's calibrated (memoised) noise scales for ``config``."""
        return calibrated(domain, config, calibration_seed=self.calibration_seed)

    def _paper_calibration(self, domain, config: UploadConfig):
        def make():
            rng = np.random.default_rng([self.calibration_seed, 0xCA11B])
            n_rec = (
                domain.n_x if self.audit_records is None else min(self.audit_records, domain.n_x)
            )
            records = np.sort(rng.choice(domain.n_x, size=n_rec, replace=False))
            return calibrate_paper(
                domain, config.split.upload, rank=self.rank, n_neighbours=self.n_neighbours,
                tau_c=self.paper_tau_c, delta=self.delta, records=records, rng=rng,
                noise=self.paper_noise,
            )  # fmt: skip

        key = ("paper", config, self.paper_tau_c, self.paper_noise, self.calibration_seed)
        return self.calibrations.get(domain, key, make)


def _row_of(neighbourhood: np.ndarray, x) -> int:
    return int(np.flatnonzero(neighbourhood == x)[0])


def _v_factor(upload, n_outputs: int) -> np.ndarray | None:
    """The right factor ``V`` (``K x r``) of an SVD ``dy`` upload, else ``None``."""
    if upload.family != "svd":
        return None
    theta = np.asarray(upload.params["dy"], dtype=float)
    r = min(upload.rank, upload.n_local, n_outputs)
    return theta[r + upload.n_local * r :].reshape(n_outputs, r)


def _own_block(perm, z_permuted, local_dx, eps_pt) -> np.ndarray:
    """The paper's per-neighbourhood check: un-permute, verify on the true local distances
    at ``eps_pt`` (repair with the proven envelope if it fails)."""
    block = np.empty_like(z_permuted)
    block[perm] = z_permuted
    if verify(block, local_dx, eps_pt).passed:
        return block
    return _repaired(block, local_dx, eps_pt)
