"""The budget split of the elimination rounds: each user's per-query ``rho`` in ``c`` parts
(:func:`split_budget`) and the split of a budget vector kept between queries
(:func:`split_kept`), what :mod:`mdpsim.queries.elimination` releases round by round."""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np

from mdpsim._core.validation import check_scalar
from mdpsim.errors import InputError
from mdpsim.privacy.accounting import gaussian_noise_std_km
from mdpsim.privacy.filters import add_up, sub_down

SPLITS = ("even", "doubling")
MAX_PARTS = 64


def split_budget(rho_per_km2, c: int, *, scheme: str = "even") -> tuple[np.ndarray, np.ndarray]:
    """Split each user's ``rho`` into ``c`` parts.

    ``"even"``: ``rho / c`` each; ``"doubling"``: ``2^(j-1) / (2^c - 1) rho`` (paper §7).

    Returns
    -------
    parts, cum_up
        ``(n, c)`` arrays: the parts (the last one is ``rho`` minus the others, rounded down,
        so their exact real sum never exceeds ``rho``) and the running sums rounded up (what a
        user who took part in ``j`` rounds has spent is ``cum_up[:, j-1]``; ``cum_up[:, -1]
        <= rho``).
    """
    rho = np.asarray(rho_per_km2, dtype=float)
    if rho.ndim != 1 or not np.all(np.isfinite(rho)) or np.any(rho < 0):
        raise InputError("rho_per_km2 must be a 1-D array of finite values >= 0 (per km^2)")
    c = check_scalar(c, "c", kind=int, min=1, max=MAX_PARTS)  # rounds
    if scheme == "even":
        w = np.full(c, 1.0 / c)
    elif scheme == "doubling":
        w = 2.0 ** np.arange(c) / (2.0**c - 1.0)
    else:
        raise InputError(f"scheme={scheme!r} must be one of {SPLITS}")
    parts = rho[:, None] * w[None, :]
    cum = np.empty_like(parts)
    acc = np.zeros(len(rho))
    for j in range(c - 1):
        acc = add_up(acc, parts[:, j])
        cum[:, j] = acc
    parts[:, -1] = sub_down(rho, acc)
    cum[:, -1] = add_up(acc, parts[:, -1])
    return parts, cum


@dataclass(frozen=True)
class Split:
    """One budget vector's split (read-only, kept between queries): the users asked
    (``rho > 0``), their :func:`split_budget` ``parts`` and ``cum`` as ``(c, asked)`` arrays
    (a round is a row), each part's Gaussian noise std (km; NaN for a part of 0), and whether
    every asked user's parts are all > 0 (else nothing is released)."""

    n: int
    users: np.ndarray
    parts: np.ndarray
    cum: np.ndarray
    std_km: np.ndarray
    releasable: bool


@functools.lru_cache(maxsize=64)
def split_kept(rho_bytes: bytes, n: int, c: int, scheme: str) -> Split:
    """The :class:`Split` of the budgets ``rho_bytes`` (float64): a planner asks the same
    budgets tick after tick."""
    rho = np.frombuffer(rho_bytes, dtype=float, count=n)
    users = (rho > 0).nonzero()[0]
    parts, cum = (a[users].T.copy() for a in split_budget(rho, c, scheme=scheme))
    positive = parts > 0
    std = np.full(parts.shape, np.nan)
    std[positive] = gaussian_noise_std_km(parts[positive])
    split = Split(n, users, parts, cum, std, bool(positive.all()))
    for arr in (split.users, split.parts, split.cum, split.std_km):
        arr.setflags(write=False)
    return split
