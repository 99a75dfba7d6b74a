"""Private release of surrogate parameters: asymmetric, truncated noise with an exact density.

Each coordinate ``c`` of a parameter vector ``theta`` has a public range ``[lo_c, hi_c]``, a
noise scale ``b_c > 0``, a deterministic shift ``t_c`` and a *direction*:

* ``0`` (shape parameters: centres, spreads, singular vectors): ``raw = theta + Lap(b)``;
* ``-1`` (coordinates that raise a distance surface): biased down;
* ``+1`` (coordinates that raise the loss surface): biased up.

Biased coordinates use one of two noise laws (``noise=``):

* ``"onesided"`` (the paper): ``raw = theta + t -/+ |Lap(b)|``, i.e. an exponential
  variable with scale ``b``. Its support ends at ``theta + t``, so an output above
  ``theta_j + t`` is impossible under ``x_j``: the privacy loss is infinite there.
* ``"shifted"`` (our default): ``raw = theta + t -/+ mu + Lap(b)`` with
  ``mu = b ln(1 / (2 q))``, so the output lies on the wrong side of ``theta + t`` with
  probability exactly ``q`` (``wrong_side_prob``). Full support: the loss is bounded by
  ``|theta_i - theta_j| / b`` per coordinate.

The released value is ``clip(raw, lo, hi)`` (truncation to the public range). The clip puts
atoms at ``lo`` and ``hi``; :meth:`ParameterRelease.logpdf` is the exact log-density with
respect to Lebesgue measure plus those two atoms (interior: the noise density; at a bound: the
log of the tail mass). The SVD soft-threshold rule ``s' = max(s - tau - |eta|, 0)`` is the
``"onesided"`` law with ``t = -tau`` and ``lo = 0``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from mdpsim.errors import InputError

NOISE_LAWS = ("shifted", "onesided")


def _check_arrays(lo, hi, scale, shift, direction):
    arrays = [np.asarray(a, dtype=float) for a in (lo, hi, scale, shift, direction)]
    d = arrays[0].shape
    if any(a.shape != d for a in arrays) or len(d) != 1:
        raise InputError("lo, hi, scale, shift and direction must be 1-D of equal length")
    lo, hi, scale, shift, direction = arrays
    if not np.all(np.isfinite(scale)) or np.any(scale <= 0):
        raise InputError("every noise scale must be finite and > 0")
    if not np.all(lo < hi):
        raise InputError("every public range must have lo < hi")
    if not np.all(np.isin(direction, (-1.0, 0.0, 1.0))):
        raise InputError("direction entries must be -1, 0 or +1")
    return lo, hi, scale, shift, direction


@dataclass(frozen=True)
class ParameterRelease:
    """The randomised map ``theta -> clip(theta + shift + noise, lo, hi)`` (all per coordinate)."""

    lo: np.ndarray
    hi: np.ndarray
    scale: np.ndarray
    shift: np.ndarray
    direction: np.ndarray
    noise: str = "shifted"
    wrong_side_prob: float = 0.05

    def __post_init__(self) -> None:
        if self.noise not in NOISE_LAWS:
            raise InputError(f"noise={self.noise!r} must be one of {NOISE_LAWS}")
        q = float(self.wrong_side_prob)
        if not 0 < q < 0.5:
            raise InputError(f"wrong_side_prob={self.wrong_side_prob!r} must be in (0, 0.5)")
        arrays = _check_arrays(self.lo, self.hi, self.scale, self.shift, self.direction)
        for name, arr in zip(("lo", "hi", "scale", "shift", "direction"), arrays, strict=True):
            arr.setflags(write=False)
            object.__setattr__(self, name, arr)

    @property
    def dim(self) -> int:
        return len(self.lo)

    @property
    def _onesided(self) -> np.ndarray:
        """Coordinates that use the one-sided exponential law."""
        return (self.direction != 0) & (self.noise == "onesided")

    @property
    def centre(self) -> np.ndarray:
        """Offset of the noise location from ``theta`` (shift plus the Laplace bias ``mu``)."""
        if self.noise == "onesided":
            return self.shift
        mu = self.scale * math.log(1.0 / (2.0 * self.wrong_side_prob))
        return self.shift + self.direction * mu

    def _raw(self, theta: np.ndarray, u: np.ndarray) -> np.ndarray:
        return theta + self.centre + self._noise(u)

    def transform(self, theta: np.ndarray, uniforms: np.ndarray) -> np.ndarray:
        """Released values for parameter rows ``theta`` from U(0,1) ``uniforms`` (same shape)."""
        return np.clip(self._raw(np.asarray(theta, float), uniforms), self.lo, self.hi)

    def sample(self, theta: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """One release of ``theta`` (1-D or stacked rows)."""
        theta = np.asarray(theta, dtype=float)
        return self.transform(theta, rng.random(theta.shape))

    def logpdf(self, z: np.ndarray, theta: np.ndarray) -> np.ndarray:
        """Exact log-density of outputs ``z`` given ``theta`` (rows), summed over coordinates.

        ``-inf`` where ``z`` is impossible (outside a one-sided support).
        """
        z, theta = np.atleast_2d(z), np.atleast_2d(theta)
        m = theta + self.centre
        b = self.scale
        out = np.abs(z - m)
        out /= -b
        out -= np.log(2.0 * b)  # Laplace interior
        one = np.flatnonzero(self._onesided)
        if len(one):  # exponential columns: e = sgn (raw - m) >= 0
            e = self.direction[one] * (z[:, one] - m[:, one])
            with np.errstate(invalid="ignore"):
                out[:, one] = np.where(e >= 0, -np.log(b[one]) - e / b[one], -np.inf)
        for bound, is_low in ((self.lo, True), (self.hi, False)):
            rows, cols = np.nonzero(z <= bound if is_low else z >= bound)
            if len(rows):
                out[rows, cols] = _tail_logmass(
                    bound[cols], m[rows, cols], b[cols], self.direction[cols],
                    self._onesided[cols], low=is_low,
                )  # fmt: skip
        return out.sum(axis=-1)

    def for_records(self, thetas: np.ndarray) -> RecordRelease:
        """This release over a population of records (one parameter row each), for the auditor."""
        thetas = np.asarray(thetas, dtype=float)
        m = thetas + self.centre
        atoms = tuple(
            _tail_logmass(bound, m, self.scale, self.direction, self._onesided, low=low)
            for bound, low in ((self.lo, True), (self.hi, False))
        )
        return RecordRelease(self, m, atoms)

    def _noise(self, u: np.ndarray) -> np.ndarray:
        """Noise added to the location ``theta + centre`` (Laplace, or exponential along
        ``direction`` for one-sided coordinates), by inversion of ``u``."""
        h = u - 0.5
        noise = -self.scale * np.sign(h) * np.log1p(-2.0 * np.abs(h))
        one = np.flatnonzero(self._onesided)
        if len(one):
            noise[..., one] = -(self.scale * self.direction)[one] * np.log1p(-u[..., one])
        return noise


@dataclass(frozen=True)
class RecordRelease:
    """A :class:`ParameterRelease` applied to known records: noise locations ``m`` (R, d) and
    the log-masses of the clip atoms at ``lo`` and ``hi`` per record and coordinate."""

    release: ParameterRelease
    m: np.ndarray
    atoms: tuple[np.ndarray, ...]  # (at lo, at hi)

    def log_ratios(self, i: np.ndarray, j: np.ndarray, uniforms: np.ndarray) -> np.ndarray:
        """For ``z`` released by record ``i`` from ``uniforms``: ``logpdf(z | i) - logpdf(z | j)``.

        The same value as the difference of :meth:`ParameterRelease.logpdf` (``+inf`` where
        ``z`` is impossible under ``j``), computed faster and more accurately: terms equal
        under both hypotheses (``ln 2b``) are never added, and a clip atom's mass depends only
        on the record and the coordinate, so it was computed once per record.
        """
        rel = self.release
        m_i, m_j = self.m[i], self.m[j]
        z = np.clip(m_i + rel._noise(np.asarray(uniforms, dtype=float)), rel.lo, rel.hi)
        inv_b = 1.0 / rel.scale
        out = np.abs(z - m_j)
        out -= np.abs(z - m_i)
        out *= inv_b  # Laplace interior: (|z - m_j| - |z - m_i|) / b
        one = np.flatnonzero(rel._onesided)
        if len(one):  # exponential interior: e >= 0 under i; impossible under j if e_j < 0
            sgn = rel.direction[one]
            e_i = sgn * (z[:, one] - m_i[:, one])
            e_j = sgn * (z[:, one] - m_j[:, one])
            out[:, one] = np.where(e_j >= 0, (e_j - e_i) * inv_b[one], np.inf)
        for atom, at_bound in zip(self.atoms, (z <= rel.lo, z >= rel.hi), strict=True):
            if at_bound.any():
                with np.errstate(invalid="ignore"):
                    out = np.where(at_bound, atom[i] - atom[j], out)
        return out.sum(axis=-1)


def _tail_logmass(bound, m, b, sgn, one, *, low: bool) -> np.ndarray:
    """``ln P[raw <= bound]`` (``low``) or ``ln P[raw >= bound]``: the mass of a clip atom."""
    lap = _laplace_logcdf(bound - m, b) if low else _laplace_logcdf(m - bound, b)
    e = sgn * (bound - m)
    # raw = m + sgn E: toward the low bound E <= e if sgn > 0 else E >= e; mirrored for high.
    cdf_side = sgn > 0 if low else sgn < 0
    expo = np.where(cdf_side, _exp_logcdf(e, b), _exp_logsf(e, b))
    return np.where(one, expo, lap)


def _laplace_logcdf(t: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``ln P[Lap(b) <= t]``, stable on both sides."""
    return np.where(t < 0, math.log(0.5) + t / b, np.log1p(-0.5 * np.exp(-np.abs(t) / b)))


def _exp_logcdf(t: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``ln P[Exp(b) <= t]`` (``-inf`` for ``t <= 0``)."""
    with np.errstate(divide="ignore"):
        return np.where(t > 0, np.log(-np.expm1(-np.maximum(t, 0) / b)), -np.inf)


def _exp_logsf(t: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``ln P[Exp(b) >= t]`` (0 for ``t <= 0``)."""
    return -np.maximum(t, 0.0) / b
