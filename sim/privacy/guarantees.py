"""What a mechanism promises, as types: :class:`PureMDP`, :class:`PMDP` and their composition.

* ``PureMDP(eps)``: ``Z[i,k] <= exp(eps d(x_i, x_j)) Z[j,k]`` for all i, j, k (eps in 1/km).
  A matrix can be certified against it exactly (:func:`certify`).
* ``PMDP(eps, delta, audit)``: (eps, delta)-probabilistic mDP (DistA-LP's surrogate uploads):
  with probability ``1 - delta`` over the mechanism's randomness the release is eps-mDP. It is
  only ever *audited* (Monte Carlo, with a confidence), so :func:`certify` refuses it; the
  :class:`Audit` record says with what confidence, on how many samples and records.
* ``Composition(parts)``: their sequential composition (eps and delta add up), e.g. a
  DistA-LP upload followed by one report.
* ``NoGuarantee``: claims nothing (the unconstrained Stackelberg optimum, a reference point
  for reading). Nothing to certify, and no privacy filter charges it, so no run releases it.

Every consumer dispatches on the type: :func:`certify` (``Mechanism.fit``, every released
report matrix), the one charge conversion ``mdpsim.privacy.filters.charge_of`` and the
budget policies. Anything else is refused with a :class:`TypeError`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from mdpsim._core.validation import check_probability, check_scalar
from mdpsim.privacy.verifier import PrivacyViolation, verify

#: Relative slack of the exact check (solver round-off in an LP's released matrix).
CERTIFY_RTOL = 1e-9


def _checked_eps(value, name: str = "epsilon_per_km") -> float:
    return check_scalar(value, name, min=0, unit="per km")


@dataclass(frozen=True)
class PureMDP:
    """Pure ``epsilon_per_km``-mDP, as a mechanism's promise.

    Pure geo-privacy (:class:`~mdpsim.privacy.accounting.PureGP`) is the same inequality as
    the accounting notion a budget is kept in; a PureMDP release is charged as
    ``PureGP(eps)``.
    """

    epsilon_per_km: float
    note: str = ""

    def __post_init__(self) -> None:
        object.__setattr__(self, "epsilon_per_km", _checked_eps(self.epsilon_per_km))

    kind = "pure"
    delta = 0.0
    confidence = None

    def __str__(self) -> str:
        text = f"{self.epsilon_per_km:g}/km-mDP (pure)"
        return f"{text}; {self.note}" if self.note else text


@dataclass(frozen=True)
class Audit:
    """How a PmDP claim was checked: the confidence the auditor reached, on ``n_samples``
    Monte Carlo samples per audited pair of ``n_records`` records (``None``: not recorded)."""

    confidence: float
    method: str
    n_samples: int | None = None
    n_records: int | None = None

    def __str__(self) -> str:
        size = [f"{self.n_samples} samples" if self.n_samples else "",
                f"{self.n_records} records" if self.n_records else ""]  # fmt: skip
        on = ", ".join(s for s in size if s)
        return f"confidence {self.confidence:.6g} ({self.method}{'; ' + on if on else ''})"


@dataclass(frozen=True)
class PMDP:
    """(``epsilon_per_km``, ``delta``)-PmDP; ``audit`` is ``None`` until the auditor ran
    (an unaudited claim cannot be charged)."""

    epsilon_per_km: float
    delta: float
    audit: Audit | None = None
    note: str = ""

    kind = "pmdp"

    def __post_init__(self) -> None:
        object.__setattr__(self, "epsilon_per_km", _checked_eps(self.epsilon_per_km))
        check_probability(self.delta, "delta")

    @property
    def confidence(self) -> float | None:
        """The audit's confidence (``None``: not audited)."""
        return None if self.audit is None else self.audit.confidence

    def __str__(self) -> str:
        text = f"({self.epsilon_per_km:g}/km, {self.delta:g})-PmDP"
        if self.audit is not None:
            text += f", confidence {self.audit.confidence:.6g}"
        return f"{text}; {self.note}" if self.note else text


