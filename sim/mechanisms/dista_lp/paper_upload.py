"""The paper's upload rules to the letter (``upload="paper"``): the claim, not a certificate.

Per block ``t`` (dx, dy, cy) a user fits the rank-``k`` SVD of its (row-permuted) block and
releases (Appendix C, eq. 58):

* the singular values with a one-sided biased soft threshold, ``s~ = max(s - tau - |eta|, 0)``
  for the distance blocks (``s + tau + |eta|`` for the loss block, biased up), ``eta ~
  Lap(b)``, ``tau = c * eps_t`` with ``c`` in [0.3, 1];
* ``U_k`` and ``V_k`` exactly as fitted.

The noise scale is the paper's primary rule ``b = Delta_s / eps_t``, ``Delta_s`` a Lipschitz
bound of the singular-value map (measured on the audited records). ``noise="fidelity:f"`` is a
diagnostic instead: ``b_t = f * median s1_t`` (the top singular value over the audited
records), the noise that gives the reconstruction fidelity the paper's Table II reports; it is
what the paper's utility needs, not what its privacy rule gives. Either way the paper's audit
is run as written: ``S = 100`` Monte Carlo pairs, the empirical violation rate ``p_hat`` and
Prop. 2's confidence ``1 - 2 exp(-2 S (delta - p_hat)^2)`` are reported (not enforced).

Why this is not certified: ``U_k`` and ``V_k`` are record-dependent vectors released without
noise. Two records with different neighbourhoods release different vectors with
probability 1, so the privacy loss of observing them is infinite (the paper's own eq. 18).
The audit covers only the noised coordinates, and 100 samples cannot certify ``delta = 1e-4``
(``p_hat = 0`` gives Prop. 2 confidence ``1 - 2 e^{-2e-6}`` ≈ 0).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from mdpsim._core.validation import check_scalar
from mdpsim.errors import InputError
from mdpsim.mechanisms.dista_lp.release import ParameterRelease
from mdpsim.mechanisms.dista_lp.user import Upload, local_blocks, public_scales
from mdpsim.privacy.pmdp import audit_pmdp, hoeffding_confidence
from mdpsim.privacy.split import BLOCKS

PAPER_SAMPLES = 100


@dataclass(frozen=True)
class PaperCalibration:
    """Noise scale per block and the paper's audit at it (public: depends on X only)."""

    scales: dict[str, float]
    taus: dict[str, float]
    p_hat: dict[str, float]
    hoeffding_confidence: float
    n_records: int
    noise: str


def _direction(block: str) -> float:
    return 1.0 if block == "cy" else -1.0


def _singular_values(block: np.ndarray, rank: int) -> np.ndarray:
    return np.linalg.svd(block, compute_uv=False)[:rank]


def _release(rank: int, hi: float, scale: float, tau: float, block: str) -> ParameterRelease:
    sign = _direction(block)
    return ParameterRelease(
        lo=np.zeros(rank),
        hi=np.full(rank, hi),
        scale=np.full(rank, scale),
        shift=np.full(rank, sign * tau),
        direction=np.full(rank, sign),
        noise="onesided",
    )


def check_tau_c(tau_c) -> float:
    """The paper's threshold factor ``c`` of ``tau = c * eps``: a number in [0.3, 1]."""
    return check_scalar(tau_c, "paper_tau_c", min=0.3, max=1.0, unit="the paper's range")


def check_paper_noise(noise) -> str:
    """``"lipschitz"`` (the paper's rule) or ``"fidelity:f"``, ``f`` in (0, 1]."""
    if noise == "lipschitz":
        return noise
    if isinstance(noise, str) and noise.startswith("fidelity:"):
        try:
            f = float(noise.split(":", 1)[1])
        except ValueError:
            f = math.nan
        if 0 < f <= 1:
            return noise
    raise InputError(
        f"paper_noise={noise!r} must be 'lipschitz' (the paper's b = Delta_s / eps_t) or "
        "'fidelity:f' with f in (0, 1] (b = f * median top singular value, a diagnostic)"
    )


def _scale(noise: str, thetas: np.ndarray, gaps: np.ndarray, dist: np.ndarray, eps_t: float):
    if noise == "lipschitz":
        return max(float(np.max(gaps / np.maximum(dist, 1e-12))) / eps_t, 1e-12)
    return float(noise.split(":", 1)[1]) * float(np.median(thetas[:, 0]))


def calibrate_paper(
    domain,
    budgets: dict[str, float],
    *,
    rank: int,
    n_neighbours: int,
    tau_c: float,
    delta: float,
    records: np.ndarray,
    rng: np.random.Generator,
    noise: str = "lipschitz",
) -> PaperCalibration:
    """The paper's noise: ``b_t = Delta_t / eps_t`` with ``Delta_t`` the Lipschitz bound of
    the singular-value map (largest ``||s_i - s_j||_1 / d(x_i, x_j)`` over the audited
    records), or the ``fidelity:f`` diagnostic; ``tau_t = c eps_t``; then the paper's audit
    of it (``S = 100``)."""
    scales_pub = public_scales(domain)
    dist = np.asarray(domain.dist_xx[np.ix_(records, records)])
    svals: dict[str, list] = {t: [] for t in BLOCKS}
    for x in records:
        lb = local_blocks(domain, int(x), n_neighbours=n_neighbours)
        for t, a in lb.as_dict().items():
            svals[t].append(_singular_values(a, rank))
    iu = np.triu_indices(len(records), 1)
    out_scale, out_tau, out_p = {}, {}, {}
    for t in BLOCKS:
        thetas = np.stack(svals[t])
        gaps = np.abs(thetas[:, None, :] - thetas[None, :, :]).sum(axis=2)[iu]
        scale = _scale(noise, thetas, gaps, dist[iu], budgets[t])
        tau = tau_c * budgets[t]
        hi = scales_pub[t] * math.sqrt(n_neighbours * domain.n_y)
        rel = _release(thetas.shape[1], hi, scale, tau, t)
        audit = audit_pmdp(rel, thetas, dist, budgets[t], delta, n_samples=PAPER_SAMPLES, rng=rng)
        out_scale[t], out_tau[t], out_p[t] = scale, tau, audit.p_hat
    conf = min(hoeffding_confidence(p, PAPER_SAMPLES, delta) for p in out_p.values())
    return PaperCalibration(out_scale, out_tau, out_p, conf, len(records), noise)


def paper_upload(
    domain, x_index: int, cal: PaperCalibration, *, rank: int, n_neighbours: int, rng
) -> tuple[np.ndarray, Upload]:
    """One user's paper-mode upload; returns the private permutation and the upload."""
    lb = local_blocks(domain, x_index, n_neighbours=n_neighbours)
    n = len(lb.neighbourhood)
    perm = rng.permutation(n)
    blocks = {"dx": lb.dx[np.ix_(perm, perm)], "dy": lb.dy[perm], "cy": lb.cy[perm]}
    params = {}
    scales_pub = public_scales(domain)
    for t in BLOCKS:
        a = blocks[t]
        r = min(rank, *a.shape)
        u, s, vt = np.linalg.svd(a, full_matrices=False)
        hi = scales_pub[t] * math.sqrt(n * domain.n_y)
        rel = _release(r, hi, cal.scales[t], cal.taus[t], t)
        s_tilde = rel.sample(s[:r], rng)
        params[t] = np.concatenate([s_tilde, u[:, :r].ravel(), vt[:r].T.ravel()])
    return perm, Upload("svd", params, n, domain.n_y, rank)
