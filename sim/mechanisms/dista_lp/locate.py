"""Locating a user from its upload alone: what DistA-LP's honest-but-curious server infers
(it plans on these guesses; the upload-stage attack, sim/attacks/upload_stage.py, scores them).

* Surrogate uploads (``paper``, ``strict``): the server rebuilds ``A_dy``, the distances from
  the user's (row-permuted) neighbourhood to every public output. Each reconstructed row is a
  distance profile; the server matches it to the public profile ``dist_xy[x]`` of every
  secret (least absolute difference) and so recovers the neighbourhood's secrets. With an
  SVD upload it uses the right factor ``V`` instead: the neighbourhood's profiles lie in its
  span whatever the (noised) singular values are. The user is
  the centre of its neighbourhood (the ``n`` secrets nearest to it), so the guess is the
  secret whose ``n`` nearest secrets overlap the matches most (ties: smallest total distance
  to the matches). Noise-free uploads are located inside the neighbourhood exactly.
* Location uploads: the Bayesian posterior ``p(x | x~) ∝ prior(x) EM(x~ | x)`` and its
  Bayes estimate under distance loss, ``argmin_y sum_x p(x | x~) d(x, y)``.
* The reference: a prior-only guess, ``argmin_y sum_x prior(x) d(x, y)``.
"""

from __future__ import annotations

import numpy as np

from mdpsim.errors import InputError

_CHUNK = 256


def upload_location_estimate(dy_reconstructed_km: np.ndarray) -> int:
    """Index of the output closest on average to the uploaded neighbourhood (a weak guess
    that needs no map; :func:`locate_surrogate_upload` is the attack)."""
    dy = np.asarray(dy_reconstructed_km, dtype=float)
    if dy.ndim != 2 or dy.size == 0:
        raise ValueError("dy block must be a non-empty (n_local, K) array")
    return int(np.argmin(dy.mean(axis=0)))


def match_profiles(dy_reconstructed_km: np.ndarray, dist_xy_km: np.ndarray) -> np.ndarray:
    """For each reconstructed row, the secret whose public distance profile is nearest (l1)."""
    dy = np.asarray(dy_reconstructed_km, dtype=float)
    D = np.asarray(dist_xy_km, dtype=float)
    if dy.ndim != 2 or D.ndim != 2 or dy.shape[1] != D.shape[1] or len(dy) == 0:
        raise InputError(f"dy block {dy.shape} must have one column per output of {D.shape}")
    out = np.empty(len(dy), dtype=np.int64)
    for s in range(0, len(dy), 8):
        rows = dy[s : s + 8]
        best = np.full(len(rows), np.inf)
        for c in range(0, len(D), _CHUNK):
            cost = np.abs(rows[:, None, :] - D[None, c : c + _CHUNK]).sum(axis=2)
            arg = np.argmin(cost, axis=1)
            val = cost[np.arange(len(rows)), arg]
            better = val < best
            best[better] = val[better]
            out[s : s + 8][better] = c + arg[better]
    return out


def match_subspace(v_factor: np.ndarray, dist_xy_km: np.ndarray, n: int) -> np.ndarray:
    """The ``n`` secrets whose public profiles lie closest to the span of an uploaded SVD
    right factor ``V`` (``K x r``): smallest relative residual ``||d - Q Q^T d|| / ||d||``.

    The rows of the user's ``dy`` block lie (up to the rank-r error) in that span whatever
    the singular values are, so an exactly released ``V`` gives the neighbourhood away."""
    V = np.asarray(v_factor, dtype=float)
    D = np.asarray(dist_xy_km, dtype=float)
    if V.ndim != 2 or V.shape[0] != D.shape[1]:
        raise InputError(f"V factor {V.shape} must have one row per output of {D.shape}")
    Q, _ = np.linalg.qr(V)
    proj = D @ Q
    resid = np.maximum(np.einsum("ik,ik->i", D, D) - np.einsum("ir,ir->i", proj, proj), 0.0)
    rel = resid / np.maximum(np.einsum("ik,ik->i", D, D), 1e-300)
    return np.argsort(rel, kind="stable")[: min(int(n), len(D))]


def locate_from_matches(matches: np.ndarray, domain, n_neighbours: int) -> int:
    """The secret whose ``n`` nearest secrets overlap the matched secrets most."""
    matches = np.unique(np.asarray(matches, dtype=np.int64))
    n = min(int(n_neighbours), domain.n_x)
    # Candidates: the matches and their neighbours; score = overlap of the n-nearest set.
    cand = np.unique(np.argsort(domain.dist_xx[matches], axis=1, kind="stable")[:, :n])
    hoods = np.argsort(domain.dist_xx[cand], axis=1, kind="stable")[:, :n]
    overlap = np.isin(hoods, matches).sum(axis=1)
    spread = domain.dist_xx[np.ix_(cand, matches)].sum(axis=1)
    best = np.lexsort((spread, -overlap))[0]
    return int(cand[best])


def locate_surrogate_upload(
    dy_reconstructed_km: np.ndarray, domain, n_neighbours: int, *, v_factor=None
) -> int:
    """The secret the server guesses from a surrogate upload (module docstring): from the
    span of the uploaded SVD factor ``V`` when there is one, else from the reconstructed rows."""
    if v_factor is not None:
        matches = match_subspace(v_factor, domain.dist_xy, n_neighbours)
    else:
        matches = match_profiles(dy_reconstructed_km, domain.dist_xy)
    return locate_from_matches(matches, domain, n_neighbours)


def location_posterior(released: int, domain, epsilon_up: float) -> np.ndarray:
    """``p(x | x~) ∝ prior(x) exp(-eps d(x, x~) / 2) / S(x)``: the EM over X at ``epsilon_up``."""
    log_em = -0.5 * epsilon_up * domain.dist_xx
    log_norm = np.logaddexp.reduce(log_em, axis=1)
    with np.errstate(divide="ignore"):
        log_p = np.log(domain.prior) + log_em[:, int(released)] - log_norm
    log_p -= log_p.max()
    p = np.exp(log_p)
    return p / p.sum()


def bayes_guess(weights: np.ndarray, dist_xy_km: np.ndarray) -> int:
    """``argmin_y sum_x w(x) d(x, y)``: the Bayes estimate under distance loss."""
    return int(np.argmin(np.asarray(weights, dtype=float) @ np.asarray(dist_xy_km, dtype=float)))


def locate_location_upload(released: int, domain, epsilon_up: float) -> int:
    """The output the server guesses from a released location (posterior Bayes estimate)."""
    return bayes_guess(location_posterior(released, domain, epsilon_up), domain.dist_xy)


def prior_guess(domain) -> int:
    """The guess without any upload (the prior's Bayes estimate)."""
    return bayes_guess(domain.prior, domain.dist_xy)


def error_summary(errors_km) -> dict[str, float]:
    """Median and 10th percentile of location errors (km); NaN when there are none."""
    e = np.asarray(errors_km, dtype=float)
    if e.size == 0:
        return {"median_km": float("nan"), "p10_km": float("nan")}
    return {"median_km": float(np.median(e)), "p10_km": float(np.percentile(e, 10))}