@dataclass(frozen=True)
class Composition:
    """Sequential composition of ``parts`` (``labels`` name them in ``str``)."""

    parts: tuple[PureMDP | PMDP, ...]
    labels: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if not self.parts or not all(isinstance(p, (PureMDP, PMDP)) for p in self.parts):
            raise TypeError("a Composition composes PureMDP / PMDP parts (at least one)")
        if self.labels and len(self.labels) != len(self.parts):
            raise ValueError("one label per part")

    @property
    def kind(self) -> str:
        """``"pure"`` when every part is, else ``"pmdp"``."""
        return "pure" if all(isinstance(p, PureMDP) for p in self.parts) else "pmdp"

    @property
    def epsilon_per_km(self) -> float:
        return math.fsum(p.epsilon_per_km for p in self.parts)

    @property
    def delta(self) -> float:
        return math.fsum(p.delta for p in self.parts)

    @property
    def confidence(self) -> float | None:
        """Union bound over the audited parts (``None`` if one is not audited; pure: None)."""
        pmdp = [p for p in self.parts if isinstance(p, PMDP)]
        if not pmdp or any(p.audit is None for p in pmdp):
            return None
        return max(0.0, 1.0 - math.fsum(1.0 - p.audit.confidence for p in pmdp if p.audit))

    def __str__(self) -> str:
        if self.kind == "pure":
            head = f"{self.epsilon_per_km:g}/km-mDP (pure)"
        else:
            conf = self.confidence
            head = f"({self.epsilon_per_km:g}/km, {self.delta:g})-PmDP" + (
                "" if conf is None else f", confidence {conf:.6g}"
            )
        labels = self.labels or tuple(f"part {n + 1}" for n in range(len(self.parts)))
        body = " + ".join(f"{label} [{p}]" for label, p in zip(labels, self.parts, strict=True))
        return f"{head}; sequential composition: {body}"


@dataclass(frozen=True)
class NoGuarantee:
    """No mDP claim at all: a reference point, never charged (so never released in a run)."""

    note: str = ""

    kind = "none"
    epsilon_per_km = math.inf
    delta = 0.0
    confidence = None

    def __str__(self) -> str:
        return f"no mDP guarantee; {self.note}" if self.note else "no mDP guarantee"


Guarantee = PureMDP | PMDP | Composition | NoGuarantee


def compose(*parts: PureMDP | PMDP, labels: tuple[str, ...] = ()) -> Guarantee:
    """The sequential composition of ``parts`` (one part: that part)."""
    if len(parts) == 1 and not labels:
        return parts[0]
    return Composition(tuple(parts), labels)


def check_guarantee(guarantee, what: str = "guarantee") -> Guarantee:
    """``guarantee`` if it is one of the guarantee types, else :class:`TypeError`."""
    if not isinstance(guarantee, (PureMDP, PMDP, Composition, NoGuarantee)):
        raise TypeError(
            f"{what} {guarantee!r} is not a guarantee: use PureMDP, PMDP, Composition or "
            "NoGuarantee (mdpsim.privacy.guarantees)"
        )
    return guarantee


def certify(
    guarantee: Guarantee, matrix: np.ndarray, domain, *, who: str = "the mechanism"
) -> float | None:
    """Certify ``matrix`` (``domain.n_x`` rows) exactly against ``guarantee``; the smallest
    epsilon (1/km) it satisfies (``None`` for :class:`NoGuarantee`: nothing is claimed).

    Pure (or a composition of pure parts, at their summed eps): the exact verifier in log
    space. Road metric: only ``domain.constraint_pairs`` (few, ~edges, exact by chaining);
    lp norms: the full check (almost every pair chains there). Raises
    :class:`PrivacyViolation` if the matrix is not eps-mDP (within ``CERTIFY_RTOL``), or if the
    guarantee has a PmDP part: a probabilistic claim cannot be certified on a matrix.
    """
    check_guarantee(guarantee)
    if isinstance(guarantee, NoGuarantee):
        return None
    if guarantee.kind != "pure":
        parts = guarantee.parts if isinstance(guarantee, Composition) else (guarantee,)
        what = (
            "a PmDP guarantee"
            if any(isinstance(p, PMDP) for p in parts)
            else f"a {type(guarantee).__name__} of kind {guarantee.kind!r}, not 'pure',"
        )
        raise PrivacyViolation(
            f"{who} states {guarantee} for its released matrix: {what} cannot be "
            "certified exactly, and every released matrix must be; state a pure one"
        )
    eps = guarantee.epsilon_per_km
    result = verify(matrix, domain.dist_xx, eps, pairs=domain.verified_pairs)
    if not result.smallest_epsilon <= eps * (1 + CERTIFY_RTOL):
        raise PrivacyViolation(f"{who} released a matrix that is not {eps:g}/km-mDP: {result}")
    return result.smallest_epsilon
